"""MuJoCo's arm under our controller and wrench estimator, end to end, and what happened.

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
(robot_dynamics.demo_realistic; ``--engine``, default internal; ``--exact-links``: the plant's
links exact and friction and armature fitted alone).
``--scene cartesian``: the task-space modes instead (hold, push, release, target, a streamed
circle; robot_dynamics.demo_cartesian).
"""
import argparse
import contextlib
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import rclpy
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import WrenchStamped
from rcl_interfaces.srv import SetParameters
from rclpy.duration import Duration
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.time import Time
from scipy.interpolate import CubicSpline
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robot_dynamics import bringup, run
from robot_dynamics.nodes.wrench_estimator import tared_at

WAYPOINT_OFFSETS = np.array([0.0, 0.3, -0.2, 0.1, 0.0])  # rad, added to every joint, 1 s apart
WRENCH = np.array([0.4, -0.3, 0.2, 6.0, -8.0, 12.0])      # moment (N m), force (N), base axes
# MuJoCo, in the bring-up's lock step with the controller
SIMULATOR = {'engine': 'mujoco'}


def stamp(msg):
    return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec


def ros_time(t, kind=Time):
    """A builtin_interfaces Time (or, with kind=Duration, Duration) message of t seconds."""
    return kind(nanoseconds=int(round(t * 1e9))).to_msg()


class Observer(Node):
    """Records joint states, wrench estimates and diagnostics; talks to the nodes."""

    def __init__(self):
        super().__init__('demo')
        self.states, self.wrenches, self.diagnostics = [], [], {}
        # 0.1 s of 1 kHz messages: starved of CPU, the demo loses states rather than falling
        # behind the arm's clock (its `now` decides when the trajectory starts)
        best_effort = QoSProfile(depth=100, reliability=ReliabilityPolicy.BEST_EFFORT)
        self.create_subscription(JointState, 'joint_states', self.states.append, best_effort)
        self.create_subscription(WrenchStamped, '/wrench_estimator/wrench',
                                 self.wrenches.append, best_effort)
        self.create_subscription(DiagnosticArray, '/diagnostics', self.on_diagnostics, 10)
        self.released = threading.Event()   # the first effort command releases the brakes
        self.commands = self.create_subscription(Float64MultiArray, 'effort_controller/commands',
                                                 lambda _: self.released.set(), best_effort)
        self.trajectory = self.create_publisher(JointTrajectory,
                                                '/dynamics_controller/joint_trajectory', 10)
        self.wrench = self.create_publisher(WrenchStamped, '/arm_simulator/external_wrench', 10)

    def on_diagnostics(self, msg):
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values}
            self.diagnostics[status.name.split(':')[0]] = values

    def now(self):
        """The simulated arm's clock: the newest joint state's stamp."""
        return stamp(self.states[-1]) if self.states else 0.0

    def wait_until(self, t, timeout=30.0):
        deadline = time.monotonic() + timeout
        while self.now() < t:
            if time.monotonic() > deadline:
                raise TimeoutError('the simulated arm stopped publishing joint states')
            time.sleep(0.01)

    def positions(self, joints, since, until):
        picked = [m for m in list(self.states) if since <= stamp(m) <= until]
        index = [list(picked[0].name).index(j) for j in joints]
        return (np.array([stamp(m) for m in picked]),
                np.array([np.asarray(m.position)[index] for m in picked]))

    def call(self, srv_type, name, request, timeout=10.0):
        client = self.create_client(srv_type, name)
        if not client.wait_for_service(timeout):
            raise TimeoutError(f'{name} is not available')
        future = client.call_async(request)
        done = threading.Event()
        future.add_done_callback(lambda _: done.set())
        done.wait(timeout)
        return future.result()

    def set_parameter(self, node, name, value):
        request = SetParameters.Request(parameters=[Parameter(name, value=value)
                                                    .to_parameter_msg()])
        result = self.call(SetParameters, f'/{node}/set_parameters', request).results[0]
        if not result.successful:
            raise RuntimeError(f'{node} rejected {name}: {result.reason}')


PUSH_TIME = 1.0   # s


SILENCE = 60.0   # s: the nodes logged nothing for this long, no command yet: they are stuck


def wait_for_release(observer, processes):
    """Until the first effort command (the brakes release) and the first joint state.

    No fixed deadline: it waits as long as the nodes make progress (their logs grow; a cold
    start logs its warm-up every 5 s, shown here) and gives up after SILENCE s of silence.
    """
    print('   waiting for the nodes ...', flush=True)
    heard = time.monotonic()
    while not (observer.released.wait(0.5) and observer.states):
        if processes.exited():
            raise RuntimeError(f'nodes exited: {processes.exited()} (their logs follow)')
        for line in processes.new_lines():
            if 'warming up' in line or 'warmed up' in line:
                print(f'   {line[:150]}', flush=True)
            heard = time.monotonic()
        if time.monotonic() - heard > SILENCE:
            raise TimeoutError(f'no effort command and no word from the nodes for {SILENCE:.0f} '
                               's: is the controller running? (their logs follow)')
    # no more 1 kHz callbacks; destroyed in the executor's thread, where it is safe
    observer.executor.create_task(observer.destroy_subscription, observer.commands)


def gravity_compensation(observer, processes, joints, q0):
    wait_for_release(observer, processes)
    released = observer.now()
    progress(observer, released + 2.0, 'released under gravity compensation')
    t, q = observer.positions(joints, released, released + 2.0)
    return np.abs(q - q0).max(), t[-1] - t[0]


def progress(observer, until, what):
    """Wait for the arm's clock to reach ``until``, printing a one-line progress bar."""
    start = observer.now()
    while observer.now() < until:
        observer.wait_until(min(until, observer.now() + 0.25))
        done = min(1.0, (observer.now() - start) / max(until - start, 1e-9))
        print(f'\r   {what}: [{"#" * int(20 * done):20s}] {observer.now() - start:4.1f} s '
              'simulated', end='', flush=True)
    print(flush=True)


def tracking(observer, joints, lower, upper):
    observer.set_parameter('dynamics_controller', 'mode', 'computed_torque')
    observer.wait_until(observer.now() + 0.3)
    q_now = observer.positions(joints, observer.now() - 0.01, np.inf)[1][-1]
    times = np.arange(len(WAYPOINT_OFFSETS), dtype=float)
    signs = np.where(np.arange(len(joints)) % 2, -1.0, 1.0)
    margin = np.minimum(0.05, 0.1 * (upper - lower))   # rad (m for a prismatic joint)
    scale = np.minimum(1.0, 0.25 * (upper - lower))     # a finger's few cm: offsets in cm
    waypoints = np.clip(q_now + np.outer(WAYPOINT_OFFSETS, signs * scale), lower + margin,
                        upper - margin)
    waypoints[0] = q_now
    start = observer.now() + 0.5   # our clock may lag the arm's by ~0.1 s
    msg = JointTrajectory(joint_names=list(joints))
    msg.header.stamp = ros_time(start)
    msg.points = [JointTrajectoryPoint(positions=list(p), time_from_start=ros_time(t, Duration))
                  for p, t in zip(waypoints, times)]
    observer.trajectory.publish(msg)
    progress(observer, start + times[-1] + 0.3, 'computed torque along the trajectory')
    t, q = observer.positions(joints, start, start + times[-1] + 0.3)
    error = q - CubicSpline(times, waypoints, bc_type='clamped')(np.clip(t - start, 0, times[-1]))
    return t - start, error, times[-1]


def vector(m):
    w = m.wrench
    return np.array([w.torque.x, w.torque.y, w.torque.z, w.force.x, w.force.y, w.force.z])


def push(observer, base, wrench):
    """Apply ``wrench`` at the tip for PUSH_TIME, then remove it; estimates around it; tare."""
    def publish(w):
        msg = WrenchStamped()
        msg.header.frame_id = base
        m = msg.wrench
        (m.torque.x, m.torque.y, m.torque.z, m.force.x, m.force.y, m.force.z) = w.tolist()
        observer.wrench.publish(msg)

    before = observer.now()
    publish(wrench)
    applied_at = None
    deadline = time.monotonic() + 20.0
    while applied_at is None:   # the first estimate above 5 % of the push (within ~1 ms of it)
        applied_at = next((stamp(m) for m in list(observer.wrenches) if stamp(m) > before and
                           np.linalg.norm(vector(m)[3:]) > 0.05 * np.linalg.norm(wrench[3:])),
                          None)
        if time.monotonic() > deadline:
            raise TimeoutError('the wrench estimator does not respond')
        time.sleep(0.01)
    progress(observer, applied_at + PUSH_TIME, 'pushing the end effector')
    publish(np.zeros(6))
    progress(observer, observer.now() + 0.5, 'released')
    picked = [m for m in list(observer.wrenches) if before - 0.2 <= stamp(m)]
    t = np.array([stamp(m) for m in picked]) - applied_at
    estimates = np.array([vector(m) for m in picked])
    settled = estimates[(t >= 0.3) & (t <= PUSH_TIME - 0.05)].mean(axis=0)
    # the push ends where the estimate falls below 95 % (as it starts where it passes 5 %): the
    # arm's clock at our zero wrench is only known to within our lag behind it
    falling = (t > 0.3) & (estimates[:, 3:] @ wrench[3:] < 0.95 * settled[3:] @ wrench[3:])
    duration = t[np.argmax(falling)] if falling.any() else PUSH_TIME
    response = observer.call(Trigger, '/wrench_estimator/tare', Trigger.Request())
    if response is None or not response.success:
        raise RuntimeError(f'~/tare did not answer or refused: {response}')
    tared = tared_at(response.message)
    while stamp(observer.wrenches[-1]) < tared + 0.3:
        time.sleep(0.01)
    return t, estimates, duration, settled, np.linalg.norm(vector(observer.wrenches[-1])[3:])


def chain_ends(urdf):
    """(root link, deepest leaf of the longest chain) of a URDF's tree."""
    import xml.etree.ElementTree as ET
    joints = ET.fromstring(urdf).findall('joint')
    parent = {j.find('child').get('link'): j.find('parent').get('link') for j in joints}
    moving = {j.find('child').get('link') for j in joints if j.get('type') != 'fixed'}
    links = {link for pair in parent.items() for link in pair}
    root = next(iter(links - set(parent)))

    def depth(link):   # (moving joints, all joints) up to the root
        d = (0, 0)
        while link in parent:
            d = (d[0] + (link in moving), d[1] + 1)
            link = parent[link]
        return d

    leaves = links - set(parent.values())
    return root, max(sorted(leaves), key=depth)


def arm_config(args, work):
    """(config file, base, tip, joints, q0, lower, upper) for --robot or --urdf."""
    import robot_dynamics as rd
    if not args.urdf:
        path = bringup.config_file(f'{args.robot}.yaml')
        sim = bringup.load_config(path)['arm_simulator']['ros__parameters']
        model = rd.load_urdf(rd.robot_urdf(args.robot), sim['base'], sim['tip'])
        order = [model.joint_names.index(j) for j in sim['joints']]
        return (path, sim['base'], sim['tip'], sim['joints'], np.array(sim['initial_position']),
                model.lower[order], model.upper[order])
    urdf = pathlib.Path(args.urdf).read_text()
    root, leaf = chain_ends(urdf)
    model = rd.load_urdf(urdf, args.base or root, args.tip or leaf)
    lower, upper = model.lower, model.upper
    q0 = np.where(np.isfinite(lower) & np.isfinite(upper), (lower + upper) / 2, 0.3)
    n, joints = model.nv, list(model.joint_names)
    config = {
        'dynamics_controller': {'kp': [400.0] * n, 'kd': [40.0] * n, 'state_timeout': 0.1},
        'wrench_estimator': {'observer_gain': [50.0] * n, 'damping': 0.001,
                             'reference_frame': model.base, 'state_timeout': 0.1},
        'arm_simulator': {'initial_position': q0.tolist()}}
    # a copy of the joint list per node: rcl's YAML parser refuses anchors and aliases
    path = pathlib.Path(work) / 'arm.yaml'
    path.write_text(yaml.safe_dump({k: {'ros__parameters': dict(
        base=model.base, tip=model.tip, joints=list(joints), **v)} for k, v in config.items()}))
    return str(path), model.base, model.tip, joints, q0, lower, upper


def plot(path, title, tracking, push):
    """Joint tracking error and estimated vs applied wrench over time, as a PNG."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    (t_track, error, joints), (t_push, estimates, duration) = tracking, push
    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(9, 10))
    top.plot(t_track, 1e3 * error, lw=0.8)
    top.set(xlabel='time along the trajectory, s', ylabel='tracking error, mrad',
            title=f'{title}: computed torque on MuJoCo')
    top.legend(joints, fontsize=7, ncol=4)
    applied = np.where(((t_push >= 0) & (t_push < duration))[:, None], WRENCH, 0.0)
    for k, (axes, unit, rows) in enumerate(((middle, 'N', range(3, 6)),
                                            (bottom, 'N m', range(3)))):
        for i, name in zip(rows, 'xyz'):
            line, = axes.plot(t_push, estimates[:, i], lw=1.0, label=f'estimated {name}')
            axes.plot(t_push, applied[:, i], '--', color=line.get_color(), lw=1.0,
                      label=f'applied {name}')
        axes.set(xlabel='time since the push, s',
                 ylabel=f"{'force' if k == 0 else 'moment'} at the tip, base axes, {unit}")
        axes.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


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
                             '(robot_dynamics.demo_cartesian); realistic: the realistic plant '
                             'before and after identification (robot_dynamics.demo_realistic)')
    return parser.parse_args(argv)


@contextlib.contextmanager
def session(args, name, observer_class=None, controller=None):
    """The simulated_arm bring-up on MuJoCo, our observer spinning beside it; stopped at exit.

    Yields (observer, processes, arm_config's tuple); ``controller``: dynamics_controller
    parameters over the config file's.
    """
    # every kernel into numba's cache first, with a progress bar: seconds when it is there
    subprocess.run([sys.executable, '-m', 'robot_dynamics.compile'], check=True)
    domain, lock = run.allocate_domain_id()
    with tempfile.TemporaryDirectory(prefix='robot_dynamics_demo_') as work:
        arm = arm_config(args, work)
        env = run.loopback_environment(domain, work)
        os.environ.update({k: env[k] for k in ('ROS_DOMAIN_ID', 'RMW_IMPLEMENTATION',
                                               'FASTDDS_DEFAULT_PROFILES_FILE', 'ROS_LOG_DIR')})
        rclpy.init()
        observer = (observer_class or Observer)()
        executor = SingleThreadedExecutor()
        executor.add_node(observer)
        spinner = threading.Thread(target=executor.spin, daemon=True)
        spinner.start()
        print(f'{name} ({arm[1]} -> {arm[2]}) on MuJoCo: arm_simulator, dynamics_controller, '
              f'wrench_estimator (ROS_DOMAIN_ID={domain}, loopback DDS; logs in {work})',
              flush=True)
        specs = bringup.nodes('simulated_arm', robot=args.robot, urdf=args.urdf or '',
                              config=arm[0], overrides={'arm_simulator': SIMULATOR,
                                                        'dynamics_controller': controller or {}})
        processes = run.Processes(specs, env, work, output=work)
        try:
            yield observer, processes, arm
        finally:
            codes = processes.stop()
            executor.shutdown()
            spinner.join(5.0)
            observer.destroy_node()
            rclpy.try_shutdown()
            lock.close()
            report_logs(work, codes)


def main(argv=None):
    args = arguments(argv)
    name = pathlib.Path(args.urdf).stem if args.urdf else args.robot
    if args.scene == 'realistic':
        if args.urdf:
            raise SystemExit('--scene realistic runs a shipped --robot (its config gives q0 and '
                             'the gains)')
        from robot_dynamics import demo_realistic
        return demo_realistic.main(args, name)
    if args.scene == 'cartesian':
        from robot_dynamics import demo_cartesian
        return demo_cartesian.main(args, name)
    began = time.monotonic()
    with session(args, name) as (observer, processes, arm):
        config, base, tip, joints, q0, lower, upper = arm
        print('1. release under gravity compensation', flush=True)
        drift, window = gravity_compensation(observer, processes, joints, q0)
        print(f'2. computed torque through {len(WAYPOINT_OFFSETS)} waypoints', flush=True)
        t_track, error, duration = tracking(observer, joints, lower, upper)
        print('3. a push at the end effector, then ~/tare', flush=True)
        t_push, estimates, push_time, settled, tared = push(observer, base, WRENCH)
        controller = observer.diagnostics.get('dynamics_controller', {})
        simulator = observer.diagnostics.get('arm_simulator', {})
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    figure = out / f'{name}_demo.png'
    plot(figure, name, (t_track, error, joints), (t_push, estimates, push_time))
    rms, worst = np.sqrt(np.mean(error ** 2)), np.abs(error).max()
    force_error = np.linalg.norm(settled[3:] - WRENCH[3:])
    moment_error = np.linalg.norm(settled[:3] - WRENCH[:3])
    rows = [
        ('gravity compensation drift', f'{drift:.1e} rad', f'max |q - q0| over {window:.1f} s'),
        ('tracking error RMS', f'{rms:.1e} rad',
         f'{duration:.0f} s, {len(WAYPOINT_OFFSETS)} waypoints'),
        ('tracking error max', f'{worst:.1e} rad', ''),
        ('push force, applied', f'{np.linalg.norm(WRENCH[3:]):.2f} N', 'at the tip'),
        ('push force, estimate error', f'{force_error:.3f} N',
         f'{100 * force_error / np.linalg.norm(WRENCH[3:]):.2f} %, 0.3-{PUSH_TIME - 0.05:.2f} s'),
        ('push moment, estimate error', f'{moment_error:.3f} N m',
         f'applied {np.linalg.norm(WRENCH[:3]):.2f} N m'),
        ('force after ~/tare', f'{tared:.3f} N', ''),
        ('controller latency', f"{controller.get('compute_median_us')} us",
         f"median; p99 {controller.get('compute_p99_us')} us (state in -> effort out)"),
        ('loop latency', f"{simulator.get('loop_latency_median_us')} us",
         f"median; p99 {simulator.get('loop_latency_p99_us')} us (state out -> command in)"),
        ('real-time factor', f"{simulator.get('real_time_factor')}",
         f"overruns {simulator.get('overruns')}"),
    ]
    print(f'\n{name} on MuJoCo: measured')
    for label, value, note in rows:
        print(f'  {label:30s} {value:>14s}   {note}')
    took = time.monotonic() - began
    figures = dict(robot=name, drift_rad=float(drift), tracking_rms_rad=float(rms),
                   tracking_max_rad=float(worst), push_force_error_n=float(force_error),
                   push_moment_error_nm=float(moment_error), force_after_tare_n=float(tared),
                   figure=str(figure.resolve()), seconds=round(took, 1))
    (out / f'{name}_demo.yaml').write_text(yaml.safe_dump(figures, sort_keys=False))
    print(f'\nfigure: {figure.resolve()}\ndemo took {took:.0f} s')
    return 0


def report_logs(work, codes):
    """The nodes' warnings and errors (a few of each), and how they exited."""
    for name, code in codes.items():
        lines = (pathlib.Path(work) / f'{name}.log').read_text().splitlines()
        problems = [line for line in lines if line.startswith(('[WARN]', '[ERROR]', '[FATAL]'))]
        print(f'{name}: exit status {code}, {len(problems)} warnings or errors' +
              ''.join(f'\n   {line[:160]}' for line in problems[:4]))
        if code:
            print('\n'.join(lines[-30:]))


if __name__ == '__main__':
    raise SystemExit(main())
