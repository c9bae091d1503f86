"""One writer per input: the joint-state source a node takes, and its command topic's writers.

A ROS graph lets any node publish on any topic. ``JointStateSource`` is the joint_states
subscription's callback: rclpy hands it each message with its MessageInfo, whose
``publisher_gid`` names the publisher; states are taken from the accepted publishers only, a
set lookup per message. A publisher not seen before is resolved to its node through the graph
(``get_publishers_info_by_topic``): a publisher of the source node (``joint_states_sources``, or
the first node seen when that is empty) is accepted, any other's states are refused, with one
WARN per publisher naming its node and the topic, and ``health`` (for /diagnostics) says WARN
while such a publisher is in the graph. The source is never switched silently: a lost source is
the state_timeout's business; ``select`` (a parameter change) and ``reset`` (``~/reset``) choose
again.

``writers(node, topic)`` gives a topic's publishers by node, for the command topic's single
writer check (the controller's activation and its graph poll, the simulator's report).
"""
import inspect
import time

GRAPH_PERIOD = 0.5   # s: how often the command topic's writers are looked up (2 Hz)
# s after a node's start before the graph it sees may be taken as complete: DDS discovers the
# endpoints already there within it (1-1.5 s measured on a loaded 2-core machine; more on CI)
DISCOVERY = 2.0
SETTLE = 1.0            # s with an unchanged graph before it is taken as complete
DISCOVERY_LIMIT = 10.0  # s: the longest wait for it


def full_name(namespace, name):
    """A node's fully qualified name: /namespace/name."""
    return namespace.rstrip('/') + '/' + name


UNKNOWN = '_NODE_NAME_UNKNOWN_'   # rmw's name of a node whose endpoints came before its name


def writers(node, topic):
    """{publisher GID bytes: fully qualified node name} of the publishers on ``topic``.

    Without the publishers whose node is not known yet: a later look names them.
    """
    return {bytes(e.endpoint_gid): full_name(e.node_namespace, e.node_name)
            for e in node.get_publishers_info_by_topic(node.resolve_topic_name(topic))
            if e.node_name != UNKNOWN}


def other_writers(node, topic):
    """The nodes other than ``node`` that publish on ``topic``, sorted."""
    own = node.get_fully_qualified_name()
    return sorted({name for name in writers(node, topic).values() if name != own})


def discovered_writers(node, topic, started):
    """other_writers, looked up until one is seen or the graph this node sees is complete.

    A node activated right after it started (autostart) would otherwise look before discovery
    has shown it the writers already there, and two controllers would write at once. No DDS
    event says discovery is done, so the graph is taken as complete DISCOVERY s after
    ``started`` once another node is seen and neither the nodes nor any topic's publisher count
    has changed for SETTLE s (on a loaded machine the others come later, and together), and at
    DISCOVERY_LIMIT s in any case.
    """
    seen, changed = graph(node), started
    while True:
        others = other_writers(node, topic)
        now = time.monotonic()
        if others or now >= started + DISCOVERY_LIMIT:
            return others
        current = graph(node)
        if current != seen:
            seen, changed = current, now
        elif now >= started + DISCOVERY and now >= changed + SETTLE and len(seen[0]) > 1:
            return others
        time.sleep(0.05)


def graph(node):
    """What discovery has shown ``node``: (the nodes, {topic: its publisher count})."""
    return (frozenset(node.get_node_names_and_namespaces()),
            {name: node.count_publishers(name) for name, _ in node.get_topic_names_and_types()})


def matches(name, wanted):
    """A node name matches an entry of joint_states_sources: the full name, or its last part."""
    return name == wanted or ('/' not in wanted and name.rsplit('/', 1)[-1] == wanted)


P = inspect.Parameter
WITH_INFO = inspect.Signature([P('msg', P.POSITIONAL_ONLY), P('info', P.POSITIONAL_ONLY)])


class JointStateSource:
    """The joint_states callback that passes on (``deliver(msg)``) the source's states only.

    Its signature asks rclpy for the MessageInfo. rclpy's SingleThreadedExecutor calls it with
    (msg, info); Kilted's EventsExecutor (rclpy 9.1) with the one tuple (msg, info).
    """

    __signature__ = WITH_INFO

    def __init__(self, node, topic, deliver, names=()):
        self.node, self.topic, self.deliver = node, node.resolve_topic_name(topic), deliver
        self.names, self.chosen = tuple(names), None
        self.accepted, self.strays = set(), {}   # GIDs taken; GID -> node name, refused
        self.warned_unchecked = False   # states without GIDs: said once (unchecked)
        self.count = lambda: None   # a refused state (the node's diagnostics counter)

    def __call__(self, *args):
        msg, info = args if len(args) == 2 else args[0]
        gid = info.get('publisher_gid')
        if gid is None:   # Jazzy's rclpy or an rmw without GIDs: no one-source check
            self.unchecked()
            self.deliver(msg)
        elif gid['data'] in self.accepted:
            self.deliver(msg)
        elif gid['data'] in self.strays:
            self.count()
        else:
            self.identify(gid['data'], msg)

    def unchecked(self):
        """Said once: states without their publisher's GID cannot be told apart by source."""
        if not self.warned_unchecked:
            self.warned_unchecked = True
            self.node.get_logger().warning(
                f'joint_states on {self.topic} come without their publisher\'s GID (rclpy before '
                'Kilted, or the rmw): every publisher\'s states are taken; a second publisher '
                'on the topic is not detected (one source needs Kilted or later)')

    def identify(self, gid, msg):
        """A publisher not seen before: accepted (its state delivered) or refused, said once."""
        name = writers(self.node, self.topic).get(bytes(gid))
        if name is None:   # not in this node's graph yet: the next message tries again
            self.count()
            return
        if self.takes(name):
            self.accepted.add(gid)
            self.deliver(msg)
            return
        self.strays[gid] = name
        self.count()
        self.node.get_logger().warning(
            f'joint_states from {name} on {self.topic} ignored: this node takes them from '
            f'{self.source()} only; another publisher on the topic (a joint_state_publisher, a '
            'bag being played?) must not be used; to take them from it: joint_states_sources, '
            'or ~/reset (the first publisher seen)')

    def takes(self, name):
        """Whether states of node ``name`` are the source's (the first node seen is chosen)."""
        if self.names:
            return any(matches(name, wanted) for wanted in self.names)
        if self.chosen is None:
            self.chosen = name
            self.node.get_logger().info(
                f'joint_states: taking them from {name} on {self.topic} (the first publisher '
                'seen; joint_states_sources names the source)')
        return name == self.chosen

    def source(self):
        """The source as a log line names it."""
        if self.names:
            return ', '.join(self.names)
        return self.chosen or 'the first publisher seen'

    def select(self, names):
        """joint_states_sources (a parameter change): a new choice if they changed."""
        if tuple(names) != self.names:
            self.names = tuple(names)
            self.reset()

    def reset(self):
        """Choose again: every publisher is resolved anew (``~/reset``, a parameter change)."""
        self.chosen = None
        self.accepted.clear()
        self.strays.clear()

    def others(self):
        """The nodes publishing on the topic whose states are refused (graph), sorted."""
        names = set(writers(self.node, self.topic).values())
        if self.names:
            return sorted(n for n in names if not any(matches(n, w) for w in self.names))
        return sorted(names - {self.chosen}) if self.chosen else []

    def health(self):
        """(warning or None, values) for /diagnostics: the source and the other publishers."""
        others = self.others()
        values = {'joint_states_source': self.source(), 'joint_states_other_publishers': others}
        if not others:
            return None, values
        return (f'joint_states: other publishers on {self.topic}, their states ignored: '
                f"{', '.join(others)}"), values
