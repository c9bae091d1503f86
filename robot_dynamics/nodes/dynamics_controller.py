"""dynamics_controller: gravity compensation or computed torque on effort_controller/commands.

One std_msgs/Float64MultiArray (``joints`` order, what ros2_control's
JointGroupEffortController consumes) per accepted joint state. The control laws are
robot_dynamics.core.control; this node maps messages and parameters onto them.

Stale joint states (none for ``state_timeout``): a JointGroupEffortController keeps applying the
last command it received, forever. So the last command must be a safe one to hold: the node
publishes one final τ = g(q) at the last measured pose (no feedback or feedforward terms that
could drive the arm), logs an error and publishes nothing more until states return. The arm then
floats, gravity-compensated, where it was; it is not braked. When states return, computed torque
resumes by holding the position it finds (bumpless). A real arm needs its own watchdog too (e.g.
Franka's communication-loss reflex).
"""
import dataclasses
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, Header
from trajectory_msgs.msg import JointTrajectory as JointTrajectoryMsg

from robot_dynamics.core.control import ComputedTorque, GravityCompensation, clamp_effort
from robot_dynamics.core.trajectory import JointTrajectory

from .common import (COMMAND_QOS, MODEL_PARAMS, STATE_PARAMS, ArmNode, BadInput, ConfigError,
                     JointStateReader, Param, Percentiles, all_finite, main as run_node, seconds,
                     state_qos, to_array)

GRAVITY_COMPENSATION, COMPUTED_TORQUE = 'gravity_compensation', 'computed_torque'


@dataclasses.dataclass(frozen=True)
class Config:
    mode: str
    gravity_compensation: GravityCompensation
    computed_torque: ComputedTorque   # None without gains
    effort_limits: np.ndarray         # model order, inf where unlimited


class Setpoint:
    """A constant reference (q_d, v_d, a_d = 0): hold a position or a streamed setpoint."""

    def __init__(self, q, v=None):
        self.q = np.array(q, dtype=float)
        self.v = np.zeros_like(self.q) if v is None else np.array(v, dtype=float)
        self.a = np.zeros_like(self.q)

    def sample(self, t):
        return self.q, self.v, self.a


class TimedTrajectory:
    """A JointTrajectory started at time ``start`` (s, the clock of joint_states stamps)."""

    def __init__(self, trajectory, start):
        self.trajectory, self.start = trajectory, start

    def sample(self, t):
        return self.trajectory.sample(t - self.start)


def trajectory_from_msg(msg, joint_names, start, current):
    """trajectory_msgs/JointTrajectory -> TimedTrajectory in model order.

    When the first point is later than the start, the current reference at the start is
    prepended as point 0, so the reference is continuous when the new trajectory takes over.
    """
    names = list(msg.joint_names)
    if sorted(names) != sorted(joint_names):
        raise BadInput(f'joint_trajectory names {names} must be exactly the joints '
                       f'{list(joint_names)}')
    index = [names.index(j) for j in joint_names]
    n = len(names)

    def field(name, required):
        rows = [getattr(p, name) for p in msg.points]
        if not required and all(len(r) == 0 for r in rows):
            return None
        if any(len(r) != n for r in rows):
            raise BadInput(f'every point needs {n} {name} (or, except positions, none)')
        return [np.asarray(r, dtype=float)[index] for r in rows]

    times = [p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in msg.points]
    q, v, a = field('positions', True), field('velocities', False), field('accelerations', False)
    if times[0] > 0:
        q0, v0, a0 = current.sample(start)
        times, q = [0.0] + times, [q0] + q
        v = None if v is None else [v0] + v
        a = None if a is None else [a0] + a
    try:
        return TimedTrajectory(JointTrajectory(times, q, v, a), start)
    except ValueError as error:
        raise BadInput(f'joint_trajectory: {error}') from None


class DynamicsController(ArmNode):
    """Joint states in, one effort command out; mode switchable at run time."""

    NAME = 'dynamics_controller'
    PARAMS = MODEL_PARAMS + STATE_PARAMS + (
        Param('mode', GRAVITY_COMPENSATION, 'string', 'control law; switching to computed_torque '
              'holds the current position until a trajectory or reference arrives',
              choices=(GRAVITY_COMPENSATION, COMPUTED_TORQUE)),
        Param('kp', [], 'double[]', 'computed torque position gains, 1/s^2 (critically damped '
              'with kd = 2 sqrt(kp)); needed for computed_torque', per_joint=True),
        Param('kd', [], 'double[]', 'computed torque velocity gains, 1/s', per_joint=True),
        Param('effort_limits', [], 'double[]', 'commands are clamped to +-limit, N m (N); '
              'empty: the URDF effort limits', per_joint=True),
    )

    def __init__(self):
        self.config = self.reader = self.reference = self.pending = None
        self.q_last, self.last_state, self.commanding = None, None, False
        self.published = self.rejected = self.clamped = 0
        self.latency = Percentiles(('compute', 'state_age'))
        self.t_last, self.checked_at = None, time.monotonic()
        super().__init__(self.NAME)
        self.publisher = self.create_publisher(Float64MultiArray, 'effort_controller/commands',
                                               COMMAND_QOS)
        self.diagnostics = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self.command = Float64MultiArray()
        # depth 1: a controller acts on the newest state and skips any it could not serve
        self.create_subscription(JointState, 'joint_states', self.on_joint_state,
                                 state_qos(self.values['joint_states_reliability'], 1))
        self.create_subscription(JointTrajectoryMsg, '~/joint_trajectory', self.on_trajectory, 10)
        self.create_subscription(JointState, '~/reference', self.on_reference, 10)
        self.create_timer(0.02, self.check_stale)
        self.create_timer(1.0, self.publish_diagnostics)
        self.load_model()

    # -- configuration -------------------------------------------------------------------------
    def configure(self, values, arm):
        limits = arm.model.effort_limit
        if len(values['effort_limits']):
            limits = arm.per_joint(values, 'effort_limits')
            if (limits <= 0).any():
                raise ConfigError(f"effort_limits must be > 0, got {values['effort_limits']}")
        ct = None
        if len(values['kp']) or len(values['kd']):
            kp, kd = arm.per_joint(values, 'kp'), arm.per_joint(values, 'kd')
            for name, gain in (('kp', kp), ('kd', kd)):
                if (gain < 0).any():
                    raise ConfigError(f'{name} must be >= 0, got {values[name]}')
            ct = ComputedTorque(arm.model, kp, kd)
        if values['mode'] == COMPUTED_TORQUE and ct is None:
            raise ConfigError('computed_torque needs kp and kd, one value per joint')
        return Config(values['mode'], GravityCompensation(arm.model), ct, np.array(limits))

    def apply(self, config):
        if config.mode != (self.config and self.config.mode):
            self.get_logger().info(f'mode: {config.mode}')
            self.pending = None
            self.reference = self.hold()
        self.config = config
        self.reader = JointStateReader(self.arm.model.joint_names, ('position', 'velocity'))

    def hold(self):
        """Bumpless reference: hold the last measured position (None before the first state)."""
        return None if self.q_last is None else Setpoint(self.q_last)

    # -- inputs --------------------------------------------------------------------------------
    def on_joint_state(self, msg):
        received = time.perf_counter()
        if self.config is None:
            self.get_logger().warning('no model yet: waiting for robot_description',
                                      throttle_duration_sec=2.0)
            return
        try:
            state = self.reader.read(msg)
            if state is None:
                return
            q, v, _ = state
            t = seconds(msg.header.stamp) or time.time()
            self.on_valid_state(q, t)
            tau = self.control(q, v, t)
        except BadInput as error:
            self.rejected += 1
            self.warn(f'joint_states ignored: {error}')
            return
        if self.publish(tau):
            self.latency.add(time.perf_counter() - received, time.time() - t)

    def on_valid_state(self, q, t):
        self.last_state, self.t_last = time.monotonic(), t
        if not self.commanding and self.q_last is not None:
            self.get_logger().info('joint states are back: commanding again')
            self.reference, self.pending = Setpoint(q), None
        self.q_last = q
        if self.reference is None:
            self.reference = Setpoint(q)

    def control(self, q, v, t):
        if self.config.mode == GRAVITY_COMPENSATION:
            return self.config.gravity_compensation(q)
        if v is None:
            raise BadInput('computed_torque needs joint velocities')
        if self.pending is not None and t >= self.pending.start:
            self.reference, self.pending = self.pending, None
        return self.config.computed_torque(q, v, *self.reference.sample(t))

    def on_trajectory(self, msg):
        if not self.tracking('joint_trajectory'):
            return
        start = seconds(msg.header.stamp) or self.t_last  # zero: now, on the states' clock
        if not msg.points:
            self.reference, self.pending = Setpoint(self.q_last), None
            self.get_logger().info('empty joint_trajectory: holding the current position')
            return
        current = self.pending if self.pending and start >= self.pending.start else self.reference
        try:
            self.pending = trajectory_from_msg(msg, self.arm.model.joint_names, start, current)
        except BadInput as error:
            self.warn(str(error))
            return
        self.get_logger().info(f'joint_trajectory: {len(msg.points)} points, '
                               f'{self.pending.trajectory.duration:.3f} s')

    def on_reference(self, msg):
        if not self.tracking('reference'):
            return
        try:
            q, v, _ = JointStateReader(self.arm.model.joint_names).read(msg) or (None,) * 3
            if q is None:
                raise BadInput(f'reference names none of the joints {list(self.arm.joints)}')
        except BadInput as error:
            self.warn(f'reference ignored: {error}')
            return
        self.reference, self.pending = Setpoint(q, v), None

    def tracking(self, what):
        if self.config is None or self.config.mode != COMPUTED_TORQUE or self.q_last is None:
            self.warn(f'{what} ignored: tracking needs mode computed_torque and joint states')
            return False
        return True

    # -- outputs -------------------------------------------------------------------------------
    def publish(self, tau):
        """Publish τ in joints order, clamped; never NaN. Returns whether it was published."""
        if not all_finite(tau):
            self.get_logger().error(f'non-finite effort {tau}: not published',
                                    throttle_duration_sec=1.0)
            return False
        tau, clamped = clamp_effort(tau, self.config.effort_limits)
        if clamped.any():
            self.clamped += 1
            names = [n for n, c in zip(self.arm.model.joint_names, clamped) if c]
            self.warn(f'effort clamped at {names}')
        self.command.data = to_array(self.arm.to_joints(tau))
        self.publisher.publish(self.command)
        self.published += 1
        self.commanding = True
        return True

    def check_stale(self):
        """Stop commanding after state_timeout without joint states (timer, every 20 ms)."""
        now = time.monotonic()
        slept, self.checked_at = now - self.checked_at > 0.1, now
        if slept:  # this process itself did not run: let states queued meanwhile in first
            return
        if not self.commanding or now - self.last_state < self.values['state_timeout']:
            return
        self.publish(self.config.gravity_compensation(self.q_last))
        self.commanding = False
        self.get_logger().error(
            f"no joint_states for {self.values['state_timeout']} s: published a final gravity "
            'compensation command for the last pose and stopped commanding')

    def publish_diagnostics(self):
        level, message = DiagnosticStatus.OK, f'commanding ({self.values["mode"]})'
        if self.config is None:
            level, message = DiagnosticStatus.WARN, 'waiting for robot_description'
        elif not self.commanding:
            level, message = DiagnosticStatus.ERROR, 'not commanding: no recent joint_states'
        values = {'mode': self.values['mode'], 'commands': self.published,
                  'rejected_states': self.rejected, 'clamped_commands': self.clamped,
                  **self.latency.stats()}
        status = DiagnosticStatus(level=level, name=f'{self.get_name()}: effort commands',
                                  message=message, hardware_id=self.values['tip'],
                                  values=[KeyValue(key=k, value=str(x)) for k, x in values.items()])
        self.diagnostics.publish(DiagnosticArray(header=self.header(), status=[status]))

    def header(self):
        return Header(stamp=self.get_clock().now().to_msg())


def main(args=None):
    return run_node(DynamicsController, args)


if __name__ == '__main__':
    raise SystemExit(main())
