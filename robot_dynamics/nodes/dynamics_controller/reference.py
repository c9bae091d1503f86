"""The controller's reference: what computed torque tracks, and what replaces it when.

The reference in force is a hold (``Setpoint`` at a measured position), a streamed setpoint
(~/reference, limited by contact safety) or a trajectory (~/joint_trajectory or a
FollowJointTrajectory goal, a ``TimedTrajectory`` on the clock of the joint states' stamps). A
new trajectory waits, pending, until its start; the first state stamped at or after it makes it
the reference in force. ``Reference`` holds the two and is the one place they change.
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

    def take(self, msg, model, start, blend, feasible):
        """A trajectory_msgs/JointTrajectory from ``start``: its TimedTrajectory, made pending.

        It blends from what ``blend`` makes of the reference at its start (PFL: as slowed), and
        ``feasible`` times its trajectory (contact safety). BadInput if refused: nothing changes.
        """
        timed = trajectory_from_msg(msg, model, start, blend(self.blend_source(start)))
        timed.trajectory = feasible(timed.trajectory)
        self.follow(timed)
        return timed

    def runs(self, timed):
        """True while the TimedTrajectory is the reference in force or the pending one."""
        return timed is self.current or timed is self.pending


def trajectory_start(stamp, t_last, warn):
    """When a trajectory stamped ``stamp`` (s; 0: now) starts: never before the newest state."""
    if stamp and stamp < t_last:   # sampled from a past start, the reference would step
        warn(f'joint_trajectory stamped {t_last - stamp:.3f} s before the newest joint state: '
             'it starts now')
    return max(stamp, t_last)


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
    A partial trajectory (a subset of the joints): the joints it does not name hold the current
    reference's position at the start (velocity and acceleration 0).
    """
    names, joint_names = list(msg.joint_names), list(model.joint_names)
    unknown = [name for name in names if name not in joint_names]
    if unknown or len(set(names)) != len(names) or not names:
        raise BadInput(f'joint_trajectory names {names} must be distinct joints of '
                       f'{joint_names} (unknown: {unknown})')
    q0, v0, a0 = current.sample(start)
    named = [joint_names.index(name) for name in names]
    n = len(names)

    def field(name, required, held):
        rows = [getattr(p, name) for p in msg.points]
        if not required and all(len(r) == 0 for r in rows):
            return None
        if any(len(r) != n for r in rows):
            raise BadInput(f'every point needs {n} {name} (or, except positions, none)')
        full = []
        for row in rows:
            values = np.array(held, dtype=float)
            values[named] = np.asarray(row, dtype=float)
            full.append(values)
        return full

    times = [p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in msg.points]
    zeros = np.zeros(len(joint_names))
    q = field('positions', True, q0)
    v, a = field('velocities', False, zeros), field('accelerations', False, zeros)
    for qk in q:
        within_limits(model, qk, 'joint_trajectory point')
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
