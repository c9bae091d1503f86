"""Contact safety in the nodes: feasible references and collision detection with its reaction.

The numerics are robot_dynamics.core (feasibility, setpoints, collision, observers); this
module maps parameters and messages onto them: the ``trajectory.*`` and ``collision.*``
parameters, the trajectory check or time scaling, the rate-limited streamed reference, the
collision monitor (``~/collision``, ``~/reset``) and the reactions of the controller; the
wrench estimator only reports (``ESTIMATOR_PARAMS``). Behaviour and measured margins:
doc/guides/contact_safety.md.
"""
import dataclasses
import math

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

import robot_dynamics as rd
from robot_dynamics.core.collision import CollisionDetector, Comply, Reaction
from robot_dynamics.core.observers import MomentumObserver
from robot_dynamics.core.setpoints import SetpointLimiter
from robot_dynamics.core.trajectory import JointTrajectory

from .joint_states import BadInput
from .parameters import ConfigError, section

TIME_SCALING_HEADROOM = 1.01   # s = 1.01 × the smallest fitting factor: 1 % below the limits
REFERENCE_RAMP = 0.5           # s: default streamed-reference acceleration = v_max / 0.5 s
EVENT_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                       reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.TRANSIENT_LOCAL)

#: the parameters of collision detection (both nodes) and of the controller's safety
DETECTION_PARAMS = section('wrench_estimator', 'collision')
CONTROLLER_PARAMS = section('dynamics_controller', 'trajectory', 'collision')
ESTIMATOR_PARAMS = DETECTION_PARAMS


@dataclasses.dataclass(frozen=True)
class Detection:
    """How collisions are detected: None in Safety.detection when ``collision.enable`` is off."""

    thresholds: np.ndarray        # model order, N m (N)
    samples: int
    force_threshold: float        # N, None: off

    def detector(self, model):
        return CollisionDetector(model, self.thresholds, self.samples, self.force_threshold)


@dataclasses.dataclass(frozen=True)
class Safety:
    """The controller's contact-safety configuration (``configure``)."""

    model: rd.Model               # the controller's model, effort limits = effort_limits
    acceleration_limit: np.ndarray   # model order, inf: none
    time_scaling: bool
    limiter: object               # a fresh SetpointLimiter factory, or the reason there is none
    detection: Detection          # None: off
    reaction: Reaction
    comply: Comply
    observer_gain: np.ndarray
    max_gap: float                # s, see ``collision.max_gap``


def detection(values, arm, implied=False):
    """The ``collision.*`` detection parameters as a Detection (None when disabled).

    ``implied``: on whatever ``collision.enable`` (the controller's PFL needs it, pfl_reaction).
    """
    if not (values['collision.enable'] or implied):
        return None
    model = arm.model
    if len(values['collision.thresholds']):
        thresholds = arm.per_joint(values, 'collision.thresholds')
    else:
        try:
            thresholds = rd.default_thresholds(model)
        except ValueError as error:
            raise ConfigError(f'collision.thresholds: {error}') from None
    force = float(values['collision.force_threshold'])
    if force > 0 and model.tip is None:
        raise ConfigError(f"collision.force_threshold > 0 needs the tip parameter (the frame whose "
                          f"force it bounds; read-only: set it at start): the model is the whole "
                          f"tree below '{model.base}'")
    return Detection(thresholds, int(values['collision.samples']), force if force > 0 else None)


def acceleration_limits(values, arm):
    """``trajectory.acceleration_limits`` in model order (inf for none), each > 0."""
    if not len(values['trajectory.acceleration_limits']):
        return np.full(arm.model.nv, math.inf)
    return arm.per_joint(values, 'trajectory.acceleration_limits')


def reference_limiter(model, acceleration_limit):
    """A SetpointLimiter factory for streamed references, or why none can be built (a str).

    Acceleration: ``trajectory.acceleration_limits``, else v_max / REFERENCE_RAMP.
    """
    velocity = model.velocity_limit
    missing = [n for n, v in zip(model.joint_names, velocity) if not np.isfinite(v)]
    if missing:
        return f'the URDF gives no velocity limit for {missing}'
    acc = np.where(np.isfinite(acceleration_limit), acceleration_limit,
                   velocity / REFERENCE_RAMP)
    return lambda: SetpointLimiter(model, acc)


def pfl_reaction(values, reaction):
    """With ``pfl.enable``, collision detection is on and its reaction must act (ConfigError).

    The permissible speed bounds the first contact only; after it the controller, still
    tracking, would press on the body beyond its quasi-static limit (docs/power_force_
    limiting.md). So PFL implies detection, and a reaction of none is refused.
    """
    if values['pfl.enable'] and reaction is Reaction.NONE:
        raise ConfigError('collision.reaction none is refused while pfl.enable is true: after a '
                          'contact the arm would keep pressing on the body beyond its '
                          'quasi-static limit; choose stop or comply (PFL turns collision '
                          'detection on)')
    return bool(values['pfl.enable'])


def configure(values, arm, effort_limits):
    """Safety from the parameter values; ConfigError with the reason for a bad set."""
    acc = acceleration_limits(values, arm)
    reaction = Reaction(values['collision.reaction'])
    implied = pfl_reaction(values, reaction)
    try:
        found = detection(values, arm, implied=implied)
    except ConfigError as error:
        if values['collision.enable']:
            raise
        raise ConfigError(f'pfl.enable turns collision detection on: {error}') from None
    gain = arm.per_joint(values, 'collision.observer_gain')
    model = arm.model.replace(effort_limit=np.asarray(effort_limits, dtype=float))
    try:
        comply = Comply(model)
    except ValueError as error:
        if found and reaction is Reaction.COMPLY:
            raise ConfigError(f'collision.reaction comply: {error}') from None
        comply = None
    return Safety(model, acc, bool(values['trajectory.time_scaling']),
                  reference_limiter(model, acc), found, reaction, comply, gain,
                  float(values['collision.max_gap']))


def feasible(safety, trajectory, log):
    """The core JointTrajectory to run: checked, or time-scaled; BadInput with the reason."""
    acc = safety.acceleration_limit
    try:
        if not safety.time_scaling:
            rd.check_trajectory(safety.model, trajectory, acc)
            return trajectory
        factor = rd.time_scaling(safety.model, trajectory, acc)
    except rd.InfeasibleTrajectory as error:
        raise BadInput(f'joint_trajectory rejected: {error}') from None
    if factor == 1.0:
        return trajectory
    factor *= TIME_SCALING_HEADROOM
    log(f'joint_trajectory over the limits as timed: slowed down uniformly by a factor '
        f'{factor:.4f} ({trajectory.duration:.3f} s -> {trajectory.duration * factor:.3f} s)')
    return trajectory.time_scaled(factor)


def warm_up_trajectories(safety):
    """Run the trajectory check and time scaling once (numba compiles or loads them here)."""
    model = safety.model
    q = model.neutral_position
    trajectory = JointTrajectory([0.0, 1.0], [q, q])
    rd.trajectory_violations(model, trajectory, safety.acceleration_limit)
    rd.time_scaling(model, trajectory, safety.acceleration_limit)


def warm_up_observer(safety):
    """Run the collision detection's observer once (numba compiles or loads it here)."""
    model = safety.model
    q = model.neutral_position
    observer = MomentumObserver(model, safety.observer_gain)
    for dt in (0.0, 1e-3):
        observer.update(q, np.zeros(model.nv), rd.gravity(model, q), dt)


class LimitedSetpoint:
    """A streamed setpoint as a reference: (q_d, q̇_d, q̈_d) moving towards ``target``.

    ``sample(t)`` steps the limiter by the time since the previous sample (t: the joint
    states' clock, so every state steps it once); a new target keeps the limiter's state, so
    the reference stays smooth. The setpoint's velocities are not used: the limiter stops on
    the target.
    """

    def __init__(self, limiter, target, t):
        self.limiter, self.target, self.t = limiter, target, t
        self.q, self.v = limiter.q.copy(), limiter.v.copy()
        self.a = np.zeros_like(self.q)

    def sample(self, t):
        if t > self.t:
            self.q, self.v, self.a = self.limiter.step(self.target, t - self.t)
            self.t = t
        return self.q, self.v, self.a


def streamed(safety, reference, t, target):
    """The reference after a streamed setpoint ``target`` at time t (BadInput: none possible).

    A LimitedSetpoint takes the new target; any other reference hands its (q_d, q̇_d) at t
    to a new limiter, so the switch is continuous.
    """
    if isinstance(reference, LimitedSetpoint):
        reference.target = target
        return reference
    if isinstance(safety.limiter, str):
        raise BadInput(f'reference ignored: {safety.limiter}: a streamed setpoint needs one')
    limiter = safety.limiter()
    q, v, _ = reference.sample(t)
    limiter.reset(q, v)
    return LimitedSetpoint(limiter, target, t)


def event_status(node_name, event=None, reaction=None):
    """DiagnosticStatus of a collision event (ERROR), or OK 'no collision' for None."""
    if event is None:
        return DiagnosticStatus(level=DiagnosticStatus.OK, name=f'{node_name}: collision',
                                message='no collision')
    values = {'time': f'{event.time:.6f}', 'onset': f'{event.onset:.6f}',
              'joints': ','.join(event.joints),
              'torques': ','.join(f'{x:.6g}' for x in event.torques),
              'thresholds': ','.join(f'{x:.6g}' for x in event.thresholds),
              'force': '' if event.force is None else f'{event.force:.6g}',
              'reaction': '' if reaction is None else reaction.value}
    return DiagnosticStatus(level=DiagnosticStatus.ERROR, name=f'{node_name}: collision',
                            message=str(event),
                            values=[KeyValue(key=k, value=v) for k, v in values.items()])


class CollisionMonitor:
    """The latched collision event of one node: detector, ``~/collision`` topic, reset.

    ``update(t, residual, q)`` feeds one residual sample and returns the event when it is
    *new* (None otherwise); ``event`` stays latched until ``reset()``.
    """

    def __init__(self, context):
        self.context, self.detector, self.event, self.reaction = context, None, None, None
        self.publisher = context.create_publisher(DiagnosticArray, '~/collision', EVENT_QOS)
        self.publish(None)

    def configure(self, found, model, reaction=None):
        """A new Detection (None: off) on the node's model; a latched event is kept."""
        self.detector = None if found is None else found.detector(model)
        self.reaction = reaction

    def update(self, t, residual, q):
        if self.detector is None or self.event is not None:
            return None
        self.event = self.detector.update(t, residual, q)
        if self.event is not None:
            self.publish(self.event)
        return self.event

    def reset(self):
        """Clear the latched event; returns it (None: there was none)."""
        event, self.event = self.event, None
        if self.detector is not None:
            self.detector.reset()
        if event is not None:
            self.publish(None)
        return event

    def publish(self, event):
        array = DiagnosticArray(status=[event_status(self.context.name, event,
                                                     self.reaction)])
        array.header.stamp = self.context.clock.now().to_msg()
        if event is not None:   # the joint state's clock, like every other stamp of ours
            array.header.stamp.sec, array.header.stamp.nanosec = divmod(
                int(round(event.time * 1e9)), 10**9)
        self.publisher.publish(array)

    def health(self):
        """{'collision': ...} for /diagnostics."""
        if self.detector is None and self.event is None:
            return {'collision': 'detection off'}
        return {'collision': 'none' if self.event is None else str(self.event)}


class ResidualObserver:
    """The controller's momentum observer on the joint states' clock (re-anchored on gaps)."""

    def __init__(self, model, gain, max_dt):
        self.observer, self.t = MomentumObserver(model, gain, max_dt=max_dt), None

    def configure(self, model, gain, max_dt):
        self.observer.model, self.observer.gain = model, gain
        self.observer.max_dt = max_dt

    def update(self, t, q, v, effort):
        """r ≈ τ_ext at this state (nv,); a first sample or a gap re-anchors it (r held)."""
        dt = 0.0 if self.t is None else t - self.t
        self.t = t
        with np.errstate(all='ignore'):
            residual = self.observer.update(q, v, effort, dt)
        if not np.isfinite(residual).all():
            self.observer.reset(q, v)
            self.t = None
            raise BadInput('the momentum observer overflowed on this state: restarted')
        return residual
