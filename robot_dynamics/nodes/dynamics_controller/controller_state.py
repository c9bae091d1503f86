"""~/controller_state: what dynamics_controller tracked and commanded, decimated from its states.

A component of the controller, built with its Context: it owns the ``controller_state.rate``
parameter's publication. Of the joint states the controller serves (on either path) it takes
the first at or after each multiple of the period on the states' clock (integer nanoseconds:
exactly every 20th state of a 1 kHz arm at 50 Hz) and publishes, in the model's joint order,
the reference the law tracked, the measured state (feedback), error = reference - feedback and
the effort command published for that state (output). A mode without a joint reference
(gravity compensation, the task-space modes) leaves reference and error empty.

Where control_msgs imports, one ``control_msgs/msg/JointTrajectoryControllerState``; elsewhere
one ``sensor_msgs/JointState`` per part on ``~/controller_state/<part>`` (``FALLBACK``).
Off (rate 0) it creates nothing and the controller's check per state is one comparison with
``due`` (inf).
"""
import math

from sensor_msgs.msg import JointState

from ..common.joint_states import to_array

TOPIC = '~/controller_state'
PARTS = ('reference', 'feedback', 'error', 'output')
FALLBACK = (f'{TOPIC} is sensor_msgs/JointState on {TOPIC}/' + '{' + ','.join(PARTS) + '}')


def import_state():
    """control_msgs' JointTrajectoryControllerState, None where control_msgs does not import."""
    try:
        from control_msgs.msg import JointTrajectoryControllerState
    except ImportError:
        return None
    return JointTrajectoryControllerState


class ControllerState:
    """The controller's state publication; ``due``: stamp (ns) of the next state to publish.

    ``command()``: the last command published (model order); ``scaling()``: the trajectory's
    speed scaling (power and force limiting), 1 when none.
    """

    def __init__(self, context, command, scaling):
        self.context, self.command, self.scaling = context, command, scaling
        self.type = import_state()
        self.publishers = None
        self.period = self.due = math.inf   # ns
        self.names = self.messages = None   # the model's joint names; the messages, made once

    @property
    def available(self):
        """True where control_msgs imports (else the JointState fallback)."""
        return self.type is not None

    def apply(self, rate):
        """Publish at ``rate`` Hz of state time (0: off); the publishers at the first rate > 0."""
        if rate <= 0.0:
            self.period = self.due = math.inf
            return
        if self.publishers is None:
            create = self.context.create_publisher
            try:
                self.publishers = [create(self.type, TOPIC, 10)] if self.available else None
            except (ValueError, RuntimeError, OSError):   # its type support does not load
                self.type = None
            if not self.available:
                self.publishers = [create(JointState, f'{TOPIC}/{part}', 10) for part in PARTS]
        self.period, self.due = round(1e9 / rate), 0

    def publish(self, stamp, q, v, reference):
        """The state stamped ``stamp`` (ns), served with q, v (None: none) tracking ``reference``.

        reference: (q_d, q̇_d, q̈_d) of the law, None in a mode without a joint reference.
        """
        self.due = (stamp // self.period + 1) * self.period
        sec, nanosec = divmod(stamp, 10**9)
        # part -> (positions, velocities, accelerations, effort), None: empty
        parts = {'feedback': (q, v, None, None), 'output': (None, None, None, self.command())}
        if reference is not None:
            qd, vd, ad = reference
            parts['reference'] = (qd, vd, ad, None)
            parts['error'] = (qd - q, None if v is None else vd - v, None, None)
        messages = self.made()
        if self.available:
            msg = messages[0]
            msg.speed_scaling_factor = float(self.scaling())
            for part in PARTS:
                fill(getattr(msg, part), POINT_FIELDS, parts.get(part, NONE))
            publish(self.publishers[0], msg, sec, nanosec)
            return
        for part, publisher, msg in zip(PARTS, self.publishers, messages):
            if part in parts:
                positions, velocities, _, effort = parts[part]   # JointState has no accelerations
                fill(msg, STATE_FIELDS, (positions, velocities, effort))
                publish(publisher, msg, sec, nanosec)

    def made(self):
        """The messages filled for each publication, made again only for a new model.

        rclpy copies a message when it publishes it: the next publication may refill it.
        """
        names = self.context.arm().model.joint_names
        if self.names is not names:
            self.names, listed = names, list(names)
            self.messages = [self.type(joint_names=listed)] if self.available else \
                [JointState(name=listed) for _ in PARTS]
        return self.messages


POINT_FIELDS = ('positions', 'velocities', 'accelerations', 'effort')   # JointTrajectoryPoint
STATE_FIELDS = ('position', 'velocity', 'effort')                        # sensor_msgs/JointState
NONE = (None,) * len(POINT_FIELDS)   # a part the mode does not have: every field empty


def fill(msg, fields, arrays):
    """Set each of ``fields`` of msg from its array in ``arrays`` (None: empty)."""
    for field, values in zip(fields, arrays, strict=True):
        setattr(msg, field, () if values is None else to_array(values))


def publish(publisher, msg, sec, nanosec):
    msg.header.stamp.sec, msg.header.stamp.nanosec = sec, nanosec
    publisher.publish(msg)
