"""The serialized-message fast path against rclpy's (de)serialization and JointStateReader."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from rclpy.serialization import deserialize_message, serialize_message
from builtin_interfaces.msg import Time
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from robot_dynamics.core._jit import jit
from robot_dynamics.core.joint_state_cdr import OK, read_state
from robot_dynamics.nodes.common.cdr import CdrJointStateReader, Float64MultiArrayWriter, \
    JointStateWriter, WrenchStampedWriter, parse_joint_state, read_float64_array, \
    serialized_time
from robot_dynamics.nodes.common.joint_states import BadInput, JointStateReader, wrench_message

pytestmark = pytest.mark.nojit

JOINTS = [f'panda_joint{i}' for i in range(1, 8)]
FIELDS = JointStateReader.FIELDS
NAME_TEXT = st.text(st.characters(blacklist_categories=('Cs',), blacklist_characters='\0'),
                    max_size=13)   # every length mod 4: the alignment padding after a name
FINITE = st.floats(-1e6, 1e6)
NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])


def message(names, arrays, stamp=(0, 0), frame_id=''):
    msg = JointState(name=names, position=arrays[0], velocity=arrays[1], effort=arrays[2])
    msg.header.stamp.sec, msg.header.stamp.nanosec = stamp
    msg.header.frame_id = frame_id
    return msg


@st.composite
def joint_names(draw):
    """Ours in any order, some or none of them, with extra and sometimes duplicated names."""
    ours = draw(st.permutations(JOINTS))
    ours = ours[:draw(st.sampled_from([7, 7, 7, 0, draw(st.integers(1, 6))]))]
    names = list(ours) + draw(st.lists(NAME_TEXT, max_size=3))
    names = draw(st.permutations(names))
    if names and draw(st.integers(0, 9)) == 0:
        names.append(draw(st.sampled_from(names)))
    return names


@st.composite
def field(draw, n):
    """Empty, or n values (one of them now and then not finite), or a wrong number of values."""
    kind = draw(st.sampled_from(['full', 'full', 'full', 'empty', 'poisoned', 'wrong']))
    if kind == 'empty':
        return []
    if kind == 'wrong':
        return draw(st.lists(FINITE, min_size=1, max_size=n + 2).filter(lambda x: len(x) != n))
    values = draw(st.lists(FINITE, min_size=n, max_size=n))
    if kind == 'poisoned' and n:
        values[draw(st.integers(0, n - 1))] = draw(NON_FINITE)
    return values


@st.composite
def joint_state(draw):
    names = draw(joint_names())
    return message(names, [draw(field(len(names))) for _ in FIELDS],
                   (draw(st.integers(-2**31, 2**31 - 1)), draw(st.integers(0, 2**32 - 1))),
                   draw(NAME_TEXT))


def outcome(read, *args):
    """What a reader makes of a message: its result or ('BadInput', text)."""
    try:
        return read(*args)
    except BadInput as error:
        return ('BadInput', str(error))


def assert_same(fast, plain, msg):
    """The fast reader's outcome equals the plain one's, with the message's stamp."""
    if plain is None or isinstance(plain[0], str):
        assert fast == plain
        return
    assert fast[3] == (msg.header.stamp.sec, msg.header.stamp.nanosec)
    for mine, theirs in zip(fast[:3], plain):
        assert (mine is None) == (theirs is None)
        if theirs is not None:
            assert mine.dtype == theirs.dtype
            np.testing.assert_array_equal(mine, theirs)


def check_sequence(messages, fields=FIELDS):
    fast, plain = CdrJointStateReader(JOINTS, fields), JointStateReader(JOINTS, fields)
    for msg in messages:
        assert_same(outcome(fast.read_cdr, serialize_message(msg)), outcome(plain.read, msg), msg)
    return fast


@settings(max_examples=300, deadline=None)
@given(joint_state())
def test_parse_matches_rclpy(msg):
    sec, nanosec, frame_id, names, *arrays = parse_joint_state(serialize_message(msg))
    assert (sec, nanosec) == (msg.header.stamp.sec, msg.header.stamp.nanosec)
    assert frame_id == msg.header.frame_id and names == msg.name
    for mine, f in zip(arrays, FIELDS):
        np.testing.assert_array_equal(mine, np.array(getattr(msg, f), float))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(joint_state(), st.integers(1, 3)), min_size=1, max_size=5),
       st.sampled_from([FIELDS, ('position', 'velocity'), ('position',)]))
def test_reader_matches_plain_on_fuzzed_sequences(runs, fields):
    """Runs of repeated messages: the second of a run takes the compiled path if it can."""
    check_sequence([msg for msg, repeat in runs for _ in range(repeat)], fields)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.permutations(JOINTS), st.integers(0, 4)), min_size=1, max_size=4),
       st.lists(FINITE, min_size=8, max_size=8))
def test_reader_matches_plain_on_recorded_like_streams(orders, values):
    """A driver's stream: all joints, changing order, a gripper's states in between, NaN."""
    stream = []
    for k, (order, extra) in enumerate(orders):
        names = list(order) + [f'panda_finger_joint{i}' for i in range(extra)]
        arrays = [values[:len(names)] + [0.0] * (len(names) - 8)] * 3
        stream += [message(names, arrays, (1700000000 + k, 1000 * k), 'panda_link0')] * 3
        stream.append(message(['panda_finger_joint1'], [[0.04], [], []]))
        stream.append(message(names, [arrays[0], [math.nan] * len(names), arrays[2]]))
    check_sequence(stream)


def test_compiled_path_serves_repeated_names():
    """After the first message of a name list, valid messages never take the plain path."""
    reader = CdrJointStateReader(JOINTS)
    order = JOINTS[::-1] + ['finger']
    for k in range(5):
        values = [float(k + i) for i in range(8)]
        q, v, effort, stamp = reader.read_cdr(serialize_message(
            message(order, [values] * 3, (k, 0))))
        assert q.tolist() == values[:7][::-1] and stamp == (k, 0)
    gripper = serialize_message(message(['finger'], [[0.0], [], []]))
    assert reader.read_cdr(gripper) is None and reader.read_cdr(gripper) is None
    assert reader.plain_reads == 2


@jit
def positions_plus_one(buf, ref, cfg, out, info):
    """A compiled caller of the compiled reader, as a node's whole cycle would be."""
    status = read_state(buf, ref, cfg, out, info)
    return status, out[0] + 1.0


def test_compiled_reader_is_callable_from_compiled_code():
    reader = CdrJointStateReader(JOINTS)
    data = serialize_message(message(JOINTS[::-1], [[float(i) for i in range(7)]] * 3))
    reader.read_cdr(data)   # maps the names (plain path)
    status, q = positions_plus_one(np.frombuffer(data, np.uint8), *reader.arrays)
    assert status == OK and q.tolist() == [7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0]


def test_reader_errors_name_the_problem():
    reader = CdrJointStateReader(JOINTS)
    good = message(JOINTS, [[0.0] * 7] * 3)
    reader.read_cdr(serialize_message(good))
    for names, arrays, text in [
            ([], [[], [], []], 'empty JointState'),
            (JOINTS, [[0.0] * 7, [0.0] * 6, []], 'velocity has 6 values for 7 joint names'),
            (JOINTS, [[], [0.0] * 7, []], 'no positions'),
            (JOINTS, [[0.0] * 6 + [math.inf], [], []], "non-finite position for ['panda_joint7']"),
            (JOINTS[1:], [[0.0] * 6, [], []], "missing joints ['panda_joint1']")]:
        with pytest.raises(BadInput, match=text.replace('[', r'\[')):
            reader.read_cdr(serialize_message(message(names, arrays)))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(FINITE, NON_FINITE), max_size=20))
def test_writer_matches_rclpy(values):
    """Same size and bytes as serialize_message, except the padding Fast CDR leaves unset."""
    writer = Float64MultiArrayWriter(len(values))
    writer.data[:] = values
    mine, theirs = writer.serialized(), serialize_message(Float64MultiArray(data=values))
    assert len(mine) == len(theirs)
    defined = list(range(16)) + list(range(20, len(mine)))
    assert bytes(mine[i] for i in defined) == bytes(theirs[i] for i in defined)
    np.testing.assert_array_equal(deserialize_message(mine, Float64MultiArray).data, values)


def test_writer_serializes_values_given():
    writer = Float64MultiArrayWriter(3)
    data = deserialize_message(writer.serialized([1.0, -2.0, 3.5]), Float64MultiArray).data
    assert data.tolist() == [1.0, -2.0, 3.5]


@given(st.lists(NAME_TEXT, min_size=1, max_size=9, unique=True),
       st.integers(-2**31, 2**31 - 1), st.integers(0, 10**9 - 1), st.data())
@settings(max_examples=60, deadline=None, database=None, derandomize=True)
def test_joint_state_writer_gives_what_rclpy_gives(names, sec, nanosec, data):
    """The writer's bytes deserialize to the message rclpy would serialize (NaN, Inf included)."""
    n = len(names)
    values = [np.array(data.draw(st.lists(st.floats(allow_nan=True), min_size=n, max_size=n)))
              for _ in range(3)]
    writer = JointStateWriter(names)
    for _ in range(2):   # a second message from the same buffer
        msg = deserialize_message(writer.serialized(sec, nanosec, *values), JointState)
        assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (sec, nanosec)
        assert list(msg.name) == names and msg.header.frame_id == ''
        for field, x in zip((msg.position, msg.velocity, msg.effort), values):
            assert np.array_equal(np.array(field), x, equal_nan=True)
        values = [x[::-1].copy() for x in values]


@given(st.lists(st.floats(allow_nan=True), max_size=12), st.integers(0, 2))
@settings(max_examples=100, deadline=None, database=None, derandomize=True)
def test_float64_array_read_as_rclpy_reads_it(values, dims):
    """Read in place (empty layout) or through rclpy (a layout): the values rclpy gives."""
    msg = Float64MultiArray(data=values)
    msg.layout.dim = [MultiArrayDimension(label='joints' * k, size=len(values), stride=1)
                      for k in range(dims)]
    msg.layout.data_offset = dims
    read = read_float64_array(serialize_message(msg))
    assert read.dtype == np.float64 and np.array_equal(read, values, equal_nan=True)
    writer = Float64MultiArrayWriter(len(values))
    assert np.array_equal(read_float64_array(writer.serialized(values)), values, equal_nan=True)


@given(st.lists(NAME_TEXT, min_size=1, max_size=5, unique=True),
       st.lists(st.floats(allow_nan=True), min_size=5, max_size=5))
@settings(max_examples=40, deadline=None, database=None, derandomize=True)
def test_joint_state_writer_of_efforts_only(names, values):
    n = len(names)
    msg = deserialize_message(JointStateWriter(names, ('effort',)).serialized(
        3, 4, np.array(values[:n])), JointState)
    assert list(msg.name) == names and len(msg.position) == len(msg.velocity) == 0
    assert np.array_equal(np.array(msg.effort), values[:n], equal_nan=True)


@given(NAME_TEXT, st.integers(-2**31, 2**31 - 1), st.integers(0, 10**9 - 1),
       st.lists(st.floats(allow_nan=True), min_size=6, max_size=6))
@settings(max_examples=60, deadline=None, database=None, derandomize=True)
def test_wrench_writer_gives_what_rclpy_gives(frame, sec, nanosec, wrench):
    """(moment, force) in, the message's force and torque out; every frame_id length."""
    writer = WrenchStampedWriter(frame)
    msg = deserialize_message(writer.serialized(sec, nanosec, np.array(wrench)), WrenchStamped)
    w = msg.wrench
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec, msg.header.frame_id) == \
        (sec, nanosec, frame)
    assert np.array_equal([w.torque.x, w.torque.y, w.torque.z, w.force.x, w.force.y, w.force.z],
                          wrench, equal_nan=True)
    made = wrench_message(frame, wrench)   # rclpy's own message, the stamp left unset
    m = made.wrench
    assert (made.header.stamp.sec, made.header.stamp.nanosec, made.header.frame_id) == \
        (0, 0, frame)
    # fields, not bytes: Jazzy's rclpy leaves the padding after a string uninitialised
    assert np.array_equal([m.torque.x, m.torque.y, m.torque.z, m.force.x, m.force.y, m.force.z],
                          wrench, equal_nan=True)


@given(st.integers(-2**31, 2**31 - 1), st.integers(0, 2**32 - 1))
@settings(max_examples=100, deadline=None)
def test_time_serialized_as_rclpy_does(sec, nanosec):
    """The heartbeat's bytes (a builtin_interfaces/Time) are rclpy's."""
    assert serialized_time(sec, nanosec) == serialize_message(Time(sec=sec, nanosec=nanosec))
