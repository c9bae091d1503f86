"""Tail latency under load: the simulated arm beside ``stress-ng --cpu N``, with and without RT.

    python -m robot_dynamics.benchmarks.tail_latency [--seconds 20] [--cpus 2] [--priority 50]

The simulated_arm bring-up (the Panda in computed torque, lock step at real time, three nodes
at 1 kHz) on loopback DDS, once at the default scheduler and once with ``thread_priority``;
each time, after 25 s of start-up, ``stress-ng --cpu N`` (Debian package stress-ng) runs for
``seconds``. Per run, from /diagnostics: the controller's compute time per state, p99 (the
largest of the reports under load) and the largest since its start, and the simulator's loop
latency (median, p99 of its last report). A benchmark, not a test; one run per setting.
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

import rclpy
from diagnostic_msgs.msg import DiagnosticArray

from robot_dynamics import bringup, run

START = 25.0   # s: the nodes warm up and settle before the load starts


def spin_for(node, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)


def measure(realtime, seconds, cpus):
    """The figures of one run with ``realtime`` launch arguments ({}: none)."""
    domain, lock = run.allocate_domain_id()
    with tempfile.TemporaryDirectory(prefix='robot_dynamics_tail_') as work:
        env = run.loopback_environment(domain, work)
        os.environ.update({k: env[k] for k in ('ROS_DOMAIN_ID', 'RMW_IMPLEMENTATION',
                                               'FASTDDS_DEFAULT_PROFILES_FILE')})
        rclpy.init()
        node, found, p99 = rclpy.create_node('tail_latency'), {}, []

        def heard(msg):
            for status in msg.status:
                values = {kv.key: kv.value for kv in status.values}
                found[status.name.split(':')[0]] = values
                if status.name.startswith('dynamics_controller') and 'compute_p99_us' in values:
                    p99.append(float(values['compute_p99_us']))
        node.create_subscription(DiagnosticArray, '/diagnostics', heard, 10)
        procs = run.Processes(bringup.nodes('simulated_arm', mode='computed_torque', **realtime),
                              env, work, output=work)
        try:
            spin_for(node, START)
            del p99[:]
            stress = subprocess.Popen(['stress-ng', '--cpu', str(cpus), '--timeout',
                                       f'{seconds}s', '--quiet'])
            spin_for(node, seconds)
            stress.wait()
        finally:
            procs.stop()
            node.destroy_node()
            rclpy.try_shutdown()
            lock.close()
    controller, simulator = found.get('dynamics_controller', {}), found.get('arm_simulator', {})
    return {'realtime': realtime or 'none',
            'thread_priority': controller.get('realtime_thread_priority'),
            'controller_compute_p99_us': max(p99, default=float('nan')),
            'controller_compute_max_us': controller.get('compute_max_us'),
            'simulator_loop_latency_median_us': simulator.get('loop_latency_median_us'),
            'simulator_loop_latency_p99_us': simulator.get('loop_latency_p99_us')}


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m robot_dynamics.benchmarks.tail_latency')
    parser.add_argument('--seconds', type=float, default=20.0)
    parser.add_argument('--cpus', type=int, default=2)
    parser.add_argument('--priority', type=int, default=50)
    args = parser.parse_args(argv)
    for realtime in ({}, {'thread_priority': str(args.priority)}):
        print(json.dumps(measure(realtime, args.seconds, args.cpus)), flush=True)


if __name__ == '__main__':
    raise SystemExit(main())
