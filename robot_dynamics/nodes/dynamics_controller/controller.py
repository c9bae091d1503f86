"""dynamics_controller: gravity compensation, computed torque and task-space control.

One std_msgs/Float64MultiArray on effort_controller/commands (``joints`` order, what ros2_control's
JointGroupEffortController consumes) per accepted joint state. This module owns the node: its
parameters (``DynamicsController.PARAMS``), the joint-state and reference callbacks, the rate
limit and clamp of every command, the stale-state ramp and the final command on a stop. The
control laws are robot_dynamics.core.control and core.task_control; the reference tracked
(reference), power and force limiting (speed_limiter), the task-space modes (task_space) and
the loop's health (loop_health) are modules of their own here, contact safety and the payload
modules of nodes.common.
Behaviour, topics and parameters: doc/nodes/dynamics_controller.md.
"""
import dataclasses
import math
import time

import numpy as np
from builtin_interfaces.msg import Time
from rclpy.duration import Duration
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory as JointTrajectoryMsg

import robot_dynamics as rd
from robot_dynamics.core.control import ComputedTorque, GravityCompensation, VelocityFilter
from robot_dynamics.core.limits import limit_command
from robot_dynamics.core.collision import Comply, Reaction

from ..common import cdr, contact_safety, payload, profiles
from ..common.cdr import CdrJointStateReader, Float64MultiArrayWriter
from ..common.diagnostics import ERROR, OK, WARN, Diagnostics, inertia_health
from ..common.joint_states import COMMAND_QOS, BadInput, JointStateReader, all_finite, seconds
from ..common.node import ManagedArmNode, main as run_node
from ..common.parameters import ConfigError
from ..common.schema import load
from . import command_cycle, speed_limiter, task_space
from .command_cycle import CommandCycle
from .command_output import CommandOutput
from .loop_health import LoopHealth, comply_damping, natural_frequency
from .reference import Reference, trajectory_from_msg, within_limits
from .watchdog import STALE_TICK, StateWatchdog

GRAVITY_COMPENSATION, COMPUTED_TORQUE = 'gravity_compensation', 'computed_torque'
STOP_RAMP = 1.0          # s: longest ramp to the final command on a graceful stop
ACK_WAIT = 1.0           # s: longest wait for the final command's acknowledgements
BANDWIDTH = 20.0         # rad/s: computed torque's default ω (kp = ω², kd = 2 ζ ω, ζ = 1)
COUNTERS = ('commands', 'rejected_states', 'rejected_references', 'clamped_commands',
            'rate_limited_commands', 'non_finite_commands', 'timeouts', 'collisions')


@dataclasses.dataclass(frozen=True)
class Config:
    mode: str
    gravity_compensation: GravityCompensation
    computed_torque: ComputedTorque
    effort_limits: np.ndarray         # model order, inf where unlimited
    max_effort_rate: float            # N m/s
    profile: profiles.Profile         # what the command and the efforts mean on this arm
    safety: contact_safety.Safety
    task: object = None               # the task-space law of a task-space mode (task_space)
    pfl: speed_limiter.LimiterConfig = None   # power and force limiting (speed_limiter.py)
    velocity_filter_cutoff: float = 0.0       # Hz, 0: the control laws get the measured q̇


def joint_gains(values, arm):
    """Computed torque's (kp, kd) in model order (the schema refuses negative ones).

    They are accelerations per error (1/s², 1/s), so one default fits every arm: empty kp is
    BANDWIDTH² (400) for every joint, empty kd 2 √kp (critically damped: 40 by default).
    """
    kp = (arm.per_joint(values, 'kp') if len(values['kp'])
          else np.full(arm.model.nv, BANDWIDTH ** 2))
    kd = arm.per_joint(values, 'kd') if len(values['kd']) else 2.0 * np.sqrt(kp)
    return kp, kd


def integral_gains(values, arm, limits):
    """(ki, integral_limit) in model order (the schema refuses negative ones)."""
    ki = arm.per_joint(values, 'ki') if len(values['ki']) else 0.0
    limit = arm.per_joint(values, 'integral_limit') if len(values['integral_limit']) else limits
    return ki, limit


def check_model(model):
    """ConfigError unless g(q) and M(q) are finite and M(q) positive definite at a mid pose."""
    q = model.neutral_position
    ok, smallest = inertia_health(rd.mass_matrix(model, q))
    if not ok or not np.isfinite(rd.gravity(model, q)).all():
        raise ConfigError(f'the model (with its payload) is not physical: smallest eigenvalue of '
                          f'M(q) {smallest:.3g} at q = {q.tolist()}')


class DynamicsController(ManagedArmNode):
    """Joint states in, one effort command out; mode switchable at run time."""

    NAME = 'dynamics_controller'
    PARAMS = load(NAME)

    def __init__(self, **options):
        self.config = self.reader = self.cycle = None
        self.reference = Reference()
        self.q_last, self.t_last = None, None   # the newest accepted state's q and stamp
        super().__init__(self.NAME, **options)
        self.diagnostics = Diagnostics(self, 'effort commands', COUNTERS, ('compute', 'state_age'))
        self.watchdog = StateWatchdog(self.create_timer, lambda: self.seconds(),
                                      self.ramp_to_final, self.stopped_commanding)
        self.publisher = self.create_publisher(Float64MultiArray, 'effort_controller/commands',
                                               COMMAND_QOS)
        self.output = CommandOutput(
            self.publisher, self.create_publisher(Time, '~/command_stamp', COMMAND_QOS),
            self.diagnostics, self.get_logger(), self.warn, self.get_clock(),
            self.watchdog.commanded)
        # depth 1: a controller acts on the newest state and skips any it could not serve
        self.subscribe_joint_states(1)
        self.create_subscription(JointTrajectoryMsg, '~/joint_trajectory', self.on_trajectory, 10)
        self.create_subscription(JointState, '~/reference', self.on_reference, 10)
        self.payload_topic = payload.subscribe(self)
        context = self.component_context(self.diagnostics, lambda: self.q_last)
        self.limiter = speed_limiter.SpeedLimiter(context)
        self.task = task_space.TaskSpace(context, self.limiter)
        self.identification = payload.PayloadService(self)
        self.collision = contact_safety.CollisionMonitor(context)
        self.loop = LoopHealth()
        self.settle = None   # the law while the loop is latched unstable (loop_health)
        self.observer = self.velocity_filter = None
        self.create_service(Trigger, '~/reset', self.on_reset)
        self.start()

    # -- configuration -------------------------------------------------------------------------
    def configure(self, values, arm):
        check_model(arm.model)
        limits = arm.model.effort_limit
        if len(values['effort_limits']):
            limits = arm.per_joint(values, 'effort_limits')
        kp, kd = joint_gains(values, arm)
        ct = ComputedTorque(arm.model, kp, kd, *integral_gains(values, arm, limits))
        gravity = GravityCompensation(arm.model, values['friction_compensation'],
                                      values['friction_deadband'])
        safety = contact_safety.configure(values, arm, limits)
        return Config(values['mode'], gravity, ct, np.array(limits),
                      float(values['max_effort_rate']), profiles.profile(values, arm),
                      safety, task_space.configure(values, arm),
                      speed_limiter.configure(values, arm.model,
                                              speed_limiter.contact_drive(values, kp, kd)),
                      float(values['velocity_filter_cutoff']))

    def apply(self, config):
        self.task.apply(config.task)
        previous = self.config and self.config.computed_torque
        if config.mode != (self.config and self.config.mode):
            self.get_logger().info(f'mode: {config.mode}')
            self.hold()   # config's integral starts from 0
            self.task.hold(self.q_last)
        elif previous and config.computed_torque:   # another parameter: the integral goes on
            config.computed_torque.continue_from(previous)
        if self.config is None or \
                config.velocity_filter_cutoff != self.config.velocity_filter_cutoff:
            self.velocity_filter = VelocityFilter(config.velocity_filter_cutoff) \
                if config.velocity_filter_cutoff > 0.0 else None
        self.config = config
        self.limiter.apply(config.pfl)
        detecting = config.safety.detection is not None
        self.reader = CdrJointStateReader(self.arm.model.joint_names, finite=(
            'position', 'velocity') + (('effort',) if detecting else ()))
        self.output.apply(config, self.arm.model, self.arm.order)
        self.identification.configure(self.values, self.arm, config.profile)
        self.configure_detection(config.safety)
        self.cycle = self.compiled_cycle(config)
        self.watchdog.configure(self.values['state_timeout'])

    def compiled_cycle(self, config):
        """The CommandCycle for this configuration on the fast path, None where it cannot serve.

        It serves gravity compensation (without friction compensation), computed torque
        (without the integral term) and the task-space modes (a law that does not refuse
        singular poses) on a model without mimic joints, an arm that does not add its own
        gravity compensation, without collision detection or a velocity filter.
        """
        if not self.values['fast_path'] or self.arm.model.mimic \
                or config.profile.compensates_gravity or self.observer is not None \
                or self.velocity_filter is not None:
            return None
        gravity, ct, task = config.gravity_compensation, config.computed_torque, config.task
        if task is not None:
            if not (task.singular_damping > 0.0 or task.singular_cutoff > 0.0):
                return None
            law, control = command_cycle.TASK, task
        elif config.mode == GRAVITY_COMPENSATION and not gravity.friction_compensation:
            law, control = command_cycle.GRAVITY, gravity
        elif config.mode == COMPUTED_TORQUE and not ct.ki.any():
            law, control = command_cycle.COMPUTED_TORQUE, ct
        else:
            return None
        out = self.output
        return CommandCycle(law, control, self.reader, config.effort_limits, self.arm.order,
                            out.tau_last, out.writer.data, out.clamped)

    def warm_up(self):
        q = self.arm.model.neutral_position
        zero = np.zeros_like(q)
        self.config.gravity_compensation(q, zero)
        self.config.computed_torque(q, zero, q, zero, zero)
        self.config.profile.command(q, zero)
        task_space.warm_up(self.arm.model)
        contact_safety.warm_up(self.config.safety)
        speed_limiter.warm_up(self.config.pfl, self.arm.model)
        cdr.warm_up(self.arm.model.joint_names)
        if self.cycle is not None:
            command_cycle.warm_up(self.arm.model, self.arm.model.joint_names,
                                  self.config.effort_limits, self.arm.order)
        limit_command(zero, zero.copy(), math.inf, self.config.effort_limits, self.arm.order,
                      Float64MultiArrayWriter(len(q)).data, np.zeros(len(q), bool))

    def configure_detection(self, safety):
        """The observer and detector for ``collision.*`` (observer None when off)."""
        self.collision.configure(safety.detection, self.arm.model, safety.reaction)
        timeout = min(self.values['state_timeout'], safety.max_gap)
        if safety.detection is None:
            self.observer = None
        elif self.observer is None:
            self.observer = contact_safety.ResidualObserver(self.arm.model, safety.observer_gain,
                                                            timeout)
        else:
            self.observer.configure(self.arm.model, safety.observer_gain, timeout)

    def clear(self):
        """A cleanup: the model's configuration and the state it was tracking are gone."""
        self.watchdog.stop()
        self.config = self.cycle = self.q_last = self.t_last = None
        self.reference.hold(None)
        self.output.writer = None   # buffers for the next model's joints

    def hold(self):
        """Bumpless: hold the last measured position (nothing before the first state)."""
        self.reset_integral()
        self.reference.hold(self.q_last)

    def reset_integral(self):
        """Computed torque's integral term starts again from 0 (a new hold, a lost state)."""
        if self.config is not None:
            self.config.computed_torque.reset()

    # -- inputs --------------------------------------------------------------------------------
    def run_cycle(self, data):
        """The state through the compiled cycle, if it serves it; False: it left it untouched.

        It serves a state while commanding in its configuration (``compiled_cycle``), with no
        collision latched and no trajectory or task target on PFL's scaled clock, stamped in
        order; it does what ``on_state`` does for such a state.
        """
        cycle, limiter = self.cycle, self.limiter
        header = cdr.header_stamp(data)
        if cycle is None or not self.watchdog.commanding or self.reaction() is not Reaction.NONE \
                or limiter.enabled or limiter.reference is not None or header is None:
            return False
        received = time.perf_counter()   # wall time: this process's compute time per state
        sec, nanosec = header
        t, now = sec + 1e-9 * nanosec, self.seconds()
        if not t or self.stamp_error(t, now) is not None:
            return False
        stamp = sec * 10**9 + nanosec
        tracking, task = cycle.law == command_cycle.COMPUTED_TORQUE, cycle.law == command_cycle.TASK
        target = self.reference.at(t).sample(t) if tracking else \
            self.task.cycle_target() if task else None
        if task and target is None:
            return False
        status = cycle.run(data, target, self.output.effort_step(now, stamp))
        if status < 0:
            return False
        q, v, effort = cycle.state()
        self.diagnostics.received()
        self.output.serialized, self.t_last, self.q_last = True, t, q
        self.watchdog.accepted(now)
        if tracking:
            limiter.state = (q, v)
        self.identification.add(q, v, effort)
        if task:
            self.task.served(q, v, t, cycle.condition[0])
        self.output.published(status, now, stamp)
        self.output.beat(sec, nanosec)
        self.diagnostics.time(time.perf_counter() - received, self.clock_time() - t)
        return True

    def on_state(self, read, msg, serialized):
        """One joint state, read by ``read``: checks, control law, command (both paths)."""
        received = time.perf_counter()   # wall time: this process's compute time per state
        self.diagnostics.received()
        if self.config is None:
            self.get_logger().warning('no model yet: waiting for robot_description',
                                      throttle_duration_sec=2.0)
            return
        self.output.serialized = serialized
        try:
            state = read(msg)
            if state is None:
                self.foreign_state(self.reader.message_names, self.watchdog.last_state,
                                   self.seconds())
                return
            q, v, effort, (sec, nanosec) = state
            t = (sec + 1e-9 * nanosec) or self.clock_time()
            self.check_stamp(t)
            self.on_valid_state(q, t)
            self.identification.add(q, v, effort)
            self.detect_collision(q, v, effort, t)
            tau = self.control(q, v, t)
        except BadInput as error:
            self.diagnostics.count('rejected_states')
            self.warn(f'joint_states ignored: {error}')
            return
        # exact differences of stamps: integer nanoseconds
        if self.output.publish(tau, q, self.seconds(), (sec * 10**9 + nanosec) or None):
            self.output.beat(sec, nanosec)
            self.diagnostics.time(time.perf_counter() - received, self.clock_time() - t)

    def check_stamp(self, t):
        """Out of order or a clock jump while commanding: BadInput (see the module docstring)."""
        if not self.watchdog.commanding or self.t_last is None:
            return
        error = self.stamp_error(t, self.seconds())
        if error is not None:
            raise BadInput(error)

    def stamp_error(self, t, now):
        """Why a state stamped t, at the node's time now, is refused while commanding (or None)."""
        if t < self.t_last:
            return f'out of order: stamped {self.t_last - t:.4f} s before the newest'
        allowed = now - self.watchdog.last_state + self.values['state_timeout']
        if t - self.t_last > allowed:
            return (f'stamp jumped {t - self.t_last:.4f} s ahead (more than {allowed:.4f} s of '
                    'node time and state_timeout)')
        return None

    def on_valid_state(self, q, t):
        self.t_last = t
        self.watchdog.accepted(self.seconds())
        if not self.watchdog.commanding and self.q_last is not None:
            self.get_logger().info('joint states are back: commanding again')
            self.reference.hold(q)
            self.reset_integral()
            if self.velocity_filter is not None:
                self.velocity_filter.reset()
            self.task.hold(q)
        self.q_last = q
        if self.reference.current is None:
            self.reference.hold(q)

    def measured_effort(self, q, effort):
        """The joint torques the arm measured (model order), from joint_states' effort."""
        return self.config.profile.joint_torque(q, effort)

    def detect_collision(self, q, v, effort, t):
        """One observer and detector sample; on a new collision, start the reaction."""
        if self.observer is None:
            return
        if v is None or effort is None:
            raise BadInput('collision detection needs velocity and effort for every joint')
        residual = self.observer.update(t, q, v, self.measured_effort(q, effort))
        event = self.collision.update(t, residual, q)
        if event is None:
            return
        self.diagnostics.count('collisions')
        reaction = self.config.safety.reaction
        if reaction is not Reaction.NONE:
            self.reference.hold(rd.stop_reference(q)[0])
            self.reset_integral()
        self.get_logger().error(f'{event}; reaction: {reaction.value}'
                                + ('' if reaction is Reaction.NONE else ' until ~/reset'))

    def reaction(self):
        """The reaction in force: COMPLY while the loop is latched unstable, else the collision's.

        The unstable loop: nodes.loop_health; the collision's: while one is latched.
        """
        if self.loop.unstable is not None:
            return Reaction.COMPLY
        if self.collision.event is None:
            return Reaction.NONE
        return self.config.safety.reaction

    def control(self, q, v, t):
        if self.velocity_filter is not None and v is not None:
            v = self.velocity_filter(v, t)
        reaction = self.reaction()
        if reaction is Reaction.COMPLY:
            comply = self.settle if self.loop.unstable is not None else self.config.safety.comply
            return (comply or self.config.gravity_compensation)(q, v)
        if self.config.mode == GRAVITY_COMPENSATION and reaction is not Reaction.STOP:
            return self.config.gravity_compensation(q, v)
        if self.config.task is not None and reaction is not Reaction.STOP:
            return self.task.control(q, v, t)
        if v is None:
            raise BadInput('computed_torque needs joint velocities')
        reference = self.reference.at(t)
        tau = self.config.computed_torque(q, v, *self.limiter.sample(reference, t, q, v), t=t)
        if not all_finite(tau):
            self.diagnostics.count('non_finite_commands')
            self.get_logger().error('non-finite computed torque: holding the measured position, '
                                    'publishing g(q)', throttle_duration_sec=1.0)
            self.reference.hold(q)
            self.reset_integral()
            tau = self.config.gravity_compensation(q)
        return tau

    def on_trajectory(self, msg):
        if not self.tracking('joint_trajectory'):
            return
        start = seconds(msg.header.stamp) or self.t_last  # zero: now, on the states' clock
        if start < self.t_last:   # sampled from a past start, the reference would step
            self.warn(f'joint_trajectory stamped {self.t_last - start:.3f} s before the newest '
                      'joint state: it starts now')
            start = self.t_last
        if not msg.points:
            self.hold()
            self.get_logger().info('empty joint_trajectory: holding the current position')
            return
        # a trajectory slowed by PFL: blended from as slowed
        current = self.limiter.blend_source(self.reference.blend_source(start))
        try:
            timed = trajectory_from_msg(msg, self.arm.model, start, current)
            timed.trajectory = contact_safety.feasible(self.config.safety, timed.trajectory,
                                                       self.get_logger().info)
        except BadInput as error:
            self.diagnostics.count('rejected_references')
            self.warn(str(error))
            return
        self.reference.follow(timed)
        self.get_logger().info(f'joint_trajectory: {len(msg.points)} points, '
                               f'{timed.trajectory.duration:.3f} s, from {start:.6f} s')

    def on_reference(self, msg):
        if not self.tracking('reference'):
            return
        try:
            q, v, _ = JointStateReader(self.arm.model.joint_names).read(msg) or (None,) * 3
            if q is None:
                raise BadInput(f'reference names none of the joints {list(self.arm.joints)}')
            within_limits(self.arm.model, q, 'reference')
            setpoint = contact_safety.streamed(self.config.safety, self.reference.current,
                                               self.t_last, q)
        except BadInput as error:
            self.diagnostics.count('rejected_references')
            self.warn(f'reference ignored: {error}')
            return
        self.reference.stream(setpoint)

    def tracking(self, what):
        if not self.active:
            self.diagnostics.count('rejected_references')
            self.warn(f'{what} ignored: the controller is not active (lifecycle)')
            return False
        if self.config is None or self.config.mode != COMPUTED_TORQUE or self.q_last is None:
            self.diagnostics.count('rejected_references')
            self.warn(f'{what} ignored: tracking needs mode computed_torque and joint states')
            return False
        if self.reaction() is not Reaction.NONE:
            self.diagnostics.count('rejected_references')
            self.warn(f'{what} ignored: stopped by a collision until ~/reset')
            return False
        return True

    def on_reset(self, request, response):
        """~/reset: clear a latched collision; tracking resumes holding the current position."""
        unstable = self.loop.unstable
        self.loop.reset()
        event = self.collision.reset() or unstable
        if event is None:
            response.success, response.message = True, 'no collision latched'
            return response
        if self.q_last is not None:
            self.hold()
        response.success = True
        response.message = f'reset after {event}: holding the current position'
        self.get_logger().info(response.message)
        return response

    # -- outputs -------------------------------------------------------------------------------
    def ramp_to_final(self):
        """One step, at max_effort_rate, toward the final command g(q_last); True once there."""
        return self.output.ramp_to(self.config.gravity_compensation(self.q_last), self.q_last,
                                   self.seconds())

    def stopped_commanding(self):
        self.diagnostics.count('timeouts')
        self.get_logger().error(
            f"no joint_states for {self.values['state_timeout']} s: published a final gravity "
            'compensation command for the last pose and stopped commanding')

    def finish(self):
        """A graceful stop (SIGINT, SIGTERM): end on the final command g(q_last), then exit.

        It ramps there as after state_timeout, for at most STOP_RAMP (wall time), then publishes it
        unlimited, and waits up to ACK_WAIT for reliable subscribers to acknowledge it. The
        heartbeat has stopped with the last command that answered a state. Nothing while not
        commanding: no state yet, or the stale check already ended on that command.
        """
        if not self.watchdog.commanding or self.config is None:
            return
        # wall time: the process must end even if /clock stopped (the ramp's Δt is the node's
        # time, so under use_sim_time without /clock the final command comes after STOP_RAMP)
        deadline = time.monotonic() + STOP_RAMP
        while not self.ramp_to_final():
            if time.monotonic() > deadline:
                self.output.published_at = None   # no rate limit: the final command at once
                self.ramp_to_final()
                break
            time.sleep(STALE_TICK)
        self.watchdog.stop()
        self.publisher.wait_for_all_acked(Duration(seconds=ACK_WAIT))
        self.get_logger().info('stopping: published the final gravity compensation command for '
                               'the last pose')

    def health(self):
        """(level, message, values) for /diagnostics, with the model check at the last pose."""
        level, message, values = OK, f'commanding ({self.values["mode"]})', {}
        if not self.active:
            return WARN, 'not active (lifecycle): not commanding', {}
        if self.config is None:
            return WARN, 'waiting for robot_description', {}
        if not self.watchdog.commanding:
            level, message = ERROR, 'not commanding: no recent joint_states'
        if self.q_last is not None:
            ok, smallest = inertia_health(rd.mass_matrix(self.arm.model, self.q_last))
            values['mass_matrix_min_eigenvalue'] = round(smallest, 6)
            if not ok:
                level, message = ERROR, 'model unhealthy: M(q) not positive definite'
        warning, task = self.task.health()
        if warning and level == OK:
            level, message = WARN, warning
        loop_level, loop_message, loop = self.loop_health()
        if loop_level > level:
            level, message = loop_level, loop_message
        if self.collision.event is not None:
            reaction = self.config.safety.reaction
            level = WARN if reaction is Reaction.NONE else ERROR
            message = f'{self.collision.event} (reaction: {reaction.value})'
        return level, message, {'mode': self.values['mode'], **values, **task, **loop,
                                **self.collision.health()}

    def loop_health(self):
        """nodes.loop_health's check of this report; the instability is logged when latched."""
        was = self.loop.unstable
        counts = self.diagnostics.counts
        result = self.loop.check(
            natural_frequency(self.config.mode, self.config.computed_torque, self.task.law),
            self.diagnostics.last_rate, self.loop.ages(self.diagnostics.latency, 1),
            counts['commands'], counts['clamped_commands'] + counts['rate_limited_commands'])
        if self.loop.unstable is not None and was is None:
            model, delay = self.arm.model, self.loop.delay or 0.0
            self.settle = Comply(model, comply_damping(rd.mass_matrix(model, self.q_last), delay))
            self.get_logger().error(f'{self.loop.unstable}: complying (gravity compensation '
                                    f'plus joint damping for a {1e3 * delay:.1f} ms delay) '
                                    f'until ~/reset')
        return result


def main(args=None):
    return run_node(DynamicsController, args)


if __name__ == '__main__':
    raise SystemExit(main())
