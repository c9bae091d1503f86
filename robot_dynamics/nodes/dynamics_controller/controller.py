"""dynamics_controller: gravity compensation, computed torque and task-space control.

One std_msgs/Float64MultiArray on effort_controller/commands (``joints`` order, what ros2_control's
JointGroupEffortController consumes) per accepted joint state. This module is the node: its
callbacks and its cycle per state, glue around its components, modules of their own here:
configuration (parameters -> Config), reference, command_output (rate limit, clamp,
publication), watchdog (state loss, final command), reactions (collision, unstable loop),
cartesian_modes, speed_limiter (PFL), command_cycle (the compiled path), trajectory_action
(~/follow_joint_trajectory), controller_state (~/controller_state); contact_safety and payload
are nodes.common's. The control laws are robot_dynamics.core.control and core.task_control.
Behaviour, topics and parameters: doc/nodes/dynamics_controller.md.
"""
import time

from builtin_interfaces.msg import Time
from rclpy.duration import Duration
from rclpy.lifecycle import TransitionCallbackReturn
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory as JointTrajectoryMsg

import robot_dynamics as rd
from robot_dynamics.core.control import VelocityFilter
from robot_dynamics.core.collision import Reaction

from ..common import cdr, contact_safety, payload
from ..common.cdr import CdrJointStateReader
from ..common.diagnostics import ERROR, OK, WARN, Diagnostics, inertia_health
from ..common.joint_states import COMMAND_QOS, BadInput, JointStateReader, all_finite, to_seconds
from ..common.lifecycle import ManagedArmNode
from ..common.process import main as run_node
from ..common.schema import load
from ..common.writers import GRAPH_PERIOD, discovered_writers, other_writers
from . import (command_cycle, configuration, controller_state, speed_limiter, cartesian_modes,
               trajectory_action)
from .command_output import CommandOutput
from .configuration import COMPUTED_TORQUE, GRAVITY_COMPENSATION
from .limits import Ceiling
from .reactions import Reactions
from .reference import Reference, trajectory_start, within_limits
from .watchdog import StateWatchdog

STOP_RAMP = 1.0          # s: longest ramp to the final command on a graceful stop
ACK_WAIT = 1.0           # s: longest wait for the final command's acknowledgements
COUNTERS = ('commands', 'rejected_states', 'rejected_references', 'clamped_commands',
            'rate_limited_commands', 'non_finite_commands', 'timeouts', 'collisions',
            'ignored_states')
COMMANDS = 'effort_controller/commands'


class DynamicsController(ManagedArmNode):
    """Joint states in, one effort command out; mode switchable at run time."""

    NAME = 'dynamics_controller'
    PARAMS = load(NAME)
    COMPILE_REST = True   # its mode switches at run time: every mode's kernels in the cache

    def __init__(self, **options):
        self.config = self.reader = self.cycle = self.action = None
        self.reference = Reference()
        self.q_last, self.t_last = None, None   # the newest accepted state's q and stamp
        self.ceiling = None   # the limits at configure: run time may only lower them (limits)
        self.displaced_by = None   # other writers seen on the command topic while active
        self.started = time.monotonic()   # discovery of the command topic's writers (writers)
        super().__init__(self.NAME, **options)
        self.diagnostics = Diagnostics(self, 'effort commands', COUNTERS, ('compute', 'state_age'))
        self.watchdog = StateWatchdog(self.create_timer, lambda: self.monotonic_time(),
                                      self.ramp_to_final, self.stopped_commanding)
        self.publisher = None   # created while active: an inactive controller is no writer
        self.output = CommandOutput(
            self.publisher, self.create_publisher(Time, '~/command_stamp', COMMAND_QOS),
            self.diagnostics, self.get_logger(), self.warn, self.get_clock(),
            self.watchdog.commanded)
        # depth 1: a controller acts on the newest state and skips any it could not serve
        self.subscribe_joint_states(1)
        self.source.count = lambda: self.diagnostics.count('ignored_states')
        self.create_timer(GRAPH_PERIOD, self.check_writers)
        self.create_subscription(JointTrajectoryMsg, '~/joint_trajectory', self.on_trajectory, 10)
        self.create_subscription(JointState, '~/reference', self.on_reference, 10)
        context = self.component_context(self.diagnostics, lambda: self.q_last)
        self.payload_topic = payload.subscribe(context)
        self.limiter = speed_limiter.SpeedLimiter(context)
        self.task = cartesian_modes.TaskSpace(context, self.limiter)
        self.identification = payload.PayloadService(context)
        self.reactions = Reactions(context)
        self.action = trajectory_action.TrajectoryAction(   # ~/follow_joint_trajectory
            context, self.reference, self.start_trajectory, self.tracking, self.hold)
        self.state = controller_state.ControllerState(   # ~/controller_state
            context, lambda: self.output.tau_last, lambda: self.limiter.s)
        if not self.action.available:
            self.get_logger().info(f'{self.action.missing}: {trajectory_action.MISSING}; '
                                   f'{controller_state.FALLBACK}')
        self.tracked = None   # (q_d, q̇_d, q̈_d) computed torque tracked on the plain path
        self.velocity_filter = None
        self.create_service(Trigger, '~/reset', self.on_reset)
        self.start()

    # -- configuration -------------------------------------------------------------------------
    def configure(self, values, arm):
        """The parameters' Config (ArmNode); at run time, limits no higher than at configure."""
        config = configuration.configure(values, arm)
        if self.ceiling is not None:
            self.ceiling.check(config, values)
        return config

    def apply(self, config):
        if self.ceiling is None:   # the lifecycle's configure (or the model's arrival)
            self.ceiling = Ceiling(config, self.values)
        self.source.select(self.values['joint_states_sources'])
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
        self.reactions.configure(config.safety, self.arm.model, self.values['state_timeout'])
        self.cycle = None if not self.fast_path(self.values, config) else command_cycle.choose(
            config, self.arm.model, self.reader, self.output, self.arm.order)
        self.watchdog.configure(self.values['state_timeout'])
        self.state.apply(self.values['controller_state.rate'])

    @staticmethod
    def fast_path(values, config):
        """Whether ``config`` may run the compiled cycle (no observer, no velocity filter)."""
        return values['fast_path'] and config.safety.detection is None \
            and config.velocity_filter_cutoff <= 0.0

    def warm_up_steps(self, config, every_mode=False):
        return configuration.warm_up_steps(config, self.arm, self.fast_path(self.values, config),
                                           every_mode)

    def clear(self):
        """A cleanup: the model's configuration and the state it was tracking are gone."""
        self.watchdog.stop()
        self.config = self.cycle = self.q_last = self.t_last = self.ceiling = None
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

    # -- the state loop's steps (ManagedArmNode.on_state) --------------------------------------
    def compiled(self, data):
        """The compiled cycle on the bytes ``data``: what ``after`` needs, or None (declined).

        It serves a state while commanding in its configuration (``command_cycle.choose``), with no
        collision latched and no trajectory or task target on PFL's scaled clock, stamped in
        order; it leaves any other state untouched for ``interpreted``.
        """
        cycle, limiter = self.cycle, self.limiter
        if cycle is None or not self.watchdog.commanding \
                or self.reactions.reaction() is not Reaction.NONE \
                or limiter.enabled or limiter.reference is not None:
            return None
        header = cdr.header_stamp(data)
        if header is None:
            return None
        sec, nanosec = header
        t, now = sec + 1e-9 * nanosec, self.monotonic_time()
        if not t or self.stamp_error(t, now) is not None:
            return None
        stamp = sec * 10**9 + nanosec
        tracking, task = cycle.law == command_cycle.COMPUTED_TORQUE, cycle.law == command_cycle.TASK
        target = self.reference.at(t).sample(t) if tracking else \
            self.task.cycle_target() if task else None
        if task and target is None:
            return None
        self.output.serialized = True
        status = cycle.run(data, target, self.output.effort_step(now, stamp))
        if status < 0:
            return None
        q, v, effort = cycle.state()
        self.accept(q, v, effort, t, now)
        self.tracked = target if tracking else None
        if tracking:
            limiter.state = (q, v)
        if task:
            self.task.served(q, v, t, cycle.condition[0])
        self.output.published(status, now, stamp)
        return t, q, v, header

    def interpreted(self, msg, serialized):
        """The state in Python: read, checks, control law, command; None if none was published."""
        self.output.serialized = serialized
        state = self.read(msg, serialized, self.watchdog.last_state)
        if state is None:
            return None
        q, v, effort, (sec, nanosec) = state
        t, now = (sec + 1e-9 * nanosec) or self.clock_time(), self.monotonic_time()
        error = self.stamp_error(t, now)
        if error is not None:
            raise BadInput(error)
        self.accept(q, v, effort, t, now)
        self.detect_collision(q, v, effort, t)
        tau = self.control(q, v, t)
        # exact differences of stamps: integer nanoseconds
        if not self.output.publish(tau, q, self.monotonic_time(), (sec * 10**9 + nanosec) or None):
            return None
        return t, q, v, (sec, nanosec)

    def after(self, received, t, q, v, header):
        """What every published command is followed by: heartbeat, action, state, timing."""
        sec, nanosec = header
        self.output.beat(sec, nanosec)
        self.action.served(t, q, v)
        stamp = sec * 10**9 + nanosec or round(t * 1e9)
        if stamp >= self.state.due:
            self.state.publish(stamp, q, v, self.tracked)
        self.diagnostics.time(time.perf_counter() - received, self.clock_time() - t)

    def stamp_error(self, t, now):
        """Why a state stamped t, at the node's time now, is refused while commanding (or None)."""
        if not self.watchdog.commanding or self.t_last is None:
            return None
        if t < self.t_last:
            return f'out of order: stamped {self.t_last - t:.4f} s before the newest'
        allowed = now - self.watchdog.last_state + self.values['state_timeout']
        if t - self.t_last > allowed:
            return (f'stamp jumped {t - self.t_last:.4f} s ahead (more than {allowed:.4f} s of '
                    'node time and state_timeout)')
        return None

    def accept(self, q, v, effort, t, now):
        """The state (q, q̇, effort) stamped t is the newest: watchdog, reference, sample.

        now: the node's time it was taken at (``seconds``, read once per state).
        """
        self.t_last = t
        self.watchdog.accepted(now)
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
        self.identification.add(q, v, effort)

    def detect_collision(self, q, v, effort, t):
        """One observer and detector sample; on a new collision, start the reaction."""
        if self.reactions.observer is None:
            return
        if v is None or effort is None:
            raise BadInput('collision detection needs velocity and effort for every joint')
        event = self.reactions.detect(t, q, v, self.config.profile.joint_torque(q, effort))
        if event is None:
            return
        self.diagnostics.count('collisions')
        reaction = self.config.safety.reaction
        if reaction is not Reaction.NONE:
            self.reference.hold(rd.stop_reference(q)[0])
            self.reset_integral()
        self.get_logger().error(f'{event}; reaction: {reaction.value}'
                                + ('' if reaction is Reaction.NONE else ' until ~/reset'))

    def control(self, q, v, t):
        """τ for the state (q, v) stamped t; ``tracked``: the joint reference (None: none)."""
        self.tracked = None
        if self.velocity_filter is not None and v is not None:
            v = self.velocity_filter(v, t)
        reaction = self.reactions.reaction()
        if reaction is Reaction.COMPLY:
            return (self.reactions.comply() or self.config.gravity_compensation)(q, v)
        if self.config.mode == GRAVITY_COMPENSATION and reaction is not Reaction.STOP:
            return self.config.gravity_compensation(q, v)
        if self.config.task is not None and reaction is not Reaction.STOP:
            return self.task.control(q, v, t)
        if v is None:
            raise BadInput('computed_torque needs joint velocities')
        self.tracked = self.limiter.sample(self.reference.at(t), t, q, v)
        tau = self.config.computed_torque(q, v, *self.tracked, t=t)
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
        try:
            self.start_trajectory(msg)
        except BadInput as error:
            self.diagnostics.count('rejected_references')
            self.warn(str(error))

    def start_trajectory(self, msg):
        """A JointTrajectory (topic, action): its TimedTrajectory (None: empty, hold); BadInput."""
        start = trajectory_start(to_seconds(msg.header.stamp), self.t_last, self.warn)
        if not msg.points:
            self.hold()
            self.get_logger().info('empty joint_trajectory: holding the current position')
            return None
        timed = self.reference.take(   # a trajectory slowed by PFL: blended from as slowed
            msg, self.arm.model, start, self.limiter.blend_source,
            lambda path: contact_safety.feasible(self.config.safety, path, self.get_logger().info))
        self.get_logger().info(f'joint_trajectory: {len(msg.points)} points, '
                               f'{timed.trajectory.duration:.3f} s, from {start:.6f} s')
        return timed

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
        """True if a reference (``what``) can be taken now; else counted and said why not."""
        if not self.active:
            reason = 'the controller is not active (lifecycle)'
        elif self.config is None or self.config.mode != COMPUTED_TORQUE or self.q_last is None:
            reason = 'tracking needs mode computed_torque and joint states'
        elif self.reactions.reaction() is not Reaction.NONE:
            reason = 'stopped by a collision until ~/reset'
        else:
            return True
        self.diagnostics.count('rejected_references')
        self.warn(f'{what} ignored: {reason}')
        return False

    def on_reset(self, request, response):
        """~/reset: clear a latched collision; tracking resumes holding the current position."""
        event = self.reactions.reset()
        self.source.reset()
        response.success, response.message = True, 'no collision latched'
        if event is not None:
            if self.q_last is not None:
                self.hold()
            response.message = f'reset after {event}: holding the current position'
            self.get_logger().info(response.message)
        response.message += '; joint_states: the source is chosen again'
        return response

    # -- one writer on the command topic (common.writers) --------------------------------------
    def on_activate(self, state):
        """Refused while another node publishes on the command topic; else its publisher."""
        others = discovered_writers(self, COMMANDS, self.started)
        if others:
            self.get_logger().error(
                f"activation refused: {self.resolve_topic_name(COMMANDS)} already has a writer: "
                f"{', '.join(others)} (one controller per command topic: stop or deactivate it)")
            return TransitionCallbackReturn.FAILURE
        self.displaced_by = None
        self.publisher = self.output.publisher = self.create_publisher(
            Float64MultiArray, COMMANDS, COMMAND_QOS)
        return super().on_activate(state)

    def on_deactivate(self, state):
        result = super().on_deactivate(state)   # the final command (finish) first
        self.drop_publisher()
        return result

    def on_cleanup(self, state):
        self.drop_publisher()
        return super().on_cleanup(state)

    def drop_publisher(self):
        if self.publisher is not None:
            self.destroy_publisher(self.publisher)
        self.publisher = self.output.publisher = None

    def check_writers(self):
        """Every GRAPH_PERIOD while active: another writer on the command topic stops this one.

        Both streams would reach the arm interleaved: the final command, then inactive (ERROR).
        """
        if not self.active or self.publisher is None:
            return
        others = other_writers(self, COMMANDS)
        if not others:
            return
        self.displaced_by = others
        self.get_logger().error(
            f"another writer on {self.resolve_topic_name(COMMANDS)}: {', '.join(others)}; "
            'published the final gravity compensation command and deactivated (one controller '
            'per command topic: activate again once it is gone)')
        self.trigger_deactivate()

    # -- outputs -------------------------------------------------------------------------------
    def ramp_to_final(self):
        """One step, at max_effort_rate, toward the final command g(q_last); True once there."""
        return self.output.ramp_to(self.config.gravity_compensation(self.q_last), self.q_last,
                                   self.monotonic_time())

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
        self.action.abort('the controller stopped (deactivated or shut down)')
        if not self.watchdog.commanding or self.config is None:
            return
        self.watchdog.ramp_down(STOP_RAMP, self.output.unlimit)
        self.publisher.wait_for_all_acked(Duration(seconds=ACK_WAIT))
        self.get_logger().info('stopping: published the final gravity compensation command for '
                               'the last pose')

    def destroy_node(self):
        if self.action is not None:   # None: stopped while starting
            self.action.destroy()
        super().destroy_node()

    def health(self):
        """(level, message, values) for /diagnostics, with the model check at the last pose."""
        level, message, values = OK, f'commanding ({self.values["mode"]})', {}
        if self.displaced_by:
            return ERROR, (f"deactivated: another writer on {COMMANDS}: "
                           f"{', '.join(self.displaced_by)}"), {}
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
        self.task.follow_delay(self.reactions.loop.delay)   # the previous report's delay
        warning, task = self.task.health()
        if warning and level == OK:
            level, message = WARN, warning
        warning, source = self.source.health()
        if warning and level == OK:
            level, message = WARN, warning
        level, message, reactions = self.reactions.health(
            level, message, self.config, self.task.law, self.diagnostics, self.arm.model,
            self.q_last, self.get_logger().error)
        return level, message, {'mode': self.values['mode'], **values, **task, **reactions,
                                **source}


def main(args=None):
    return run_node(DynamicsController, args)


if __name__ == '__main__':
    raise SystemExit(main())
