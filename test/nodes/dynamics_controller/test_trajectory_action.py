"""~/follow_joint_trajectory and ~/controller_state over real DDS, driven as MoveIt drives them.

The simulated_arm bring-up in lock step (arm_simulator waits for every command) on each
simulator engine, internal and MuJoCo (one bring-up per engine, the module's tests in order on
it), dynamics_controller in computed torque, with the test-only control_msgs (test/interfaces,
built by the control_msgs_prefix fixture). The client sends a goal, waits for acceptance and the
result, and checks the status and error code, as MoveIt's simple controller manager does: a
multi-point trajectory, a partial goal, a preemption, a cancel, goals that violate a limit or
name an unknown joint, and tolerances. The arm's own joint_states (not the server's feedback)
judge where it went; the tracking figures come from the action's feedback. Every wait is on
the arm's clock or on a result, with generous wall-clock timeouts: the figures do not depend
on the load.
"""
import threading
import time

import numpy as np
import pytest
from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Duration
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

import robot_dynamics as rd
from robot_dynamics import bringup
from robot_dynamics.simulation import ENGINES
from ros_harness import BEST_EFFORT, ArmView, stamp_of, window

CONFIG = bringup.load_config(bringup.config_file('panda.yaml'))
SIM = CONFIG['arm_simulator']['ros__parameters']
JOINTS, Q0 = SIM['joints'], np.array(SIM['initial_position'])
PANDA = rd.load_urdf(rd.robot_urdf('panda'), base='panda_link0', tip='panda_hand')
ACTION = '/dynamics_controller/follow_joint_trajectory'
STATE = '/dynamics_controller/controller_state'
STATE_RATE = 50.0       # Hz: controller_state.rate's default
STATE_PERIOD = 1.0 / SIM['rate']   # s: the arm's joint states, one per simulator step
GOAL_TOLERANCE = 0.02   # rad: trajectory_action.goal_tolerance's default
STOPPED = 0.05          # rad/s: trajectory_action.stopped_velocity_tolerance's default
RESULT_WAIT = 120.0     # s of wall time at most for a result (the arm's clock runs meanwhile)


def duration(t):
    sec, nanosec = divmod(int(round(t * 1e9)), 10**9)
    return Duration(sec=sec, nanosec=nanosec)


def trajectory(names, points):
    """A JointTrajectory starting on receipt: points are (time s, positions)."""
    return JointTrajectory(joint_names=list(names), points=[
        JointTrajectoryPoint(positions=[float(x) for x in q], time_from_start=duration(t))
        for t, q in points])


def wait_for(future, what, timeout=RESULT_WAIT, logs=str):
    """The future's result, waited for up to ``timeout`` s (wall time); ``logs()`` on failure."""
    deadline = time.monotonic() + timeout
    while not future.done():
        assert time.monotonic() < deadline, f'no {what} in {timeout} s\n{logs()}'
        time.sleep(0.01)
    return future.result()


class MoveItLikeClient:
    """An action client as moveit_simple_controller_manager uses it: goal, acceptance, result."""

    def __init__(self, probe, action_type, logs):
        from rclpy.action import ActionClient
        self.type, self.probe, self.logs = action_type, probe, logs
        # made on the probe's executor thread: rclpy's ActionClient joins the node's waitables
        # before it has its lock, and an executor iterating them meanwhile died of it
        self.client = probe.in_executor(ActionClient, probe, action_type, ACTION)
        assert self.client.wait_for_server(timeout_sec=30.0), f'no server on {ACTION}'
        self.lock = threading.Lock()

    def send(self, names, points, **tolerances):
        """Send a goal; returns (goal handle, its feedback list)."""
        goal = self.type.Goal(trajectory=trajectory(names, points), **tolerances)
        feedback = []

        def on_feedback(msg):
            with self.lock:
                feedback.append(msg.feedback)

        handle = wait_for(self.client.send_goal_async(goal, feedback_callback=on_feedback),
                          'goal response', 30.0)
        assert handle.accepted, 'the server rejected the goal instead of answering with a code'
        return handle, feedback

    def result(self, handle):
        """(status, result) of an accepted goal, once it ended."""
        answer = wait_for(handle.get_result_async(), 'result', logs=self.logs)
        return answer.status, answer.result

    def execute(self, names, points, **tolerances):
        handle, feedback = self.send(names, points, **tolerances)
        return (*self.result(handle), feedback)

    def close(self):
        self.probe.in_executor(self.client.destroy)


@pytest.fixture(scope='module', params=ENGINES)
def arm(ros, request, control_msgs_prefix):
    """The lock-step bring-up (computed torque) on an engine, a MoveIt-like client on its action.

    It records the arm's joint states, the controller's state and its effort commands.
    """
    from control_msgs.action import FollowJointTrajectory
    from control_msgs.msg import JointTrajectoryControllerState
    view = ArmView()
    view.engine = request.param
    view.states = ros.probe.record(JointState, 'joint_states', BEST_EFFORT)
    view.controller_states = ros.probe.record(JointTrajectoryControllerState, STATE)
    view.commands = ros.probe.record(Float64MultiArray, 'effort_controller/commands')
    specs = bringup.nodes('simulated_arm', robot='panda', mode='computed_torque',
                          engine=request.param)
    view.launch = ros.launch([s for s in specs if s.name != 'wrench_estimator'])
    view.launch.ready()
    # commanding: the controller has matched the arm's joint states (late in a session discovery
    # can take seconds, and lock step releases a silent controller's arm meanwhile)
    assert view.controller_states.wait(1, timeout=60.0), f'not commanding\n{view.logs()}'
    view.wait(1.0)
    assert ros.probe.get_parameters('arm_simulator', 'engine') == {'engine': request.param}
    client = MoveItLikeClient(ros.probe, FollowJointTrajectory, view.logs)
    view.client, view.codes = client, FollowJointTrajectory.Result
    yield view
    try:
        client.close()
    finally:
        codes = view.launch.processes.stop(timeout=20.0)
        ros.probe.stop_recording(view.states, view.controller_states, view.commands)
    assert set(codes.values()) == {0}, view.launch.logs()


def settled(arm, seconds=0.5):
    """The arm's positions and speeds, (q, v) of the newest state, after ``seconds`` more."""
    arm.wait(seconds)
    msg = arm.states.last()
    index = [list(msg.name).index(j) for j in JOINTS]
    return np.asarray(msg.position)[index], np.asarray(msg.velocity)[index]


def test_a_multi_point_goal_succeeds_within_the_goal_tolerance(arm):
    """Three points in 2.4 s; the tracking figures from the action's feedback.

    Bounds: max 3e-4 rad, RMS 1.5e-4 rad. Computed torque (ω = 20 rad/s, ζ = 1) on the model
    the engine integrates leaves the zero-order hold of lock step: the command for the state at
    t, computed with q̈_d(t), acts over the 1 ms step while q̈_d moves on by the jerk j times dt;
    the error settles at about j dt / (2 ω²). These quintic segments (up to 0.2 rad in 0.8 s)
    have jerks up to about 60 · 0.2 / 0.8³ ≈ 25 rad/s³: some 3e-5 rad. The bounds are ten times
    that, a fifth of the goal tolerance's default (0.02 rad) and far below any a MoveIt
    configuration sets. MuJoCo integrates the same URDF (RK4, the same step) with its own
    dynamics, so equal figures on both engines are not a mistake our simulator and controller
    share.
    """
    q, _ = settled(arm)
    offsets = np.array([0.3, -0.2, 0.25, 0.3, -0.3, 0.25, 0.4])
    points = [(0.8, q + 0.5 * offsets), (1.6, q + offsets), (2.4, q + 0.2 * offsets)]
    status, result, feedback = arm.client.execute(JOINTS, points)
    assert status == GoalStatus.STATUS_SUCCEEDED, f'{result}\n{arm.logs()}'
    assert result.error_code == arm.codes.SUCCESSFUL
    errors = np.array([f.error.positions for f in feedback])
    largest, rms = np.abs(errors).max(), np.sqrt(np.mean(errors ** 2))
    print(f'{arm.engine}: multi-point goal, tracking error max {largest:.2e} rad, '
          f'RMS {rms:.2e} rad over {len(feedback)} feedback messages')
    # succeeded once settled: within the goal tolerance of the last point, stopped (the
    # probe's best-effort states may lag the result: a state 0.1 s later, slower still)
    end, speed = settled(arm, 0.1)
    assert np.abs(end - points[-1][1]).max() <= GOAL_TOLERANCE
    assert np.abs(speed).max() <= STOPPED
    assert len(feedback) > 50   # 50 Hz of the arm's time over 2.4 s
    assert list(feedback[0].joint_names) == JOINTS
    # feedback's error is desired - actual, as documented
    np.testing.assert_allclose(errors, [np.subtract(f.desired.positions, f.actual.positions)
                                        for f in feedback], atol=1e-12)
    assert largest < 3e-4 and rms < 1.5e-4


def test_a_partial_goal_moves_its_joints_and_holds_the_others(arm):
    q, _ = settled(arm)
    named = [JOINTS[1], JOINTS[3]]
    target = q[[1, 3]] + [0.2, 0.25]
    status, result, _ = arm.client.execute(named, [(1.0, target)])
    assert status == GoalStatus.STATUS_SUCCEEDED, f'{result}\n{arm.logs()}'
    end, _ = settled(arm, 0.2)
    assert np.abs(end[[1, 3]] - target).max() <= GOAL_TOLERANCE
    held = [0, 2, 4, 5, 6]
    assert np.abs(end[held] - q[held]).max() < 2e-3


def test_a_new_goal_preempts_the_running_one(arm):
    q, _ = settled(arm)
    first, _ = arm.client.send(JOINTS, [(3.0, q + 0.4)])
    arm.wait(0.5)
    second = q + np.array([0.0, 0.1, 0.0, -0.1, 0.0, 0.1, 0.0])
    status, result, _ = arm.client.execute(JOINTS, [(1.0, second)])
    assert status == GoalStatus.STATUS_SUCCEEDED, f'{result}\n{arm.logs()}'
    first_status, first_result = arm.client.result(first)
    assert first_status == GoalStatus.STATUS_ABORTED
    assert 'preempted' in first_result.error_string
    end, _ = settled(arm, 0.2)
    assert np.abs(end - second).max() <= GOAL_TOLERANCE


def test_cancel_holds_where_the_arm_stands(arm):
    q, _ = settled(arm)
    handle, _ = arm.client.send(JOINTS, [(2.0, q + 0.3)])
    arm.wait(0.8)
    answer = wait_for(handle.cancel_goal_async(), 'cancel response', 30.0)
    assert answer.return_code == answer.ERROR_NONE and len(answer.goals_canceling) == 1
    status, result = arm.client.result(handle)
    assert status == GoalStatus.STATUS_CANCELED, f'{result}\n{arm.logs()}'
    stood, _ = settled(arm, 0.3)
    later, speed = settled(arm, 1.0)
    moved = np.abs(stood - q).max()
    assert 0.02 < moved < 0.29, f'cancelled mid-way: it moved {moved} rad of 0.3'
    assert np.abs(later - stood).max() < 2e-3   # holds there, not at the goal
    assert np.abs(speed).max() < STOPPED


def test_goals_that_cannot_run_are_answered_with_a_code_and_the_arm_holds(arm):
    q, _ = settled(arm)
    beyond = q.copy()
    beyond[3] = PANDA.upper[PANDA.joint_names.index(JOINTS[3])] + 0.1   # the URDF's limit
    status, result, _ = arm.client.execute(JOINTS, [(1.0, beyond)])
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == arm.codes.INVALID_GOAL
    assert 'outside the joint limits' in result.error_string and JOINTS[3] in result.error_string
    status, result, _ = arm.client.execute(['elbow'], [(1.0, [0.1])])
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == arm.codes.INVALID_JOINTS and 'elbow' in result.error_string
    end, _ = settled(arm, 0.5)
    assert np.abs(end - q).max() < 2e-3


def test_tolerances_abort_with_their_codes(arm):
    from control_msgs.msg import JointTolerance
    q, _ = settled(arm)
    # a path tolerance no real tracking meets
    tight = [JointTolerance(name=JOINTS[0], position=1e-9)]
    status, result, _ = arm.client.execute(JOINTS, [(1.0, q + 0.2)], path_tolerance=tight)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == arm.codes.PATH_TOLERANCE_VIOLATED
    assert JOINTS[0] in result.error_string
    # a goal tolerance the arm cannot settle within before goal_time_tolerance runs out
    q, _ = settled(arm, 0.5)
    status, result, _ = arm.client.execute(
        JOINTS, [(0.5, q + 0.1)], goal_tolerance=[JointTolerance(name=JOINTS[2], position=1e-12)],
        goal_time_tolerance=duration(0.05))
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == arm.codes.GOAL_TOLERANCE_VIOLATED
    assert JOINTS[2] in result.error_string


def nanoseconds(msg):
    return msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec


def by_name(names, values):
    """values (ordered as names) in the order of JOINTS."""
    return np.asarray(values)[[list(names).index(j) for j in JOINTS]]


def assert_rate(states, rate):
    """The controller states came at ``rate`` Hz of the arm's clock, on the period's grid.

    Each is the first state at or after a multiple of the period (the simulator's float stamps
    are off the grid by up to a microsecond); consecutive ones a whole number of periods apart
    (the probe's single thread, lagging behind 1 kHz states and commands, may lose one of the
    reliable keep-last-10 messages), at least 90 % of them one period apart.
    """
    ns = np.array([nanoseconds(m) for m in states])
    period = round(1e9 / rate)
    assert (ns % period < STATE_PERIOD * 1e9).all(), ns % period
    periods = np.diff(ns) / period
    assert np.abs(periods - np.round(periods)).max() < 0.5 * STATE_PERIOD * rate, periods
    assert np.round(periods).min() >= 1 and np.mean(np.round(periods) == 1) >= 0.9, periods


def test_controller_state_is_the_tracked_reference_the_state_and_the_command(arm):
    """~/controller_state around a goal, against what the test sees independently.

    feedback: the arm's joint state of the same stamp, exactly; output: one of the effort
    commands the probe recorded, exactly (it is the command published for that state); error:
    reference - feedback, within the tracking bound of the multi-point goal; reference: the action
    feedback's desired where the stamps coincide, and the goal's last point once the trajectory
    has ended; one state per 1/rate of the arm's clock (``assert_rate``).
    """
    q, _ = settled(arm)
    target = q + np.array([0.15, -0.1, 0.1, 0.15, -0.1, 0.1, 0.2])
    since = arm.now()
    status, result, feedback = arm.client.execute(JOINTS, [(1.0, target)])
    assert status == GoalStatus.STATUS_SUCCEEDED, f'{result}\n{arm.logs()}'
    ended = arm.now()
    arm.wait(0.3)
    states = window(arm.controller_states, since, arm.now())
    assert states, f'no controller state\n{arm.logs()}'
    assert_rate(states, STATE_RATE)
    joint_states = {nanoseconds(m): m for m in window(arm.states, since, arm.now())}
    desired = {nanoseconds(f): f.desired for f in feedback}
    commands = {tuple(m.data) for m in arm.commands.messages}
    seen = {'joint state': 0, 'action feedback': 0, 'command': 0}
    for msg in states:
        names, stamp = msg.joint_names, nanoseconds(msg)
        reference, measured = (np.asarray(p.positions) for p in (msg.reference, msg.feedback))
        np.testing.assert_array_equal(msg.error.positions, reference - measured)
        assert np.abs(msg.error.positions).max() < 3e-4
        np.testing.assert_array_equal(msg.error.velocities, np.subtract(
            msg.reference.velocities, msg.feedback.velocities))
        if stamp in joint_states:
            seen['joint state'] += 1
            arm_state = joint_states[stamp]
            np.testing.assert_array_equal(by_name(names, measured),
                                          by_name(arm_state.name, arm_state.position))
        if stamp in desired:
            seen['action feedback'] += 1
            np.testing.assert_array_equal(reference, desired[stamp].positions)
        if stamp_of(msg) > ended:   # the trajectory has ended: its last point, at rest
            np.testing.assert_allclose(by_name(names, reference), target, rtol=0, atol=1e-12)
            np.testing.assert_allclose(msg.reference.velocities, 0.0, atol=1e-12)
        seen['command'] += tuple(by_name(names, msg.output.effort)) in commands
    print(f'{arm.engine}: {len(states)} controller states; matched by stamp or value: {seen}')
    # the probe misses some of the 1 kHz joint states (best effort) and commands (reliable but
    # keep-last 1 at the controller: a stalled probe gets the newest only); a match is exact
    assert seen['joint state'] >= len(states) // 2 and seen['command'] >= len(states) // 2


def test_controller_state_rate_is_a_parameter_and_0_is_off(arm):
    """controller_state.rate at run time: 100 Hz, then 0 (nothing), then its default again."""
    def set_rate(rate):
        result = arm.client.probe.set_parameters('dynamics_controller',
                                                 {'controller_state.rate': rate})[0]
        assert result.successful, result.reason
        return arm.now() + 0.2   # the probe sees states up to ~0.1 s late: now in force

    since = set_rate(100.0)
    arm.wait_until(since + 0.5)
    assert_rate(window(arm.controller_states, since, arm.now()), 100.0)
    since = set_rate(0.0)
    arm.wait_until(since + 0.5)
    assert not window(arm.controller_states, since)
    since = set_rate(STATE_RATE)
    # the states' own window, once its last has come: ~/controller_state trails joint_states
    # by the controller's lag, which a faster-than-real-time arm makes longer in its time
    arm.controller_states.wait_for_stamp(since + 0.3)
    states = window(arm.controller_states, since, since + 0.3)
    assert len(states) >= 10
    assert_rate(states, STATE_RATE)
