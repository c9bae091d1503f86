"""The node base class ``ArmNode``: parameters, the model, validated updates, the time policy.

A node is parameters -> core objects -> publishers. Every node builds its whole configuration
from a dict of parameter values in one function; the on-set callback runs that same function on
the proposed values, so a bad value is rejected with the function's reason and the node keeps
the configuration it had (see ``ArmNode``).

Time: every interval that decides behaviour (a timeout, a rate limit's Δt, a window) is read
from ``ArmNode.monotonic_time``, and every comparison with a joint state's stamp from
``ArmNode.clock_time``. With ``use_sim_time`` (rclpy's parameter, read at start: a change is
refused) both are the newest /clock time, e.g. arm_simulator's: time stands still while /clock
does. Without it, ``monotonic_time`` is the monotonic wall clock (ROS time would be the system
clock, which NTP may step) and ``clock_time`` the system clock, what stamps are compared against.
rclpy's timers (``create_timer``) run on the node's ROS clock, so on /clock under use_sim_time,
once per due time (``timers``: Kilted's events executor may call a due timer in a burst).
Wall time stays only where a node measures itself: its CPU time per message, its latency, its
log throttling, and its own shutdown.
"""
import abc
import math
import re
import time

from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionServer
from rclpy.node import Node
from std_msgs.msg import String

from ...core import _jit, warm_up
from .arm import ArmBuilder
from .background_compile import BackgroundCompile
from .context import Context
from .joint_states import DESCRIPTION_QOS
from . import realtime
from .parameters import MODEL_PARAMS, ConfigError, check, declare_parameters, parameter_value
from .timers import called_when_due


USE_SIM_TIME = 'use_sim_time'   # rclpy's parameter: the node's clock is /clock
FOREIGN_PERIOD = 5.0   # s: joint states without our joints for this long are worth a warning


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


class ArmNode(Node, metaclass=abc.ABCMeta):
    """A node on one arm model: parameters, the model (parameter or topic), validated updates.

    Subclasses set PARAMS, implement the abstract ``configure`` and ``apply``, and call
    ``load_model()`` at the end of __init__. configure and apply run when the model arrives and
    on every accepted parameter change.
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
                       self.get_clock(), lambda: self.monotonic_time(), newest_state, diagnostics,
                       self.create_publisher, self.create_subscription, self.create_timer,
                       self.destroy_timer, self.create_service, lambda: self.arm,
                       self.set_parameters_atomically,
                       lambda *args, **kwargs: ActionServer(self, *args, **kwargs))

    def create_timer(self, timer_period_sec, callback, *args, **kwargs):
        """rclpy's timer on the node's clock, its callback run once per due time (``timers``)."""
        return called_when_due(super().create_timer, timer_period_sec, callback, *args, **kwargs)

    def monotonic_time(self):
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

    @abc.abstractmethod
    def configure(self, values, arm):
        """The node's configuration of parameter ``values`` on ``arm``; ConfigError: refused."""

    @abc.abstractmethod
    def apply(self, config):
        """Put ``config`` (configure's, already validated) in use."""

    def spin(self, executor, stopped):
        """Process callbacks until stopped() (checked at least every 0.1 s)."""
        while not stopped():
            executor.spin_once(timeout_sec=0.1)

    def finish(self):
        """The node's last act on a graceful stop, after its last callback (``main``)."""
