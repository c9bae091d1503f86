"""rosbag2 recordings (``ros2 bag record /joint_states``) as the Recording ``fit_dynamics`` fits.

A bag is a directory holding ``metadata.yaml`` and its .mcap or .db3 files (MCAP is
``ros2 bag record``'s default since Iron, sqlite3 before), or one such file alone. It is read
with the ``rosbags`` library (pure Python, no ROS install needed; imported only here, when a bag
is given). The sensor_msgs/JointState messages of one topic (``--topic``, default
/joint_states; a namespaced /<ns>/joint_states if it is the only one) become the columns of the
chain's joints, mapped by name in each message: extra joints are ignored, messages carrying
none of the chain's joints (another publisher's, e.g. a gripper's) are skipped, a message
carrying only some of them is refused. Stamps are the messages' header stamps, as
``record_joint_states`` records them (``stamps='receive'``: the bag's receive times, for
publishers that leave the header at 0); they must increase. Positions and efforts must be
finite; velocities are kept only if every message has finite ones (the fit differentiates q).
Efforts that are motor currents are converted with the torque constants (N m/A), as the
recorder's ``measured_effort: current`` does. The latest std_msgs/String on the topic's
namespace's ``robot_description``, if recorded, is the Recording's ``robot_description``.
"""
import pathlib

import numpy as np

from robot_dynamics.tools import recording

SUFFIXES = ('.mcap', '.db3')
DEFAULT_TOPIC = '/joint_states'
JOINT_STATE = 'sensor_msgs/msg/JointState'
STRING = 'std_msgs/msg/String'
STAMPS = ('header', 'receive')


class BagError(ValueError):
    """A bag that cannot give the recording; the message says why and what to do."""


def is_bag(path):
    """Whether ``path`` is a rosbag2: a directory, or a .mcap or .db3 file."""
    path = pathlib.Path(path)
    return path.is_dir() or path.suffix.lower() in SUFFIXES


def rosbags():
    """The rosbags modules (Reader, the typestore), or BagError saying how to install them."""
    try:
        from rosbags.rosbag2 import Reader
        from rosbags.typesys import Stores, get_typestore
    except ImportError:
        raise BagError('reading a rosbag2 needs the rosbags library: pip install rosbags') from None
    return Reader, get_typestore(Stores.ROS2_JAZZY)   # JointState and String: every distro's


class Bag:
    """The JointState messages of one topic of a rosbag2, and its robot_description.

    ``messages``: (receive time ns, message) in the bag's order; ``notes``: what the report
    should say (the topic chosen when it was not the one asked).
    """

    def __init__(self, path, topic=DEFAULT_TOPIC):
        Reader, typestore = rosbags()
        from rosbags.rosbag2 import ReaderError
        from rosbags.serde import SerdeError
        self.path, self.notes, self.description = str(path), [], ''
        if pathlib.Path(path).is_dir() and not (pathlib.Path(path) / 'metadata.yaml').exists():
            raise BagError('a directory without metadata.yaml is no rosbag2 (without its '
                           'metadata.yaml, give the bag\'s .mcap or .db3 file itself)')
        try:
            with Reader(path) as reader:
                self.topic = self.choose_topic(reader.topics, topic)
                description = self.topic.rsplit('/', 1)[0] + '/robot_description'
                wanted = [c for c in reader.connections if c.topic == self.topic or (
                    c.topic == description and c.msgtype == STRING)]
                self.messages = []
                for connection, time, raw in reader.messages(wanted):
                    msg = typestore.deserialize_cdr(raw, connection.msgtype)
                    if connection.topic == self.topic:
                        self.messages.append((time, msg))
                    else:
                        self.description = msg.data
        except (ReaderError, SerdeError) as error:
            raise BagError(f'not a readable rosbag2: {error}') from None

    def choose_topic(self, topics, topic):
        """The JointState topic to read: ``topic``, or the only one in a namespace."""
        topic = '/' + topic.lstrip('/')
        states = sorted(t for t, info in topics.items() if info.msgtype == JOINT_STATE)
        found = f'its JointState topics: {states or "none"} (all: {sorted(topics)})'
        if topic in topics:
            if topics[topic].msgtype != JOINT_STATE:
                raise BagError(f'{topic} is {topics[topic].msgtype}, not {JOINT_STATE}; {found}')
            return topic
        candidates = [t for t in states if t.endswith(topic)]
        if len(candidates) == 1:
            self.notes.append(f'reading {candidates[0]}: the only JointState topic ending in '
                              f'{topic}')
            return candidates[0]
        which = (f'several JointState topics end in {topic}' if candidates
                 else f'no topic {topic} in the bag')
        raise BagError(f'{which}; {found}; choose one with --topic')

    def recording(self, joints, stamps='header', torque_constants=None):
        """The Recording of ``joints`` (column order), checked (module docstring)."""
        joints = list(joints)
        rows, times, skipped = [], [], 0
        for k, (time, msg) in enumerate(self.messages):
            where = (f'message {k} on {self.topic} (received '
                     f'{(time - self.messages[0][0]) * 1e-9:.3f} s into the bag)')
            row = self.row(msg, joints, where)
            if row is None:
                skipped += 1
                continue
            stamp = time if stamps == 'receive' else \
                msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
            if times and stamp <= times[-1]:
                raise BagError(f'{stamps} stamps must increase: {where} is stamped '
                               f'{stamp * 1e-9:.9f} s, the previous one {times[-1] * 1e-9:.9f} s'
                               + ('' if stamps == 'receive' else ' (--stamps receive uses the '
                                  "bag's receive times)"))
            times.append(stamp)
            rows.append(row)
        if not rows:
            first = list(self.messages[0][1].name) if self.messages else []
            raise BagError(f'no message on {self.topic} carries the joints {joints} '
                           f'({len(self.messages)} messages; the first names {first})')
        self.notes.append(f'{len(rows)} messages on {self.topic}, stamped by ' + (
            'the bag\'s receive times' if stamps == 'receive' else 'their headers'))
        if skipped:
            self.notes.append(f'skipped {skipped} messages on {self.topic} carrying none of '
                              f'the joints (another publisher\'s)')
        q, v, tau = (np.array(x) for x in zip(*rows))
        if torque_constants is not None:
            tau = tau * self.constants(torque_constants, joints)
        return recording.from_stamps(times, q, v, tau, joints,
                                     robot_description=self.description)

    @staticmethod
    def row(msg, joints, where):
        """(q, v, effort) of ``joints`` in a message (v NaN if absent), None if it has none."""
        names = list(msg.name)
        index = {name: i for i, name in enumerate(names)}
        if len(index) != len(names):
            raise BagError(f'{where} names a joint twice: {names}')
        found = [index.get(j) for j in joints]
        if all(i is None for i in found):
            return None
        missing = [j for j, i in zip(joints, found) if i is None]
        if missing:
            raise BagError(f'{where} lacks the joints {missing} (it has {names}): the fit needs '
                           f'every joint of the chain in each message; --base/--tip choose the '
                           f'chain')
        row = []
        for field in ('position', 'velocity', 'effort'):
            values = np.asarray(getattr(msg, field), dtype=float)
            if len(values) == 0 and field == 'velocity':
                row.append(np.full(len(joints), np.nan))
                continue
            if len(values) != len(names):
                raise BagError(f'{where} has {len(values)} {field} values for {len(names)} '
                               f'names' + (' (the fit needs efforts: record a joint_states '
                                           'publisher that has them)' if field == 'effort' else ''))
            x = values[found]
            bad = [j for j, value in zip(joints, x) if not np.isfinite(value)]
            if bad and field != 'velocity':
                raise BagError(f'{where} has non-finite {field} for {bad}')
            row.append(np.where(np.isfinite(x), x, np.nan))   # velocities: NaN drops them all
        return row

    @staticmethod
    def constants(torque_constants, joints):
        """The torque constants as a vector, one > 0 per joint, or BagError."""
        k = np.asarray(torque_constants, dtype=float)
        if k.shape != (len(joints),) or not (k > 0).all():
            raise BagError(f'--torque-constants: one constant > 0 (N m/A) per joint, in the '
                           f'order {joints}; got {k.tolist()}')
        return k
