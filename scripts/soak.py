"""1 kHz soak: simulator + controller (computed torque) + estimator, then a report.

    .venv/bin/python scripts/soak.py [--duration 600] [--busy] [--robot panda] [--json FILE]

The simulated_arm bring-up runs as processes on loopback DDS (robot_dynamics.run); this script
sends the controller a back-and-forth trajectory every few seconds, records every effort command
(NaN, effort-limit violations against the URDF), /diagnostics (latency, overruns, clamps,
rejected messages) and, every second, CPU and resident memory of each process from /proc.
``--busy`` adds a process spinning on the other core.

Latency, end to end: joint state published by the simulator -> effort command received by it
(its ``loop_latency``), and joint state received -> effort published inside the controller
(``compute``). Each node reports median and p99 over its last samples once a second; the report
gives the median of those medians, the largest p99 and the largest single value.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robot_dynamics import bringup, run
from robot_dynamics.core.robots import robot_urdf

PAGE, TICK = os.sysconf('SC_PAGE_SIZE'), os.sysconf('SC_CLK_TCK')


def process_sample(pid):
    """(CPU seconds, resident MB) of a process from /proc."""
    fields = pathlib.Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICK          # utime + stime
    rss = int(pathlib.Path(f'/proc/{pid}/statm').read_text().split()[1]) * PAGE / 2**20
    return cpu, rss


class Monitor:
    """Records commands and /diagnostics; publishes the trajectories."""

    def __init__(self, limits, joints, q0):
        self.node = rclpy.create_node('soak_monitor')
        self.limits, self.joints, self.q0 = limits, joints, q0
        self.commands = self.nan = self.violations = 0
        self.diagnostics = []   # (time, node name, {key: value})
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.BEST_EFFORT)
        self.node.create_subscription(Float64MultiArray, 'effort_controller/commands',
                                      self.on_command, qos)
        self.node.create_subscription(DiagnosticArray, '/diagnostics', self.on_diagnostics, 100)
        self.trajectory = self.node.create_publisher(
            JointTrajectory, '/dynamics_controller/joint_trajectory', 10)
        self.sign = 1.0

    def on_command(self, msg):
        tau = np.frombuffer(msg.data) if hasattr(msg.data, 'tobytes') else np.array(msg.data)
        self.commands += 1
        if not np.isfinite(tau).all():
            self.nan += 1
        elif (np.abs(tau) > self.limits + 1e-9).any():
            self.violations += 1

    def on_diagnostics(self, msg):
        for status in msg.status:
            values = {}
            for kv in status.values:
                try:
                    values[kv.key] = float(kv.value)
                except ValueError:
                    values[kv.key] = kv.value
            self.diagnostics.append((time.monotonic(), status.name.split(':')[0], values))

    def send_trajectory(self):
        """q0 -> q0 ± 0.3 rad (every joint) -> q0 in 2 s, from time 0.5 s (blended)."""
        offset = self.sign * 0.3
        self.sign = -self.sign
        points = [(self.q0 + offset, 1.0), (self.q0, 2.0)]
        self.trajectory.publish(JointTrajectory(joint_names=self.joints, points=[
            JointTrajectoryPoint(positions=list(q), time_from_start=_duration(t))
            for q, t in points]))


def _duration(t):
    from builtin_interfaces.msg import Duration
    return Duration(sec=int(t), nanosec=int(round((t % 1) * 1e9)))


def series(diagnostics, node, key):
    return np.array([v[key] for _, n, v in diagnostics if n == node and
                     isinstance(v.get(key), float)])


def soak(duration=600.0, robot='panda', busy=False, log=print):
    """Run the soak; returns the report (a dict)."""
    config = bringup.load_config(bringup.config_file(f'{robot}.yaml'))
    joints = config['dynamics_controller']['ros__parameters']['joints']
    q0 = np.array(config['arm_simulator']['ros__parameters']['initial_position'])
    limit = {j.get('name'): j.find('limit') for j in
             ET.parse(robot_urdf(robot)).getroot().iter('joint')}
    limits = np.array([float(limit[j].get('effort')) for j in joints])

    domain, lock = run.allocate_domain_id()
    work = pathlib.Path(tempfile.mkdtemp(prefix='robot_dynamics_soak_'))
    env = run.loopback_environment(domain, work)
    os.environ.update({k: env[k] for k in ('ROS_DOMAIN_ID', 'RMW_IMPLEMENTATION',
                                           'FASTDDS_DEFAULT_PROFILES_FILE', 'ROS_LOG_DIR')})
    # collision detection on, report only: its false alarms are counted (controller.collisions)
    specs = bringup.nodes('simulated_arm', robot=robot, mode='computed_torque', overrides={
        'dynamics_controller': {'collision.enable': True, 'collision.reaction': 'none'}})
    processes = run.Processes(specs, env, work, output=work)
    spinner = subprocess.Popen([sys.executable, '-c', 'while True: pass']) if busy else None
    rclpy.init()
    monitor = Monitor(limits, joints, q0)
    executor = SingleThreadedExecutor()
    executor.add_node(monitor.node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    samples = {name: [] for name in processes.procs}   # (t, cpu s, rss MB)
    try:
        deadline = time.monotonic() + 120
        while not all(']: ready: ' in (work / f'{s.name}.log').read_text() for s in specs):
            if processes.exited() or time.monotonic() > deadline:
                raise RuntimeError(f'nodes did not start: {processes.exited()} (logs in {work})')
            time.sleep(0.1)
        start = time.monotonic()
        log(f'soak: {duration:.0f} s, {robot}, busy core: {busy}, logs in {work}')
        next_trajectory = start + 1.0
        while time.monotonic() - start < duration:
            now = time.monotonic()
            for name, p in processes.procs.items():
                samples[name].append((now - start, *process_sample(p.pid)))
            if now >= next_trajectory:
                monitor.send_trajectory()
                next_trajectory = now + 3.0
            if processes.exited():
                raise RuntimeError(f'nodes exited: {processes.exited()} (logs in {work})')
            time.sleep(1.0)
        report = make_report(monitor, samples, duration, busy)
    finally:
        codes = processes.stop()
        if spinner:
            spinner.kill()
            spinner.wait()
        executor.shutdown()
        thread.join(5.0)
        monitor.node.destroy_node()
        rclpy.try_shutdown()
        lock.close()
    report['exit_codes'] = codes
    return report


def make_report(monitor, samples, duration, busy):
    d = monitor.diagnostics
    sim, ctl = 'arm_simulator', 'dynamics_controller'
    loop_median, loop_p99 = series(d, sim, 'loop_latency_median_us'), series(d, sim,
                                                                             'loop_latency_p99_us')
    compute_median, compute_p99 = (series(d, ctl, 'compute_median_us'),
                                   series(d, ctl, 'compute_p99_us'))
    last = {n: v for _, n, v in d}
    processes = {}
    for name, s in samples.items():
        s = np.array(s)
        t, cpu, rss = s.T
        settled = rss[t >= 0.2 * t[-1]]   # after warm-up (numba, DDS discovery, allocations)
        processes[name] = {
            'cpu_percent': round(100 * (cpu[-1] - cpu[0]) / max(t[-1] - t[0], 1e-9), 1),
            'rss_mb_start': round(float(settled[0]), 2), 'rss_mb_end': round(float(rss[-1]), 2),
            'rss_growth_mb': round(float(rss[-1] - settled[0]), 2),
            'rss_mb_over_time': [round(float(x), 1) for x in rss[::max(1, len(rss) // 10)]]}
    return {
        'duration_s': duration, 'busy_core': busy,
        'loop_latency_us (state published -> command received)': {
            'median': round(float(np.median(loop_median)), 1),
            'p99_worst_second': round(float(loop_p99.max()), 1)},
        'compute_latency_us (state received -> effort published)': {
            'median': round(float(np.median(compute_median)), 1),
            'p99_worst_second': round(float(compute_p99.max()), 1),
            'max': last.get(ctl, {}).get('compute_max_us')},
        'simulator': {k: last.get(sim, {}).get(k) for k in
                      ('real_time_factor', 'overruns', 'slips', 'simulated_time_s')},
        'real_time_factor_min': round(float(series(d, sim, 'real_time_factor').min()), 3),
        'worst_lateness_ms': round(float(series(d, sim, 'worst_lateness_ms').max()), 2),
        'controller': {k: last.get(ctl, {}).get(k) for k in
                       ('commands', 'rejected_states', 'clamped_commands',
                        'rate_limited_commands', 'non_finite_commands', 'timeouts',
                        'collisions')},
        'estimator': {k: last.get('wrench_estimator', {}).get(k) for k in
                      ('estimates', 'rejected_states', 'observer_restarts', 'compute_p99_us')},
        'commands_seen': monitor.commands, 'nan_commands': monitor.nan,
        'limit_violations': monitor.violations, 'processes': processes}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--duration', type=float, default=600.0)
    parser.add_argument('--robot', default='panda')
    parser.add_argument('--busy', action='store_true', help='load the other core')
    parser.add_argument('--json', help='also write the report to this file')
    args = parser.parse_args(argv)
    report = soak(args.duration, args.robot, args.busy)
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        pathlib.Path(args.json).write_text(text)
    ok = report['nan_commands'] == 0 and report['limit_violations'] == 0
    return 0 if ok else 1


if __name__ == '__main__':
    raise SystemExit(main())
