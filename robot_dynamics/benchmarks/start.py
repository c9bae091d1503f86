"""Start-up benchmark: seconds from a node's process start to its first output, cold and warm.

    python -m robot_dynamics.benchmarks.start [--out DIR] [--cases NAME ...]

Each case starts one node as a process (``python -m robot_dynamics.nodes.<node> --ros-args``)
with the minimal parameters a newcomer writes (``robot_description`` and, for the controller,
``mode``) on an arm the package does not ship (example-robot-data's UR5 when installed, else
the Panda), on loopback DDS in a domain of its own; this process publishes the arm's joint
states at 100 Hz (the simulator publishes its own) and times the first output: the effort
command, the estimator's external joint torques, the simulator's first joint state. Cold: an
empty NUMBA_CACHE_DIR, nothing compiled anywhere; warm: the same directory again. Also the
compile step (``python -m robot_dynamics.compile``) into an empty cache. The results file
(``start.json``) records the machine, the numba version and the load average.
"""
import argparse
import importlib.metadata
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time

import yaml

import robot_dynamics as rd
from robot_dynamics import run

from .suites import machine

#: case: (node, parameters beside robot_description, the topic of its first output)
CASES = {
    'dynamics_controller gravity_compensation':
        ('dynamics_controller', {'mode': 'gravity_compensation'}, 'effort_controller/commands'),
    'dynamics_controller computed_torque':
        ('dynamics_controller', {'mode': 'computed_torque'}, 'effort_controller/commands'),
    'wrench_estimator': ('wrench_estimator', {}, 'wrench_estimator/external_joint_torques'),
    'arm_simulator': ('arm_simulator', {}, 'joint_states'),
}
TIMEOUT = 600.0   # s: a start slower than this is a failure, not a figure


def unshipped_urdf():
    """(name, URDF text) of example-robot-data's UR5 if installed, else the shipped Panda."""
    try:
        files = importlib.metadata.distribution('example-robot-data').files
        path = next(f.locate() for f in files if str(f).endswith('ur5_robot.urdf'))
        return 'ur5 (example-robot-data)', pathlib.Path(path).read_text()
    except (importlib.metadata.PackageNotFoundError, StopIteration):
        return 'panda (shipped)', pathlib.Path(rd.robot_urdf('panda')).read_text()


def first_output(node, parameters, topic, cache, work, urdf, timeout=TIMEOUT):
    """Seconds from the node's process start to its first message on ``topic``."""
    import rclpy
    from rclpy.node import Node
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    model = rd.load_urdf(urdf)
    params = pathlib.Path(work) / f'{node}.yaml'
    params.write_text(yaml.safe_dump({node: {'ros__parameters': {
        'robot_description': urdf, **parameters}}}))
    domain, lock = run.allocate_domain_id()
    env = {**run.loopback_environment(domain, work), 'NUMBA_CACHE_DIR': cache}
    os.environ.update({k: env[k] for k in ('ROS_DOMAIN_ID', 'RMW_IMPLEMENTATION',
                                           'FASTDDS_DEFAULT_PROFILES_FILE')})
    context = rclpy.Context()
    rclpy.init(context=context)
    probe = Node('start_benchmark', context=context)
    arrived = threading.Event()
    kind = JointState if topic.endswith(('joint_states', 'external_joint_torques')) \
        else Float64MultiArray
    probe.create_subscription(kind, topic, lambda _: arrived.set(), 10)
    states = probe.create_publisher(JointState, 'joint_states', 10)
    state = JointState(name=list(model.joint_names), position=list(model.neutral_position),
                       velocity=[0.0] * model.nv, effort=[0.0] * model.nv)

    def publish():
        state.header.stamp = probe.get_clock().now().to_msg()
        states.publish(state)
    if node != 'arm_simulator':
        probe.create_timer(0.01, publish)
    log = open(pathlib.Path(work) / f'{node}.log', 'w')
    began = time.monotonic()
    process = subprocess.Popen([sys.executable, '-m', f'robot_dynamics.nodes.{node}',
                                '--ros-args', '--params-file', str(params)],
                               env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        while not arrived.is_set():
            executor_spin(probe, context)
            if process.poll() is not None:
                raise RuntimeError(f'{node} exited {process.returncode}: see {log.name}')
            if time.monotonic() - began > timeout:
                raise TimeoutError(f'{node}: no {topic} in {timeout:.0f} s')
        return time.monotonic() - began
    finally:
        process.terminate()
        process.wait(20)
        log.close()
        probe.destroy_node()
        rclpy.shutdown(context=context)
        lock.close()


def executor_spin(node, context, _executors={}):
    """One round of callbacks of ``node`` (an executor per context, made once)."""
    from rclpy.executors import SingleThreadedExecutor
    if context not in _executors:
        _executors.clear()
        _executors[context] = SingleThreadedExecutor(context=context)
        _executors[context].add_node(node)
    _executors[context].spin_once(timeout_sec=0.05)


def compile_seconds(cache):
    """Seconds of ``python -m robot_dynamics.compile`` into the (empty) ``cache``."""
    began = time.monotonic()
    subprocess.run([sys.executable, '-m', 'robot_dynamics.compile', '--quiet'],
                   env={**os.environ, 'NUMBA_CACHE_DIR': cache}, check=True)
    return time.monotonic() - began


def measure(cases):
    arm, urdf = unshipped_urdf()
    rows = []
    with tempfile.TemporaryDirectory(prefix='robot_dynamics_start_') as work:
        for name in cases:
            node, parameters, topic = CASES[name]
            with tempfile.TemporaryDirectory(dir=work) as cache:
                cold = first_output(node, parameters, topic, cache, work, urdf)
                warm = first_output(node, parameters, topic, cache, work, urdf)
            rows.append(dict(case=name, cold_s=round(cold, 2), warm_s=round(warm, 2)))
            print(f'{name:45s} cold {cold:6.1f} s   warm {warm:5.2f} s', flush=True)
        with tempfile.TemporaryDirectory(dir=work) as cache:
            full = compile_seconds(cache)
        print(f'{"python -m robot_dynamics.compile":45s} cold {full:6.1f} s', flush=True)
    return dict(arm=arm, starts=rows, compile_s=round(full, 1))


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m robot_dynamics.benchmarks.start',
                                     description=__doc__.split('\n\n')[0])
    parser.add_argument('--out', default='benchmark_results', help='output directory')
    parser.add_argument('--cases', nargs='*', default=list(CASES), choices=list(CASES))
    args = parser.parse_args(argv)
    results = dict(machine=machine(), **measure(args.cases),
                   load_average_after=os.getloadavg())
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / 'start.json').write_text(json.dumps(results, indent=1))
    print(f'results: {out / "start.json"}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
