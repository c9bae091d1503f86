"""wrench_estimator: external joint torques and the end-effector wrench from joint torques.

This module owns the node: its parameters (``WrenchEstimator.PARAMS``), the joint-state callback
that runs a generalized-momentum observer (robot_dynamics.core.observers) on the measured
efforts, the damped inverse from joint torques to the tip wrench, tare, and the near-singular
and static-residual checks. Collision detection is nodes.contact_safety's.
Behaviour, topics and parameters: doc/nodes/wrench_estimator.md.
"""
import dataclasses
import time

import numpy as np
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

import robot_dynamics as rd
from robot_dynamics.core.observers import MomentumObserver

from ..common import cdr, contact_safety, payload, profiles
from ..common.diagnostics import ERROR, OK, WARN, Diagnostics, StaticResidual, inertia_health
from ..common.joint_states import LATCHED_QOS, BadInput, to_array, to_time
from ..common.lifecycle import ManagedArmNode
from ..common.process import main as run_node
from ..common.parameters import ConfigError
from ..common.schema import load
from . import estimator_cycle

SINGULAR = 1e-2      # σ_min/σ_max of J below which the pose counts as near-singular
TARED = 'tared at the joint state stamped {stamp:.6f} s: bias {bias} (joints order; ~/bias)'
COUNTERS = ('estimates', 'rejected_states', 'observer_restarts', 'near_singular',
            'collisions', 'ignored_states')


@dataclasses.dataclass(frozen=True)
class Config:
    gain: np.ndarray       # model order, 1/s
    frame: str             # frame_id of ~/wrench; None: no wrench (the model has no tip)
    reference: object      # rd.LOCAL_WORLD_ALIGNED or rd.LOCAL
    damping: float
    profile: profiles.Profile   # measured efforts -> joint torques
    detection: contact_safety.Detection   # None: collision detection off


def wrench_frame(reference_frame, model):
    """(frame_id, Jacobian reference) of ~/wrench for ``reference_frame``; (None, None): no tip.

    ConfigError naming what to set for a frame that is neither the base nor the tip.
    """
    if model.tip is None:
        if reference_frame:
            raise ConfigError(f"reference_frame '{reference_frame}': ~/wrench needs the tip "
                              f"parameter (read-only: set it at start): the model is the whole "
                              f"tree below '{model.base}'; empty: joint torques only")
        return None, None
    frames = {model.base: rd.LOCAL_WORLD_ALIGNED, model.tip: rd.LOCAL}
    frame = reference_frame or model.base
    if frame not in frames:
        raise ConfigError(f"reference_frame must be the base link '{model.base}' or the tip "
                          f"link '{model.tip}' (empty: the base), got '{frame}'")
    return frame, frames[frame]


class WrenchEstimator(ManagedArmNode):
    """Joint states in, ~/external_joint_torques and ~/wrench out, once per joint state."""

    NAME = 'wrench_estimator'
    PARAMS = load(NAME)

    def __init__(self, **options):
        self.config = self.observer = self.reader = self.cycle = None
        self.last_stamp = self.q_last = None
        self.last_state = None   # the node's monotonic_time() at the last accepted state
        self.conditioning, self.checked_at = None, -np.inf
        self.residual = StaticResidual()
        super().__init__(self.NAME, **options)
        self.diagnostics = Diagnostics(self, 'wrench estimate', COUNTERS)
        self.wrench_publisher = self.create_publisher(WrenchStamped, '~/wrench', 10)
        self.torque_publisher = self.create_publisher(JointState, '~/external_joint_torques', 10)
        # depth 10: the observer integrates momentum, so it takes every state, a little late
        # after a hiccup rather than skipping some (which costs accuracy)
        self.subscribe_joint_states(10)
        self.source.count = lambda: self.diagnostics.count('ignored_states')
        self.create_service(Trigger, '~/tare', self.on_tare)
        self.bias_publisher = self.create_publisher(JointState, '~/bias', LATCHED_QOS)
        context = self.component_context(self.diagnostics, lambda: self.q_last)
        self.collision = contact_safety.CollisionMonitor(context)
        self.create_service(Trigger, '~/reset', self.on_reset)
        self.payload_topic = payload.subscribe(context)
        self.start()

    def configure(self, values, arm):
        gain = arm.per_joint(values, 'observer_gain')
        frame, reference = wrench_frame(values['reference_frame'], arm.model)
        return Config(gain, frame, reference, values['damping'],
                      profiles.profile(values, arm), contact_safety.detection(values, arm))

    def apply(self, config):
        if self.observer is None:
            self.observer = MomentumObserver(self.arm.model, config.gain,
                                             max_dt=self.max_gap(config))
        else:  # a new model or gain: re-anchored at the next state, tare bias kept
            self.observer.model, self.observer.gain = self.arm.model, config.gain
            self.observer.max_dt = self.max_gap(config)
        if config.frame is None and self.config is None:
            self.get_logger().info('no tip (the whole tree): publishing ~/external_joint_torques '
                                   'only; ~/wrench needs the tip parameter')
        self.config = config
        self.source.select(self.values['joint_states_sources'])
        self.collision.configure(config.detection, self.arm.model)
        self.reader = cdr.CdrJointStateReader(self.arm.model.joint_names)
        self.torques = JointState(name=list(self.arm.joints))
        self.wrench = WrenchStamped()
        self.wrench.header.frame_id = config.frame or ''
        self.writers = (cdr.JointStateWriter(self.arm.joints, ('effort',)),
                        cdr.WrenchStampedWriter(config.frame or ''))
        self.cycle = None
        if self.serves_compiled(config):
            self.cycle = estimator_cycle.EstimatorCycle(
                self.observer, self.reader, self.writers, self.arm.model.tip,
                config.reference, config.damping, self.arm.order)

    def clear(self):
        """A cleanup: the model's configuration and the observer's integration are gone."""
        self.config = self.observer = self.cycle = self.last_stamp = self.q_last = None

    def max_gap(self, config):
        """Longest step the observer integrates: state_timeout, collision.max_gap if detecting."""
        if config.detection is None:
            return self.values['state_timeout']
        return min(self.values['state_timeout'], self.values['collision.max_gap'])

    def serves_compiled(self, config):
        """Whether the compiled cycle serves ``config``: joint torques, no mimic joint."""
        return self.values['fast_path'] and not self.arm.model.mimic and \
            config.profile.measured_effort == profiles.TORQUE

    def warm_up_steps(self, config, every_mode=False):
        m = self.arm.model
        steps = [('momentum observer', lambda: self.warm_up_observer(config))]
        if self.serves_compiled(config) or (every_mode and not m.mimic):
            steps.append(('joint state reader', lambda: cdr.warm_up(m.joint_names)))
            steps.append(('compiled cycle', lambda: estimator_cycle.warm_up(
                MomentumObserver(m, config.gain), m.joint_names, config.frame or '',
                config.reference, self.arm.order)))
        return steps

    def warm_up_observer(self, config):
        m = self.arm.model
        q, zero = m.neutral_position, np.zeros(m.nv)
        observer = MomentumObserver(m, config.gain)
        observer.update(q, zero, zero, 0.0)
        tau_ext = observer.update(q, zero, zero, 1e-3)
        state = q.copy()   # what check_singularity and health call, on a state's writable q
        rd.gravity(m, state)
        rd.mass_matrix(m, state)
        if config.frame is not None:
            observer.wrench(q, tau_ext, m.tip, config.reference, config.damping)
            rd.frame_jacobian(m, state, m.tip, config.reference)

    # -- the state loop's steps (ManagedArmNode.on_state) --------------------------------------
    def compiled(self, data):
        """The compiled cycle on the bytes ``data``: what ``after`` needs, or None (declined).

        It serves a state that continues the observer's integration (the previous one accepted,
        0 < dt <= the longest step), measured as joint torques on a model without mimic joints;
        it leaves any other state untouched for ``interpreted``.
        """
        anchor = self.observer.anchor if self.cycle is not None else None
        header = cdr.header_stamp(data)
        if anchor is None or anchor[1] is None or self.last_stamp is None or header is None:
            return None
        sec, nanosec = header
        stamp = sec + 1e-9 * nanosec
        dt = stamp - self.last_stamp   # max_dt: state_timeout or less (max_gap)
        if not (stamp and 0.0 < dt <= self.observer.max_dt):
            return None
        tau_ext = self.cycle.run(data, dt)
        if tau_ext is None:
            return None
        q, v, effort = self.cycle.state()
        self.accept(q, stamp)
        torques, wrench = self.writers
        self.torque_publisher.publish(torques.serialized(sec, nanosec))
        if self.config.frame is not None:
            self.wrench_publisher.publish(wrench.serialized(sec, nanosec))
        return stamp, tau_ext, q, v, effort

    def interpreted(self, msg, serialized):
        """The state in Python: read, observer, wrench, publication; None if none was published."""
        state = self.read(msg, serialized, self.last_state)
        if state is None:
            return None
        q, v, effort, (sec, nanosec) = state
        if v is None or effort is None:
            raise BadInput('the observer needs velocity and effort for every joint')
        effort = self.config.profile.joint_torque(q, effort)
        stamp = (sec + 1e-9 * nanosec) or self.clock_time()
        dt = 0.0 if self.last_stamp is None else stamp - self.last_stamp
        if self.last_stamp is not None and not 0.0 < dt <= self.values['state_timeout']:
            self.diagnostics.count('observer_restarts')
            self.get_logger().warning(f'joint_states {dt:+.3f} s after the previous one: '
                                      'observer restarted', throttle_duration_sec=1.0)
        self.accept(q, stamp)
        try:   # huge finite values (1e300) overflow to Inf inside the observer
            with np.errstate(all='ignore'):
                tau_ext = self.observer.update(q, v, effort, dt)
                wrench = None if self.config.frame is None else self.observer.wrench(
                    q, tau_ext, self.arm.model.tip, self.config.reference, self.config.damping)
            if wrench is None and not np.isfinite(tau_ext).all():
                raise ValueError('non-finite external joint torques')
            if wrench is not None and not np.isfinite(wrench).all():
                raise ValueError('non-finite wrench')
        except ValueError as error:   # restart from the next state rather than stay poisoned
            self.observer.reset(q, np.zeros_like(q))
            self.last_stamp = None
            self.diagnostics.count('observer_restarts')
            self.warn(f'joint_states overflowed the observer ({error}): restarted, not published')
            return None
        self.publish(sec, nanosec, tau_ext, wrench, serialized)
        return stamp, tau_ext, q, v, effort

    def accept(self, q, stamp):
        """The state at q stamped ``stamp`` is the newest the observer integrated."""
        self.last_stamp, self.q_last, self.last_state = stamp, q, self.monotonic_time()

    def after(self, received, stamp, tau_ext, q, v, effort):
        """What every published estimate is followed by: checks, collision detection, timing."""
        self.check_singularity(q, v, effort)
        self.detect(stamp, tau_ext, q)
        self.diagnostics.time(time.perf_counter() - received)

    def detect(self, stamp, tau_ext, q):
        """The collision detector's sample (an event is reported), then the estimate counted."""
        if self.collision.update(stamp, tau_ext, q) is not None:
            self.diagnostics.count('collisions')
            self.get_logger().error(f'{self.collision.event} (reported; ~/reset to re-arm)')
        self.diagnostics.count('estimates')

    def check_singularity(self, q, v, effort):
        """Every 0.1 s: σ_min/σ_max of J (warn below SINGULAR) and the static residual."""
        now = self.monotonic_time()
        if now - self.checked_at < 0.1:
            return
        self.checked_at = now
        m = self.arm.model
        if self.config.frame is not None:
            self.check_conditioning(rd.frame_jacobian(m, q, m.tip, self.config.reference))
        self.residual.update(v, effort, rd.gravity(m, q))

    def check_conditioning(self, J):
        """σ_min/σ_max of the tip's Jacobian J, with a warning below SINGULAR."""
        s = np.linalg.svd(J, compute_uv=False)
        self.conditioning = float(s[-1] / s[0]) if s[0] > 0 else 0.0
        if self.conditioning < SINGULAR:
            self.diagnostics.count('near_singular')
            self.warn(f'near-singular pose (sigma_min/sigma_max of J = {self.conditioning:.2e}):'
                      ' wrench components along the singular directions are damped toward 0')

    def publish(self, sec, nanosec, tau_ext, wrench, serialized):
        """~/external_joint_torques and ~/wrench, stamped as the state: bytes or messages."""
        tau_joints = self.arm.to_joints(tau_ext)
        if serialized:
            torques, wrench_writer = self.writers
            self.torque_publisher.publish(torques.serialized(sec, nanosec, tau_joints))
            if wrench is not None:
                self.wrench_publisher.publish(wrench_writer.serialized(sec, nanosec, wrench))
            return
        for header in (self.torques.header, self.wrench.header):
            header.stamp.sec, header.stamp.nanosec = sec, nanosec
        self.torques.effort = to_array(tau_joints)
        self.torque_publisher.publish(self.torques)
        if wrench is None:
            return
        w = self.wrench.wrench
        (w.torque.x, w.torque.y, w.torque.z, w.force.x, w.force.y, w.force.z) = wrench.tolist()
        self.wrench_publisher.publish(self.wrench)

    def health(self):
        """(level, message, values) for /diagnostics."""
        if not self.active:
            return WARN, 'not active (lifecycle): not estimating', {}
        if self.config is None:
            return WARN, 'waiting for robot_description', {}
        if self.q_last is None:
            return WARN, 'no joint states yet', {}
        ok, smallest = inertia_health(rd.mass_matrix(self.arm.model, self.q_last))
        values = {'mass_matrix_min_eigenvalue': round(smallest, 6),
                  'jacobian_conditioning': self.conditioning,
                  **self.residual.values(self.arm.to_joints), **self.collision.health()}
        warning, source = self.source.health()
        values.update(source)
        if not ok:
            return ERROR, 'model unhealthy: M(q) not positive definite', values
        if warning:
            return WARN, warning, values
        if self.collision.event is not None:
            return WARN, str(self.collision.event), values
        if self.conditioning is not None and self.conditioning < SINGULAR:
            return WARN, 'near-singular pose: wrench partly unobservable', values
        return OK, 'estimating', values

    def on_tare(self, request, response):
        if self.last_stamp is None:
            response.success, response.message = False, 'no joint state received yet'
            return response
        self.observer.tare()
        bias = self.arm.to_joints(self.observer.bias)
        tared = JointState(name=list(self.arm.joints), effort=to_array(bias))
        tared.header.stamp = to_time(self.last_stamp)
        self.bias_publisher.publish(tared)   # latched: the bias in force and its state's stamp
        response.success = True
        response.message = TARED.format(stamp=self.last_stamp, bias=np.round(bias, 4).tolist())
        self.get_logger().info(response.message)
        return response

    def on_reset(self, request, response):
        """~/reset: clear a latched collision event (detection re-armed), choose the source anew."""
        event = self.collision.reset()
        self.source.reset()
        response.success = True
        response.message = 'no collision latched' if event is None else f'reset after {event}'
        response.message += '; joint_states: the source is chosen again'
        return response


def main(args=None):
    return run_node(WrenchEstimator, args)


if __name__ == '__main__':
    raise SystemExit(main())
