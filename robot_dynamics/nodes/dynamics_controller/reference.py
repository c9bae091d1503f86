"""The controller's reference: what computed torque tracks, and what replaces it when.

The reference in force is a hold (``Setpoint`` at a measured position), a streamed setpoint
(~/reference, limited by contact safety) or a trajectory (~/joint_trajectory, a
``TimedTrajectory`` on the clock of the joint states' stamps). A new trajectory waits, pending,
until its start; the first state stamped at or after it makes it the reference in force.
``Reference`` holds the two and is the one place they change.
"""
import numpy as np

from robot_dynamics.core.control import unwrap_positions
from robot_dynamics.core.trajectory import JointTrajectory

from ..common.joint_states import BadInput

START_TOLERANCE = 0.05   # rad (m): largest step a trajectory's point at time 0 may ask for


class Reference:
    """The reference in force (``current``) and a trajectory waiting for its start (``pending``).

    ``current`` is None until the first joint state (nothing to hold yet).
    """

    def __init__(self):
        self.current = self.pending = None

    def at(self, t):
        """The reference for the state stamped t: a pending trajectory takes over from its start."""
        if self.pending is not None and t >= self.pending.start:
            self.current, self.pending = self.pending, None
        return self.current

    def hold(self, q):
        """Hold the position q (None: nothing yet); a pending trajectory is dropped."""
        self.current, self.pending = None if q is None else Setpoint(q), None

    def stream(self, setpoint):
        """A streamed setpoint takes over at once; a pending trajectory is dropped."""
        self.current, self.pending = setpoint, None

    def blend_source(self, start):
        """What a trajectory starting at ``start`` continues from: the pending one, if started."""
        if self.pending is not None and start >= self.pending.start:
            return self.pending
        return self.current

    def follow(self, timed):
        """A TimedTrajectory, pending until its start."""
        self.pending = timed


def within_limits(model, q, what):
    """BadInput unless the positions q (model order) are inside the joint limits."""
    outside = (q < model.lower) | (q > model.upper)
    if outside.any():
        names = [model.joint_names[i] for i in np.flatnonzero(outside)]
        raise BadInput(f'{what} outside the joint limits at {names}')


class Setpoint:
    """A constant reference (q_d, v_d, a_d = 0): hold a position or a streamed setpoint."""

    def __init__(self, q, v=None):
        self.q = np.array(q, dtype=float)
        self.v = np.zeros_like(self.q) if v is None else np.array(v, dtype=float)
        self.a = np.zeros_like(self.q)

    def sample(self, t):
        return self.q, self.v, self.a


class TimedTrajectory:
    """A JointTrajectory started at time ``start`` (s, the clock of joint_states stamps)."""

    def __init__(self, trajectory, start):
        self.trajectory, self.start = trajectory, start

    def sample(self, t):
        return self.trajectory.sample(t - self.start)


def trajectory_from_msg(msg, model, start, current):
    """trajectory_msgs/JointTrajectory -> TimedTrajectory in model order.

    When the first point is later than the start, the current reference at the start is
    prepended as point 0, so the reference is continuous when the new trajectory takes over
    (blend); a first point at time 0 must be within START_TOLERANCE of it (else: rejected).
    Continuous joints take the short way round between points (``unwrap_positions``).
    """
    names, joint_names = list(msg.joint_names), model.joint_names
    if sorted(names) != sorted(joint_names):
        raise BadInput(f'joint_trajectory names {names} must be exactly the joints '
                       f'{list(joint_names)}')
    index = [names.index(j) for j in joint_names]
    n = len(names)

    def field(name, required):
        rows = [getattr(p, name) for p in msg.points]
        if not required and all(len(r) == 0 for r in rows):
            return None
        if any(len(r) != n for r in rows):
            raise BadInput(f'every point needs {n} {name} (or, except positions, none)')
        return [np.asarray(r, dtype=float)[index] for r in rows]

    times = [p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in msg.points]
    q, v, a = field('positions', True), field('velocities', False), field('accelerations', False)
    for qk in q:
        within_limits(model, qk, 'joint_trajectory point')
    q0, v0, a0 = current.sample(start)
    q = unwrap_positions(model, q0, q)
    if times[0] > 0:
        times, q = [0.0] + times, [q0] + q
        v = None if v is None else [v0] + v
        a = None if a is None else [a0] + a
    elif not np.abs(q[0] - q0).max() <= START_TOLERANCE:
        raise BadInput(f'joint_trajectory: the first point, at time 0, is '
                       f'{np.abs(q[0] - q0).max():.3g} from the current reference (more than '
                       f'{START_TOLERANCE}): give it a time_from_start > 0 to blend')
    try:
        return TimedTrajectory(JointTrajectory(times, q, v, a), start)
    except ValueError as error:
        raise BadInput(f'joint_trajectory: {error}') from None
