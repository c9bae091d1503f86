"""arm_simulator: a simulated arm driven by effort commands, paced by the wall clock.

This module owns the node: its parameters (``ArmSimulator.PARAMS``), the step loop and its pacing
against the wall clock (``Pace``, lock step, ``/clock``), the command watchdog and the brakes, and
the joint states it reports, through the hardware profile. The physics is an engine of
robot_dynamics.simulation (internal or MuJoCo), the plant's layers nodes.plant_parameters.
Behaviour, topics and parameters: doc/nodes/arm_simulator.md.
"""
import dataclasses
import math
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import WrenchStamped
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

import robot_dynamics as rd
from robot_dynamics.core.control import clamp_effort
from robot_dynamics.simulation import simulate
from robot_dynamics.simulation.mujoco_engine import import_mujoco
from robot_dynamics.simulation.timing_faults import Faults, TimingFaults

from ..common import profiles
from ..common.arm import ArmBuilder
from ..common.cdr import JointStateWriter, read_float64_array, serialized_time
from ..common.diagnostics import Percentiles
from ..common.joint_states import COMMAND_QOS, to_array
from ..common.node import ArmNode
from ..common.process import main as run_node
from ..common.parameters import ConfigError, check
from ..common.schema import load
from ..common.writers import other_writers
from .plant_parameters import make_plant, plant_urdf, with_profile

SLIP = 0.5  # s behind the wall clock before the deadlines are re-anchored
FLOW_WINDOW = 0.1   # s: commands "flow" while one came within this long (or command_wait)
STOP_TIME = 0.01    # s: the watchdog stop's velocity time constant below stop_deceleration
COMMANDS = 'effort_controller/commands'
REST = 1e-3         # rad/s (m/s): every joint slower than this, the stopped arm is at rest
# /clock as rclpy's and rclcpp's time sources subscribe to it (rclcpp::ClockQoS)
CLOCK_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                       reliability=ReliabilityPolicy.BEST_EFFORT)


@dataclasses.dataclass(frozen=True)
class Config:
    damping: np.ndarray     # model order, N m s/rad
    initial: np.ndarray     # model order
    model: object           # the simulated arm (Arm.model: payload and joint terms included)
    payload: dict           # the payload it carries (Arm.payload, None: none)
    profile: profiles.Profile   # the arm's interface, simulated the other way round
    urdf: str = None        # the plant's URDF (plant_parameters.plant_urdf)
    plant: object = None    # simulation.plant.Plant: delay, extra friction, sensors
    timeout_steps: float = math.inf   # command_timeout in steps (inf: no watchdog)
    faults: Faults = Faults()   # timing faults on the way to the controller

    def same_arm(self, other):
        """Whether an engine built for ``other`` simulates this arm (damping, payload, joints)."""
        return other is not None and all(np.array_equal(a, b) for a, b in
                                         zip(self._arm(), other._arm()))

    def _arm(self):
        m, load = self.model, self.payload or {}
        return (self.damping, m.inertia, m.armature, m.viscous, m.coulomb, m.coulomb_velocity,
                m.stiction, m.stribeck_velocity,
                self.payload is None, *(load.get(k, 0.0) for k in ('mass', 'com', 'inertia')))


class ArmSimulator(ArmNode):
    """Integrates the arm at ``rate`` Hz and publishes joint_states every step."""

    NAME = 'arm_simulator'
    PARAMS = load(NAME)

    def __init__(self, **options):
        self.config = self.engine = self.plant = None
        self.external = None   # (wrench (6,), 'base' or 'tip') or None
        super().__init__(self.NAME, **options)   # options: rclpy Node keywords
        self._build_plant = ArmBuilder()
        self.dt = 1.0 / self.values['rate']   # before load_model: apply() builds the engine
        self.braked = self.values['brakes']
        self.stopping = False      # the watchdog has tripped: the drive is stopping the arm
        self.clock = 0             # steps simulated: the arm's own clock (t = clock dt)
        self.deadline = math.inf   # the watchdog trips on the step after this one
        self.trips = 0             # times it tripped
        self.commands = 0          # effort commands taken
        self.answered = 0          # ... when the newest state was published
        self.awaiting = False      # a state went out at the newest step: its answer is due
        self.faults = None         # TimingFaults, if any
        self.locked = False        # lock step: each step waits for the newest state's answer
        self.publisher = self.create_publisher(JointState, 'joint_states', COMMAND_QOS)
        self.clock_publisher = self.create_publisher(Clock, '/clock', CLOCK_QOS) \
            if self.values['publish_clock'] else None
        raw = self.values['fast_path']
        self.create_subscription(Float64MultiArray, 'effort_controller/commands',
                                 self.on_serialized_command if raw else self.on_command,
                                 COMMAND_QOS, raw=raw)
        self.create_subscription(WrenchStamped, '~/external_wrench', self.on_wrench, 10)
        self.diagnostics = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self.loop_latency = Percentiles(('loop_latency',), size=2000)
        # wall time: the loop latency and the command wait measure how this process and the
        # controller keep up with the wall clock the simulation is paced by
        self.published_at = self.previous_published_at = self.commanded_at = time.monotonic()
        self.stamp = (0, 0)   # (sec, nanosec) of the last state published
        self.writers = []     # the command topic's publishers, when more than one
        self.load_model()

    def configure(self, values, arm):
        n = arm.model.nv
        damping = arm.per_joint(values, 'joint_damping') if len(values['joint_damping']) \
            else np.zeros(n)
        if len(values['initial_position']):
            initial = arm.per_joint(values, 'initial_position')
        else:
            initial = arm.model.neutral_position
        if values['engine'] == 'mujoco':
            try:
                import_mujoco()
            except ImportError as error:
                raise ConfigError(str(error)) from None
        timeout = values['command_timeout']
        try:
            faults = Faults(**{k: values[f'faults.{k}'] for k in (
                'delay', 'jitter', 'drop', 'bunch', 'stall', 'stall_period', 'seed')})
        except ValueError as error:
            raise ConfigError(str(error)) from None
        return Config(damping, initial, arm.model, arm.payload, profiles.profile(values, arm),
                      plant=make_plant(values, arm, initial, self.dt),
                      timeout_steps=max(1, round(timeout / self.dt)) if timeout else math.inf,
                      faults=faults)

    def _build(self, values, urdf):
        """The simulated arm is the plant: the profile's values on the plant's URDF."""
        given = getattr(self, '_parameter_overrides', {})   # as declare_parameters reads them
        values = with_profile(values, self._build_arm.base_model(values, urdf), given)
        xml = plant_urdf(values, urdf)
        arm = self._build_plant(values, xml)
        check(self.PARAMS, values, len(arm.joints))   # the per-joint sizes, now known
        return arm, dataclasses.replace(self.configure(values, arm), urdf=xml)

    def apply(self, config):
        """Build the engine; rebuild it at the current state when damping or payload change."""
        if config.same_arm(self.config):
            self.config = config
            return
        arm, m = self.arm, self.arm.model
        start = config.initial if self.engine is None else arm.to_model(self.engine.q)
        engine = simulate(self.values['engine'], config.model, arm.joints, arm.to_joints(start),
                          self.dt, damping=arm.to_joints(config.damping), urdf_xml=config.urdf,
                          payload=config.payload, end_stops=self.values['end_stops'])
        if self.engine is None:
            self.plant = config.plant   # plant.* are read-only: its delay line and RNG stay
            self.faults = TimingFaults(config.faults, self.dt) if config.faults.any else None
            self.tau = np.zeros(m.nv)       # clamped command, model order
            self.effort = np.zeros(m.nv)    # reported joint torque, joints order
            self.sensed_effort = np.zeros(m.nv)   # the same in model order (sensed_step's)
            self.state = JointState(name=list(arm.joints))
            self.writer = JointStateWriter(arm.joints) if self.values['fast_path'] else None
        else:
            engine.set_state(self.engine.q, self.engine.v)
            self.get_logger().info('simulated arm changed (damping, payload or joint terms): '
                                   'engine rebuilt')
        self.engine, self.config = engine, config
        #: the internal engine's compiled step serves an arm that reports its joint torques
        self.sensed = (self.values['fast_path'] and self.values['engine'] == 'internal'
                       and not config.model.mimic and not config.profile.compensates_gravity
                       and config.profile.measured_effort == profiles.TORQUE)

    def warm_up_steps(self, config, every_mode=False):
        return [(f'{self.values["engine"]} engine', lambda: self.warm_up_engine(config))]

    def warm_up_engine(self, config):
        """Compile (or load) what a step calls, on a copy of the engine: braked and running.

        The plant's friction too (a pure function); not its delay line or sensors (their state).
        """
        arm, zero = self.arm, np.zeros(self.arm.model.nv)
        engine = simulate(self.values['engine'], config.model, arm.joints, self.engine.q,
                          self.dt, damping=arm.to_joints(config.damping), urdf_xml=config.urdf,
                          payload=config.payload, end_stops=self.values['end_stops'])
        q = arm.to_model(engine.q)
        self.plant.friction(engine.v)
        wrenches = [(None, 'base')] + ([(np.ones(6), 'tip')] if arm.model.tip else [])
        for wrench, frame in wrenches:
            engine.holding_torque(wrench, frame)
            self.stop_torque(engine, wrench, frame)
            if self.sensed:
                engine.sensed_step(zero, zero, zero.copy(), wrench, frame)
            else:
                config.profile.reported_effort(q, config.profile.command(q, zero))
                engine.step(zero, wrench, frame)

    # -- inputs --------------------------------------------------------------------------------
    def on_command(self, msg):
        """A deserialized command (the plain path)."""
        self.command(np.array(msg.data, dtype=float))

    def on_serialized_command(self, data):
        """A command's CDR bytes (the fast path)."""
        self.command(read_float64_array(data))

    def command(self, tau):
        """The effort command τ (joints order) from now on, if it is one."""
        if self.config is None:
            return
        if tau.shape != (self.arm.model.nv,) or not np.isfinite(tau).all():
            self.get_logger().warning(f'command ignored: needs {self.arm.model.nv} finite '
                                      f'values, got {tau.tolist()}', throttle_duration_sec=1.0)
            return
        self.commanded_at = time.monotonic()
        self.commands += 1
        self.locked = self.values['lock_step']
        self.deadline = self.clock + self.config.timeout_steps
        self.loop_latency.add(self.commanded_at - self.published_at)
        self.tau, clamped = clamp_effort(self.arm.to_model(tau), self.arm.model.effort_limit)
        if clamped.any():
            self.get_logger().warning(f'command saturated at the effort limits: {tau.tolist()}',
                                      throttle_duration_sec=1.0)
        if self.stopping or self.braked:
            resumed = self.trips > 0
            self.braked = self.stopping = False
            self.get_logger().info('effort commands resumed: brakes released, stop ended'
                                   if resumed else 'first effort command: brakes released')

    def on_wrench(self, msg):
        if self.config is None:
            return
        m, w = self.arm.model, msg.wrench
        references = {m.base: 'base', m.tip: 'tip'}   # make_engine's wrench_frame
        wrench = np.array([w.torque.x, w.torque.y, w.torque.z, w.force.x, w.force.y, w.force.z])
        if msg.header.frame_id not in references or m.tip is None or \
                not np.isfinite(wrench).all():
            self.get_logger().warning(f'external_wrench ignored: needs frame_id {m.base} or '
                                      f'{m.tip} and finite values', throttle_duration_sec=1.0)
            return
        self.external = (wrench, references[msg.header.frame_id]) if wrench.any() else None
        self.get_logger().info(f'external wrench {wrench.tolist()} in {msg.header.frame_id}')

    # -- simulation ----------------------------------------------------------------------------
    def step(self):
        """Advance the engine by one time step unless braked; set ``effort`` in joints order.

        Past the watchdog's deadline, the drive's own stop instead of the command.
        """
        sim = self.engine
        wrench, frame = self.external or (None, 'base')
        self.clock += 1
        if self.clock > self.deadline and not self.braked:
            self.trip()
        if self.stopping:
            self.stop_step(wrench, frame)
        if self.braked:
            self.hold(wrench, frame)
            return
        if self.stopping:
            return
        q, v = sim.q, sim.v
        command = self.plant.command(self.tau)   # the plant's delay (of any order: model's)
        try:
            if self.sensed:
                self.sensed_step(command, v, wrench, frame)
            else:
                self.profiled_step(command, q, v, wrench, frame)
        except ValueError as error:  # a diverged state: stop rather than publish garbage
            sim.set_state(q, np.zeros_like(v))
            self.braked = True
            self.get_logger().error(f'simulation diverged ({error}): brakes engaged')

    def hold(self, wrench, frame):
        """Braked: the state stays; the effort is the torque the brakes hold."""
        arm = self.arm
        held = arm.to_model(self.engine.holding_torque(wrench, frame))
        q_model = arm.to_model(self.engine.q)
        self.effort = arm.to_joints(self.config.profile.reported_effort(q_model, held))

    def trip(self):
        """No command for command_timeout: the drive stops the arm (one warning per stop)."""
        self.deadline, self.stopping = math.inf, True
        self.trips += 1
        self.plant.delay.line.clear()   # the line refills with the next command
        topic = self.resolve_topic_name('effort_controller/commands')
        self.get_logger().warning(
            f"no effort command on {topic} for command_timeout {self.values['command_timeout']} "
            f"s (simulated time): the last one is no longer applied; the drive stops the arm at "
            f"{self.values['stop_deceleration']} rad/s^2 and engages the brakes")

    def stop_torque(self, engine, wrench, frame):
        """The stop's joint torque (model order, within the effort limits): module docstring."""
        arm, m = self.arm, self.config.model
        q, v = arm.to_model(engine.q), arm.to_model(engine.v)
        limit = self.values['stop_deceleration']
        a = -np.clip(v / max(STOP_TIME, self.dt), -limit, limit)
        tau = rd.rnea(m, q, v, a) + self.config.damping * v
        if wrench is not None:   # − Jᵀ F: the engine's holding torque less gravity
            tau += arm.to_model(engine.holding_torque(wrench, frame)) - rd.gravity(m, q)
        return clamp_effort(tau, m.effort_limit)[0]

    def stop_step(self, wrench, frame):
        """One step of the watchdog's stop; at rest, the brakes engage."""
        sim, arm, config = self.engine, self.arm, self.config
        v = sim.v
        if np.abs(v).max(initial=0.0) <= REST:
            sim.set_state(sim.q, np.zeros_like(v))
            self.stopping, self.braked = False, True
            self.get_logger().info(f'arm stopped at {np.round(sim.q, 4).tolist()}: brakes '
                                   'engaged until the next effort command')
            return
        tau = self.stop_torque(sim, wrench, frame)
        torque = tau - config.damping * arm.to_model(v)
        self.effort = arm.to_joints(config.profile.reported_effort(arm.to_model(sim.q), torque))
        try:
            sim.step(arm.to_joints(tau) - self.plant.friction(v), wrench, frame)
        except ValueError as error:
            sim.set_state(sim.q, np.zeros_like(v))
            self.stopping, self.braked = False, True
            self.get_logger().error(f'simulation diverged ({error}): brakes engaged')

    def sensed_step(self, command, v, wrench, frame):
        """The internal engine's compiled step, for an arm that reports its joint torques."""
        try:
            self.engine.sensed_step(command, self.arm.to_model(self.plant.friction(v)),
                                    self.sensed_effort, wrench, frame)
        finally:
            self.effort = self.arm.to_joints(self.sensed_effort)

    def profiled_step(self, command, q, v, wrench, frame):
        """The step through the hardware profile (any engine): τ = command (+ g_robot(q))."""
        arm, profile = self.arm, self.config.profile
        q_model = arm.to_model(q)
        tau = command + profile.robot_gravity(q_model) if profile.compensates_gravity \
            else command
        torque = tau - self.config.damping * arm.to_model(v)
        self.effort = arm.to_joints(profile.reported_effort(q_model, torque))
        self.engine.step(arm.to_joints(tau) - self.plant.friction(v), wrench, frame)

    def publish(self, stamp):
        self.previous_published_at, self.published_at = self.published_at, time.monotonic()
        self.stamp = sec, nanosec = divmod(int(round(stamp * 1e9)), 10**9)
        self.publish_clock(sec, nanosec)
        sensed = self.plant.sense(self.engine.q, self.engine.v, self.effort)
        states = [(sec, nanosec, *sensed)] if self.faults is None else \
            self.faults.due(self.clock, (sec, nanosec, *(np.array(x) for x in sensed)))
        self.awaiting = bool(states)
        if states:
            self.answered = self.commands
        for state in states:
            self.publish_state(*state)

    def publish_state(self, sec, nanosec, q, v, effort):
        """One joint state: bytes or a message."""
        if self.writer is not None:
            self.publisher.publish(self.writer.serialized(sec, nanosec, q, v, effort))
            return
        s = self.state
        s.header.stamp.sec, s.header.stamp.nanosec = sec, nanosec
        s.position, s.velocity, s.effort = to_array(q), to_array(v), to_array(effort)
        self.publisher.publish(s)

    def publish_clock(self, sec, nanosec):
        """/clock at the simulated time (sec, nanosec), if ``publish_clock``: bytes or a message.

        A rosgraph_msgs/Clock is one builtin_interfaces/Time: its CDR is the stamp's.
        """
        if self.clock_publisher is None:
            return
        if self.writer is not None:
            self.clock_publisher.publish(serialized_time(sec, nanosec))
            return
        clock = Clock()
        clock.clock.sec, clock.clock.nanosec = sec, nanosec
        self.clock_publisher.publish(clock)

    def spin(self, executor, stopped):
        """Fixed-step loop paced by the wall clock (callbacks run in wait_for_step)."""
        while self.config is None:
            if stopped():
                return
            executor.spin_once(timeout_sec=0.1)
        pace = Pace(self.dt, self.values['real_time_factor'])
        self.publish(pace.stamp())
        next_report = time.monotonic() + 1.0
        next_log = time.monotonic() + self.values['log_period']
        while not stopped():
            self.wait_for_step(executor, pace, stopped)
            self.step()
            pace.tick()
            self.publish(pace.stamp())
            if time.monotonic() >= next_report:
                next_report += 1.0
                report = {**pace.report(), **self.loop_latency.stats()}
                self.check_writers()
                self.publish_diagnostics(report)
                if time.monotonic() >= next_log:
                    next_log += self.values['log_period']
                    self.get_logger().info(', '.join(f'{k} {v}' for k, v in report.items()))

    def wait_for_step(self, executor, pace, stopped=bool):
        """Take callbacks until the next step is due (at least one round of them per step).

        A step is due when its deadline has passed and, in lock step, the newest state has been
        answered (``wait_for_answer``); otherwise, when a command has come since the state
        before the newest one (the controller may lag one step, not more), or ``command_wait``
        has passed, or no commands flow (braked, or none for ``flow_window``).
        """
        executor.spin_once(timeout_sec=max(pace.remaining(), 0.0))
        while (remaining := pace.remaining()) > 0:
            executor.spin_once(timeout_sec=remaining)
        if self.values['lock_step']:
            self.wait_for_answer(executor, stopped)
            return
        wait = self.values['command_wait']
        give_up, flow_window = time.monotonic() + wait, max(FLOW_WINDOW, wait)
        while (self.commanded_at < self.previous_published_at and not self.braked
               and time.monotonic() - self.commanded_at < flow_window
               and (left := give_up - time.monotonic()) > 0):
            executor.spin_once(timeout_sec=left)

    def wait_for_answer(self, executor, stopped):
        """Lock step: until a command has come since the newest state was published.

        A controller silent for lock_step_timeout releases the lock until its next command;
        a stop request (``stopped()``) ends the wait.
        """
        give_up = time.monotonic() + self.values['lock_step_timeout']
        while self.locked and self.awaiting and not self.braked and \
                self.commands == self.answered and not stopped():
            left = give_up - time.monotonic()
            if left <= 0:
                self.locked = False
                self.get_logger().warning(
                    f"lock step released: no effort command answered the state stamped "
                    f"{self.stamp[0] + 1e-9 * self.stamp[1]:.3f} within lock_step_timeout "
                    f"{self.values['lock_step_timeout']} s; the arm runs on until the "
                    f"controller commands again")
                return
            executor.spin_once(timeout_sec=min(left, 0.1))

    def check_writers(self):
        """Once a second: more than one publisher on the command topic is a WARN (one per set).

        A drive takes one stream of commands; two controllers' would reach it interleaved.
        """
        found = other_writers(self, COMMANDS)
        found = found if len(found) > 1 else []
        if found and found != self.writers:
            self.get_logger().warning(
                f"{len(found)} publishers on {self.resolve_topic_name(COMMANDS)}: "
                f"{', '.join(found)}; their commands reach the arm interleaved (one controller "
                'per command topic)')
        self.writers = found

    def publish_diagnostics(self, report):
        report = {'engine': self.values['engine'], 'rate_hz': self.values['rate'], **report,
                  'command_publishers': self.writers, **self.realtime_health()}
        message = 'braked' if self.braked else 'stopping' if self.stopping else 'running'
        if self.writers:
            message = f"{message}; {len(self.writers)} publishers on {COMMANDS}: " \
                f"{', '.join(self.writers)}"
        status = DiagnosticStatus(
            level=DiagnosticStatus.WARN if self.writers else DiagnosticStatus.OK,
            name=f'{self.get_name()}: simulation', message=message,
            hardware_id=self.values['tip'],
            values=[KeyValue(key=k, value=str(v)) for k, v in report.items()])
        array = DiagnosticArray(status=[status])
        array.header.stamp.sec, array.header.stamp.nanosec = self.stamp
        self.diagnostics.publish(array)


class Pace:
    """Deadlines w₀ + k dt / real_time_factor on the monotonic clock, stamps t₀ + k dt.

    At real_time_factor 0 there are no deadlines. It keeps the pacing's statistics.

    The stamps are simulated time, anchored at the system clock at start. Behind the wall clock
    the steps run back to back; more than SLIP behind, the deadlines (not the stamps) are
    re-anchored, counted as a slip.
    """

    def __init__(self, dt, factor=1.0):
        self.dt, self.k = dt, 0
        self.period = dt / factor if factor else 0.0   # wall time per step (0: unpaced)
        self.wall0, self.stamp0 = time.monotonic(), time.time()
        self.overruns = self.slips = 0
        self.worst = 0.0
        self.window = (self.wall0, 0)    # (wall time, step) at the last report

    def remaining(self):
        """Wall time until the deadline of the next step, s (negative: late)."""
        return self.wall0 + (self.k + 1) * self.period - time.monotonic()

    def tick(self):
        """Step k -> k+1 done: count it as an overrun if it finished a period late."""
        lateness = -self.remaining()
        self.worst = max(self.worst, lateness)
        if self.period and lateness > self.period:
            self.overruns += 1
        if self.period and lateness > SLIP:
            self.slips += 1
            self.wall0 += lateness
        self.k += 1

    def stamp(self):
        return self.stamp0 + self.k * self.dt

    def report(self):
        """Real-time factor since the last report, counters, worst lateness (then reset)."""
        now = time.monotonic()
        factor = (self.k - self.window[1]) * self.dt / (now - self.window[0])
        self.window = (now, self.k)
        report = {'real_time_factor': round(factor, 3), 'overruns': self.overruns,
                  'slips': self.slips, 'worst_lateness_ms': round(self.worst * 1e3, 2),
                  'simulated_time_s': round(self.k * self.dt, 3)}
        self.worst = 0.0
        return report


def main(args=None):
    return run_node(ArmSimulator, args)


if __name__ == '__main__':
    raise SystemExit(main())
