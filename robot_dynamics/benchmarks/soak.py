"""Soak: a long run of the simulated arm, RSS and collections of each node over time.

    python -m robot_dynamics.benchmarks.soak [--minutes 10] [--period 30] [--mode M] [--out DIR]

The simulated_arm bring-up (the Panda, lock step at real time, all three nodes at 1 kHz) on
loopback DDS in a domain of its own; every ``period`` s this process reads each node's resident
memory (VmRSS, /proc/<pid>/status) and its /diagnostics ``gc_collections`` (collections per
generation) and ``gc_frozen``. A loop that allocates nothing that lives keeps RSS flat and the
third generation's count where the node's start left it (nodes.common.realtime). Writes
``soak.json`` and prints a table. A benchmark, not a test: it takes the minutes it is given.
"""
import argparse
import json
import os
import pathlib
import tempfile
import time

import rclpy
from diagnostic_msgs.msg import DiagnosticArray

from robot_dynamics import bringup, run


def rss_mib(pid):
    """Resident memory of a process, MiB."""
    for line in pathlib.Path(f'/proc/{pid}/status').read_text().splitlines():
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024.0
    return float('nan')


def collector_states(node, seconds):
    """{node name: (gc_collections, gc_frozen)} from /diagnostics heard within ``seconds``."""
    found = {}

    def heard(msg):
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values}
            if 'gc_collections' in values:
                found[status.name.split(':')[0]] = (values['gc_collections'],
                                                    values['gc_frozen'])
    subscription = node.create_subscription(DiagnosticArray, '/diagnostics', heard, 10)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)
    node.destroy_subscription(subscription)
    return found


def soak(minutes, period, mode):
    """Samples [{t, node: {rss_mib, gc_collections, gc_frozen}}] over ``minutes``."""
    domain, lock = run.allocate_domain_id()
    samples = []
    with tempfile.TemporaryDirectory(prefix='robot_dynamics_soak_') as work:
        env = run.loopback_environment(domain, work)
        os.environ.update({k: env[k] for k in ('ROS_DOMAIN_ID', 'RMW_IMPLEMENTATION',
                                               'FASTDDS_DEFAULT_PROFILES_FILE')})
        rclpy.init()
        listener = rclpy.create_node('soak_listener')
        procs = run.Processes(bringup.nodes('simulated_arm', mode=mode), env, work, output=work)
        start = time.monotonic()
        try:
            while time.monotonic() - start < 60.0 * minutes and not procs.exited():
                states = collector_states(listener, period)
                samples.append({'t': round(time.monotonic() - start, 1), **{
                    name: {'rss_mib': round(rss_mib(p.pid), 1),
                           'gc_collections': states.get(name, ('?', '?'))[0],
                           'gc_frozen': states.get(name, ('?', '?'))[1]}
                    for name, p in procs.procs.items()}})
                print(json.dumps(samples[-1]), flush=True)
        finally:
            procs.stop()
            listener.destroy_node()
            rclpy.try_shutdown()
            lock.close()
    return samples


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m robot_dynamics.benchmarks.soak')
    parser.add_argument('--minutes', type=float, default=10.0)
    parser.add_argument('--period', type=float, default=30.0)
    parser.add_argument('--mode', default='computed_torque', choices=bringup.MODES)
    parser.add_argument('--out', default='.')
    args = parser.parse_args(argv)
    samples = soak(args.minutes, args.period, args.mode)
    out = pathlib.Path(args.out) / 'soak.json'
    out.write_text(json.dumps(samples, indent=1))
    print(f'wrote {out}')


if __name__ == '__main__':
    raise SystemExit(main())
