"""Node benchmark: CPU per cycle and latency of each node against a minimal rclpy node.

    python -m robot_dynamics.benchmarks.nodes [--quick] [--rounds R] [--out DIR]

On loopback DDS in a domain of its own, this process plays a 7-DoF arm (the Panda's joints):
it publishes a sensor_msgs/JointState, waits for the node's reply and publishes the next state
at the next 1 ms tick (a ping-pong at 1 kHz), to each node under test in turn, each a process in
a namespace of its own: the minimal node and its raw twin (``echo_node``), dynamics_controller in
computed_torque, gravity_compensation, cartesian_impedance and operational_space
(config/panda.yaml, the shipped URDF; all on the default fast path) and in computed_torque on
the plain path (``fast_path`` false), and wrench_estimator (its reply: ~/wrench). The
arm_simulator is measured the other way round: it publishes the states at its own 1 kHz and
this process answers each with a constant command.

Per node and round: CPU per cycle (utime + stime of the node's process, /proc/<pid>/stat, over
the window, divided by the states it answered) and the latency state -> reply (median, p99; the
simulator's own figure, state -> command, from its /diagnostics). Ratios are taken against the
minimal nodes within each round; the tables give the median over rounds and the range. Also in
process: the compiled CDR reader against rclpy's deserialize_message + JointStateReader, and
dynamics_controller's joint-state callback on both paths (``callback_costs``).
"""
import argparse
import dataclasses
import json
import os
import pathlib
import signal
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import WrenchStamped
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

import robot_dynamics as rd
from robot_dynamics import bringup, run
from robot_dynamics.nodes.common.cdr import CdrJointStateReader, Float64MultiArrayWriter
from robot_dynamics.nodes.dynamics_controller import DynamicsController
from robot_dynamics.nodes.common.joint_states import COMMAND_QOS, JointStateReader, to_array
from robot_dynamics.nodes.common.process import executor

from .report import callback_table, node_table, reader_table
from .suites import machine

CLOCK_TICK = os.sysconf('SC_CLK_TCK')
QUICK, FULL = dict(rounds=2, cycles=2000), dict(rounds=4, cycles=5000)
WARM_CYCLES, TIMEOUT = 300, 0.5      # per window; s without a reply: the state counts as lost
RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


@dataclasses.dataclass
class Target:
    label: str
    argv: list          # command line of the node's process
    reply: str          # the topic it answers on (the simulator: where its states come)
    reply_type: type
    answered: bool = False   # the benchmark answers the node's states (arm_simulator)
    process: object = None


def cpu_seconds(pid):
    """utime + stime of a process (all its threads), s."""
    with open(f'/proc/{pid}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK


def arm_state():
    """(joint names, q, v, effort) of the Panda holding its simulator's initial pose."""
    section = bringup.config_section(bringup.config_file('panda.yaml'), 'arm_simulator')
    model = rd.load_urdf(rd.robot_urdf('panda'), section['base'], section['tip'])
    q = np.array(section['initial_position'])
    return section['joints'], q, np.zeros_like(q), rd.gravity(model, q)


def targets(work):
    """The nodes under test, each in a namespace bench_<label>."""
    echo = [sys.executable, '-m', 'robot_dynamics.benchmarks.echo_node']

    def node(label, setup, name, **overrides):
        spec = next(s for s in bringup.nodes(setup, namespace=f'bench_{label}',
                                             overrides={name: overrides}) if s.name == name)
        return run.node_command(spec, work)

    def ns(label, argv):
        return argv + ['--ros-args', '-r', f'__ns:=/bench_{label}']

    commands = 'effort_controller/commands'
    return [Target('minimal', ns('minimal', echo), commands, Float64MultiArray),
            Target('minimal_raw', ns('minimal_raw', echo + ['raw']), commands, Float64MultiArray),
            Target('computed_torque', node('computed_torque', 'computed_torque',
                                           'dynamics_controller'), commands, Float64MultiArray),
            Target('gravity_compensation', node('gravity_compensation', 'gravity_compensation',
                                                'dynamics_controller'), commands,
                   Float64MultiArray),
            *[Target(mode, node(mode, 'gravity_compensation', 'dynamics_controller', mode=mode),
                     commands, Float64MultiArray)
              for mode in ('cartesian_impedance', 'operational_space')],
            Target('computed_torque_plain', node('computed_torque_plain', 'computed_torque',
                                                 'dynamics_controller', fast_path=False),
                   commands, Float64MultiArray),
            Target('wrench_estimator', node('wrench_estimator', 'wrench_estimation',
                                            'wrench_estimator'), 'wrench_estimator/wrench',
                   WrenchStamped),
            # real time is what it measures: not in lock step with the benchmark
            Target('arm_simulator', node('arm_simulator', 'simulated_arm', 'arm_simulator',
                                         joint_damping=[2.0] * 7, lock_step=False),
                   'joint_states', JointState, answered=True)]


class Bench:
    """This process's rclpy node: the fake arm's states out, the replies in, one target at a time.

    Both ways are raw (serialized) so that this side costs as little as it can; the state's
    stamp is written into its bytes before each publication.
    """

    def __init__(self, targets, state):
        self.node, self.executor = Node('node_benchmark'), executor()
        self.executor.add_node(self.node)
        names, q, v, effort = state
        self.state = bytearray(serialize_message(JointState(
            name=names, position=q.tolist(), velocity=v.tolist(), effort=effort.tolist())))
        self.command = Float64MultiArrayWriter(len(q)).serialized(effort)
        self.active, self.replied_at, self.arrivals, self.diagnostics = None, None, [], {}
        self.publishers = {t.label: self._connect(t) for t in targets}
        self.node.create_subscription(DiagnosticArray, '/diagnostics', self._diagnostics, 10)

    def _connect(self, target):
        """The publisher to the target, after subscribing to what it publishes."""
        ns, topic = f'/bench_{target.label}', f'/bench_{target.label}/{target.reply}'
        if target.answered:
            publisher = self.node.create_publisher(
                Float64MultiArray, f'{ns}/effort_controller/commands', COMMAND_QOS)
            self.node.create_subscription(JointState, topic, self._answer(target, publisher),
                                          COMMAND_QOS, raw=True)
            return publisher
        stamped = hasattr(target.reply_type, 'header')
        self.node.create_subscription(target.reply_type, topic, self._reply(target, stamped),
                                      RELIABLE, raw=True)
        return self.node.create_publisher(JointState, f'{ns}/joint_states', COMMAND_QOS)

    def _reply(self, target, stamped):
        """A reply's callback; a stamped reply must carry the stamp of the last state."""
        def on_reply(data):
            if target.label == self.active and not (stamped and data[4:12] != self.state[4:12]):
                self.replied_at = time.perf_counter()
        return on_reply

    def _answer(self, target, publisher):
        """A simulator's state's callback: answer with the constant command."""
        def on_state(_):
            publisher.publish(self.command)
            if target.label == self.active:
                self.arrivals.append(time.perf_counter())
        return on_state

    def _diagnostics(self, msg):
        for status in msg.status:
            self.diagnostics[status.name] = {kv.key: kv.value for kv in status.values}

    def ping(self, label):
        """Publish one state, stamped now; the latency of its reply, s (None: none came)."""
        sec, nanosec = divmod(time.time_ns(), 10**9)
        struct.pack_into('<iI', self.state, 4, sec, nanosec)
        self.replied_at = None
        sent = time.perf_counter()
        self.publishers[label].publish(bytes(self.state))
        while self.replied_at is None and (left := sent + TIMEOUT - time.perf_counter()) > 0:
            self.executor.spin_once(timeout_sec=left)
        return None if self.replied_at is None else self.replied_at - sent

    def ping_pong(self, target, cycles):
        """(latencies, lost) of ``cycles`` states, one per 1 ms tick or after the reply."""
        self.active, latencies, lost = target.label, [], 0
        tick = time.perf_counter()
        for _ in range(cycles):
            latency = self.ping(target.label)
            if latency is None:
                lost += 1
            else:
                latencies.append(latency)
            tick = max(tick + 1e-3, time.perf_counter())
            time.sleep(max(0.0, tick - time.perf_counter()))
        self.active = None
        return np.array(latencies), lost

    def spin_for(self, seconds):
        end = time.perf_counter() + seconds
        while (left := end - time.perf_counter()) > 0:
            self.executor.spin_once(timeout_sec=left)

    def close(self):
        self.executor.shutdown()
        self.node.destroy_node()


def start(target, env, work):
    log = open(pathlib.Path(work) / f'{target.label}.log', 'w')
    target.process = subprocess.Popen(target.argv, env=env, stdout=log, stderr=subprocess.STDOUT)


def stop(target):
    process, target.process = target.process, None
    process.send_signal(signal.SIGINT)
    try:
        process.wait(5.0)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def check_running(target, work, deadline):
    """Raise, with the end of its log, if the node has exited or the deadline has passed."""
    if target.process.poll() is None and time.monotonic() < deadline:
        return
    log = (pathlib.Path(work) / f'{target.label}.log').read_text()[-3000:]
    raise RuntimeError(f'{target.label} exited ({target.process.returncode}) or does not '
                       f'answer:\n{log}')


def wait_until_answering(bench, target, work, timeout=120.0):
    """Ping until 50 states in a row get a reply (the node has started and matched)."""
    bench.active, deadline, streak = target.label, time.monotonic() + timeout, 0
    while streak < 50:
        check_running(target, work, deadline)
        streak = streak + 1 if bench.ping(target.label) is not None else 0
    bench.active = None
    print(f'{target.label} answers ({time.monotonic() - deadline + timeout:.1f} s)',
          file=sys.stderr, flush=True)


def figures(cpu, answered, latencies, lost):
    """One node's figures in one window."""
    median, p99 = np.percentile(latencies, [50, 99]) * 1e6
    return dict(cpu_us=cpu / answered * 1e6, median_us=median, p99_us=p99,
                answered=answered, lost=lost)


def measure_ping_pong(bench, target, cycles):
    bench.ping_pong(target, WARM_CYCLES)
    before = cpu_seconds(target.process.pid)
    latencies, lost = bench.ping_pong(target, cycles)
    return figures(cpu_seconds(target.process.pid) - before, len(latencies), latencies, lost)


def measure_answered(bench, target, cycles, env, work):
    """The simulator: started for its window, its states answered; latency from its diagnostics."""
    start(target, env, work)
    try:
        bench.active, bench.arrivals = target.label, []
        deadline = time.monotonic() + 120.0
        while len(bench.arrivals) < 100:
            check_running(target, work, deadline)
            bench.spin_for(0.1)
        bench.spin_for(1.0)
        bench.arrivals, bench.diagnostics = [], {}
        before = cpu_seconds(target.process.pid)
        bench.spin_for(max(cycles * 1e-3, 2.5))
        cpu, answered = cpu_seconds(target.process.pid) - before, len(bench.arrivals)
        loop = bench.diagnostics.get('arm_simulator: simulation', {})
        bench.active = None
    finally:
        stop(target)
    result = figures(cpu, answered, np.array([np.nan]), 0)
    result.update(median_us=float(loop.get('loop_latency_median_us', 'nan')),
                  p99_us=float(loop.get('loop_latency_p99_us', 'nan')),
                  period_p99_us=float(np.percentile(np.diff(bench.arrivals), 99) * 1e6))
    return result


def measure_round(bench, nodes, cycles, env, work):
    """{label: figures} of every node, in turn."""
    return {t.label: measure_answered(bench, t, cycles, env, work) if t.answered
            else measure_ping_pong(bench, t, cycles) for t in nodes}


def reader_costs(rounds=7, messages=2000):
    """µs per message: the compiled reader vs deserialize + JointStateReader, and the writers."""
    names, q, v, effort = arm_state()
    data = serialize_message(JointState(name=names[::-1] + ['finger'], position=[*q, 0.0],
                                        velocity=[*v, 0.0], effort=[*effort, 0.0]))
    fast, plain = CdrJointStateReader(names), JointStateReader(names)
    writer, command = Float64MultiArrayWriter(len(q)), Float64MultiArray()
    cases = {'read: compiled CDR reader': lambda: fast.read_cdr(data),
             'read: deserialize_message + JointStateReader':
                 lambda: plain.read(deserialize_message(data, JointState)),
             'write: Float64MultiArrayWriter': lambda: writer.serialized(effort),
             'write: fill the message + serialize_message':
                 lambda: serialize_message(fill(command, to_array(effort)))}
    times = {name: [] for name in cases}
    for _ in range(rounds):
        for name, call in cases.items():
            call()
            start = time.thread_time()
            for _ in range(messages):
                call()
            times[name].append((time.thread_time() - start) / messages * 1e6)
    return {name: dict(us=float(np.median(t)), min_us=float(np.min(t)))
            for name, t in times.items()}


def callback_costs(modes=('computed_torque', 'gravity_compensation', 'cartesian_impedance',
                          'operational_space'), rounds=5, states=2000):
    """µs of CPU per joint state of dynamics_controller's callback, in process, on both paths.

    fast: ``on_serialized_joint_state`` on the bytes; plain: ``deserialize_message`` and
    ``on_joint_state`` (what rclpy does for a typed subscription). Publication is a no-op here;
    the states are the same message, stamped (the compiled cycles serve only stamped states;
    equal stamps are accepted). Needs rclpy initialised.
    """
    names, q, v, effort = arm_state()
    msg = JointState(name=names, position=q.tolist(), velocity=v.tolist(), effort=effort.tolist())
    msg.header.stamp.sec = int(time.time())
    data = serialize_message(msg)
    values = {**bringup.config_section(bringup.config_file('panda.yaml'), 'dynamics_controller'),
              'robot_description': pathlib.Path(rd.robot_urdf('panda')).read_text()}
    out = {}
    for mode in modes:
        node = DynamicsController(namespace=f'/callback_{mode}', parameter_overrides=[
            Parameter(k, value=x) for k, x in {**values, 'mode': mode}.items()])
        node.publisher.publish = node.task.tip_pose.publish = \
            node.output.heartbeat.publish = lambda _: None
        cases = {'fast': lambda: node.on_serialized_joint_state(data),
                 'plain': lambda: node.on_joint_state(deserialize_message(data, JointState))}
        times = {path: [] for path in cases}
        for _ in range(rounds):
            for path, call in cases.items():
                call()
                start = time.thread_time()
                for _ in range(states):
                    call()
                times[path].append((time.thread_time() - start) / states * 1e6)
        assert node.diagnostics.counts['rejected_states'] == 0, node.diagnostics.counts
        node.destroy_node()
        out[mode] = {path: float(np.median(t)) for path, t in times.items()}
    return out


def fill(msg, data):
    msg.data = data
    return msg


def ratios(rounds, reference):
    """Per node and figure: [its ratio to ``reference`` in each round]."""
    return {label: {k: [r[label][k] / r[reference][k] for r in rounds]
                    for k in ('cpu_us', 'median_us', 'p99_us')} for label in rounds[0]}


def summary(rounds):
    """Medians and ranges over rounds of each figure and of the ratios to both minimal nodes."""
    out = {}
    for label in rounds[0]:
        keys = rounds[0][label]
        out[label] = {k: spread([r[label][k] for r in rounds]) for k in keys}
    for reference in ('minimal', 'minimal_raw'):
        for label, figures_ in ratios(rounds, reference).items():
            out[label][f'vs_{reference}'] = {k: spread(x) for k, x in figures_.items()}
    return out


def spread(values):
    return dict(median=float(np.median(values)), min=float(np.min(values)),
                max=float(np.max(values)))


def measure(quick=False, rounds=None):
    """Run the node benchmark (own domain, loopback DDS); its results as a dict."""
    settings = dict(QUICK if quick else FULL, **({'rounds': rounds} if rounds else {}))
    domain, lock = run.allocate_domain_id()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix='robot_dynamics_node_bench_') as work:
        env = run.loopback_environment(domain, work)
        os.environ.update({k: env[k] for k in ('ROS_DOMAIN_ID', 'RMW_IMPLEMENTATION',
                                               'FASTDDS_DEFAULT_PROFILES_FILE', 'ROS_LOG_DIR')})
        rclpy.init()
        try:
            per_round = _rounds(targets(work), settings, env, work)
            callbacks = callback_costs()
        finally:
            rclpy.try_shutdown()
            lock.close()
    return dict(settings=settings, load_average_before=load_before,
                load_average_after=os.getloadavg(), rounds=per_round,
                summary=summary(per_round), readers=reader_costs(), callbacks=callbacks)


def _rounds(nodes, settings, env, work):
    served = [t for t in nodes if not t.answered]
    for t in served:
        start(t, env, work)
    bench = Bench(nodes, arm_state())
    try:
        for t in served:
            wait_until_answering(bench, t, work)
        return [measure_round(bench, nodes, settings['cycles'], env, work)
                for _ in range(settings['rounds'])]
    finally:
        bench.close()
        for t in served:
            stop(t)


def report(results):
    """The node section as markdown."""
    s = results['settings']
    return '\n\n'.join([
        f"{s['rounds']} rounds of {s['cycles']} states per node; ratios: median over rounds "
        f"(range). Load average before {results['load_average_before']}, after "
        f"{results['load_average_after']}.", node_table(results['summary']),
        reader_table(results['readers']), callback_table(results['callbacks'])])


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m robot_dynamics.benchmarks.nodes',
                                     description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='2 short rounds (about a minute)')
    parser.add_argument('--rounds', type=int, help='rounds (default 4, quick 2)')
    parser.add_argument('--out', default='benchmark_results', help='output directory')
    args = parser.parse_args(argv)
    results = dict(machine=machine(), **measure(args.quick, args.rounds))
    print('## Nodes: CPU per cycle and latency at 1 kHz, Panda\n')
    print(report(results))
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / 'nodes.json').write_text(json.dumps(results, indent=1))


if __name__ == '__main__':
    main()
