"""~/follow_joint_trajectory: control_msgs/action/FollowJointTrajectory for dynamics_controller.

A component of the controller, built with its Context (the server from the Context's
``create_action_server``) and the controller's reference, its ``start_trajectory``, ``tracking``
and ``hold``. It owns the action server: a goal's checks (its joint names, its
tolerances, then those of ~/joint_trajectory through the controller's ``start_trajectory``),
the path and goal tolerances, feedback, preemption, cancel and the result. A refused goal is
aborted at once with an error code and a message (what MoveIt's controller manager reports).
The goal is watched on the joint states the controller serves (``served``, on their clock):
each state is checked against the path tolerances and, after the trajectory's end, against the
goal tolerances; feedback goes out every FEEDBACK_PERIOD of state time. It is served only where
control_msgs imports; else the controller says so once at start (``MISSING``) and serves the
topic alone.
"""
import numpy as np
from rclpy.action import CancelResponse, GoalResponse
from rclpy.task import Future
from trajectory_msgs.msg import JointTrajectoryPoint

from ..common.joint_states import BadInput, to_array, to_seconds, to_time

FEEDBACK_PERIOD = 0.02   # s of state time between feedback messages: 50 Hz
ACTION = '~/follow_joint_trajectory'
MISSING = f'{ACTION} is not served (~/joint_trajectory is)'


def import_action():
    """control_msgs' FollowJointTrajectory, None where control_msgs does not import."""
    try:
        from control_msgs.action import FollowJointTrajectory
    except ImportError:
        return None
    return FollowJointTrajectory


class Refused(BadInput):
    """A goal refused with a FollowJointTrajectory result code."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def joint_tolerances(entries, joint_names, position, velocity, what, invalid):
    """(position, velocity) bounds per joint (model order) from defaults and a goal's entries.

    A default or entry of 0 leaves a joint unchecked (inf) or at its default; an entry > 0
    replaces the default; < 0 (control_msgs' -1) erases it.
    """
    n = len(joint_names)
    bounds = [np.full(n, default if default > 0.0 else np.inf) for default in (position, velocity)]
    for entry in entries:
        if entry.name not in joint_names:
            raise Refused(invalid, f'{what} names {entry.name!r}, not one of the joints '
                                   f'{list(joint_names)}')
        i = joint_names.index(entry.name)
        for bound, value in zip(bounds, (entry.position, entry.velocity)):
            if value > 0.0:
                bound[i] = value
            elif value < 0.0:
                bound[i] = np.inf
    return bounds


def point(positions, velocities=None, accelerations=None):
    """A JointTrajectoryPoint of the arrays given (model order)."""
    msg = JointTrajectoryPoint(positions=to_array(positions))
    if velocities is not None:
        msg.velocities = to_array(velocities)
    if accelerations is not None:
        msg.accelerations = to_array(accelerations)
    return msg


def worst(error, bound, joint_names):
    """(joint name, error, bound) of the joint furthest over its bound, None if none is."""
    over = np.abs(error) - bound
    i = int(np.argmax(over))
    return None if not over[i] > 0.0 else (joint_names[i], float(error[i]), float(bound[i]))


class Goal:
    """One accepted goal while it runs: its trajectory, tolerances and the awaited result."""

    def __init__(self, handle, timed, path, goal, time_tolerance, point_times):
        self.handle, self.timed = handle, timed
        self.path, self.goal = path, goal   # (position, velocity) bounds, model order
        self.end = timed.start + timed.trajectory.duration
        self.deadline = self.end + time_tolerance
        self.point_times = point_times      # the goal's points, s after the start
        self.next_feedback = timed.start
        self.done = Future()


class TrajectoryAction:
    """The FollowJointTrajectory server of a DynamicsController.

    ``reference``: the controller's Reference; ``start_trajectory(msg)``: a TimedTrajectory made
    pending, or BadInput; ``tracking(what)``: True if a reference can be taken now;
    ``hold()``: hold where the arm stands.
    """

    def __init__(self, context, reference, start_trajectory, tracking, hold):
        self.context, self.reference, self.goal, self.server = context, reference, None, None
        self.start_trajectory, self.tracking, self.hold = start_trajectory, tracking, hold
        self.action, self.missing = import_action(), 'control_msgs is not importable'
        if self.action is None:
            return
        try:
            self.server = context.create_action_server(
                self.action, ACTION, execute_callback=self.execute,
                goal_callback=lambda request: GoalResponse.ACCEPT,
                cancel_callback=lambda handle: CancelResponse.ACCEPT)
        except (ValueError, RuntimeError, OSError) as error:   # its type support does not load
            self.action = None
            self.missing = f'control_msgs imports but its type support does not load ({error})'

    @property
    def available(self):
        """True where control_msgs imports (the action is served)."""
        return self.action is not None

    async def execute(self, handle):
        """Run one goal: refused at once, or watched on the states until its result."""
        try:
            goal = self.start(handle)
        except Refused as error:
            return self.end_goal(handle, 'abort', error.code, str(error))
        except BadInput as error:   # the checks of ~/joint_trajectory
            return self.end_goal(handle, 'abort', self.action.Result.INVALID_GOAL, str(error))
        if self.goal is not None:
            self.finish(self.goal, 'abort', self.action.Result.INVALID_GOAL,
                        'preempted by a new goal')
        self.goal = goal
        return await goal.done

    def start(self, handle):
        """Check the goal and start its trajectory on the controller: a Goal, or Refused."""
        request, codes = handle.request, self.action.Result
        names = list(self.context.arm().model.joint_names)
        if request.multi_dof_trajectory.joint_names:
            raise Refused(codes.INVALID_JOINTS, 'multi-DOF joints are not supported: this arm '
                                                f'has the joints {names}')
        given = list(request.trajectory.joint_names)
        unknown = [name for name in given if name not in names]
        if unknown or not given or len(set(given)) != len(given):
            raise Refused(codes.INVALID_JOINTS, f'trajectory names {given} must be distinct '
                                                f'joints of {names} (unknown: {unknown})')
        if not request.trajectory.points:
            raise Refused(codes.INVALID_GOAL, 'the trajectory has no points')
        values = self.context.values()
        path = joint_tolerances(request.path_tolerance, names,
                                values['trajectory_action.path_tolerance'], 0.0,
                                'path_tolerance', codes.INVALID_JOINTS)
        goal = joint_tolerances(request.goal_tolerance, names,
                                values['trajectory_action.goal_tolerance'],
                                values['trajectory_action.stopped_velocity_tolerance'],
                                'goal_tolerance', codes.INVALID_JOINTS)
        if not self.tracking('follow_joint_trajectory goal'):
            raise Refused(codes.INVALID_GOAL, 'tracking needs mode computed_torque, joint states '
                                              'and no latched stop (~/reset)')
        timed = self.start_trajectory(request.trajectory)
        time_tolerance = to_seconds(request.goal_time_tolerance) \
            or values['trajectory_action.goal_time_tolerance']
        times = [to_seconds(p.time_from_start) for p in request.trajectory.points]
        return Goal(handle, timed, path, goal, time_tolerance, np.array(times))

    def served(self, t, q, v):
        """The controller served the state (t, q, v): check the goal, send feedback, end it."""
        goal = self.goal
        if goal is None:
            return None
        codes = self.action.Result
        if goal.handle.is_cancel_requested:
            self.hold()
            return self.finish(goal, 'canceled', codes.SUCCESSFUL,
                               'canceled: holding where the arm stands')
        if not self.reference.runs(goal.timed):
            return self.finish(goal, 'abort', codes.INVALID_GOAL, 'another trajectory, '
                               'reference, mode or stop took over')
        if t < goal.timed.start:
            return None
        qd, vd, ad = goal.timed.sample(t)
        v = np.zeros_like(q) if v is None else v
        if t >= goal.next_feedback:
            self.feedback(goal, t, q, v, qd, vd, ad)
        names = self.context.arm().model.joint_names
        if t <= goal.end:
            over = worst(qd - q, goal.path[0], names) or worst(vd - v, goal.path[1], names)
            if over is not None:
                self.hold()
                return self.finish(goal, 'abort', codes.PATH_TOLERANCE_VIOLATED,
                                   '%s: error %.4g over the path tolerance %.4g; holding where '
                                   'the arm stands' % over)
            return None
        over = worst(qd - q, goal.goal[0], names) or worst(v, goal.goal[1], names)
        if over is None:
            return self.finish(goal, 'succeed', codes.SUCCESSFUL, '')
        if t > goal.deadline:
            self.hold()
            return self.finish(goal, 'abort', codes.GOAL_TOLERANCE_VIOLATED,
                               '%s: error %.4g over the goal tolerance %.4g at the end of '
                               'goal_time_tolerance; holding where the arm stands' % over)
        return None

    def feedback(self, goal, t, q, v, qd, vd, ad):
        """Desired, actual and error (desired - actual) at the state stamped t."""
        msg = self.action.Feedback()
        msg.header.stamp = to_time(t)
        msg.joint_names = list(self.context.arm().model.joint_names)
        msg.desired, msg.actual = point(qd, vd, ad), point(q, v)
        msg.error = point(qd - q, vd - v)
        if hasattr(msg, 'index'):   # control_msgs 6 (Kilted): the point being executed
            msg.index = int(np.searchsorted(goal.point_times, t - goal.timed.start))
        goal.handle.publish_feedback(msg)
        goal.next_feedback = t + FEEDBACK_PERIOD

    def destroy(self):
        """Destroy the action server: it holds the node, which could not leave the graph."""
        if self.server is not None:
            self.server.destroy()
            self.server = None

    def abort(self, message):
        """Abort the running goal, if any (the controller stops commanding): INVALID_GOAL."""
        if self.goal is not None:
            self.finish(self.goal, 'abort', self.action.Result.INVALID_GOAL, message)

    def finish(self, goal, status, code, message):
        """End the running goal with ``status`` (succeed, abort, canceled) and its result."""
        if goal is self.goal:
            self.goal = None
        goal.done.set_result(self.end_goal(goal.handle, status, code, message))

    def end_goal(self, handle, status, code, message):
        getattr(handle, status)()
        if code != self.action.Result.SUCCESSFUL:   # rclpy: one severity per call site
            self.context.logger.warning(f'follow_joint_trajectory: {message}')
        elif message:
            self.context.logger.info(f'follow_joint_trajectory: {message}')
        return self.action.Result(error_code=code, error_string=message)
