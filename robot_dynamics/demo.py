"""The simulated arm under our controllers, end to end, and what happened.

    python -m robot_dynamics.demo [--robot panda|ur5e]

Starts the ``simulated_arm`` bring-up (arm_simulator, dynamics_controller, wrench_estimator:
one process each, loopback DDS, a domain of their own) and drives it like a user would:

1. the arm is released at its initial pose under gravity compensation: how far it drifts in 2 s;
2. computed torque (a parameter change) and a JointTrajectory through waypoints: how well the
   arm follows the clamped cubic spline through them;
3. a wrench applied at the tip: the estimator's wrench against the applied one, then ~/tare;
4. the controller's latency and the simulator's real-time factor, from /diagnostics.
"""
import argparse
import os
import pathlib
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

WAYPOINT_OFFSETS = np.array([0.0, 0.3, -0.2, 0.1, 0.0])  # rad, added to every joint, 1 s apart
WRENCH = np.array([0.4, -0.3, 0.2, 6.0, -8.0, 12.0])      # moment (N m), force (N), base axes


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


def gravity_compensation(observer, joints, q0):
    if not observer.released.wait(60.0):
        raise TimeoutError('no effort command: is the controller running?')
    # no more 1 kHz callbacks; destroyed in the executor's thread, where it is safe
    observer.executor.create_task(observer.destroy_subscription, observer.commands)
    released = observer.now()
    observer.wait_until(released + 2.0)
    t, q = observer.positions(joints, released, released + 2.0)
    return np.abs(q - q0).max(), t[-1] - t[0]


def tracking(observer, joints):
    observer.set_parameter('dynamics_controller', 'mode', 'computed_torque')
    observer.wait_until(observer.now() + 0.3)
    q_now = observer.positions(joints, observer.now() - 0.01, np.inf)[1][-1]
    times = np.arange(len(WAYPOINT_OFFSETS), dtype=float)
    signs = np.where(np.arange(len(joints)) % 2, -1.0, 1.0)
    waypoints = q_now + np.outer(WAYPOINT_OFFSETS, signs)
    start = observer.now() + 0.3
    msg = JointTrajectory(joint_names=list(joints))
    msg.header.stamp = ros_time(start)
    msg.points = [JointTrajectoryPoint(positions=list(p), time_from_start=ros_time(t, Duration))
                  for p, t in zip(waypoints, times)]
    observer.trajectory.publish(msg)
    observer.wait_until(start + times[-1] + 0.3)
    t, q = observer.positions(joints, start, start + times[-1] + 0.3)
    error = q - CubicSpline(times, waypoints, bc_type='clamped')(np.clip(t - start, 0, times[-1]))
    return np.sqrt(np.mean(error ** 2)), np.abs(error).max(), times[-1]


def wrench_estimate(observer, base):
    msg = WrenchStamped()
    msg.header.frame_id = base
    w = msg.wrench
    (w.torque.x, w.torque.y, w.torque.z, w.force.x, w.force.y, w.force.z) = WRENCH.tolist()
    before = stamp(observer.wrenches[-1])
    observer.wrench.publish(msg)

    def vector(m):
        w = m.wrench
        return np.array([w.torque.x, w.torque.y, w.torque.z, w.force.x, w.force.y, w.force.z])

    def onset():
        """The first estimate above 5 % of the wrench (the observer crosses it within ~1 ms)."""
        return next((stamp(m) for m in list(observer.wrenches) if stamp(m) > before and
                     np.linalg.norm(vector(m)[3:]) > 0.05 * np.linalg.norm(WRENCH[3:])), None)

    deadline = time.monotonic() + 10.0
    while (applied_at := onset()) is None:
        if time.monotonic() > deadline:
            raise TimeoutError('the wrench estimator does not respond')
        time.sleep(0.01)
    observer.wait_until(applied_at + 0.5)
    estimate = vector([m for m in list(observer.wrenches) if stamp(m) <= applied_at + 0.3][-1])
    newest = stamp(observer.wrenches[-1])
    observer.call(Trigger, '/wrench_estimator/tare', Trigger.Request())
    while stamp(observer.wrenches[-1]) < newest + 0.3:
        time.sleep(0.01)
    return estimate, np.linalg.norm(vector(observer.wrenches[-1])[3:])


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m robot_dynamics.demo',
                                     description=__doc__.split('\n\n')[0])
    parser.add_argument('--robot', default='panda', choices=bringup.ROBOTS)
    args = parser.parse_args(argv)
    config = yaml.safe_load(open(bringup.config_file(f'{args.robot}.yaml')))
    sim = config['arm_simulator']['ros__parameters']
    joints, q0 = sim['joints'], np.array(sim['initial_position'])

    domain, lock = run.allocate_domain_id()
    with tempfile.TemporaryDirectory(prefix='robot_dynamics_demo_') as work:
        env = run.loopback_environment(domain, work)
        os.environ.update({k: env[k] for k in ('ROS_DOMAIN_ID', 'RMW_IMPLEMENTATION',
                                               'FASTDDS_DEFAULT_PROFILES_FILE', 'ROS_LOG_DIR')})
        rclpy.init()
        observer = Observer()
        executor = SingleThreadedExecutor()
        executor.add_node(observer)
        spinner = threading.Thread(target=executor.spin, daemon=True)
        spinner.start()
        print(f'starting arm_simulator, dynamics_controller, wrench_estimator ({args.robot}, '
              f'ROS_DOMAIN_ID={domain}, loopback DDS; logs in {work})', flush=True)
        processes = run.Processes(bringup.nodes('simulated_arm', robot=args.robot), env, work,
                                  output=work)
        try:
            drift, window = gravity_compensation(observer, joints, q0)
            print(f'1. gravity compensation, released at q0 = {q0.tolist()}:\n'
                  f'   largest joint motion in {window:.2f} s: {drift:.2e} rad')
            rms, worst, duration = tracking(observer, joints)
            print(f'2. computed torque, a {duration:.0f} s trajectory through '
                  f'{len(WAYPOINT_OFFSETS)} waypoints:\n'
                  f'   tracking error RMS {rms:.2e} rad, max {worst:.2e} rad')
            estimate, tared = wrench_estimate(observer, sim['base'])
            error = np.linalg.norm(estimate[3:] - WRENCH[3:]) / np.linalg.norm(WRENCH[3:])
            np.set_printoptions(precision=3, suppress=True)
            print(f'3. wrench at the tip (base axes), 0.3 s after applying it:\n'
                  f'   applied   {WRENCH}\n   estimated {estimate}\n'
                  f'   force error {100 * error:.2f} %; after ~/tare: {tared:.3f} N')
            controller = observer.diagnostics.get('dynamics_controller', {})
            simulator = observer.diagnostics.get('arm_simulator', {})
            print(f"4. controller, joint state received -> effort published: median "
                  f"{controller.get('compute_median_us')} µs, p99 "
                  f"{controller.get('compute_p99_us')} µs\n"
                  f"   simulator loop, state published -> command received: median "
                  f"{simulator.get('loop_latency_median_us')} µs, p99 "
                  f"{simulator.get('loop_latency_p99_us')} µs; real-time factor "
                  f"{simulator.get('real_time_factor')}, overruns {simulator.get('overruns')}")
        finally:
            codes = processes.stop()
            executor.shutdown()
            spinner.join(5.0)
            observer.destroy_node()
            rclpy.try_shutdown()
            lock.close()
            report_logs(work, codes)
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
