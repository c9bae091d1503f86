"""Reading and writing messages: QoS profiles, JointState -> model-order vectors, float arrays."""
import array

import numpy as np
from geometry_msgs.msg import WrenchStamped
from builtin_interfaces.msg import Time
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robot_dynamics.core import arguments

# Commands: reliable, so ros2_control's JointGroupEffortController (SystemDefaultsQoS) matches.
COMMAND_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                         reliability=ReliabilityPolicy.RELIABLE)
# A latched topic: a late subscriber gets the newest message (robot_state_publisher's
# /robot_description; the estimator's ~/bias).
LATCHED_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                         reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
DESCRIPTION_QOS = LATCHED_QOS


def state_qos(reliability, depth):
    """QoS of a joint_states subscription.

    A best-effort subscriber matches reliable and best-effort publishers alike, hence the
    default reliability.
    """
    policy = {'best_effort': ReliabilityPolicy.BEST_EFFORT,
              'reliable': ReliabilityPolicy.RELIABLE}[reliability]
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=policy)


class BadInput(ValueError):
    """A message the node must ignore; the message names the problem."""


class JointStateReader:
    """sensor_msgs/JointState -> (q, v, effort) in model order, mapped by name.

    Extra joints are ignored; a message carrying none of our joints (e.g. a gripper's) gives
    None; one carrying only some of them is rejected. Every array must be empty or have one value
    per name; ``fields`` are converted (None when empty), and those of ``finite`` (by default all
    of them) must be finite.
    """

    FIELDS = ('position', 'velocity', 'effort')

    def __init__(self, joint_names, fields=FIELDS, finite=None):
        self.joint_names, self.fields = tuple(joint_names), fields
        self.finite = fields if finite is None else finite
        self._names, self._index = None, None

    def read(self, msg):
        names = msg.name
        if not names:
            raise BadInput('empty JointState (no joint names)')
        if names != self._names:
            self._index, self._names = self._map(names), list(names)
        if self._index is None:
            return None
        for field in self.FIELDS:
            if len(getattr(msg, field)) not in (0, len(names)):
                raise BadInput(f'{field} has {len(getattr(msg, field))} values for '
                               f'{len(names)} joint names')
        if not msg.position:
            raise BadInput('no positions')
        return tuple(self._field(msg, f) if f in self.fields else None for f in self.FIELDS)

    @property
    def message_names(self):
        """The joint names of the last message read (those that named none of ours, after None)."""
        return self._names or []

    def read_stamped(self, msg):
        """``read(msg)`` and the stamp (sec, nanosec), as ``read_cdr`` gives them (cdr.py)."""
        state = self.read(msg)
        stamp = msg.header.stamp
        return None if state is None else (*state, (stamp.sec, stamp.nanosec))

    def _map(self, names):
        where = {}
        for i, name in enumerate(names):
            if name in where:
                raise BadInput(f"joint '{name}' appears twice")
            where[name] = i
        found = [where.get(n) for n in self.joint_names]
        if not any(i is not None for i in found):
            return None
        missing = [n for n, i in zip(self.joint_names, found) if i is None]
        if missing:
            raise BadInput(f'missing joints {missing}')
        return np.array(found)

    def _field(self, msg, field):
        values = getattr(msg, field)
        if not values:
            return None
        x = np.frombuffer(values) if isinstance(values, array.array) else np.asarray(values, float)
        x = x[self._index]
        if field in self.finite and not all_finite(x):
            bad = [self.joint_names[i] for i in np.flatnonzero(~np.isfinite(x))]
            raise BadInput(f'non-finite {field} for {bad}')
        return x


def all_finite(x):
    """No NaN or Inf in x, an array or a sequence of numbers (the core's compiled check)."""
    return arguments.all_finite(np.asarray(x, dtype=float).reshape(-1))


def to_array(x):
    """numpy vector -> the array.array('d') a float64[] message field stores (fastest path)."""
    return array.array('d', np.ascontiguousarray(x, dtype=float).tobytes())


def to_seconds(stamp):
    """Seconds of a builtin_interfaces/Time or Duration (0.0 for an unset stamp)."""
    return stamp.sec + 1e-9 * stamp.nanosec


def to_time(t):
    """builtin_interfaces/Time of t seconds (t >= 0)."""
    sec, nanosec = divmod(int(round(t * 1e9)), 10**9)
    return Time(sec=sec, nanosec=nanosec)


def stamp_of(msg):
    """Seconds of a stamped message's header stamp."""
    return to_seconds(msg.header.stamp)


def wrench_message(frame_id, wrench):
    """geometry_msgs/WrenchStamped (unstamped) of a wrench (moment, force), the core's order."""
    msg = WrenchStamped()
    msg.header.frame_id = frame_id
    w = msg.wrench
    (w.torque.x, w.torque.y, w.torque.z, w.force.x, w.force.y, w.force.z) = map(float, wrench)
    return msg


def trajectory_message(joint_names, start, times, positions, velocities=None,
                       accelerations=None):
    """trajectory_msgs/JointTrajectory through knots (times from ``start``, the states' clock)."""
    msg = JointTrajectory(joint_names=list(joint_names))
    msg.header.stamp = to_time(start)
    for k, (t, q) in enumerate(zip(times, positions)):
        point = JointTrajectoryPoint(positions=[float(x) for x in q])
        if velocities is not None:
            point.velocities = [float(x) for x in velocities[k]]
        if accelerations is not None:
            point.accelerations = [float(x) for x in accelerations[k]]
        point.time_from_start.sec, point.time_from_start.nanosec = divmod(
            int(round(t * 1e9)), 10**9)
        msg.points.append(point)
    return msg
