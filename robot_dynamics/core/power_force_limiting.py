"""Power and force limiting (PFL): permissible speeds from the arm's reflected mass.

ISO/TS 15066:2016 Annex A.3 (carried into ISO 10218-2:2025 Annex A) models a transient contact
between the robot and a body region as two masses and a spring: the robot's effective mass m_R,
the region's effective mass m_H and its effective spring constant k. The energy the contact may
transfer is that of the spring at the transient force limit F_T,

    E = F_T^2 / (2 k) = mu v^2 / 2,   mu = (1/m_R + 1/m_H)^-1 (the reduced mass),

so the permissible relative speed is v_max = F_T / sqrt(mu k). Integrators usually put
m_R = M/2 + m_L into it (half the moving mass plus the payload); here m_R is the arm's
reflected mass at the contact point along the direction of motion u (Khatib 1995; Lynch & Park
§8.6, the task-space mass matrix):

    m_R(q, u) = 1 / (u^T J_v M^-1 J_v^T u),

J_v the linear Jacobian of the contact point (base axes), M the joint-space mass matrix with the
joints' armature. A payload belongs in the model (``rd.with_payload``).

This is an engineering aid computing the standard's formula; it is not a certified safety
function. A cell still needs the robot's safety controller and a risk assessment.
"""
import dataclasses
import functools
import math

import numpy as np
import scipy.linalg
import yaml

from .algorithms.jacobians import LOCAL_WORLD_ALIGNED, frame_jacobian, frame_pose, frame_velocity
from .algorithms.operational_space import dynamically_consistent_inverse
from .algorithms.task_space import inverse_task_space_inertia


@dataclasses.dataclass(frozen=True)
class BodyRegion:
    """A body region's biomechanical data: forces in N, spring constant in N/m, mass in kg.

    ``transient_force`` is None where the standard permits no transient contact.
    """

    name: str
    quasi_static_force: float
    transient_force: float
    spring_constant: float
    effective_mass: float

    def __post_init__(self):
        for field in ('quasi_static_force', 'spring_constant', 'effective_mass'):
            _positive(getattr(self, field), f'body region {self.name!r}: {field}')
        if self.transient_force is not None:
            _positive(self.transient_force, f'body region {self.name!r}: transient_force')

    @property
    def energy_limit(self):
        """E = F_T^2 / (2 k): the energy the spring of the region holds at F_T (J)."""
        return 0.0 if self.transient_force is None else (
            self.transient_force ** 2 / (2.0 * self.spring_constant))


def _positive(value, what):
    if not (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0.0):
        raise ValueError(f'{what} must be a finite number > 0, got {value!r}')


def _region(name, force, k_n_per_mm, mass, transient=True):
    return BodyRegion(name, float(force), 2.0 * force if transient else None,
                      k_n_per_mm * 1e3, float(mass))


# ISO/TS 15066:2016, Annex A (the same data in ISO 10218-2:2025 Annex A). Quasi-static force
# F_s: Table A.2 (the lowest of the region's specific areas); transient force F_T = 2 F_s
# (Table A.2's transient multiplier; the standard permits no transient contact with the skull,
# forehead or face). Spring constant k (N/mm) and effective mass m_H (kg): Table A.3.
# Cross-checked against third-party copies: F_T of back, chest, abdomen, pelvis, upper arm,
# lower arm and hand; k of skull, face, neck, back, chest and abdomen; m_H of the back. The
# other values are as read from the standard and must be verified against a licensed copy;
# any value can be overridden (body_regions()).
BODY_REGIONS = {r.name: r for r in (
    _region('skull_forehead', 130, 150, 4.4, transient=False),
    _region('face', 65, 75, 4.4, transient=False),
    _region('neck', 150, 50, 1.2),
    _region('back_shoulders', 210, 35, 40.0),
    _region('chest', 140, 25, 40.0),
    _region('abdomen', 110, 10, 40.0),
    _region('pelvis', 180, 25, 40.0),
    _region('upper_arm_elbow', 150, 30, 3.0),
    _region('lower_arm_wrist', 160, 40, 2.0),
    _region('hand', 140, 75, 0.6),
    _region('thigh_knee', 220, 50, 75.0),
    _region('lower_leg', 130, 60, 75.0),
)}

_FIELDS = ('quasi_static_force', 'transient_force', 'spring_constant', 'effective_mass')


def body_regions(overrides=None):
    """The body-region table, with entries replaced or added from a dict or a YAML file.

    ``overrides`` maps a region name to a dict of the BodyRegion fields in SI units (N, N/m,
    kg); fields left out keep the standard's values, and a new region needs all of them.
    """
    if overrides is None:
        return dict(BODY_REGIONS)
    if isinstance(overrides, str):
        with open(overrides) as stream:
            overrides = yaml.safe_load(stream) or {}
    if not isinstance(overrides, dict):
        raise ValueError(f'body region overrides must be a mapping, got {overrides!r}')
    regions = dict(BODY_REGIONS)
    for name, values in overrides.items():
        if not isinstance(values, dict) or set(values) - set(_FIELDS):
            raise ValueError(f'body region {name!r}: expected a mapping of {", ".join(_FIELDS)}, '
                             f'got {values!r}')
        known = dataclasses.asdict(regions[name]) if name in regions else {}
        missing = set(_FIELDS) - set(known) - set(values)
        if missing:
            raise ValueError(f'new body region {name!r} needs {", ".join(sorted(missing))}')
        fields = {**known, **values, 'name': name}
        regions[name] = BodyRegion(**{k: v if v is None or k == 'name' else float(v)
                                      for k, v in fields.items()})
    return regions


def point_jacobian(model, q, frame, offset=(0.0, 0.0, 0.0)):
    """J_v (3 x nv, base axes) of the point at ``offset`` (frame axes) from the frame's origin.

    v_p = v_o + omega x p with p = R offset (L&P §5.1): J_v,p = J_v,o - [p]x J_omega.
    """
    A = _point_map(model, q, frame, offset)
    return A @ frame_jacobian(model, q, frame, reference=LOCAL_WORLD_ALIGNED)


def point_mobility(model, q, frame, offset=(0.0, 0.0, 0.0)):
    """Phi = J_v M^-1 J_v^T (3x3, base axes): the point's acceleration per unit force.

    A Phi_o A^T, Phi_o = J M^-1 J^T the frame's 6x6 mobility (L&P eq. 8.90's inverse) and
    A = [-[p]x  1] the map from the frame's (omega, v_o) to the point's velocity.
    """
    A = _point_map(model, q, frame, offset)
    return A @ inverse_task_space_inertia(model, q, frame, LOCAL_WORLD_ALIGNED) @ A.T


def point_velocity(model, q, v, frame, offset=(0.0, 0.0, 0.0)):
    """J_v v: the velocity (base axes) of the point at ``offset`` (frame axes)."""
    A = _point_map(model, q, frame, offset)
    return A @ frame_velocity(model, q, v, frame, reference=LOCAL_WORLD_ALIGNED)


def _point_map(model, q, frame, offset):
    """A (3x6) = [-[p]x  1], p = R offset: (omega, v_o) of the frame to the point's velocity."""
    x, y, z = frame_pose(model, q, frame)[:3, :3] @ _vector(offset, 'offset')
    return np.array([[0.0, z, -y, 1.0, 0.0, 0.0],
                     [-z, 0.0, x, 0.0, 1.0, 0.0],
                     [y, -x, 0.0, 0.0, 0.0, 1.0]])


def twist_joint_velocity(model, q, frame, twist, cutoff=1e-6):
    """q̇ = J̄ ẋ: the joint velocity of least kinetic energy moving ``frame`` at ẋ = (ω, ṗ).

    ẋ in LOCAL_WORLD_ALIGNED, angular first. J̄ = M⁻¹ Jᵀ Λ minimises ½ q̇ᵀ M q̇ subject to
    J q̇ = ẋ (Khatib 1987's dynamically consistent inverse; J⁻¹ for a 6-dof arm): the motion a
    task-space law commands, with nothing asked of the null space. Λ singularity-robust as in
    the task-space laws (``cutoff``: operational_space).
    """
    twist = np.asarray(twist, dtype=float)
    if twist.shape != (6,) or not np.isfinite(twist).all():
        raise ValueError(f'twist must be 6 finite numbers (angular first), got {twist!r}')
    return dynamically_consistent_inverse(model, q, frame, cutoff=cutoff) @ twist


def reflected_mass(model, q, frame, direction, offset=(0.0, 0.0, 0.0)):
    """m_R = 1 / (u^T J_v M^-1 J_v^T u) at the point along the unit direction u (base axes).

    Khatib's effective mass (L&P §8.6); inf where the point cannot move along u.
    """
    u = _vector(direction, 'direction')
    norm = np.linalg.norm(u)
    if norm == 0.0:
        raise ValueError('direction must be a non-zero 3-vector (base axes)')
    u = u / norm
    return _inverse(u @ point_mobility(model, q, frame, offset) @ u)


def _inverse(phi):
    return 1.0 / phi if phi > 0.0 else math.inf


def _vector(x, name):
    try:
        x = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        x = np.full(0, np.nan)
    if x.shape != (3,) or not np.all(np.isfinite(x)):
        raise ValueError(f'{name} must be 3 finite numbers, got {x!r}')
    return x


@dataclasses.dataclass(frozen=True)
class Drive:
    """The controller's pull on the contact point along the direction of motion, during contact.

    A controller tracking a reference that moves on at the contact speed v pulls the point
    towards it as a spring and damper: stiffness K = m_R kp + stiffness (N/m) and damping
    D = m_R kd + 2 damping_ratio sqrt(m_R stiffness) (N s/m). Computed torque and operational
    space with inertia shaping give kp, kd (1/s², 1/s: accelerations per error, times the
    reflected mass m_R); a Cartesian impedance gives ``stiffness`` (N/m) and its damping ratio.
    Drive() is the standard's free robot mass.
    """

    kp: float = 0.0
    kd: float = 0.0
    stiffness: float = 0.0
    damping_ratio: float = 0.0

    def __post_init__(self):
        for field in ('kp', 'kd', 'stiffness', 'damping_ratio'):
            value = getattr(self, field)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0.0):
                raise ValueError(f'Drive.{field} must be a finite number >= 0, got {value!r}')

    def gains(self, robot_mass):
        """(K N/m, D N s/m) along the direction of motion for a reflected mass m_R."""
        return (robot_mass * self.kp + self.stiffness,
                robot_mass * self.kd + 2.0 * self.damping_ratio * math.sqrt(
                    robot_mass * self.stiffness))


FREE = Drive()
CONTACT_SAMPLES = 256     # time samples per free contact duration in contact_force_per_speed
CONTACT_HORIZON = 4.0     # free contact durations searched for the peak, at most
MASS_GRID = np.linspace(math.log(0.01), math.log(1e4), 61)   # ln m_R (kg) of drive_factor


def contact_force_per_speed(robot_mass, region, drive=FREE):
    """F_peak / v: the peak force of the first contact per unit contact speed (N s/m).

    The standard's two masses and spring (A.3), the robot mass m_R driven by ``drive`` towards
    a reference moving on at the contact speed v (the controller does not know of the contact):

        m_R ẍ_R = K (v t - x_R) + D (v - ẋ_R) - F,   m_H ẍ_H = F,   F = k (x_R - x_H),

    from x_R = x_H = 0, ẋ_R = v, ẋ_H = 0. Linear and started in proportion to v, so the peak of
    F over the first contact (until F returns to 0) is v times this number. Without a drive it
    is sqrt(μ k), the standard's F = v sqrt(μ k); a drive adds the force it builds up while the
    body stops the robot. Solved exactly on a grid of T_0 / CONTACT_SAMPLES (T_0 = π sqrt(μ/k),
    the free contact's duration), over at most CONTACT_HORIZON T_0.
    """
    m_R, m_H, k = robot_mass, region.effective_mass, region.spring_constant
    mu = reduced_mass(m_R, m_H)
    if math.isinf(m_R) or drive == FREE:
        return math.sqrt(mu * k)
    K, D = drive.gains(m_R)
    # state (e = v t - x_R, ė, d = x_R - x_H, ẋ_H) per unit v, and the constant 1
    A = np.array([[0.0, 1.0, 0.0, 0.0, 0.0],
                  [-K / m_R, -D / m_R, k / m_R, 0.0, 0.0],
                  [0.0, -1.0, 0.0, -1.0, 1.0],
                  [0.0, 0.0, k / m_H, 0.0, 0.0],
                  [0.0, 0.0, 0.0, 0.0, 0.0]])
    n = int(CONTACT_HORIZON * CONTACT_SAMPLES)
    step = scipy.linalg.expm(A * (math.pi * math.sqrt(mu / k) / CONTACT_SAMPLES))
    states = np.zeros((n + 1, 5))
    states[0, 4] = 1.0
    filled, power = 1, step
    while filled <= n:   # states[i] = step^i z0, doubling the filled block each pass
        block = min(filled, n + 1 - filled)
        states[filled:filled + block] = states[:block] @ power.T
        filled, power = filled + block, power @ power
    d = states[:, 2]
    ended = np.nonzero(d[1:] < 0.0)[0]
    return k * float(d[:ended[0] + 1 if len(ended) else n + 1].max())


@functools.lru_cache(maxsize=256)
def _drive_factors(region, drive):
    return np.array([contact_force_per_speed(math.exp(x), region, drive)
                     / contact_force_per_speed(math.exp(x), region) for x in MASS_GRID])


def drive_factor(robot_mass, region, drive=FREE):
    """F_peak with ``drive`` / F_peak of the free robot mass, at the same contact speed (>= 1).

    Interpolated in ln m_R on MASS_GRID (0.01 to 10^4 kg, 61 points: within 0.1 % of
    contact_force_per_speed for the table's regions and the default gains), tabulated once per
    region and drive; outside the grid, its end values. 1 for the free mass and for m_R = inf.
    """
    if drive == FREE or math.isinf(robot_mass):
        return 1.0
    return float(np.interp(math.log(robot_mass), MASS_GRID, _drive_factors(region, drive)))


def reduced_mass(robot_mass, human_mass):
    """mu = (1/m_R + 1/m_H)^-1 (ISO/TS 15066 A.3.2); m_R = inf gives m_H."""
    return 1.0 / (1.0 / robot_mass + 1.0 / human_mass)


def permissible_speed(robot_mass, region, drive=FREE):
    """v_max = F_T / (sqrt(mu k) f) (ISO/TS 15066 A.3.2), 0 where no transient contact is permitted.

    With f = 1 (no ``drive``), the relative speed whose energy mu v^2 / 2 equals the region's
    F_T^2 / (2 k). With the controller's drive, f = drive_factor: the speed whose first contact
    peaks at F_T while the controller keeps pulling towards its reference.
    """
    if region.transient_force is None:
        return 0.0
    return region.transient_force / math.sqrt(
        reduced_mass(robot_mass, region.effective_mass) * region.spring_constant) / drive_factor(
            robot_mass, region, drive)


def moving_mass(model):
    """M: the total mass of the model's moving bodies (a payload added with with_payload too)."""
    return float(np.sum(model.inertia[:, 0]))


def standard_robot_mass(model, payload=0.0):
    """m_R = M/2 + m_L, the standard's single number (ISO/TS 15066 A.3.2), M of ``model``."""
    return moving_mass(model) / 2.0 + payload


@dataclasses.dataclass(frozen=True)
class ContactPoint:
    """A point of possible contact: ``offset`` (m, frame axes) from ``frame``'s origin."""

    frame: str
    offset: tuple = (0.0, 0.0, 0.0)


@dataclasses.dataclass(frozen=True)
class PointStatus:
    """What the speed scaling found at one contact point (SI units, base axes)."""

    point: ContactPoint
    speed: float             # |J_v v| of the velocity the scaling was asked about
    direction: np.ndarray    # its unit direction u (NaN when the point is at rest)
    reflected_mass: float    # m_R(q, u) (NaN at rest)
    permissible_speed: float  # the lowest v_max of the regions (inf at rest)
    region: str              # the region giving it (None at rest)


class SpeedScaling:
    """The speed scale s = min(1, min_i v_max,i / |v_i|) over contact points, smoothed.

    ``update(q, v, dt)`` takes the *nominal* joint velocity v, the one the motion would have at
    s = 1 (a trajectory's q̇_d(τ)): the scaled motion then moves point i at s |v_i| <= v_max,i.
    s falls at most at ``fall_rate`` (1/s) and rises at most at ``rise_rate``; it starts rising
    only once its target exceeds it by ``hysteresis`` (or reaches 1), and then keeps following
    the target up until the target falls below it, so it neither chatters on the border nor
    climbs a slowly rising target in steps. ``points`` holds the last PointStatus of each
    contact point. ``drive``: the controller's pull during a contact (Drive; permissible_speed).
    """

    def __init__(self, model, points, regions, rise_rate=1.0, fall_rate=20.0, hysteresis=0.02,
                 rest_speed=1e-6, drive=FREE):
        if not points:
            raise ValueError('SpeedScaling needs at least one contact point')
        self.model = model
        self.contact_points = [p if isinstance(p, ContactPoint) else ContactPoint(*p)
                               for p in points]
        for p in self.contact_points:
            model.frame_index(p.frame)
            _vector(p.offset, f'offset of contact point {p.frame!r}')
        self.regions = list(regions.values() if isinstance(regions, dict) else regions)
        if not self.regions or not all(isinstance(r, BodyRegion) for r in self.regions):
            raise ValueError(f'regions must be BodyRegions, got {regions!r}')
        for name, value in (('rise_rate', rise_rate), ('fall_rate', fall_rate)):
            _positive(value, name)
        if not 0.0 <= hysteresis < 1.0:
            raise ValueError(f'hysteresis must be in [0, 1), got {hysteresis!r}')
        self.rise_rate, self.fall_rate, self.hysteresis = rise_rate, fall_rate, hysteresis
        if not isinstance(drive, Drive):
            raise ValueError(f'drive must be a Drive, got {drive!r}')
        self.rest_speed, self.drive = rest_speed, drive
        for region in self.regions:   # tabulate the drive's factors now, not mid-motion
            drive_factor(1.0, region, drive)
        self.s, self.points, self.rising = 1.0, [], False

    def target(self, q, v):
        """min(1, v_max,i / |v_i|) over the points, without smoothing; fills ``points``."""
        self.points = [self._status(p, q, v) for p in self.contact_points]
        return min([1.0] + [p.permissible_speed / p.speed for p in self.points
                            if p.speed > self.rest_speed])

    def _status(self, point, q, v):
        velocity = point_velocity(self.model, q, v, point.frame, point.offset)
        speed = float(np.linalg.norm(velocity))
        if speed <= self.rest_speed:
            return PointStatus(point, speed, np.full(3, np.nan), math.nan, math.inf, None)
        u = velocity / speed
        m_R = _inverse(u @ point_mobility(self.model, q, point.frame, point.offset) @ u)
        v_max, region = min((permissible_speed(m_R, r, self.drive), r.name)
                            for r in self.regions)
        return PointStatus(point, speed, u, m_R, v_max, region)

    def update(self, q, v, dt):
        """The new s after dt seconds at nominal joint velocity v in configuration q."""
        if not (dt > 0.0 and math.isfinite(dt)):
            raise ValueError(f'dt must be a finite number > 0, got {dt!r}')
        target = self.target(q, v)
        if target < self.s:
            self.s, self.rising = max(target, self.s - self.fall_rate * dt), False
        elif self.rising or target >= 1.0 or target > self.s + self.hysteresis:
            self.s, self.rising = min(target, self.s + self.rise_rate * dt), True
        return self.s


class ScaledClock:
    """A trajectory clock slowed by s(t): dτ/dt = s.

    A reference q_d(τ) then moves at dq/dt = s q̇_d(τ) and accelerates at
    d²q/dt² = s² q̈_d(τ) + ṡ q̇_d(τ) (chain rule), so q, q̇, q̈ stay consistent while s changes.
    """

    def __init__(self, tau=0.0, s=1.0):
        self.tau, self.s, self.s_dot = float(tau), float(s), 0.0

    def advance(self, s, dt):
        """τ += s dt; ṡ from the change of s over dt. Returns τ."""
        self.s_dot = (s - self.s) / dt
        self.s = s
        self.tau += s * dt
        return self.tau

    def sample(self, trajectory):
        """(q, q̇, q̈) of ``trajectory`` (a JointTrajectory) at the clock's τ, time-scaled."""
        q, v, a = trajectory.sample(self.tau)
        return q, self.s * v, self.s ** 2 * a + self.s_dot * v
