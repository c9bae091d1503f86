"""The identification loop on a simulated plant that is not its model: before, excite + fit, after.

    python -m robot_dynamics.tools.identification_loop [--engine internal|mujoco]
        [--profile realistic] [--period 8] [--harmonics 4] [--excite '--margin 0.8 --cycles 2']
        [--fit '--links --friction --armature --stiction'] [--set PARAM:=VALUE ...] [--output DIR]

Starts the simulated_arm bring-up (robot_dynamics.run's processes, loopback DDS, a free
ROS_DOMAIN_ID) with ``arm_simulator`` on ``plant.profile`` and the nodes on the nominal URDF and
config/panda.yaml, then:

1. **before**: the day-one figures (``figures``): gravity-compensation drift over 5 s; computed
   torque's steady error 2 s after a 0.15 rad step of every joint, and its tracking RMS along
   a test excitation (seed 7, another than the identification's); the wrench estimator's bias
   at rest and its error under a 15 N push at the tip;
2. ``excite --fit`` (``--links --friction --armature --stiction`` by default) through the
   controller;
3. the fitted parameters set on the controller and the estimator (their parameter services);
4. **after**: the same figures. Prints both and writes them to ``OUTPUT/loop_<engine>.yaml``
   (beside the recording ``excitation_<engine>.npz`` and ``fitted_<engine>.yaml``).
"""
import argparse
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile

import numpy as np
import rclpy
import yaml
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

import robot_dynamics as rd
from robot_dynamics import bringup, run
from robot_dynamics.nodes.common.joint_states import trajectory_message
from robot_dynamics.probe import BEST_EFFORT, ArmView, expect, spinning, window

STEP, PUSH, DRIFT = 0.15, 15.0, 5.0   # rad, N, s
KNOT = 0.02
EXCITE_TIMEOUT = 400.0   # s: excite + fit, a bound for a hung run (a minute is usual)
NODES = ('dynamics_controller', 'wrench_estimator')


class LoopView(ArmView):
    """The loop's arm on the package's probe: its states and wrench estimates; what it sends."""

    def __init__(self, probe, joints, base):
        self.probe, self.joints, self.base = probe, list(joints), base
        self.states = probe.record(JointState, 'joint_states', BEST_EFFORT)
        self.wrenches = probe.record(WrenchStamped, '/wrench_estimator/wrench', BEST_EFFORT)
        self.trajectory = probe.create_publisher(JointTrajectory,
                                                 '/dynamics_controller/joint_trajectory', 10)
        self.wrench = probe.create_publisher(WrenchStamped, '/arm_simulator/external_wrench', 10)

    def positions(self, since, until):
        """(t, q) of the states stamped in [since, until], once the arm has passed until."""
        self.wait_until(until + 0.01, timeout=120.0)
        return self.joint_arrays(self.joints, since, until)

    def mean_force(self, since, until, timeout=60.0):
        self.wrenches.wait_for_stamp(until, timeout)
        return np.mean([(m.wrench.force.x, m.wrench.force.y, m.wrench.force.z)
                        for m in window(self.wrenches, since, until)], axis=0)

    def send(self, times, q, v=None, a=None, lead=0.5):
        """A trajectory through (times, q[, v, a]) starting ``lead`` s from now; its start."""
        start = self.now() + lead
        zeros = np.zeros_like(q)
        self.trajectory.publish(trajectory_message(
            self.joints, start, times, q, zeros if v is None else v, zeros if a is None else a))
        return start

    def push(self, force_z):
        msg = WrenchStamped()
        msg.header.frame_id = self.base
        msg.wrench.force.z = float(force_z)
        self.wrench.publish(msg)

    def set_parameters(self, node, values, timeout=30.0):
        """Set {name: value} on a node; ParametersRefused with the reasons of any refusal."""
        self.probe.apply_parameters(node, values, timeout)


def figures(arm, model, q0):
    """Measure the day-one figures of module docstring step 1; returns them as a dict."""
    out = {}
    arm.set_parameters('dynamics_controller', {'mode': 'gravity_compensation'})
    start = arm.now() + 0.3
    _, q = arm.positions(start, start + DRIFT)
    out['drift_rad'] = float(np.abs(q - q[0]).max())
    arm.set_parameters('dynamics_controller', {'mode': 'computed_torque'})
    start = arm.send([2.0, 3.0], np.array([q0, q0 + STEP]))   # blends from the reference
    _, q = arm.positions(start + 5.0, start + 6.0)
    error = q - (q0 + STEP)
    out['step_steady_rms_rad'] = float(np.sqrt(np.mean(error ** 2)))
    out['step_steady_max_rad'] = float(np.abs(error).max())
    out['wrench_bias_N'] = float(np.linalg.norm(arm.mean_force(start + 5.0, start + 6.0)))
    pushed = arm.now() + 0.2
    arm.push(-PUSH)
    force = arm.mean_force(pushed + 1.0, pushed + 2.0)
    arm.push(0.0)
    out['push_error_N'] = float(np.linalg.norm(force - [0.0, 0.0, -PUSH]))
    out['tracking_rms_rad'] = tracking(arm, model, q0)
    return out


def tracking(arm, model, q0):
    """RMS error along a test excitation (3 s, seed 7), from q0 + STEP back to q0 first."""
    start = arm.send([1.5], np.array([q0]))
    arm.wait_until(start + 2.0)
    test = rd.excitation_trajectory(model, period=3.0, harmonics=3, q0=q0, evaluations=0,
                                    seed=7, margin=0.5)
    times = np.arange(0.0, test.duration + KNOT / 2, KNOT)
    start = arm.send(times, *test.sample_many(times))
    t, q = arm.positions(start, start + test.duration)
    return float(np.sqrt(np.mean((q - test.sample_many(t - start)[0]) ** 2)))


def load_fit(arm, path):
    """Set the fitted model terms of ``path`` (fit_dynamics' YAML) on both nodes."""
    document = bringup.load_config(path)
    for node in NODES:
        values = bringup.flatten(document[node]['ros__parameters'])
        arm.set_parameters(node, {k: v for k, v in values.items() if k in (
            'inertial_parameters', 'armature', 'payload.mass', 'payload.com', 'payload.inertia')
            or k.startswith('friction.')})


def excite(env, args, q0):
    """Run excite --fit as a user would (files in --output); returns the fitted YAML's path."""
    work = pathlib.Path(args.output)
    fitted = work / f'fitted_{args.engine}.yaml'
    command = [sys.executable, '-m', 'robot_dynamics.tools.excite', '--robot', 'panda',
               '--period', str(args.period), '--harmonics', str(args.harmonics),
               '--time-budget', str(args.time_budget), '--q0', *map(str, q0),
               '--output', str(work / f'excitation_{args.engine}.npz'), '--timeout', '60',
               *shlex.split(args.excite),
               '--fit', '--fit-args', *shlex.split(args.fit), '-o', str(fitted)]
    try:
        result = subprocess.run(command, env=env, capture_output=True, text=True,
                                timeout=EXCITE_TIMEOUT)
    except subprocess.TimeoutExpired as late:
        print(f'{late.stdout or ""}{late.stderr or ""}', flush=True)
        raise RuntimeError(f'excite ran over {EXCITE_TIMEOUT:.0f} s') from None
    print(result.stdout + result.stderr, flush=True)
    if result.returncode:
        raise RuntimeError(f'excite failed with status {result.returncode}')
    return fitted


def parse(argv):
    parser = argparse.ArgumentParser(prog='identification_loop',
                                     description=__doc__.split('\n\n')[0])
    parser.add_argument('--engine', choices=('internal', 'mujoco'), default='internal')
    parser.add_argument('--profile', default='realistic', help='plant.profile (default realistic)')
    parser.add_argument('--period', type=float, default=8.0)
    parser.add_argument('--harmonics', type=int, default=4)
    parser.add_argument('--time-budget', type=float, default=5.0)
    parser.add_argument('--excite', default='--margin 0.8',
                        help="excite's further options, one string (default: %(default)s)")
    parser.add_argument('--fit', default='--links --friction --armature --stiction',
                        help="fit_dynamics' options, one string (default: %(default)s)")
    parser.add_argument('--set', action='append', default=[], metavar='PARAM:=VALUE',
                        help='an arm_simulator parameter (YAML value), e.g. plant.mass_error:=0.0')
    parser.add_argument('--output', default='.', help='directory of loop_<engine>.yaml')
    return parser.parse_args(argv)


def main(argv=None):
    """Run the loop (module docstring); exit status 0, or 1 with the reason."""
    args = parse(argv)
    config = bringup.load_config(bringup.config_file('panda.yaml'))['arm_simulator']
    sim = config['ros__parameters']
    model = rd.load_urdf(rd.robot_urdf('panda'), sim['base'], sim['tip'])
    q0 = np.array(sim['initial_position'])
    domain, lock = run.allocate_domain_id()
    with tempfile.TemporaryDirectory(prefix='identification_loop_') as work:
        env = run.loopback_environment(domain, work)
        specs = bringup.nodes('simulated_arm', robot='panda', engine=args.engine, overrides={
            'arm_simulator': {'plant.profile': args.profile,
                              **run.parse_overrides(f'arm_simulator:{x}' for x in args.set)
                              .get('arm_simulator', {})}})
        processes = run.Processes(specs, env, work, output=work)
        for key in ('ROS_DOMAIN_ID', 'RMW_IMPLEMENTATION', 'FASTDDS_DEFAULT_PROFILES_FILE'):
            os.environ[key] = env[key]   # this process's arm joins the run's domain
        rclpy.init()
        try:
            with spinning('identification_loop') as node:
                arm = LoopView(node, sim['joints'], sim['base'])
                expect(arm.states.wait(1, 180.0), 'no joint states in 180 s')
                arm.set_parameters('dynamics_controller', {'mode': 'gravity_compensation'}, 180.0)
                arm.set_parameters('wrench_estimator', {}, 180.0)
                before = figures(arm, model, q0)
                print('before:', before, flush=True)
                load_fit(arm, excite(env, args, q0))
                after = figures(arm, model, q0)
                print('after:', after, flush=True)
        except (RuntimeError, TimeoutError) as error:
            print(f'identification_loop: {error}', file=sys.stderr)
            for name in processes.procs:
                log = (pathlib.Path(work) / f'{name}.log').read_text()
                print(f'--- {name} ---\n{log[-2000:]}', file=sys.stderr)
            return 1
        finally:
            rclpy.try_shutdown()
            processes.stop(timeout=20.0)
            lock.close()
    result = {'engine': args.engine, 'profile': args.profile, 'set': args.set,
              'excite': args.excite, 'fit': args.fit, 'before': before, 'after': after}
    path = pathlib.Path(args.output) / f'loop_{args.engine}.yaml'
    path.write_text(yaml.safe_dump(result, sort_keys=False))
    print(table(before, after) + f'\nwrote {path}')
    return 0


def table(before, after):
    rows = [f'{"figure":24} {"before":>10} {"after":>10}']
    rows += [f'{k:24} {before[k]:10.3g} {after[k]:10.3g}' for k in before]
    return '\n'.join(rows)


if __name__ == '__main__':
    raise SystemExit(main())
