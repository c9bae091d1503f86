"""Timing faults over DDS: every mode stays stable with late, lost, bunched, stalled states.

The simulated_arm bring-up (lock step, the controller on /clock), its simulator with
``faults.*`` (simulation.timing_faults): each joint state reaches the controller 1-5 ms after
it was sensed (1 ms plus up to 4 ms of jitter), 5 % are lost, they go out two at a time, and
every second nothing comes for 50 ms, then the newest. The arm moves on meanwhile with the
last command. Per mode, on the Panda and the UR5e (nominal plant, internal engine):

- gravity compensation: the released arm floats, drift < 1e-3 rad over 2.5 s;
- computed torque: holds through two stalls, then a 0.1 rad step on every joint in 1 s: error
  0.5-0.9 s after it < 1e-3 rad;
- Cartesian impedance and operational space: the tip holds within 1 mm through two stalls,
  then a 10 N push for 1 s; 1.5 s after it the tip is back within 1 mm.

In every run: no command reached an effort limit (the controller's ``clamped_commands``, 0 as
in a run without faults), the state timeout never fired (state_timeout 0.5 s against 50 ms
stalls), and the faults were there: the controller saw states 4 ms old or older
(``state_age_max_us``), the states had 50 ms gaps. The
tolerated delays per mode, beyond these faults: doc/guides/timing_faults.md. About 15 s per case.
"""
import re
import time

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

import robot_dynamics as rd
from robot_dynamics import bringup
from robot_dynamics.nodes.common.joint_states import trajectory_message, wrench_message
from ros_harness import BEST_EFFORT, ArmView, stamp_of

FAULTS = {'faults.delay': 0.001, 'faults.jitter': 0.004, 'faults.drop': 0.05,
          'faults.bunch': 2, 'faults.stall': 0.05, 'faults.stall_period': 1.0,
          'faults.seed': 1}
MODES = ('gravity_compensation', 'computed_torque', 'cartesian_impedance', 'operational_space')
CASES = [(robot, mode) for robot in ('panda', 'ur5e') for mode in MODES]
HOLD = 2.5    # s, through two stalls
PUSH = 10.0   # N, along -z of the base


class Arm(ArmView):
    """One bring-up with timing faults, without the estimator."""

    def __init__(self, ros, robot, mode, faults=None, controller=None):
        self.probe, self.mode = ros.probe, mode
        sim = bringup.load_config(bringup.config_file(f'{robot}.yaml'))['arm_simulator'][
            'ros__parameters']
        self.joints, self.q0 = sim['joints'], np.array(sim['initial_position'])
        self.model = rd.load_urdf(rd.robot_urdf(robot), sim['base'], sim['tip'])
        self.states = self.probe.record(JointState, 'joint_states', BEST_EFFORT)
        self.commands = self.probe.record(Float64MultiArray, 'effort_controller/commands')
        self.diagnostics = self.probe.record(DiagnosticArray, '/diagnostics')
        self.trajectory = self.probe.create_publisher(
            JointTrajectory, '/dynamics_controller/joint_trajectory', 10)
        self.wrench = self.probe.create_publisher(WrenchStamped,
                                                  '/arm_simulator/external_wrench', 10)
        # the controller on /clock: the states' age is then their lateness in simulated time
        specs = bringup.nodes('simulated_arm', robot=robot, mode=mode, overrides={
            'arm_simulator': FAULTS if faults is None else faults,
            'dynamics_controller': {'use_sim_time': True, **(controller or {})}})
        self.launch = ros.launch([s for s in specs if s.name != 'wrench_estimator'])

    def q(self, since, until):
        return self.joint_arrays(self.model.joint_names, since, until, least=10)

    def tip(self, since, until):
        """Tip positions (k, 3) in [since, until]."""
        return rd.frame_pose(self.model, self.q(since, until)[1], self.model.tip)[:, :3, 3]

    def tip_at(self, t):
        """The tip position of the newest state stamped by t (the probe may miss some)."""
        self.wait_until(t)
        _, q = self.joint_arrays(self.model.joint_names, t - 0.3, t)
        return rd.frame_pose(self.model, q[-1], self.model.tip)[:3, 3]

    def controller(self):
        """The controller's newest /diagnostics values."""
        return {kv.key: kv.value for kv in self.controller_status().values}

    def controller_status(self, timeout=30.0):
        """The controller's newest /diagnostics status (after two more reports of any node)."""
        return self.controller_reports(timeout)[-1][1]

    def controller_reports(self, timeout=30.0):
        """(stamp, status) of each controller /diagnostics report, after two more reports.

        The stamp is the controller's clock (/clock) when it reported.
        """
        self.diagnostics.wait_for_more(2, timeout=timeout)
        deadline = time.monotonic() + timeout
        while not (reports := [(stamp_of(m), s) for m in list(self.diagnostics.messages)
                               for s in m.status if s.name.startswith('dynamics_controller')]):
            assert time.monotonic() < deadline, f'no controller diagnostics\n{self.launch.logs()}'
            self.diagnostics.wait_for_more(1, timeout=timeout)
        return reports

    def wait_for_status(self, words, timeout=60.0):
        """(stamp, status) of the first controller report whose message has ``words``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [r for r in self.controller_reports() if words in r[1].message]
            if found:
                return found[0]
        raise AssertionError(f"no '{words}' on /diagnostics\n{self.launch.logs()}")

    def close(self):
        codes = self.launch.processes.stop(timeout=20.0)
        self.probe.stop_recording(self.states, self.commands, self.diagnostics)
        self.probe.remove_publishers(self.trajectory, self.wrench)
        assert set(codes.values()) == {0}, self.launch.logs()


def started(arm):
    """Wait until the arm is released under the controller."""
    arm.launch.ready()
    assert arm.commands.wait(1, timeout=30), arm.launch.logs()
    arm.probe.stop_recording(arm.commands)
    arm.released = arm.now()
    return arm


@pytest.fixture(params=CASES, ids=[f'{r}-{m}' for r, m in CASES])
def arm(ros, request):
    arm = Arm(ros, *request.param)
    try:
        arm.launch.ready()
        assert arm.commands.wait(1, timeout=30), arm.launch.logs()
        arm.probe.stop_recording(arm.commands)
        arm.probe.wait_for_subscribers(arm.trajectory)
        arm.probe.wait_for_subscribers(arm.wrench)
        arm.released = arm.now()
        yield arm
    finally:
        arm.close()


def test_every_mode_holds_through_timing_faults(arm):
    start, end = arm.released, arm.released + HOLD
    arm.wait_until(end)
    if arm.mode in ('gravity_compensation', 'computed_torque'):
        _, q = arm.q(start, end)
        hold = np.abs(q - q[0]).max()
        assert hold < 1e-3, f'{arm.mode}: moved {hold:.2e} rad while holding'
    else:
        tip = arm.tip(start, end)
        hold = np.linalg.norm(tip - tip[0], axis=1).max()
        assert hold < 1e-3, f'{arm.mode}: the tip moved {hold * 1e3:.3f} mm while holding'
    if arm.mode == 'computed_torque':
        _, q = arm.q(end - 0.5, end)   # 50 ms could fall in a stall: too few states
        goal = q[-1] + 0.1
        t0 = arm.now() + 0.2
        order = [arm.model.joint_names.index(j) for j in arm.joints]
        arm.trajectory.publish(trajectory_message(arm.joints, t0, [1.0], [goal[order]],
                                                  np.zeros((1, len(order)))))
        arm.wait_until(t0 + 1.9)
        _, q = arm.q(t0 + 1.5, t0 + 1.9)
        after = np.abs(q - goal).max()
        assert after < 1e-3, \
            f"steady error {after:.2e} rad\n{arm.launch.log('dynamics_controller')}"
    elif arm.mode != 'gravity_compensation':
        rest = arm.tip_at(end)
        pushed = arm.now()
        arm.wrench.publish(wrench_message(arm.model.base, [0, 0, 0, 0, 0, -PUSH]))
        moved = np.linalg.norm(arm.tip_at(pushed + 1.0) - rest)
        arm.wrench.publish(wrench_message(arm.model.base, [0, 0, 0, 0, 0, 0]))
        after = np.linalg.norm(arm.tip_at(arm.now() + 1.5) - rest)
        assert moved > 2e-3, f'the push moved the tip only {moved * 1e3:.2f} mm'
        assert after < 1e-3, f'the tip came back to {after * 1e3:.3f} mm from its rest'
    values = arm.controller()
    print(f'{arm.mode}: held within {hold:.2e}; controller {values}')
    assert values['clamped_commands'] == '0' and values['timeouts'] == '0', \
        f"{values}\n{arm.launch.log('dynamics_controller')}"
    assert float(values['state_age_max_us']) >= 4e3, values   # the delays were seen
    t, _ = arm.q(start, end)
    assert np.diff(t).max() >= FAULTS['faults.stall'] - 1e-6   # and the stalls


def test_states_late_for_the_mode_turn_diagnostics_to_warn(ros):
    """Computed torque (ω_n 20 rad/s: it tolerates about 31 ms) with states 20 ms late."""
    arm = Arm(ros, 'panda', 'computed_torque', faults={'faults.delay': 0.02})
    try:
        started(arm)
        _, status = arm.wait_for_status('ms late')
        print(f'{status.message}; {arm.controller()}')
        assert status.level == DiagnosticStatus.WARN, status
        # 20 ms by the /clock the controller has read: a /clock a step or two ahead of the
        # delayed state when the machine is busy
        late = float(re.search(r'joint states ([\d.]+) ms late', status.message).group(1))
        assert 20.0 <= late <= 22.0, status.message
    finally:
        arm.close()


def motion_after(arm, latched):
    """What a failure shows: |q̇| per joint each 0.1 s from the latch, and the controller's log."""
    t, v = arm.joint_arrays(arm.model.joint_names, latched, latched + 3.0, fields=('velocity',))
    rows = [f'{s - latched:5.2f} s: {np.array2string(np.abs(x), precision=3)}'
            for s, x in zip(t, v) if round(1e3 * (s - latched)) % 100 == 0]
    return '\n'.join(rows) + '\n' + arm.launch.log('dynamics_controller')[-2000:]


def test_an_unstable_loop_is_reported_and_ends_complying_at_rest(ros):
    """An unstable loop is reported (ERROR) and the controller settles the arm.

    The UR5e under Cartesian impedance without the frequency limit, states 5 ms late: a 0.1 s
    twist sets its wrist ringing (test_task_frequency_limit), at 110 rad/s in a limit
    cycle of the rate limit (no clamp: without the check, /diagnostics said OK). Within a few
    seconds the controller reports the loop unstable (ERROR), complies, and the arm comes to
    rest.
    """
    arm = Arm(ros, 'ur5e', 'cartesian_impedance', faults={'faults.delay': 0.005},
              controller={'cartesian.max_frequency': float('inf'),
                          'cartesian.delay_margin': 0.0})   # no bound, not even the delay's
    try:
        started(arm)
        arm.probe.wait_for_subscribers(arm.wrench)
        arm.wrench.publish(wrench_message(arm.model.base, [0, 0, 0.3, 0, 0, 0]))
        arm.wait_until(arm.now() + 0.1)
        arm.wrench.publish(wrench_message(arm.model.base, [0, 0, 0, 0, 0, 0]))
        latched, status = arm.wait_for_status('loop unstable')   # the controller's clock
        assert status.level == DiagnosticStatus.ERROR, status
        seen = arm.now()   # the newest state the probe had then
        arm.wait_until(latched + 3.0)
        _, v = arm.joint_arrays(arm.model.joint_names, latched + 2.5, latched + 3.0,
                                fields=('velocity',), least=10)
        saturated = ('clamped_commands', 'rate_limited_commands')
        before = [int(arm.controller()[k]) for k in saturated]
        arm.wait_until(arm.now() + 1.0)
        after = [int(arm.controller()[k]) for k in saturated]
        print(f'{status.message} at {latched:.3f} s (the probe saw it at {seen:.3f} s); at rest '
              f'to {np.abs(v).max():.2e} rad/s; clamped and rate limited commands {before} -> '
              f'{after}')
        assert np.abs(v).max() < 0.05 and after == before, motion_after(arm, latched)
        assert 'loop unstable' in arm.launch.log('dynamics_controller')
    finally:
        arm.close()
