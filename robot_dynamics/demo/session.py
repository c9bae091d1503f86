"""The demo's bring-up and what it watches: the simulated arm on MuJoCo, observed by the probe.

``session`` starts the ``simulated_arm`` bring-up (one process per node, loopback DDS, a domain
of its own) for a shipped robot or any URDF (``arm_config``), with the package's probe spinning
beside it (robot_dynamics.probe) and an ``Observer`` recording on it; ``wait_for_release`` and
``progress`` follow the arm's clock, the newest joint state's stamp.
"""
import contextlib
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np
import rclpy
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import WrenchStamped
from rclpy.time import Time
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from robot_dynamics import bringup, run
from robot_dynamics.nodes.common.joint_states import LATCHED_QOS
from robot_dynamics.probe import BEST_EFFORT, ArmView, spinning

# MuJoCo, in the bring-up's lock step with the controller
SIMULATOR = {'engine': 'mujoco'}


def ros_time(t, kind=Time):
    """A builtin_interfaces Time (or, with kind=Duration, Duration) message of t seconds."""
    return kind(nanoseconds=int(round(t * 1e9))).to_msg()


class Observer(ArmView):
    """What the demo records and sends, on the package's probe: the arm's clock is its states'.

    Records the joint states, the wrench estimates, /diagnostics and the estimator's ~/bias
    (one per tare); the first effort command says the brakes are released.
    """

    def __init__(self, probe):
        self.probe = probe
        self.states = probe.record(JointState, 'joint_states', BEST_EFFORT)
        self.wrenches = probe.record(WrenchStamped, '/wrench_estimator/wrench', BEST_EFFORT)
        self.diagnostic_arrays = probe.record(DiagnosticArray, '/diagnostics')
        self.biases = probe.record(JointState, '/wrench_estimator/bias', LATCHED_QOS)
        self.commands = probe.record(Float64MultiArray, 'effort_controller/commands', BEST_EFFORT)
        self.trajectory = probe.create_publisher(JointTrajectory,
                                                 '/dynamics_controller/joint_trajectory', 10)
        self.wrench = probe.create_publisher(WrenchStamped, '/arm_simulator/external_wrench', 10)

    @property
    def diagnostics(self):
        """{node: {key: value}} of each node's newest diagnostic status."""
        newest = {}
        for array in list(self.diagnostic_arrays.messages):
            for status in array.status:
                newest[status.name.split(':')[0]] = {kv.key: kv.value for kv in status.values}
        return newest

    def positions(self, joints, since, until):
        """Stamps and (k, n) joint angles, in ``joints`` order, of the states in [since, until]."""
        return self.joint_arrays(joints, since, until)


SILENCE = 60.0   # s: the nodes logged nothing for this long, no command yet: they are stuck


def wait_for_release(observer, processes):
    """Until the first effort command (the brakes release) and the first joint state.

    No fixed deadline: it waits as long as the nodes make progress (their logs grow; a cold
    start logs its warm-up every 5 s, shown here) and gives up after SILENCE s of silence.
    """
    print('   waiting for the nodes ...', flush=True)
    heard = time.monotonic()
    while not (observer.commands.wait(1, 0.5) and len(observer.states)):
        if processes.exited():
            raise RuntimeError(f'nodes exited: {processes.exited()} (their logs follow)')
        for line in processes.new_lines():
            if 'warming up' in line or 'warmed up' in line:
                print(f'   {line[:150]}', flush=True)
            heard = time.monotonic()
        if time.monotonic() - heard > SILENCE:
            raise TimeoutError(f'no effort command and no word from the nodes for {SILENCE:.0f} '
                               's: is the controller running? (their logs follow)')
    observer.probe.stop_recording(observer.commands)   # a 1 kHz topic no step reads


def progress(observer, until, what):
    """Wait for the arm's clock to reach ``until``, printing a one-line progress bar."""
    start = observer.now()
    while observer.now() < until:
        observer.wait_until(min(until, observer.now() + 0.25))
        done = min(1.0, (observer.now() - start) / max(until - start, 1e-9))
        print(f'\r   {what}: [{"#" * int(20 * done):20s}] {observer.now() - start:4.1f} s '
              'simulated', end='', flush=True)
    print(flush=True)


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
        try:
            with spinning('demo') as probe:
                observer = (observer_class or Observer)(probe)
                print(f'{name} ({arm[1]} -> {arm[2]}) on MuJoCo: arm_simulator, '
                      f'dynamics_controller, wrench_estimator (ROS_DOMAIN_ID={domain}, loopback '
                      f'DDS; logs in {work})', flush=True)
                specs = bringup.nodes('simulated_arm', robot=args.robot, urdf=args.urdf or '',
                                      config=arm[0],
                                      overrides={'arm_simulator': SIMULATOR,
                                                 'dynamics_controller': controller or {}})
                processes = run.Processes(specs, env, work, output=work)
                try:
                    yield observer, processes, arm
                finally:
                    report_logs(work, processes.stop())
        finally:
            rclpy.try_shutdown()
            lock.close()


def report_logs(work, codes):
    """The nodes' warnings and errors (a few of each), and how they exited."""
    for name, code in codes.items():
        lines = (pathlib.Path(work) / f'{name}.log').read_text().splitlines()
        problems = [line for line in lines if line.startswith(('[WARN]', '[ERROR]', '[FATAL]'))]
        print(f'{name}: exit status {code}, {len(problems)} warnings or errors' +
              ''.join(f'\n   {line[:160]}' for line in problems[:4]))
        if code:
            print('\n'.join(lines[-30:]))
