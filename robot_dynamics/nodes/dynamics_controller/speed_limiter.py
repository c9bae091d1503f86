"""Power and force limiting in the dynamics_controller: the speed limiter (ISO/TS 15066 A.3).

Part of the controller, not a node of its own: the scale s (core SpeedScaling) must act where the
reference is sampled, so the controller samples its trajectory, or a task-space target stream
(``task_scale``), on a ScaledClock. This module owns the ``pfl.*`` parameters, that clock,
``~/speed_scaling``, the per-point /diagnostics and the ``~/pfl_markers``. An engineering aid,
not a certified safety function. Behaviour: doc/guides/pfl.md.
"""
import copy
import dataclasses

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Point
from rclpy.event_handler import PublisherEventCallbacks, UnsupportedEventTypeError
from scipy.spatial.transform import Rotation
from std_msgs.msg import ColorRGBA, Float64
from visualization_msgs.msg import Marker, MarkerArray

import robot_dynamics as rd
from robot_dynamics.core import power_force_limiting as pfl

from . import cartesian_modes
from ..common.parameters import ConfigError, section

PUBLISH_PERIOD = 0.01   # s: ~/speed_scaling at 100 Hz while scaling
IDLE_PERIOD = 1.0       # s: and at 1 Hz while nothing is on the scaled clock
DIAGNOSTICS_PERIOD = 1.0
MAX_AXIS = 1.0          # m: longest drawn ellipsoid semi-axis (m_R -> inf where J_v loses rank)
WARN_RATIO = 0.8        # arrow colour: green below 0.8 v_max, orange up to v_max, red above
NO_POINTS = 'off: no contact points (no tip and no pfl.frames)'
GREEN, ORANGE, RED = (0.1, 0.8, 0.1), (1.0, 0.6, 0.0), (0.9, 0.1, 0.1)

PARAMS = section('dynamics_controller', 'pfl')


@dataclasses.dataclass(frozen=True)
class LimiterConfig:
    enabled: bool
    scaling: pfl.SpeedScaling    # on the nominal velocity (holds s); None: no contact points
    monitor: pfl.SpeedScaling    # the same points and regions, on the measured velocity
    marker_rate: float
    marker_scale: float


def contact_points(values, model):
    """pfl.frames and pfl.offsets -> ContactPoints (default: the tip's origin; None: no tip)."""
    if not len(values['pfl.frames']) and model.tip is None:
        return None
    frames = list(values['pfl.frames']) or [model.tip]
    offsets = np.asarray(values['pfl.offsets'] or [0.0] * 3 * len(frames), dtype=float)
    if offsets.shape != (3 * len(frames),) or not np.isfinite(offsets).all():
        raise ConfigError(f"pfl.offsets needs 3 finite values per frame of pfl.frames "
                          f"({3 * len(frames)}), got {list(values['pfl.offsets'])}")
    for frame in frames:
        try:
            model.frame_index(frame)
        except (KeyError, ValueError):
            raise ConfigError(f"pfl.frames: unknown frame '{frame}' (the chain's frames: "
                              f"{', '.join(model.frame_names)})") from None
    return [pfl.ContactPoint(f, tuple(o)) for f, o in zip(frames, offsets.reshape(-1, 3))]


def body_regions(values):
    """The configured regions: the table with pfl.region_overrides, those of pfl.body_regions."""
    try:
        table = pfl.body_regions(values['pfl.region_overrides'] or None)
    except (OSError, ValueError, TypeError) as error:
        raise ConfigError(f'pfl.region_overrides: {error}') from None
    names = list(values['pfl.body_regions']) or [
        n for n, r in table.items() if r.transient_force is not None]
    unknown = [n for n in names if n not in table]
    if unknown:
        raise ConfigError(f"pfl.body_regions: unknown {unknown}; known: {', '.join(table)}")
    barred = [n for n in names if table[n].transient_force is None]
    if barred:
        raise ConfigError(f'pfl.body_regions: ISO/TS 15066 permits no transient contact with '
                          f'{barred} (v_max = 0): exclude that contact by other means')
    return [table[n] for n in names]


def contact_drive(values, kp, kd):
    """The controller's pull on a contact point during a contact, in the configured mode.

    A pfl.Drive (doc/guides/power_force_limiting.md): computed torque (and the stop reaction, which
    is computed torque) pulls with its stiffest joint's gains kp, kd (1/s², 1/s, per unit of
    reflected mass); operational_space with inertia shaping with its largest translational
    stiffness K (1/s²) and D = 2ζ √K; a Cartesian impedance (and operational_space without
    shaping) with its largest translational stiffness (N/m) at its damping ratio ζ.
    """
    mode, zeta = values['mode'], float(values['cartesian.damping_ratio'])
    if mode == cartesian_modes.OPERATIONAL_SPACE and values['operational_space.inertia_shaping']:
        k = float(max(values['operational_space.stiffness'][:3]))
        return pfl.Drive(kp=k, kd=2.0 * zeta * np.sqrt(k))
    if mode in cartesian_modes.MODES:
        return pfl.Drive(stiffness=float(max(values['cartesian.stiffness'][:3])),
                         damping_ratio=zeta)
    return pfl.Drive(kp=float(np.max(kp)), kd=float(np.max(kd)))


def configure(values, model, drive=pfl.FREE):
    """Parameter values -> LimiterConfig, or ConfigError with the reason.

    ``drive``: the controller's pull during a contact (contact_drive): v_max is the speed whose
    first contact peaks at F_T with it.
    """
    points, regions = contact_points(values, model), body_regions(values)
    if points is None:   # a whole tree and no pfl.frames: nothing to limit nor monitor
        if values['pfl.enable']:
            raise ConfigError(f"pfl.enable needs contact points: set pfl.frames, or the tip "
                              f"parameter (read-only: at start), whose origin is the default "
                              f"point; the model is the whole tree below '{model.base}'")
        return LimiterConfig(False, None, None, values['pfl.marker_rate'],
                             values['pfl.marker_scale'])
    rates = {k: values[f'pfl.{k}'] for k in ('rise_rate', 'fall_rate', 'hysteresis')}
    rates['drive'] = drive
    try:
        scaling = pfl.SpeedScaling(model, points, regions, **rates)
        monitor = pfl.SpeedScaling(model, points, regions, **rates)
    except (ValueError, KeyError) as error:
        raise ConfigError(f'pfl: {error}') from None
    return LimiterConfig(values['pfl.enable'], scaling, monitor, values['pfl.marker_rate'],
                         values['pfl.marker_scale'])


def warm_up(config, model):
    """Run the PFL computations once, enabled or not (pfl.enable may change at run time).

    numba compiles or loads their kernels here, before 'ready': compiled at the first scaled
    state instead, mid-motion on a cold cache, they stalled the controller for seconds.
    Without contact points (a whole tree, no pfl.frames) there is nothing to run, without a tip
    no task-space stream to scale.
    """
    if config.scaling is None:
        return
    q, v = model.neutral_position, np.full(model.nv, 0.1)
    scaling = copy.deepcopy(config.scaling)   # the configured one keeps its state
    scaling.update(q, v, 1e-3)
    point = scaling.contact_points[0]
    rd.frame_pose(model, q, point.frame)
    pfl.point_mobility(model, q, point.frame, point.offset)
    if model.tip is not None:   # a task-space stream's twist on the scaled clock
        pfl.twist_joint_velocity(model, q, model.tip, np.full(6, 0.1))


class SpeedLimiter:
    """The controller's PFL hook: ``sample`` gives the reference on the scaled clock."""

    def __init__(self, context):
        self.context, self.config = context, None
        self.clock = self.reference = self.t_clock = None
        self.task_scaled = False       # a task-space stream is on the clock (task_scale)
        self.state = None              # the last measured (q, v), model order
        self.s_low = 1.0               # lowest s since the last diagnostics
        self.scale = context.create_publisher(Float64, '~/speed_scaling', 10)
        self.marker_subscribers, self.marker_timer, self.marker_period = 0, None, None
        try:
            self.markers = context.create_publisher(
                MarkerArray, '~/pfl_markers', 1,
                event_callbacks=PublisherEventCallbacks(matched=self.on_markers_matched))
        except UnsupportedEventTypeError:   # a middleware without matched events: always paced
            self.marker_subscribers = None
            self.markers = context.create_publisher(MarkerArray, '~/pfl_markers', 1)
        self.diagnostics = context.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self.scale_timer = context.create_timer(IDLE_PERIOD, self.publish_scale)
        context.create_timer(DIAGNOSTICS_PERIOD, self.publish_diagnostics)

    @property
    def s(self):
        return self.config.scaling.s if self.clock is not None or self.task_scaled else 1.0

    def apply(self, config):
        """Take a new configuration; s carries over (no jump while a trajectory runs).

        Without contact points now (pfl.frames emptied on a whole tree) the previous scaling
        stays, disabled: a trajectory on the scaled clock returns to s = 1 at rise_rate.
        """
        previous = self.config and self.config.scaling
        if config.scaling is None and previous is not None:
            config = dataclasses.replace(config, scaling=previous)
        elif config.scaling is not None and previous is not None:
            config.scaling.s = previous.s
        self.config = config
        if config.monitor is not None:   # compile (or load) the kernels before the first state
            model = config.monitor.model
            config.monitor.target(model.neutral_position, np.full(model.nv, 0.1))
        self.pace_markers()

    def on_markers_matched(self, info):
        """A subscriber to ~/pfl_markers came or went."""
        self.marker_subscribers = info.current_count
        self.pace_markers()

    def pace_markers(self):
        """The marker timer: at marker_rate while ~/pfl_markers has a subscriber, else none.

        An idle timer still costs its callback (~0.1 ms a tick in rclpy). A middleware without
        matched events (``marker_subscribers`` None) keeps it ticking, as before that event.
        """
        rate = self.config.marker_rate if self.config is not None else 0
        period = 1.0 / rate if self.marker_subscribers != 0 and rate > 0 else None
        if self.marker_timer is not None and self.marker_period == period:
            return   # unchanged: a timer replaced on every parameter change piles up calls
        if self.marker_timer is not None:
            self.context.destroy_timer(self.marker_timer)
            self.marker_timer = None
        self.marker_period = period
        if period is not None:
            self.marker_timer = self.context.create_timer(period, self.publish_markers)

    def sample(self, reference, t, q, v):
        """(q_d, q̇_d, q̈_d) at t: a TimedTrajectory on the clock scaled by s, else unscaled.

        A trajectory being scaled stays on its clock when PFL is switched off (s rises to 1 at
        rise_rate): its reference time lags the wall clock's and must not jump.
        """
        self.state, self.task_scaled = (q, v), False
        trajectory = getattr(reference, 'trajectory', None)
        if trajectory is None or not (self.config.enabled or reference is self.reference):
            self.clock = self.reference = None
            return reference.sample(t)
        if reference is not self.reference:
            self.reference, self.t_clock = reference, t
            self.config.scaling.s = 1.0
            self.clock = pfl.ScaledClock(t - reference.start)
            self.pace_publishing()
        elif t > self.t_clock:
            dt, self.t_clock = t - self.t_clock, t
            self.clock.advance(self.next_scale(trajectory, dt), dt)
            self.s_low = min(self.s_low, self.clock.s)
        return self.clock.sample(trajectory)

    def task_scale(self, q, v, frame, twist, dt):
        """s after dt for a task-space target moving ``frame`` at the nominal twist ẋ_d (6).

        SpeedScaling on q̇ = J̄ ẋ_d at the measured q (zero twist: at rest, s rises); disabled,
        s rises to 1 at rise_rate (a stream on the clock must not jump). A stream starts at
        s = 1, as a trajectory does (``s`` said 1 until now).
        """
        self.state, self.clock, self.reference = (q, v), None, None
        scaling = self.config.scaling
        if not self.task_scaled:
            scaling.s, self.task_scaled = 1.0, True
            self.pace_publishing()
        if not self.config.enabled:
            scaling.s = min(1.0, scaling.s + scaling.rise_rate * dt)
        elif dt > 0.0:
            nominal = pfl.twist_joint_velocity(self.config.scaling.model, q, frame, twist) \
                if np.any(twist) else np.zeros_like(q)
            scaling.update(q, nominal, dt)
        self.s_low = min(self.s_low, scaling.s)
        return scaling.s

    def observe(self, q, v):
        """The measured state for /diagnostics and the markers, in a mode that samples nothing."""
        self.state, self.clock, self.reference = (q, v), None, None

    @property
    def enabled(self):
        return self.config is not None and self.config.enabled

    def blend_source(self, reference):
        """What a new trajectory blends from: the running one as scaled, else ``reference``.

        The scaled reference at t, extrapolated from the clock at the current s (exact at the
        newest state's stamp, where a trajectory without a stamp starts).
        """
        if self.clock is None or reference is not self.reference:
            return reference
        return ScaledSample(reference.trajectory, self.clock.tau, self.clock.s, self.t_clock)

    def next_scale(self, trajectory, dt):
        """s after dt: SpeedScaling on the nominal q̇_d(τ); disabled, back to 1 at rise_rate."""
        scaling = self.config.scaling
        if self.config.enabled:
            q_d, v_nominal, _ = trajectory.sample(self.clock.tau)
            return scaling.update(q_d, v_nominal, dt)
        scaling.s = min(1.0, scaling.s + scaling.rise_rate * dt)
        return scaling.s

    # -- outputs -------------------------------------------------------------------------------
    def publish_scale(self):
        """s, every PUBLISH_PERIOD while a motion is on the scaled clock, else IDLE_PERIOD."""
        if self.config is not None:
            self.scale.publish(Float64(data=float(self.s)))
        self.pace_publishing()

    def pace_publishing(self):
        """The ~/speed_scaling timer's period: fast while scaling, else idle."""
        period = PUBLISH_PERIOD if self.clock is not None or self.task_scaled else IDLE_PERIOD
        if self.scale_timer.timer_period_ns != int(period * 1e9):
            self.scale_timer.timer_period_ns = int(period * 1e9)
            self.scale_timer.reset()

    def measured(self):
        """PointStatus per contact point at the last measured state; None before a state."""
        if self.config is None or self.config.monitor is None or self.state is None \
                or self.state[1] is None:
            return None
        self.config.monitor.target(*self.state)
        return self.config.monitor.points

    def publish_diagnostics(self):
        if self.config is None:
            return
        points = self.measured()
        values = {'enabled': self.config.enabled, 'speed_scaling': round(self.s, 4),
                  'speed_scaling_min': round(self.s_low, 4)}
        self.s_low = self.s
        level, message = DiagnosticStatus.OK, 'scaling trajectories' if \
            self.config.enabled else 'disabled: monitoring only'
        for i, p in enumerate(points or ()):
            values.update(point_values(i, p))
            if p.speed > p.permissible_speed:
                level, message = DiagnosticStatus.WARN, f'point {i} ({p.point.frame}) above v_max'
        status = DiagnosticStatus(
            level=level, name=f'power and force limiting: {self.context.name}',
            message=message if points is not None else NO_POINTS if self.config.monitor is None
            else 'no joint states in computed_torque yet',
            hardware_id=self.context.values()['tip'],
            values=[KeyValue(key=k, value=str(v)) for k, v in values.items()])
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.context.clock.now().to_msg()
        self.diagnostics.publish(array)

    def publish_markers(self):
        """The MarkerArray (its timer runs only while someone subscribes: it takes ~1 ms)."""
        points = self.measured() if self.markers.get_subscription_count() else None
        if points is None:
            return
        model, (q, _) = self.config.scaling.model, self.state
        stamp = self.context.clock.now().to_msg()
        array = MarkerArray()
        for i, status in enumerate(points):
            ellipsoid, arrow = point_markers(model, q, status, self.config.marker_scale)
            for k, marker in enumerate((ellipsoid, arrow)):
                marker.header.frame_id, marker.header.stamp = model.base, stamp
                marker.ns, marker.id = 'pfl', 2 * i + k
            array.markers += [ellipsoid, arrow]
        self.markers.publish(array)


@dataclasses.dataclass(frozen=True)
class ScaledSample:
    """A trajectory on a clock at τ at time t_clock, running on at rate s."""

    trajectory: object
    tau: float
    s: float
    t_clock: float

    def sample(self, t):
        """(q_d(τ'), s q̇_d(τ'), s² q̈_d(τ')), τ' = τ + s (t − t_clock)."""
        q, v, a = self.trajectory.sample(self.tau + self.s * (t - self.t_clock))
        return q, self.s * v, self.s ** 2 * a


def point_values(i, p):
    """The /diagnostics values of one contact point (measured speed, m_R, v_max, region)."""
    at_rest = p.region is None
    return {f'point{i}.frame': p.point.frame, f'point{i}.offset_m': list(p.point.offset),
            f'point{i}.speed_m_s': round(p.speed, 4),
            f'point{i}.reflected_mass_kg': 'at rest' if at_rest else round(p.reflected_mass, 4),
            f'point{i}.permissible_speed_m_s': 'at rest' if at_rest else
            round(p.permissible_speed, 4),
            f'point{i}.region': 'at rest' if at_rest else p.region,
            f'point{i}.speed_ratio': 0.0 if at_rest else round(p.speed / p.permissible_speed, 4)}


def point_markers(model, q, status, scale):
    """(ellipsoid, arrow) Markers of one contact point, base frame.

    Ellipsoid: principal axes of Λ_v = (J_v M⁻¹ J_vᵀ)⁻¹, semi-axes scale · √(eigenvalue) (capped
    at MAX_AXIS). Arrow: the measured velocity over 0.2 s, coloured by speed / v_max.
    """
    point = status.point
    p = (rd.frame_pose(model, q, point.frame) @ np.append(point.offset, 1.0))[:3]
    mobility, axes = np.linalg.eigh(pfl.point_mobility(model, q, point.frame, point.offset))
    if np.linalg.det(axes) < 0:
        axes[:, 0] = -axes[:, 0]
    semi = np.minimum(scale / np.sqrt(np.maximum(mobility, 1e-300)), MAX_AXIS)
    ellipsoid = Marker(type=Marker.SPHERE, action=Marker.ADD)
    ellipsoid.pose.position = Point(x=p[0], y=p[1], z=p[2])
    x, y, z, w = Rotation.from_matrix(axes).as_quat()
    o = ellipsoid.pose.orientation
    o.x, o.y, o.z, o.w = float(x), float(y), float(z), float(w)
    ellipsoid.scale.x, ellipsoid.scale.y, ellipsoid.scale.z = (2.0 * semi).tolist()
    ellipsoid.color = ColorRGBA(r=0.3, g=0.5, b=1.0, a=0.4)
    arrow = Marker(type=Marker.ARROW, action=Marker.ADD)
    tip = p if status.region is None else p + 0.2 * status.speed * status.direction
    arrow.points = [Point(x=p[0], y=p[1], z=p[2]), Point(x=tip[0], y=tip[1], z=tip[2])]
    arrow.scale.x, arrow.scale.y, arrow.scale.z = 0.01, 0.02, 0.03
    arrow.color = ColorRGBA(**dict(zip('rgb', margin_colour(status))), a=1.0)
    arrow.pose.orientation.w = 1.0
    return ellipsoid, arrow


def margin_colour(status):
    """Green below WARN_RATIO · v_max (or at rest), orange up to v_max, red above."""
    ratio = 0.0 if status.region is None else status.speed / status.permissible_speed
    return GREEN if ratio < WARN_RATIO else ORANGE if ratio <= 1.0 else RED
