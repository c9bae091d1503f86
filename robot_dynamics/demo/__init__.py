"""The demo: MuJoCo's arm under our controller and wrench estimator, end to end, and what happened.

    python -m robot_dynamics.demo [--robot panda|ur5e] [--urdf PATH [--base LINK] [--tip LINK]]
        [--out DIR] [--scene joint|cartesian|realistic] [--engine internal|mujoco] [--exact-links]

Starts the ``simulated_arm`` bring-up with the MuJoCo engine (arm_simulator engine=mujoco,
dynamics_controller, wrench_estimator: one process each, loopback DDS, a domain of their own)
and drives it like a user would:

1. the arm is released at its initial pose under gravity compensation: how far it drifts in 2 s;
2. computed torque (a parameter change) and a JointTrajectory through waypoints: how well the
   arm follows the clamped cubic spline through them;
3. the end effector is pushed (a wrench at the tip for 1 s): the estimator's wrench against the
   applied one, then ~/tare;
4. the controller's latency and the simulator's real-time factor, from /diagnostics.

Prints a table of these figures and writes a figure (joint tracking error; estimated vs applied
wrench over time) to DIR/<robot>_demo.png and the figures to DIR/<robot>_demo.yaml
(DIR: ./demo_results). ``--urdf``: any arm URDF with
inertials; base and tip default to the root and the deepest leaf of the longest chain, the
initial pose to the middle of the joint ranges, the gains to those of the shipped configs.
``--scene realistic``: our control laws on ``plant.profile: realistic`` before and after
identification (links, friction and armature fitted), in one process
(robot_dynamics.demo.realistic; ``--engine``, default internal; ``--exact-links``: the plant's
links exact and friction and armature fitted alone).
``--scene cartesian``: the task-space modes instead (hold, push, release, target, a streamed
circle; robot_dynamics.demo.cartesian).

Modules: ``session`` (the bring-up, and the probe node every scene watches it with) and one per
scene: ``joint``, ``cartesian``, ``realistic``.
"""
import argparse
import pathlib

from robot_dynamics import bringup


def arguments(argv):
    parser = argparse.ArgumentParser(prog='python -m robot_dynamics.demo',
                                     description=__doc__.split('\n\n')[0])
    parser.add_argument('--robot', default='panda', choices=bringup.ROBOTS)
    parser.add_argument('--urdf', help='an arm URDF with inertials instead of a shipped robot')
    parser.add_argument('--base', help='base link (default: the URDF root)')
    parser.add_argument('--tip', help='tip link (default: the deepest leaf)')
    parser.add_argument('--out', default='demo_results', help='directory of the figure')
    parser.add_argument('--engine', default='internal', choices=('internal', 'mujoco'),
                        help='the simulation engine of --scene realistic')
    parser.add_argument('--exact-links', action='store_true',
                        help='--scene realistic with the plant\'s links exact (plant.mass_error '
                             'and com_error 0) and only friction and armature fitted')
    parser.add_argument('--scene', default='joint', choices=('joint', 'cartesian', 'realistic'),
                        help='joint: the scenario above; cartesian: the task-space modes '
                             '(robot_dynamics.demo.cartesian); realistic: the realistic plant '
                             'before and after identification (robot_dynamics.demo.realistic)')
    return parser.parse_args(argv)


def main(argv=None):
    """Run the scene the command line asks for (the joint one by default); its exit status."""
    args = arguments(argv)
    name = pathlib.Path(args.urdf).stem if args.urdf else args.robot
    if args.scene == 'realistic':
        if args.urdf:
            raise SystemExit('--scene realistic runs a shipped --robot (its config gives q0 and '
                             'the gains)')
        from robot_dynamics.demo import realistic
        return realistic.main(args, name)
    if args.scene == 'cartesian':
        from robot_dynamics.demo import cartesian
        return cartesian.main(args, name)
    from robot_dynamics.demo import joint
    return joint.main(args, name)
