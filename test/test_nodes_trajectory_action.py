"""~/follow_joint_trajectory over real DDS, driven as MoveIt's simple controller manager does.

The simulated_arm bring-up in lock step (arm_simulator waits for every command) on the
internal engine, dynamics_controller in computed torque, with the test-only control_msgs
(test/interfaces, built by the control_msgs_prefix fixture). The client sends a goal, waits for
acceptance and the result, and checks the status and error code, as MoveIt does. The arm's own
joint_states (not the server's feedback) judge where it went. Every wait is on the arm's
clock or on a result, with generous wall-clock timeouts: the figures do not depend on the load.
"""
import threading
import time

import numpy as np
import pytest
from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Duration
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

import robot_dynamics as rd
from robot_dynamics import bringup
from ros_harness import BEST_EFFORT, ArmView, session

CONFIG = bringup.load_config(bringup.config_file('panda.yaml'))
SIM = CONFIG['arm_simulator']['ros__parameters']
JOINTS, Q0 = SIM['joints'], np.array(SIM['initial_position'])
PANDA = rd.load_urdf(rd.robot_urdf('panda'), base='panda_link0', tip='panda_hand')
ACTION = '/dynamics_controller/follow_joint_trajectory'
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
        self.client = ActionClient(probe, action_type, ACTION)
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


@pytest.fixture(scope='module')
def arm(control_msgs_prefix):
    """The lock-step bring-up (computed torque) and a MoveIt-like client on its action."""
    from control_msgs.action import FollowJointTrajectory
    ros = session()
    view = ArmView()
    view.states = ros.probe.record(JointState, 'joint_states', BEST_EFFORT)
    specs = bringup.nodes('simulated_arm', robot='panda', mode='computed_torque')
    view.launch = ros.launch([s for s in specs if s.name != 'wrench_estimator'])
    view.launch.ready()
    view.wait(1.0)
    client = MoveItLikeClient(ros.probe, FollowJointTrajectory, view.logs)
    view.client, view.codes = client, FollowJointTrajectory.Result
    yield view
    client.close()
    codes = view.launch.processes.stop(timeout=20.0)
    ros.probe.stop_recording(view.states)
    assert set(codes.values()) == {0}, view.launch.logs()


def settled(arm, seconds=0.5):
    """The arm's positions and speeds, (q, v) of the newest state, after ``seconds`` more."""
    arm.wait(seconds)
    msg = arm.states.last()
    index = [list(msg.name).index(j) for j in JOINTS]
    return np.asarray(msg.position)[index], np.asarray(msg.velocity)[index]


def test_a_multi_point_goal_succeeds_within_the_goal_tolerance(arm):
    q, _ = settled(arm)
    offsets = np.array([0.3, -0.2, 0.25, 0.3, -0.3, 0.25, 0.4])
    points = [(0.8, q + 0.5 * offsets), (1.6, q + offsets), (2.4, q + 0.2 * offsets)]
    status, result, feedback = arm.client.execute(JOINTS, points)
    assert status == GoalStatus.STATUS_SUCCEEDED, f'{result}\n{arm.logs()}'
    assert result.error_code == arm.codes.SUCCESSFUL
    end, speed = settled(arm, 0.0)
    # succeeded only once settled: within the goal tolerance of the last point, stopped
    assert np.abs(end - points[-1][1]).max() <= GOAL_TOLERANCE
    assert np.abs(speed).max() <= STOPPED
    errors = np.array([f.error.positions for f in feedback])
    assert len(feedback) > 50   # 50 Hz of the arm's time over 2.4 s
    assert list(feedback[0].joint_names) == JOINTS
    # feedback's error is desired - actual, as documented
    np.testing.assert_allclose(errors, [np.subtract(f.desired.positions, f.actual.positions)
                                        for f in feedback], atol=1e-12)
    print(f'multi-point goal: largest tracking error {np.abs(errors).max():.2e} rad over '
          f'{len(feedback)} feedback messages')
    assert np.abs(errors).max() < 0.02   # computed torque on the exact model


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
