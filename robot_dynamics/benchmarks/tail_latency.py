"""Tail latency under load: the controller and the rclpy floor beside ``stress-ng --cpu N``.

    python -m robot_dynamics.benchmarks.tail_latency [--seconds 600] [--cpus 2] [--priority 50]
                                                     [--out DIR]

The node benchmark's ping-pong (``nodes.Bench``: this process plays the Panda's driver, a
JointState out, the reply in, the next state at the next 1 ms tick) to two processes in the
same run: dynamics_controller in computed torque (config/panda.yaml) and the minimal rclpy node
(``echo_node``), a state to each per tick, in alternating order. After both answer,
``stress-ng --cpu N`` (Debian package stress-ng) loads the machine for ``seconds``; the window
is measured under it. Twice: at the default scheduler, and with the real-time settings
(the controller's ``thread_priority`` and ``lock_memory``; the floor's main thread at the same
SCHED_FIFO priority, set from outside, as the controller sets its own). This process, the
driver's stand-in, stays at the default scheduler: at SCHED_FIFO its main thread was left
runnable and unscheduled for minutes beside stress-ng on this 2-core VM (kernel 6.18).

Per node and setting: the latency state -> reply (median, p99, p99.9, worst), the cycles
answered later than 2 ms (a state without a reply within 0.5 s counts as late and lost), and
the CPU per cycle. A benchmark, not a test; one run per setting.
"""
import argparse
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import rclpy
from std_msgs.msg import Float64MultiArray

from robot_dynamics import bringup, run

from . import nodes, report
from .suites import machine

LATE = 2e-3   # s: a reply later than this misses a 1 kHz cycle and the next
LABELS = ('minimal', 'computed_torque')


def targets(work, realtime):
    """The floor and the controller (with the real-time parameters ``realtime``)."""
    echo = [sys.executable, '-m', 'robot_dynamics.benchmarks.echo_node',
            '--ros-args', '-r', '__ns:=/bench_minimal']
    spec = next(s for s in bringup.nodes('computed_torque', namespace='bench_computed_torque',
                                         overrides={'dynamics_controller': realtime})
                if s.name == 'dynamics_controller')
    commands = 'effort_controller/commands'
    return [nodes.Target('minimal', echo, commands, Float64MultiArray),
            nodes.Target('computed_torque', run.node_command(spec, work), commands,
                         Float64MultiArray)]


def fifo(pid, priority):
    """SCHED_FIFO at ``priority`` for the main thread of process ``pid`` (0: this one)."""
    os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(priority))


def interleaved(bench, seconds):
    """{label: (latencies, lost)} of a state to each target per 1 ms tick for ``seconds``."""
    latencies, lost = {label: [] for label in LABELS}, dict.fromkeys(LABELS, 0)
    tick = time.perf_counter()
    end, k = tick + seconds, 0
    while tick < end:
        for label in (LABELS if k % 2 == 0 else LABELS[::-1]):
            bench.active = label
            latency = bench.ping(label)
            if latency is None:
                lost[label] += 1
            else:
                latencies[label].append(latency)
        bench.active, k = None, k + 1
        tick = max(tick + 1e-3, time.perf_counter())
        time.sleep(max(0.0, tick - time.perf_counter()))
    return {label: (np.array(latencies[label]), lost[label]) for label in LABELS}


def tail(latencies, lost, cpu):
    """One node's figures: latency percentiles (µs), late and lost cycles, CPU per cycle."""
    median, p99, p999 = np.percentile(latencies, [50, 99, 99.9]) * 1e6
    return dict(median_us=median, p99_us=p99, p999_us=p999, worst_us=latencies.max() * 1e6,
                late=int((latencies > LATE).sum()) + lost, lost=lost, cycles=len(latencies) + lost,
                cpu_us=cpu / max(len(latencies), 1) * 1e6)


def measure(priority, seconds, cpus, env, work):
    """The figures of one setting (``priority`` 0: the default scheduler)."""
    realtime = {'thread_priority': priority, 'lock_memory': True} if priority else {}
    served = targets(work, realtime)
    for target in served:
        nodes.start(target, env, work)
    bench = nodes.Bench(served, nodes.arm_state())
    stress = None
    try:
        for target in served:
            nodes.wait_until_answering(bench, target, work)
        if priority:   # the controller sets its own once ready; the floor's is set here
            fifo(served[0].process.pid, priority)
        interleaved(bench, 2.0)   # warm
        stress = subprocess.Popen(['stress-ng', '--cpu', str(cpus), '--quiet'],
                                  start_new_session=True)
        time.sleep(1.0)
        before = {t.label: nodes.cpu_seconds(t.process.pid) for t in served}
        measured = interleaved(bench, seconds)
        cpu = {t.label: nodes.cpu_seconds(t.process.pid) - before[t.label] for t in served}
    finally:
        if stress is not None:
            os.killpg(stress.pid, signal.SIGKILL)   # its workers too
            stress.wait()
        bench.close()
        for target in served:
            nodes.stop(target)
    return {label: tail(*measured[label], cpu[label]) for label in LABELS}


def run_all(seconds, cpus, priority):
    """Both settings in one domain of their own: {'default': ..., 'realtime': ...}."""
    domain, lock = run.allocate_domain_id()
    with tempfile.TemporaryDirectory(prefix='robot_dynamics_tail_') as work:
        env = run.loopback_environment(domain, work)
        os.environ.update({k: env[k] for k in ('ROS_DOMAIN_ID', 'RMW_IMPLEMENTATION',
                                               'FASTDDS_DEFAULT_PROFILES_FILE', 'ROS_LOG_DIR')})
        rclpy.init()
        try:
            return {name: measure(p, seconds, cpus, env, work)
                    for name, p in (('default', 0), ('realtime', priority))}
        finally:
            rclpy.try_shutdown()
            lock.close()


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m robot_dynamics.benchmarks.tail_latency',
                                     description=__doc__.split('\n\n')[0])
    parser.add_argument('--seconds', type=float, default=600.0, help='under load, per setting')
    parser.add_argument('--cpus', type=int, default=2, help='stress-ng --cpu')
    parser.add_argument('--priority', type=int, default=50, help='SCHED_FIFO priority')
    parser.add_argument('--out', default='benchmark_results', help='output directory')
    args = parser.parse_args(argv)
    if shutil.which('stress-ng') is None:
        parser.error('stress-ng is not installed: apt-get install stress-ng (Debian, Ubuntu)')
    results = dict(machine=machine(), seconds=args.seconds, stress_cpus=args.cpus,
                   priority=args.priority,
                   settings=run_all(args.seconds, args.cpus, args.priority))
    print(report.tail_table(results))
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / 'tail_latency.json').write_text(json.dumps(results, indent=1))


if __name__ == '__main__':
    main()
