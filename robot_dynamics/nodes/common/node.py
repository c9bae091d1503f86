"""The node base classes ``ArmNode`` and ``ManagedArmNode`` and ``main``, which runs a node.

A node is parameters -> core objects -> publishers. Every node builds its whole configuration
from a dict of parameter values in one function; the on-set callback runs that same function on
the proposed values, so a bad value is rejected with the function's reason and the node keeps
the configuration it had (see ``ArmNode``).

Time: every interval that decides behaviour (a timeout, a rate limit's Δt, a window) is read
from ``ArmNode.seconds``, and every comparison with a joint state's stamp from
``ArmNode.clock_time``. With ``use_sim_time`` (rclpy's parameter, read at start: a change is
refused) both are the newest /clock time, e.g. arm_simulator's: time stands still while /clock
does. Without it, ``seconds`` is the monotonic wall clock (ROS time would be the system clock,
which NTP may step) and ``clock_time`` the system clock, what stamps are compared against.
rclpy's timers (``create_timer``) run on the node's ROS clock, so on /clock under use_sim_time,
once per due time (``timers``: Kilted's events executor may call a due timer in a burst).
Wall time stays only where a node measures itself: its CPU time per message, its latency, its
log throttling, and its own shutdown.

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
import ctypes
import faulthandler
import math
import os
import re
import signal
import sys
import time
import traceback

import rclpy
from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionServer
from rclpy.clock import Clock, ClockType
from rclpy.exceptions import ParameterException
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNodeMixin, TransitionCallbackReturn
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from ...core import _jit, warm_up
from ...run import LAUNCHER
from .arm import ArmBuilder
from .background_compile import BackgroundCompile
from .context import Context
from .joint_states import DESCRIPTION_QOS, BadInput, state_qos
from . import realtime
from .parameters import MODEL_PARAMS, ConfigError, check, declare_parameters, parameter_value
from .timers import called_when_due
from .writers import JointStateSource


USE_SIM_TIME = 'use_sim_time'   # rclpy's parameter: the node's clock is /clock
FOREIGN_PERIOD = 5.0   # s: joint states without our joints for this long are worth a warning
IDLE_COLLECT_PERIOD = 10.0   # s, wall time: a full collection when no state came for this long


class Throttled:
    """log(text) at most once per ``period`` seconds for each kind of text.

    A kind is the text with its numbers masked (``kind``): "stamp jumped 0.31 s ahead" and
    "stamp jumped 0.32 s ahead" are one message, throttled together. Wall time: the log is read
    by a person, whatever the node's clock.
    """

    NUMBER = re.compile(r'[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?')

    def __init__(self, log, period=1.0):
        self.log, self.period, self.last = log, period, {}

    @classmethod
    def kind(cls, text):
        return cls.NUMBER.sub('#', text)

    def __call__(self, text):
        now, kind = time.monotonic(), self.kind(text)
        if now - self.last.get(kind, -math.inf) >= self.period:
            self.last[kind] = now
            self.log(text)


class ArmNode(Node):
    """A node on one arm model: parameters, the model (parameter or topic), validated updates.

    Subclasses set PARAMS, implement ``configure(values, arm) -> config`` (raise ConfigError
    with a reason) and ``apply(config)``, and call ``load_model()`` at the end of __init__.
    configure and apply run when the model arrives and on every accepted parameter change.
    """

    PARAMS = MODEL_PARAMS
    #: after a warm-up on an incomplete cache, compile the rest beside it (background_compile)
    COMPILE_REST = False

    def __init__(self, name, **options):
        super().__init__(name, **options)   # options: rclpy Node keywords (namespace, overrides)
        self.values = declare_parameters(self, self.PARAMS)
        #: use_sim_time (declared by rclpy): time is /clock's (module docstring)
        self.sim_time = self.get_parameter(USE_SIM_TIME).value is True
        check(self.PARAMS, self.values)
        self.arm = self.urdf = None
        self.warmed = set()   # the names of the warm-up steps this process has run
        self.background_compile = BackgroundCompile()
        self._build_arm = ArmBuilder()
        self.warn = Throttled(self.get_logger().warning)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.collections, self.realtime = realtime.Collections(), None

    active = True   # takes joint states (a ManagedArmNode: while active)

    def load_model(self):
        """Call last in the subclass constructor: the model from the parameter or the topic."""
        if self.values['robot_description']:
            self._configure(self.values['robot_description'])
        else:
            self.get_logger().info('waiting for the robot_description topic')
            self.description = self.create_subscription(
                String, 'robot_description', self._on_description, DESCRIPTION_QOS)

    def component_context(self, diagnostics, newest_state):
        """The Context a component of this node is built with (``newest_state()``: q or None).

        Late bound: a component sees the values and the clock the node has when it asks.
        """
        return Context(self.get_name(), lambda: self.values, self.get_logger(), self.warn,
                       self.get_clock(), lambda: self.seconds(), newest_state, diagnostics,
                       self.create_publisher, self.create_subscription, self.create_timer,
                       self.destroy_timer, self.create_service, lambda: self.arm,
                       self.set_parameters_atomically,
                       lambda *args, **kwargs: ActionServer(self, *args, **kwargs))

    def create_timer(self, timer_period_sec, callback, *args, **kwargs):
        """rclpy's timer on the node's clock, its callback run once per due time (``timers``)."""
        return called_when_due(super().create_timer, timer_period_sec, callback, *args, **kwargs)

    def seconds(self):
        """The node's time for intervals, s: /clock's under use_sim_time, else monotonic."""
        if self.sim_time:
            return self.get_clock().now().nanoseconds * 1e-9
        return time.monotonic()

    def timeless(self):
        """True while joint states wait: inactive, or under use_sim_time before the first /clock.

        A state taken before the first /clock (rclpy's time 0) would be timed at 0, and the
        first /clock would make it look seconds old (a false state timeout).
        """
        if not self.active:
            return True
        if self.sim_time and not self.get_clock().now().nanoseconds:
            self.warn('use_sim_time: joint states ignored until the first /clock message')
            return True
        return False

    def clock_time(self):
        """The node's clock, s since the epoch: what a joint state's stamp compares with."""
        if self.sim_time:
            return self.get_clock().now().nanoseconds * 1e-9
        return time.time()

    def warm_up_steps(self, config, every_mode=False):
        """The warm-up steps (core.warm_up) of the kernels ``config`` calls per state: none here.

        ``every_mode``: those of every value a parameter may later take (modes, components
        switched on), for ``python -m robot_dynamics.compile``.

        numba compiles a kernel (or loads it from its cache) at its first call: in these steps,
        before 'ready' or before a parameter change that calls new ones takes effect, not at a
        joint state, which would otherwise wait seconds on a fresh install.
        """
        return []

    def pending_warm_up(self, config):
        """The steps of ``config`` this process has not run yet."""
        return [(name, step) for name, step in self.warm_up_steps(config)
                if name not in self.warmed]

    def warm_up(self, steps):
        """Run the warm-up ``steps``, with progress in the log at least every 5 s."""
        if not steps:
            return
        log = self.get_logger()
        log.info(f'warming up {len(steps)} steps ({", ".join(name for name, _ in steps)}): '
                 'numba compiles their kernels on a fresh install, or loads them from its cache')
        took, compiled = warm_up.run(steps, log.info)
        self.warmed.update(name for name, _ in steps)
        log.info(f'warmed up in {took:.1f} s ({compiled} kernels compiled, the rest loaded '
                 'from the cache)')

    def refuse_uncompiled(self, steps):
        """The reason a parameter change needing ``steps`` waits, or None: it can warm up now.

        A step's kernels load from the cache in a fraction of a second once every kernel is
        compiled (``_jit.complete()``); before that, a step could compile for seconds in the
        middle of the control loop, so the change is refused until then.
        """
        if not steps or _jit.complete() or not _jit.ENABLED:
            return None
        return (f'{", ".join(name for name, _ in steps)} not compiled yet on this install: '
                'the kernels are compiling in the background (python -m robot_dynamics.compile)'
                '; set it again when the log says every kernel is compiled')

    def _build(self, values, urdf):
        arm = self._build_arm(values, urdf)
        check(self.PARAMS, values, len(arm.joints))   # the per-joint sizes, now known
        return arm, self.configure(values, arm)

    def _configure(self, urdf):
        self.arm, config = self._build(self.values, urdf)
        self.urdf = urdf
        self.apply(config)
        self.warm_up(self.pending_warm_up(config))
        if self.COMPILE_REST:   # before the loop's real-time settings, which a child inherits
            self.background_compile.start(self)
        self.become_realtime()
        self.get_logger().info(f'ready: {self.arm.model.nv} joints {list(self.arm.joints)}, '
                               f"{self.arm.model.base} -> {self.arm.model.tip or '(whole tree)'}")

    def become_realtime(self):
        """The real-time settings (the first time only), then frozen collections (module doc)."""
        if self.realtime is None:
            self.realtime = realtime.apply(self.values, self.get_logger())
        self.collections.freeze()

    def realtime_health(self):
        """/diagnostics values: each real-time setting's outcome and the collector's state."""
        settings = {f'realtime_{name}': done for name, done in (self.realtime or {}).items()}
        return {**settings, **self.collections.health()}

    def foreign_state(self, names, ours_at, now):
        """A joint state naming none of our joints (``names``): warn if ours are not coming.

        ``ours_at``: when the last state naming ours was accepted (None: never), on the clock
        of ``now``. A WARN at most every FOREIGN_PERIOD while none came for that long: a name
        mismatch (a prefix?) would otherwise leave the node silent for good; another
        publisher's states (a gripper's) beside the arm's are no news.
        """
        if ours_at is not None and now - ours_at < FOREIGN_PERIOD:
            return
        self.get_logger().warning(
            f'joint_states carry none of the joints {list(self.arm.joints)}, got '
            f'{list(names)}: nothing to do until they do (check the joint names, e.g. a prefix)',
            throttle_duration_sec=FOREIGN_PERIOD)

    def _on_description(self, msg):
        if self.urdf is not None:
            if msg.data != self.urdf:
                self.get_logger().warning('robot_description changed: restart to use it')
            return
        try:
            self._configure(msg.data)
        except ConfigError as error:
            self.get_logger().error(f'cannot use robot_description: {error}')

    def _on_set_parameters(self, params):
        changed = {p.name: parameter_value(p) for p in params}
        if USE_SIM_TIME in changed:
            if changed.pop(USE_SIM_TIME) != self.sim_time:
                return SetParametersResult(successful=False, reason=(
                    f'{USE_SIM_TIME} is read at start (the node\'s timeouts would jump between '
                    'the wall clock and /clock): restart the node to change it'))
        values = {**self.values, **changed}
        try:
            check(self.PARAMS, values)
            if self.urdf is not None:
                arm, config = self._build(values, self.urdf)
                pending = self.pending_warm_up(config)
                reason = self.refuse_uncompiled(pending)
                if reason is not None:
                    raise ConfigError(reason)
        except ConfigError as error:
            return SetParametersResult(successful=False, reason=str(error))
        self.values = values
        if self.urdf is not None:
            self.arm = arm
            self.apply(config)
            self.warm_up(pending)
        return SetParametersResult(successful=True)

    def configure(self, values, arm):
        raise NotImplementedError

    def apply(self, config):
        raise NotImplementedError

    def spin(self, executor, stopped):
        """Process callbacks until stopped() (checked at least every 0.1 s)."""
        while not stopped():
            executor.spin_once(timeout_sec=0.1)

    def finish(self):
        """The node's last act on a graceful stop, after its last callback (``main``)."""


class ManagedArmNode(LifecycleNodeMixin, ArmNode):
    """An ArmNode that answers joint states, with the managed-node lifecycle (module docstring).

    Subclasses subscribe with ``subscribe_joint_states(depth)``, set ``reader`` (a
    CdrJointStateReader) and ``diagnostics``, define the steps of the state loop ``on_state``
    (``compiled``, ``interpreted``, ``after``), call ``start()`` last in their constructor
    (instead of ``load_model``), and have ``finish()`` (the last act of an active node) and
    ``clear()`` (forget the configuration).
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
            self.foreign_state(self.reader.message_names, ours_at, self.seconds())
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

    def clear(self):
        """Forget the configuration built from the model (a cleanup)."""
        raise NotImplementedError

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


def executor():
    """rclpy's C++ events executor where available (Kilted), else the SingleThreadedExecutor.

    The events executor takes less CPU per message than the other (make bench-nodes measures
    it); Jazzy has only the SingleThreadedExecutor.
    """
    try:
        from rclpy.experimental import EventsExecutor
        return EventsExecutor()
    except ImportError:
        return SingleThreadedExecutor()


def main(node_class, args=None):
    """Run one node until SIGINT/SIGTERM; a configuration error at start exits with status 1.

    Either signal stops the spin; the node then does its last act (``finish``, where it has
    one: the controller's safe final command) with rclpy's context still valid (rclpy's own signal
    handlers are off, which Jazzy's rclpy 7 and Kilted's 9 both allow), and exits. A signal
    while the node is still being built (numba may be compiling) stops it at once: it has
    published nothing yet. The exit status is what ``node.spin(executor, stopped)`` returns
    (None: 0); 0 after a signal.
    """
    rclpy.init(args=sys.argv if args is None else args,
               signal_handler_options=SignalHandlerOptions.NO)
    stop, running = [], []

    def on_signal(signum, frame):
        stop.append(signum)
        if not running:
            raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 <pid>: print where every thread is
    try:
        stop_with_launcher()
        node = node_class()
        running.append(True)
    except (ConfigError, ParameterException) as error:
        rclpy.logging.get_logger(node_class.NAME).fatal(str(error))
        return end_early(1)
    except KeyboardInterrupt:
        rclpy.logging.get_logger(node_class.NAME).info('stopped while starting')
        return end_early(0)
    spinner = executor()
    spinner.add_node(node)
    status = 1   # an exception out of spin
    try:
        status = node.spin(spinner, lambda: bool(stop)) or 0
        return status
    finally:
        try:
            getattr(node, 'finish', lambda: None)()   # nodes that are not ArmNodes have none
        finally:
            tear_down(node, spinner, status)


PR_SET_PDEATHSIG = 1   # linux/prctl.h


def stop_with_launcher():
    """SIGINT (a graceful stop) when the launching process dies, if it asked for it.

    ``robot_dynamics.run`` (and so the tests) set ROBOT_DYNAMICS_LAUNCHER_PID to its pid: a
    launcher killed outright (SIGKILL, a test's timeout) must not leave its nodes running.
    """
    launcher = os.environ.get(LAUNCHER)
    if not launcher or not sys.platform.startswith('linux'):
        return
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGINT))
    if os.getppid() != int(launcher):   # it died before the prctl
        os.kill(os.getpid(), signal.SIGINT)


TEARDOWN_TIMEOUT = 5.0   # s


def tear_down(node, spinner, status):
    """Destroy the executor, the node and rclpy's context, bounded in time.

    The node has done its last act by now. rclpy's teardown has been seen to hang in
    ``destroy_node`` (once in some hundred stops of the simulator under the events executor),
    inside rcl with the GIL held, so no Python thread can act on it. After TEARDOWN_TIMEOUT,
    faulthandler's watchdog (a C thread) writes where every thread is to stderr, and a C
    library timer (``exit_later``) ends the process with the status it would have had: a
    process that outlives its stop looks dead-locked to its launcher.
    """
    cancel = exit_guard(status)
    spinner.shutdown()
    node.destroy_node()
    rclpy.try_shutdown()
    cancel()


def end_early(status):
    """End a process whose node was never built whole: ``status``, within TEARDOWN_TIMEOUT.

    The partly built node's handles go with the interpreter's exit, where rclpy's teardown can
    hang as in ``tear_down`` (seen once: a refused recorder still running after 90 s). The
    guard stays armed through that exit.
    """
    exit_guard(status)
    rclpy.try_shutdown()
    return status


def exit_guard(status):
    """After TEARDOWN_TIMEOUT: where every thread is, to stderr; then ``_exit(status)``.

    Both act without the GIL (faulthandler's C watchdog, ``exit_later``). Returns the cancel.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    faulthandler.dump_traceback_later(TEARDOWN_TIMEOUT, file=sys.stderr)
    cancel_exit = exit_later(TEARDOWN_TIMEOUT + 0.5, status)

    def cancel():
        faulthandler.cancel_dump_traceback_later()
        cancel_exit()
    return cancel


CLOCK_MONOTONIC, SIGEV_THREAD = 1, 2   # time.h, signal.h (Linux)


class SigEvent(ctypes.Structure):
    """``struct sigevent`` of Linux (64 bytes) for SIGEV_THREAD: the function and its argument."""

    _fields_ = [('value', ctypes.c_void_p), ('signo', ctypes.c_int), ('notify', ctypes.c_int),
                ('function', ctypes.c_void_p), ('attributes', ctypes.c_void_p),
                ('padding', ctypes.c_byte * 32)]


class TimeSpec(ctypes.Structure):
    _fields_ = [('seconds', ctypes.c_long), ('nanoseconds', ctypes.c_long)]


def exit_later(seconds, status):
    """``_exit(status)`` after ``seconds``, from a thread of the C library; returns its cancel.

    POSIX ``timer_create`` with SIGEV_THREAD calls ``_exit`` on a thread that never takes the
    GIL, so the exit happens even while the main thread blocks in C holding it. Where the C
    library has no ``timer_create`` (not Linux), nothing is armed.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if not sys.platform.startswith('linux') or not hasattr(libc, 'timer_create'):
        return lambda: None
    event = SigEvent(value=status, notify=SIGEV_THREAD,
                     function=ctypes.cast(libc._exit, ctypes.c_void_p).value)
    timer = ctypes.c_void_p()
    if libc.timer_create(CLOCK_MONOTONIC, ctypes.byref(event), ctypes.byref(timer)) != 0:
        return lambda: None
    whole = int(seconds)
    due = (TimeSpec * 2)(TimeSpec(0, 0), TimeSpec(whole, int((seconds - whole) * 1e9)))
    libc.timer_settime(timer, 0, due, None)
    return lambda: libc.timer_delete(timer)
