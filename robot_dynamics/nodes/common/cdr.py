"""Serialized (CDR) messages for the fast path: a JointState reader, the replies' writers.

A raw subscription (``create_subscription(..., raw=True)``) hands its callback the bytes
rclpy's ``serialize_message`` makes; their layout and the compiled reader are the core's
(``robot_dynamics.core.joint_state_cdr``).

``CdrJointStateReader.read_cdr(data)`` gives what ``JointStateReader.read`` gives for the
deserialized message, plus the stamp, in one compiled call when the names are the bytes of the
last mapped message. Anything else (new names, a message the plain reader rejects or one not in
little-endian XCDR1) goes through rclpy's ``deserialize_message`` and the plain reader, so both
paths accept, reject and word their errors alike, and the name mapping has one implementation.
"""
import struct

import numpy as np

from robot_dynamics.core.joint_state_cdr import (
    COUNT, COUNTS, ENCAPSULATION, FRAME, FRAME_LEN, HEADER_STAMP, INDEX, INFO, MAPPED, NAMES,
    NAMES_AT, NANOSEC, NONE, OFFSETS, PLAIN, SEC, WANTED, align, layout, read_state, string_end)

from .joint_states import JointStateReader


def header_stamp(data):
    """(sec, nanosec) of a serialized message that begins with a std_msgs/Header (None: short)."""
    return HEADER_STAMP.unpack_from(data, 4) if len(data) >= 12 else None


def serialized_time(sec, nanosec):
    """A builtin_interfaces/Time as CDR bytes (XCDR1 little endian), e.g. a header's stamp."""
    return ENCAPSULATION + HEADER_STAMP.pack(sec, nanosec)


def names_blob(names):
    """The serialized names as the compiled reader compares them: per name, length and bytes."""
    blob = bytearray()
    for name in names:
        encoded = name.encode() + b'\0'
        blob += len(encoded).to_bytes(4, 'little') + encoded
    return np.frombuffer(bytes(blob), np.uint8)


def deserialize_joint_state(data):
    """rclpy's deserialization of a sensor_msgs/JointState (the plain path)."""
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState
    return deserialize_message(data, JointState)


class CdrJointStateReader(JointStateReader):
    """A JointStateReader that also reads serialized messages (``read_cdr``).

    ``plain_reads`` counts the messages that took rclpy's deserialization and the plain reader.
    ``arrays`` = (ref, cfg, out, info), the state of ``read_state`` (out[f]: field f in model
    order after OK), for a compiled caller; read it again after each plain read.
    """

    def __init__(self, joint_names, fields=JointStateReader.FIELDS, finite=None,
                 deserialize=deserialize_joint_state):
        super().__init__(joint_names, fields, finite)
        n = len(self.joint_names)
        self.deserialize, self.plain_reads = deserialize, 0
        self._cfg = np.zeros(INDEX + n, np.int64)
        self._cfg[MAPPED] = -1
        self._cfg[WANTED:WANTED + 3] = [f in fields for f in self.FIELDS]
        self._wanted = tuple(f in fields for f in self.FIELDS)
        self._out, self._info = np.empty((3, n)), np.zeros(INFO, np.int64)
        self._set_ref(names_blob([]))   # read-only like every mapped one: one compiled type

    def _set_ref(self, ref):
        self.arrays = (ref, self._cfg, self._out, self._info)

    def read_cdr(self, data):
        """(q, v, effort, (sec, nanosec)) of a serialized JointState, as ``read`` would give.

        None for a message with none of our joints; BadInput as ``read`` raises it.
        """
        status = read_state(np.frombuffer(data, np.uint8), *self.arrays)
        if status == NONE:
            return None
        if status == PLAIN:
            return self._read_plain(data)
        sec, nanosec, *_, p, v, e = self._info[:COUNTS + 3].tolist()
        out, (want_p, want_v, want_e) = self._out.copy(), self._wanted
        return (out[0] if want_p and p else None, out[1] if want_v and v else None,
                out[2] if want_e and e else None, (sec, nanosec))

    def _read_plain(self, data):
        self.plain_reads += 1
        msg = self.deserialize(data)
        try:
            return self.read_stamped(msg)
        finally:
            self._remember(msg.name)

    def _remember(self, names):
        """Cache the names the plain reader has mapped (if these are they) for the fast path."""
        if self._names is None or list(names) != self._names:
            return
        self._set_ref(names_blob(names))
        self._cfg[COUNT] = len(names)
        self._cfg[MAPPED] = self._index is not None
        if self._index is not None:
            self._cfg[INDEX:] = self._index


def parse_joint_state(data):
    """A serialized JointState as (sec, nanosec, frame_id, names, position, velocity, effort).

    What the compiled reader sees of a message (None if it cannot parse it); for tests and tools.
    """
    buf, info = np.frombuffer(data, np.uint8), np.zeros(INFO, np.int64)
    if not layout(buf, info):
        return None
    frame = bytes(buf[info[FRAME]:info[FRAME] + info[FRAME_LEN]]).decode()
    names, p = [], info[NAMES_AT]
    for _ in range(info[NAMES]):
        p = int(align(p, 4))
        end = int(string_end(buf, p))
        names.append(bytes(buf[p + 4:max(end - 1, p + 4)]).decode())
        p = end
    arrays = [np.frombuffer(data, np.float64, count=int(info[COUNTS + f]),
                            offset=int(info[OFFSETS + f])) for f in range(3)]
    return (int(info[SEC]), int(info[NANOSEC]), frame, names, *arrays)


def serialized_zero_state(joint_names):
    """A serialized JointState of these joints, every value 0."""
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import JointState
    zero = [0.0] * len(joint_names)
    return serialize_message(JointState(name=list(joint_names), position=zero, velocity=zero,
                                        effort=zero))


def warm_up(joint_names):
    """Compile (or load from the cache) the reader's kernels: one message on both paths."""
    data, reader = serialized_zero_state(joint_names), CdrJointStateReader(joint_names)
    for _ in range(2):   # the first maps the names (plain), the second is compiled
        reader.read_cdr(data)


class JointStateWriter:
    """A serialized sensor_msgs/JointState with fixed names and n values per field, made once.

    The bytes are rclpy's ``serialize_message`` of the message with zeros in ``fields`` (the
    others empty); ``serialized`` writes the stamp and those arrays in place (their offsets
    found by the compiled reader's ``layout``) and returns the message as bytes, for a
    publisher of JointState.
    """

    def __init__(self, names, fields=JointStateReader.FIELDS):
        from rclpy.serialization import serialize_message
        from sensor_msgs.msg import JointState
        zero = [0.0] * len(names)
        self.buffer = bytearray(serialize_message(JointState(
            name=list(names), **{f: zero for f in fields})))
        info = np.zeros(INFO, np.int64)
        layout(np.frombuffer(bytes(self.buffer), np.uint8), info)
        self.fields = [np.frombuffer(self.buffer, np.float64, count=len(names),
                                     offset=int(info[OFFSETS + f]))
                       for f, name in enumerate(JointStateReader.FIELDS) if name in fields]

    def serialized(self, sec, nanosec, *values):
        """The message stamped (sec, nanosec) with these values (one per field), as bytes.

        Without values, those already in ``fields``.
        """
        HEADER_STAMP.pack_into(self.buffer, 4, sec, nanosec)
        for field, x in zip(self.fields, values):
            field[:] = x
        return bytes(self.buffer)


class WrenchStampedWriter:
    """A serialized geometry_msgs/WrenchStamped with a fixed frame_id, made once.

    ``serialized(sec, nanosec, wrench)`` writes the stamp and the wrench, given as (moment,
    force) like the core's, into the message's (force, torque) and returns the bytes.
    """

    def __init__(self, frame_id):
        from rclpy.serialization import serialize_message
        from geometry_msgs.msg import WrenchStamped
        msg = WrenchStamped()
        msg.header.frame_id = frame_id
        self.buffer = bytearray(serialize_message(msg))
        at = int(align(string_end(np.frombuffer(bytes(self.buffer), np.uint8), 12), 8))
        self.values = np.frombuffer(self.buffer, np.float64, count=6, offset=at)

    def serialized(self, sec, nanosec, wrench=None):
        """The message stamped (sec, nanosec) with this wrench (None: that in ``values``)."""
        HEADER_STAMP.pack_into(self.buffer, 4, sec, nanosec)
        if wrench is not None:
            self.values[:3], self.values[3:] = wrench[3:], wrench[:3]
        return bytes(self.buffer)


def read_float64_array(data):
    """The values of a serialized std_msgs/Float64MultiArray, float64 (maybe a read-only view).

    Read in place when the layout is empty and the bytes are little-endian XCDR1 (what
    ``Float64MultiArrayWriter`` and rclpy make), else through rclpy's ``deserialize_message``.
    """
    if len(data) >= 16 and data[:2] == b'\x00\x01':
        dims, _, count = FLOAT64_ARRAY_HEADER.unpack_from(data, 4)
        if dims == 0 and len(data) >= Float64MultiArrayWriter.HEADER + 8 * count:
            return np.frombuffer(data, np.float64, count, Float64MultiArrayWriter.HEADER)
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import Float64MultiArray
    return np.array(deserialize_message(data, Float64MultiArray).data, dtype=float)


FLOAT64_ARRAY_HEADER = struct.Struct('<3I')   # dim count, data_offset, data count


class Float64MultiArrayWriter:
    """A serialized std_msgs/Float64MultiArray of n values with an empty layout, made once.

    Fill ``data`` (a float64 view of the buffer) in place, then publish ``serialized()`` on a
    publisher of Float64MultiArray. The size is the one rclpy's ``serialize_message`` gives.
    """

    HEADER = 20   # encapsulation, dim count 0, data_offset 0, data count, padding to 8

    def __init__(self, n):
        self.buffer = bytearray(self.HEADER + 8 * n)
        self.buffer[1] = 1                                  # 00 01 00 00: XCDR1 little endian
        self.buffer[12:16] = n.to_bytes(4, 'little')
        self.data = np.frombuffer(self.buffer, np.float64, offset=self.HEADER)

    def serialized(self, values=None):
        """The message as bytes, after copying ``values`` (if given) into ``data``."""
        if values is not None:
            self.data[:] = values
        return bytes(self.buffer)
