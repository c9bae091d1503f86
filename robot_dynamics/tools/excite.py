"""excite: run an identification experiment on a live arm through our controller, and record it.

    excite (--robot panda|ur5e | --urdf FILE) [--base LINK] [--tip LINK] [--q0 Q ...]
        [--period S] [--harmonics L] [--cycles N] [--margin F] [--acceleration-limit A]
        [--seed N] [--time-budget S] [--output excitation.npz] [--dry-run plan.png]
        [--fit [--links] ...]
    python -m robot_dynamics.tools.excite ...

1. Plans the excitation: ``rd.excitation_trajectory`` (a finite Fourier series from rest at q0,
   within the joint limits times ``--margin``, optimised for the regressor's condition), sampled
   into knots every KNOT s (position, velocity, acceleration) and checked along its whole
   interpolated path by ``rd.check_trajectory`` (limits and the model's effort): refused,
   naming joint, time and limit, if infeasible.
2. ``--dry-run PNG``: plots q and q̇ per joint against their limits, prints the plan, exits.
3. Otherwise, over ROS: asks ``<controller>/get_parameters`` for ``mode`` and refuses unless it is
   ``computed_torque``; moves the arm from where it is to q0 at ``--approach-speed`` (a
   quintic at rest at both ends); sends the excitation to ``<controller>/joint_trajectory``,
   stamped on the joint states' clock; records ``joint_states`` over it with
   record_joint_states' recorder (same checks, same file layout); compares each joint's motion
   with the plan (tools.excitation_check): if one lags, sets the friction and armature fitted
   from this pass on the controller and runs the excitation again; prints what each joint
   achieved, refuses a recording the fit would refuse for lack of motion, else prints the
   ``fit_dynamics`` command to run next, or runs it with ``--fit`` (its options after
   ``--fit-args``).

q0: ``--q0``, else the robot config's ``initial_position`` (``--robot``), else mid-range; the
dry run plots what the live run sends. Exit status 0, 1 (refused or failed, with the reason)
or 2 (usage).
"""
import argparse
import sys

import numpy as np

import robot_dynamics as rd
from robot_dynamics import bringup
from robot_dynamics.core.trajectory import JointTrajectory
from robot_dynamics.tools.excitation_check import Refused

KNOT = 0.02          # s between the knots sent to the controller
CONTROLLER = 'dynamics_controller'


def parse_arguments(argv):
    """The command line (argparse exits with status 2 on a usage error)."""
    parser = argparse.ArgumentParser(prog='excite', description=__doc__.split('\n\n')[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument('--robot', choices=bringup.ROBOTS, help='a shipped robot')
    source.add_argument('--urdf', help='URDF file of the arm')
    parser.add_argument('--base', help="base link (default: --robot's config, else the root)")
    parser.add_argument('--tip', help="tip link (default: --robot's config)")
    parser.add_argument('--q0', type=float, nargs='+', help='start and centre, chain order')
    plan = parser.add_argument_group('the excitation')
    plan.add_argument('--period', type=float, default=10.0, help='s (default 10)')
    plan.add_argument('--harmonics', type=int, default=4, help='default 4')
    plan.add_argument('--cycles', type=int, default=1, help='periods to run (default 1)')
    plan.add_argument('--margin', type=float, default=0.5,
                      help='fraction of each position/velocity/acceleration range (default 0.5)')
    plan.add_argument('--acceleration-limit', type=float,
                      help='rad/s^2 (default: 5 s^-1 times the velocity limit)')
    plan.add_argument('--seed', type=int, default=0)
    plan.add_argument('--time-budget', type=float, default=5.0,
                      help='s for the condition-number optimisation (default 5; 0: none)')
    run = parser.add_argument_group('the run')
    run.add_argument('--dry-run', metavar='PNG', help='only plot the planned motion to PNG')
    run.add_argument('--output', '-o', default='excitation.npz', help='the recording')
    run.add_argument('--controller', default=CONTROLLER, help='the controller node\'s name')
    run.add_argument('--approach-speed', type=float, default=0.2,
                     help='peak joint speed moving to q0, rad/s (default 0.2)')
    run.add_argument('--reliability', choices=('reliable', 'best_effort'), default='reliable',
                     help='QoS of the recording subscription (default reliable: a lost '
                          'message is a gap in the stamps, which fit_dynamics fits around)')
    run.add_argument('--timeout', type=float, default=10.0,
                     help='s to wait for the controller and joint states (default 10)')
    run.add_argument('--fit', action='store_true', help='run fit_dynamics on the recording')
    run.add_argument('--fit-args', nargs=argparse.REMAINDER, default=[],
                     help='fit_dynamics options (default: --friction --armature -o fitted.yaml)')
    args = parser.parse_args(argv)
    if not (args.period > 0 and args.harmonics >= 2 and args.cycles >= 1
            and 0 < args.margin <= 1 and args.approach_speed > 0):
        parser.error('needs --period > 0, --harmonics >= 2, --cycles >= 1, 0 < --margin <= 1 '
                     'and --approach-speed > 0')
    return args


def load_model(args):
    """The Model from --robot (base and tip from its config) or --urdf."""
    base, tip = args.base, args.tip
    if args.robot:
        params = robot_config(args.robot)['dynamics_controller']['ros__parameters']
        base, tip = base or params['base'], tip or params['tip']
    try:
        return rd.load_urdf(rd.robot_urdf(args.robot) if args.robot else args.urdf,
                            base=base, tip=tip)
    except (ValueError, KeyError, OSError) as error:
        raise Refused(f'cannot load the model: {error}') from None


def robot_config(robot):
    return bringup.load_config(bringup.config_file(f'{robot}.yaml'))


def default_q0(args, model):
    """--q0; else the robot config's initial_position; else None (mid-range)."""
    if args.q0 is not None:
        if len(args.q0) != model.nv:
            raise Refused(f'--q0 needs {model.nv} values (chain order {model.joint_names})')
        return np.array(args.q0)
    if args.robot:
        sim = robot_config(args.robot)['arm_simulator']['ros__parameters']
        return np.array(sim['initial_position'])
    return None


def plan(model, args, q0):
    """(FourierTrajectory, the JointTrajectory of its knots), checked along the whole path."""
    excitation = rd.excitation_trajectory(
        model, period=args.period, harmonics=args.harmonics, q0=q0, margin=args.margin,
        acceleration_limit=args.acceleration_limit, seed=args.seed, cycles=args.cycles,
        time_budget=args.time_budget, evaluations=None if args.time_budget else 0)
    times = np.arange(0.0, excitation.duration + KNOT / 2, KNOT)
    trajectory = JointTrajectory(times, *excitation.sample_many(times))
    try:
        rd.check_trajectory(model, trajectory, args.acceleration_limit)
    except rd.InfeasibleTrajectory as error:
        raise Refused(f'the planned excitation is infeasible: {error}') from None
    return excitation, trajectory


def describe(model, excitation, trajectory):
    """A few lines: duration, condition number, the peak fraction of each limit."""
    t = np.arange(0.0, trajectory.duration, 0.005)
    q, v = (np.array(x) for x in zip(*(trajectory.sample(s)[:2] for s in t)))
    speed = np.abs(v).max(0) / model.velocity_limit
    reach = np.maximum((q.max(0) - excitation.q0) / (model.upper - excitation.q0),
                       (q.min(0) - excitation.q0) / (model.lower - excitation.q0))
    return '\n'.join([
        f'excitation: {trajectory.duration:.2f} s from q0 {np.round(excitation.q0, 3).tolist()}, '
        f'condition number {excitation.condition_number:.3g} (from '
        f'{excitation.initial_condition_number:.3g})',
        'peak |q - q0| / range to the limit: ' + ', '.join(
            f'{j} {r:.2f}' for j, r in zip(model.joint_names, reach)),
        'peak |qdot| / velocity limit: ' + ', '.join(
            f'{j} {r:.2f}' for j, r in zip(model.joint_names, speed))])


def plot(model, trajectory, path):
    """q and q̇ per joint against their limits, to a PNG."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    t = np.arange(0.0, trajectory.duration, 0.005)
    q, v = (np.array(x) for x in zip(*(trajectory.sample(s)[:2] for s in t)))
    fig, axes = plt.subplots(model.nv, 2, figsize=(10, 1.6 * model.nv), sharex=True)
    for j, name in enumerate(model.joint_names):
        for ax, x, low, high, unit in ((axes[j, 0], q[:, j], model.lower[j], model.upper[j],
                                        'rad'), (axes[j, 1], v[:, j], -model.velocity_limit[j],
                                                 model.velocity_limit[j], 'rad/s')):
            ax.plot(t, x)
            ax.axhline(low, color='r', lw=0.8)
            ax.axhline(high, color='r', lw=0.8)
            ax.set_ylabel(f'{name}\n{unit}', fontsize=7)
    axes[-1, 0].set_xlabel('t, s')
    axes[-1, 1].set_xlabel('t, s')
    fig.suptitle('planned excitation: position and velocity (red: limits)')
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def fit_command(args, output):
    """The fit_dynamics argument list for the recording."""
    source = ['--robot', args.robot] if args.robot else ['--urdf', args.urdf]
    if args.base:
        source += ['--base', args.base]
    if args.tip:
        source += ['--tip', args.tip]
    return [str(output), *source,
            *(args.fit_args or ['--friction', '--armature', '-o', 'fitted.yaml'])]


def main(argv=None):
    """Command-line entry point (module docstring)."""
    args = parse_arguments(argv)
    try:
        model = load_model(args)
        excitation, trajectory = plan(model, args, default_q0(args, model))
        print(describe(model, excitation, trajectory), flush=True)
        if args.dry_run:
            plot(model, trajectory, args.dry_run)
            print(f'wrote {args.dry_run} (dry run: nothing sent)')
            return 0
        from robot_dynamics.tools import excitation_run
        return excitation_run.run(args, model, trajectory, fit_command)
    except Refused as error:
        print(f'excite: {error}', file=sys.stderr)
        return 1


if __name__ == '__main__':
    raise SystemExit(main())
