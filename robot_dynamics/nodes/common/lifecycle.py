"""``ManagedArmNode``: an ArmNode that answers joint states, as a managed (lifecycle) node.

Lifecycle: a ``ManagedArmNode`` is a managed node (rclpy.lifecycle, the states and transitions
of ROS 2's managed nodes, as ros2_control's controllers are): configure loads the model and
checks the parameters (a refusal leaves it unconfigured, with the reason logged), activate
starts taking joint states, deactivate ends (the subclass's ``finish``) and stops taking them,
cleanup drops the model. ``autostart`` (a parameter, default true) configures and activates it
at start, a refused configuration then ending the process as before.

Real time (``realtime``): when a node is first ready, after its warm-up, it applies its
``thread_priority``, ``cpu_affinity`` and ``lock_memory`` and, at every configure, freezes what it
allocated and keeps automatic full collections out of the loop; a full collection runs at
deactivation and, every IDLE_COLLECT_PERIOD, when no joint state came for that long.
"""
import abc
import time
import traceback

from rclpy.clock import Clock, ClockType
from rclpy.lifecycle import LifecycleNodeMixin, TransitionCallbackReturn
from rclpy.node import Node
from sensor_msgs.msg import JointState

from .joint_states import BadInput, state_qos
from .node import ArmNode
from .parameters import ConfigError
from .writers import JointStateSource

IDLE_COLLECT_PERIOD = 10.0   # s, wall time: a full collection when no state came for this long


class ManagedArmNode(LifecycleNodeMixin, ArmNode):
    """An ArmNode that answers joint states, with the managed-node lifecycle (module docstring).

    Subclasses subscribe with ``subscribe_joint_states(depth)``, set ``reader`` (a
    CdrJointStateReader) and ``diagnostics``, implement the abstract steps of the state loop
    ``on_state`` (``compiled``, ``interpreted``, ``after``) and ``clear``, call ``start()`` last
    in their constructor (instead of ``load_model``), and may have ``finish()`` (the last act
    of an active node).
    """

    def __init__(self, name, **options):
        ArmNode.__init__(self, name, **options)
        LifecycleNodeMixin.__init__(self, enable_communication_interface=True)
        self.active, self.refusal, self.description = False, None, None
        self.state_taken_at = time.perf_counter()   # wall time: the collector's idle timer
        self.create_wall_timer(IDLE_COLLECT_PERIOD, self.collect_when_idle)

    def create_wall_timer(self, period, callback):
        """A timer on the steady clock, whatever the node's clock (its own housekeeping)."""
        return Node.create_timer(self, period, callback,
                                 clock=Clock(clock_type=ClockType.STEADY_TIME))

    def collect_when_idle(self):
        """A full collection when no joint state came for IDLE_COLLECT_PERIOD."""
        if time.perf_counter() - self.state_taken_at >= IDLE_COLLECT_PERIOD:
            self.collections.collect()

    def subscribe_joint_states(self, depth):
        """joint_states, as serialized bytes on the fast path, else as messages."""
        raw = self.values['fast_path']
        self.source = JointStateSource(   # one source: common.writers
            self, 'joint_states', self.on_serialized_joint_state if raw else self.on_joint_state,
            self.values['joint_states_sources'])
        self.create_subscription(JointState, 'joint_states', self.source,
                                 state_qos(self.values['joint_states_reliability'], depth),
                                 raw=raw)

    def waits(self):
        """True while joint states are not taken: inactive, before /clock, or no model yet."""
        if self.timeless():
            return True
        if self.reader is None:   # robot_description from its topic, not here yet
            self.warn('no model yet: joint states ignored until robot_description arrives')
            return True
        return False

    def on_joint_state(self, msg):
        """A deserialized JointState: the state loop; the outputs go out as messages."""
        if not self.waits():
            self.on_state(msg, False)

    def on_serialized_joint_state(self, data):
        """A JointState's CDR bytes (the fast path): the state loop; the outputs serialized."""
        if not self.waits():
            self.on_state(data, True)

    def on_state(self, msg, serialized):
        """The state loop, once for every node and transport: read, accept, compute, write, after.

        ``compiled(data)`` reads, computes and writes the bytes of a state in one compiled call
        where the configuration has a compiled cycle and the state is one it serves, else
        declines (None) and ``interpreted(msg, serialized)`` reads the state (``read``), accepts
        it and computes and writes its outputs in Python. Either returns what ``after`` needs
        (None: nothing was published) and calls the node's one ``accept`` on the state; a
        BadInput from either rejects the state with its reason.
        """
        received = time.perf_counter()   # wall time: this process's compute time per state
        self.state_taken_at = received
        self.diagnostics.received()
        if self.config is None:
            return
        try:
            served = (serialized and self.compiled(msg)) or self.interpreted(msg, serialized)
        except BadInput as error:
            self.diagnostics.count('rejected_states')
            self.warn(f'joint_states ignored: {error}')
            return
        if served is not None:
            self.after(received, *served)

    def read(self, msg, serialized, ours_at):
        """(q, q̇, effort, (sec, nanosec)) of the state, or None for another arm's (said so).

        ``ours_at``: when the node last accepted one of its own arm's states.
        """
        state = (self.reader.read_cdr if serialized else self.reader.read_stamped)(msg)
        if state is None:
            self.foreign_state(self.reader.message_names, ours_at, self.monotonic_time())
        return state

    def start(self):
        """autostart: configure (a refusal raises ConfigError: the process ends) and activate."""
        if not self.values['autostart']:
            self.get_logger().info('unconfigured (autostart false): waiting for the configure '
                                   'and activate transitions (~/change_state)')
            return
        configured = self.trigger_configure()
        if self.refusal is not None:
            raise ConfigError(self.refusal)
        if configured != TransitionCallbackReturn.SUCCESS:   # on_configure logged the error
            raise RuntimeError(f'configure failed ({configured.name}): see the error above')
        self.trigger_activate()

    def on_configure(self, state):
        self.refusal = None
        try:
            self.load_model()
        except ConfigError as error:
            self.refusal = str(error)
            self.get_logger().error(f'configure refused: {error}')
            self.on_cleanup(state)
            return TransitionCallbackReturn.FAILURE
        except Exception:   # a defect: rclpy's lifecycle would swallow it without a word
            self.get_logger().error(f'configure failed:\n{traceback.format_exc()}')
            raise
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state):
        self.active = True
        self.get_logger().info('active: taking joint states')
        return super().on_activate(state)

    def on_deactivate(self, state):
        self.finish()
        self.active = False
        self.collections.collect()
        self.get_logger().info('inactive: joint states ignored until activated')
        return super().on_deactivate(state)

    def on_cleanup(self, state):
        self.active = False
        if self.description is not None:
            self.destroy_subscription(self.description)
        self.description = self.arm = self.urdf = None
        self.clear()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state):
        if self.active:
            self.finish()
        self.active = False
        return TransitionCallbackReturn.SUCCESS

    @abc.abstractmethod
    def clear(self):
        """Forget the configuration built from the model (a cleanup)."""

    @abc.abstractmethod
    def compiled(self, data):
        """Serve the CDR bytes ``data`` in one compiled call: ``after``'s arguments, or None."""

    @abc.abstractmethod
    def interpreted(self, msg, serialized):
        """Serve a state in Python (``read``, accept, compute, write): ``after``'s arguments."""

    @abc.abstractmethod
    def after(self, received, *served):
        """What follows a served state (diagnostics, its timing), ``received`` its wall time."""

    def destroy_node(self):
        """Destroy the node, its lifecycle state machine included.

        rclpy's state machine holds the node's handle and its destroy_node leaves it: the node
        and its transition_event publisher would stay in the ROS graph as long as the process.
        A node stopped while it was being built may have none yet (rclpy's shutdown destroys
        it all the same).
        """
        machine = getattr(self, '_state_machine', None)
        if machine is not None:
            machine.destroy_when_not_in_use()
        if hasattr(self, 'background_compile'):
            self.background_compile.stop()
        super().destroy_node()
