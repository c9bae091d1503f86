"""1 kHz soak: simulator + controller (computed torque) + estimator, then a report.

    .venv/bin/python scripts/soak.py [--duration 600] [--busy] [--robot panda] [--json FILE]
        [--engine internal|mujoco] [--plant none|realistic|panda_gaz2019]
        [--amplitude 0.3] [--segment 1.0] [--push 0] [--command-wait S] [--state-timeout S]

The simulated_arm bring-up runs as processes on loopback DDS (robot_dynamics.run) for
``duration`` s of the arm's clock, paced by the wall clock (not in lock step: the soak measures
real-time behaviour) (the joint-state stamps; at most 3x that in wall time when the
simulator falls behind); this script sends the controller a back-and-forth trajectory (every
joint ± ``amplitude`` rad and back, each way in ``segment`` s) 1 s after the previous one ends
(on the arm's clock), records every effort command (NaN, effort-limit
violations against the URDF), /diagnostics (latency, overruns, clamps, rejected messages) and,
every second, CPU and resident memory of each process from /proc. ``--busy`` adds a process
spinning on the other core. ``--plant`` sets the simulated arm's ``plant.profile`` (the nodes
keep the nominal model), ``--engine`` its engine.

Contact safety: both nodes detect collisions with their defaults (the controller reporting
only, ``collision.reaction: none``); the report counts their events (false alarms: nothing
touches the arm) and gives the largest |τ_ext| per joint of the estimator's
``~/external_joint_torques`` (the same observer as the controller's) against the thresholds:
``threshold_margins`` = threshold / peak. ``--push F`` then pushes F newtons down at the tip
during one more trajectory and reports the detection delay of both nodes after the push's onset
(the estimator's force along the push first over half of it, less ln 2 / K: a first-order rise).

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
from geometry_msgs.msg import WrenchStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

import robot_dynamics as rd
from robot_dynamics import bringup, run
from robot_dynamics.core.robots import robot_urdf
from robot_dynamics.nodes.common.contact_safety import EVENT_QOS
from robot_dynamics.nodes.common.joint_states import wrench_message

PAGE, TICK = os.sysconf('SC_PAGE_SIZE'), os.sysconf('SC_CLK_TCK')
DETECTORS = ('dynamics_controller', 'wrench_estimator')
WALL_LIMIT = 3.0   # the soak ends after this many times its duration in wall time


def process_sample(pid):
    """(CPU seconds, resident MB) of a process from /proc."""
    fields = pathlib.Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICK          # utime + stime
    rss = int(pathlib.Path(f'/proc/{pid}/statm').read_text().split()[1]) * PAGE / 2**20
    return cpu, rss


class Monitor:
    """Records commands and /diagnostics; publishes the trajectories."""

    def __init__(self, limits, joints, q0, amplitude=0.3, segment=1.0):
        self.node = rclpy.create_node('soak_monitor')
        self.limits, self.joints, self.q0 = limits, joints, q0
        self.amplitude, self.segment = amplitude, segment
        self.commands = self.nan = self.violations = 0
        self.diagnostics = []   # (time, node name, {key: value})
        self.residual_peak, self.residuals = np.zeros(len(joints)), 0
        self.recording_residuals = True
        self.arm_time, self.trajectories = None, 0   # the newest joint-state stamp seen, s
        self.wrenches = []      # (stamp, force (3,)) while ``pushing``
        self.pushing = False
        self.events = {node: [] for node in DETECTORS}   # ERROR statuses on ~/collision
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.BEST_EFFORT)
        self.node.create_subscription(Float64MultiArray, 'effort_controller/commands',
                                      self.on_command, qos)
        self.node.create_subscription(DiagnosticArray, '/diagnostics', self.on_diagnostics, 100)
        self.node.create_subscription(JointState, '/wrench_estimator/external_joint_torques',
                                      self.on_residual, qos)
        self.node.create_subscription(WrenchStamped, '/wrench_estimator/wrench', self.on_wrench,
                                      qos)
        for node in DETECTORS:
            self.node.create_subscription(
                DiagnosticArray, f'/{node}/collision',
                lambda msg, node=node: self.on_event(node, msg), EVENT_QOS)
        self.trajectory = self.node.create_publisher(
            JointTrajectory, '/dynamics_controller/joint_trajectory', 10)
        self.wrench = self.node.create_publisher(WrenchStamped, '/arm_simulator/external_wrench',
                                                 10)
        self.sign = 1.0

    def on_command(self, msg):
        tau = np.frombuffer(msg.data) if hasattr(msg.data, 'tobytes') else np.array(msg.data)
        self.commands += 1
        if not np.isfinite(tau).all():
            self.nan += 1
        elif (np.abs(tau) > self.limits + 1e-9).any():
            self.violations += 1

    def on_residual(self, msg):
        self.arm_time = _stamp(msg)
        if self.recording_residuals:
            index = [list(msg.name).index(j) for j in self.joints]
            np.maximum(self.residual_peak, np.abs(np.asarray(msg.effort)[index]),
                       out=self.residual_peak)
            self.residuals += 1

    def on_wrench(self, msg):
        if self.pushing:
            f = msg.wrench.force
            self.wrenches.append((_stamp(msg), np.array([f.x, f.y, f.z])))

    def on_event(self, node, msg):
        status = msg.status[0]
        if status.level == status.ERROR:
            self.events[node].append({kv.key: kv.value for kv in status.values})

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
        """q0 -> q0 ± amplitude (every joint) -> q0, segment s each way (blended from now)."""
        offset = self.sign * self.amplitude
        self.sign, self.trajectories = -self.sign, self.trajectories + 1
        points = [(self.q0 + offset, self.segment), (self.q0, 2 * self.segment)]
        self.trajectory.publish(JointTrajectory(joint_names=self.joints, points=[
            JointTrajectoryPoint(positions=list(q), time_from_start=_duration(t))
            for q, t in points]))

    def wait_arm(self, t, timeout=30.0):
        """Until the arm's clock (joint-state stamps) reaches t."""
        deadline = time.monotonic() + timeout
        while self.arm_time < t:
            if time.monotonic() > deadline:
                raise RuntimeError('the simulated arm is stuck')
            time.sleep(0.01)

    def push(self, wrench, frame):
        self.wrench.publish(wrench_message(frame, wrench))


def _stamp(msg):
    return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec


def _duration(t):
    from builtin_interfaces.msg import Duration
    return Duration(sec=int(t), nanosec=int(round((t % 1) * 1e9)))


def series(diagnostics, node, key):
    return np.array([v[key] for _, n, v in diagnostics if n == node and
                     isinstance(v.get(key), float)])


def soak(duration=600.0, robot='panda', busy=False, log=print, engine='', plant='none',
         amplitude=0.3, segment=1.0, push=0.0, command_wait=None, state_timeout=None):
    """Run the soak; returns the report (a dict)."""
    config = bringup.load_config(bringup.config_file(f'{robot}.yaml'))
    controller = config['dynamics_controller']['ros__parameters']
    joints = controller['joints']
    q0 = np.array(config['arm_simulator']['ros__parameters']['initial_position'])
    limit = {j.get('name'): j.find('limit') for j in
             ET.parse(robot_urdf(robot)).getroot().iter('joint')}
    limits = np.array([float(limit[j].get('effort')) for j in joints])
    model = rd.load_urdf(robot_urdf(robot), controller['base'], controller['tip'])
    order = [model.joint_names.index(j) for j in joints]
    thresholds = rd.default_thresholds(model)[order]   # what both nodes use (joints order)

    domain, lock = run.allocate_domain_id()
    work = pathlib.Path(tempfile.mkdtemp(prefix='robot_dynamics_soak_'))
    env = run.loopback_environment(domain, work)
    os.environ.update({k: env[k] for k in ('ROS_DOMAIN_ID', 'RMW_IMPLEMENTATION',
                                           'FASTDDS_DEFAULT_PROFILES_FILE', 'ROS_LOG_DIR')})
    # collision detection on, report only: its false alarms are counted (controller.collisions)
    timeout = {} if state_timeout is None else {'state_timeout': state_timeout}
    specs = bringup.nodes('simulated_arm', robot=robot, mode='computed_torque', engine=engine,
                          overrides={
                              'dynamics_controller': {'collision.enable': True,
                                                      'collision.reaction': 'none', **timeout},
                              'wrench_estimator': {'collision.enable': True, **timeout},
                              # real time is what a soak measures: the simulator paced
                              # by the wall clock, not in lock step with the controller
                              'arm_simulator': {'plant.profile': plant, 'lock_step': False,
                                                **({'command_wait': command_wait}
                                                   if command_wait is not None else {})}})
    processes = run.Processes(specs, env, work, output=work)
    spinner = subprocess.Popen([sys.executable, '-c', 'while True: pass']) if busy else None
    rclpy.init()
    monitor = Monitor(limits, joints, q0, amplitude, segment)
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
        log(f'soak: {duration:.0f} s, {robot}, engine {engine or "from the config"}, plant '
            f'{plant}, ±{amplitude} rad in {segment} s, busy core: {busy}, logs in {work}')
        while monitor.arm_time is None:
            if time.monotonic() - start > 30 or processes.exited():
                raise RuntimeError(f'no external joint torques (logs in {work})')
            time.sleep(0.1)
        arm_start, sampled = monitor.arm_time, -np.inf
        next_trajectory = arm_start + 1.0
        while (monitor.arm_time - arm_start < duration and
               time.monotonic() - start < WALL_LIMIT * duration):
            now = time.monotonic()
            if now - sampled >= 1.0:
                sampled = now
                for name, p in processes.procs.items():
                    samples[name].append((now - start, *process_sample(p.pid)))
            if monitor.arm_time >= next_trajectory:   # the previous one ended 1 s ago
                monitor.send_trajectory()
                next_trajectory = monitor.arm_time + 2 * segment + 1.0
            if processes.exited():
                raise RuntimeError(f'nodes exited: {processes.exited()} (logs in {work})')
            time.sleep(0.05)
        report = make_report(monitor, samples, duration, busy)
        report.update(arm_time_s=round(monitor.arm_time - arm_start, 3),
                      wall_time_s=round(time.monotonic() - start, 3),
                      trajectories=monitor.trajectories)
        report['contact_safety'] = contact_report(monitor, thresholds)
        if push:
            report['push'] = push_detection(monitor, push, controller['base'], segment,
                                            config['wrench_estimator']['ros__parameters'])
        report.update(engine=engine or 'from the config', plant=plant, command_wait=command_wait,
                      pacing='wall clock (real time measured), not lock step',
                      state_timeout=state_timeout,
                      trajectory={'amplitude_rad': amplitude, 'segment_s': segment})
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


def contact_report(monitor, thresholds):
    """False alarms of both detectors and the residual peaks against the thresholds."""
    monitor.recording_residuals = False
    peak = monitor.residual_peak
    return {'false_alarms': {node: len(events) for node, events in monitor.events.items()},
            'events': {node: events[:3] for node, events in monitor.events.items() if events},
            'residuals_seen': monitor.residuals,
            'residual_peak_nm': np.round(peak, 3).tolist(),
            'thresholds_nm': np.round(thresholds, 3).tolist(),
            'threshold_margins': np.round(thresholds / np.maximum(peak, 1e-12), 2).tolist()}


def push_detection(monitor, force, base, segment, estimator):
    """Push ``force`` N down at the tip mid-trajectory; each node's delay after the onset, s.

    The onset: the estimator's force along the push first over half of it, less ln 2 / K (its
    first-order rise reaches half of a step ln 2 / K after the step).
    """
    gain = float(np.min(estimator['observer_gain']))
    before = {node: len(events) for node, events in monitor.events.items()}
    monitor.wait_arm(monitor.arm_time + 2 * segment + 1.0)   # the last trajectory ended
    monitor.send_trajectory()
    monitor.wait_arm(monitor.arm_time + 0.5 * segment)
    monitor.pushing = True
    monitor.push([0.0, 0.0, 0.0, 0.0, 0.0, -force], base)
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and any(
            len(monitor.events[node]) == before[node] for node in before):
        time.sleep(0.05)
    time.sleep(0.2)
    monitor.push([0.0] * 6, base)
    monitor.pushing = False
    half = [t for t, f in monitor.wrenches if -f[2] > 0.5 * force]
    if not half:
        return {'force_n': force, 'detected': False, 'reason': 'no estimate over half the push'}
    onset = half[0] - np.log(2) / gain
    report = {'force_n': force, 'onset_s': round(onset, 6)}
    for node, events in monitor.events.items():
        if len(events) > before[node]:   # a false alarm before stays latched: no new event
            report[node] = {'delay_ms': round(1e3 * (float(events[-1]['time']) - onset), 2),
                            'joints': events[-1]['joints'],
                            'torques_nm': events[-1]['torques']}
        else:
            report[node] = 'not detected'
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
                      ('estimates', 'rejected_states', 'observer_restarts', 'collisions',
                       'compute_p99_us')},
        'commands_seen': monitor.commands, 'nan_commands': monitor.nan,
        'limit_violations': monitor.violations, 'processes': processes}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--duration', type=float, default=600.0)
    parser.add_argument('--robot', default='panda')
    parser.add_argument('--busy', action='store_true', help='load the other core')
    parser.add_argument('--json', help='also write the report to this file')
    parser.add_argument('--engine', default='', help='internal or mujoco (default: the config)')
    parser.add_argument('--plant', default='none',
                        help="the simulated arm's plant.profile (none, realistic, panda_gaz2019)")
    parser.add_argument('--amplitude', type=float, default=0.3,
                        help='rad, every joint, each trajectory')
    parser.add_argument('--segment', type=float, default=1.0, help='s, each way')
    parser.add_argument('--push', type=float, default=0.0,
                        help='N: then push down at the tip, detection delay reported (0: no push)')
    parser.add_argument('--command-wait', type=float,
                        help="the simulator's command_wait, s (default its own, 2 ms; 0.1: the "
                             'simulator waits for a loaded controller rather than run on)')
    parser.add_argument('--state-timeout', type=float,
                        help="the nodes' state_timeout, s (default theirs, 0.1; 5: a loaded "
                             'machine stalling the simulator does not make the controller stop '
                             'and then hold wherever the arm stands)')
    args = parser.parse_args(argv)
    report = soak(args.duration, args.robot, args.busy, engine=args.engine, plant=args.plant,
                  amplitude=args.amplitude, segment=args.segment, push=args.push,
                  command_wait=args.command_wait, state_timeout=args.state_timeout)
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        pathlib.Path(args.json).write_text(text)
    ok = report['nan_commands'] == 0 and report['limit_violations'] == 0
    return 0 if ok else 1


if __name__ == '__main__':
    raise SystemExit(main())
