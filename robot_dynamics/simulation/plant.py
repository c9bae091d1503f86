"""The plant: a simulated arm that is not its controller's model, as a real arm never is.

Layers around an engine (``simulate``), every one off unless configured; vectors are in the
engine's ``joint_names`` order:

- **inertias**: the engine loads a second URDF (``perturbed_urdf``: every link's mass and
  inertia scaled by one factor 1 + u·mass_error, u uniform in [-1, 1], and its centre of mass
  moved by at most com_error in a uniformly random direction; seeded);
- **joint friction** beyond the engine's viscous and Coulomb terms (which stay in the engine's
  model, evaluated at every RK4 stage): Stribeck stiction, the excess of the breakaway torque
  f_s over the Coulomb level f_c decaying with speed,
  τ_s(q̇) = (f_s − f_c) exp(−(q̇ / v_s)²) tanh(q̇ / ε) (the Stribeck term of rd's joint
  friction, core friction.py, with stiction f_s − f_c), and the sigmoid law Gaz et al. identified
  on the Panda, τ_σ(q̇) = φ1 / (1 + exp(−φ2 (q̇ + φ3))) − φ1 / (1 + exp(−φ2 φ3));
  both at the velocity at the start of the step and held over it (``Plant.friction``);
  or, with ``holds`` (profile key ``plant.dry_friction``), **dry friction that holds**: the
  engine's Coulomb friction and the stiction become the internal engine's stick-slip law
  (simulation.dry_friction: a joint at rest stays exactly at rest while the torque holding it
  is within f_s, and slides with f_c + (f_s − f_c) exp(−(q̇ / v_s)²) otherwise), where the
  smooth laws above creep under any steady load below breakaway;
- **command delay**: the torque applied in step k is the command of step k − d
  (``CommandDelay``);
- **sensors** (``Sensors``): positions quantised to a resolution (encoder counts), white
  Gaussian noise on velocities and efforts, a constant effort offset; one seeded RNG.

``PROFILES`` name documented sets of these, keyed by the arm_simulator's parameter names.
"""
import collections
import xml.etree.ElementTree as ET

import numpy as np

from robot_dynamics.core.algorithms.friction import stribeck_sign

#: Gaz, Cognetti, Oliva, Robuffo Giordano, De Luca, "Dynamic Identification of the Franka
#: Emika Panda Robot With Retrieval of Feasible Parameters Using Penalty-Based Optimization",
#: IEEE RA-L 4(4), 2019: the friction model identified on a Panda, per joint 1..7, as published
#: with the paper's model (github.com/marcocognetti/FrankaEmikaPandaDynModel,
#: get_FrictionTorque.m). φ1 in N m, φ2 in s/rad, φ3 in rad/s.
GAZ_2019_FRICTION = dict(
    amplitude=[0.54615, 0.87224, 0.64068, 1.2794, 0.83904, 0.30301, 0.56489],
    slope=[5.1181, 9.0657, 10.136, 5.5903, 8.3469, 17.133, 10.336],
    offset=[0.039533, 0.025882, -0.04607, 0.036194, 0.026226, -0.021047, 0.0035526])

#: What a user meets on day one: the effects a real arm adds to its URDF, with
#: illustrative magnitudes (not measured on any one arm). Per-joint values apply to every joint.
REALISTIC = {
    'plant.mass_error': 0.1,             # link masses (and inertias) off by up to ±10 %
    'plant.com_error': 0.005,            # centres of mass moved up to 5 mm
    'armature': 0.05,                    # kg m², reflected rotor inertia
    'friction.viscous': 0.3,             # N m s/rad
    'friction.coulomb': 0.2,             # N m
    'plant.stiction': 0.3,               # N m breakaway torque (Stribeck: 0.1 N m above Coulomb)
    'plant.stribeck_velocity': 0.05,     # rad/s
    'plant.position_resolution': 1e-5,   # rad (an encoder of ~630 000 counts per turn)
    'plant.velocity_noise': 2e-3,        # rad/s standard deviation
    'plant.effort_noise': 0.05,          # N m standard deviation
    'plant.command_delay': 1,            # cycles
}
#: The Panda as Gaz et al. identified its friction (GAZ_2019_FRICTION) in place of the
#: viscous, Coulomb and Stribeck terms of REALISTIC; the rest as REALISTIC.
PANDA_GAZ_2019 = {**{k: v for k, v in REALISTIC.items() if k not in (
    'friction.viscous', 'friction.coulomb', 'plant.stiction', 'plant.stribeck_velocity')},
    **{f'plant.sigmoid_friction.{k}': v for k, v in GAZ_2019_FRICTION.items()}}
PROFILES = {'none': {}, 'realistic': REALISTIC, 'panda_gaz2019': PANDA_GAZ_2019}
#: REALISTIC with dry friction that holds (``Friction.holds``): the same friction levels, but a
#: joint at rest under a load below its breakaway torque does not creep. In-process only
#: (simulation.closed_loop.realistic_plant, internal engine): the arm_simulator node steps its
#: engine without it, so it is not among PROFILES (the node's plant.profile choices).
REALISTIC_STICTION = {**REALISTIC, 'plant.dry_friction': True}


class CommandDelay:
    """A line of d commands: ``push`` returns the command pushed d calls before.

    The first push fills the line with its command (an arm holding still before it).
    """

    def __init__(self, cycles):
        if int(cycles) != cycles or cycles < 0:
            raise ValueError(f'command delay must be a whole number of cycles >= 0, got {cycles}')
        self.cycles, self.line = int(cycles), collections.deque()

    def push(self, tau):
        """Queue τ; return the command of ``cycles`` pushes ago."""
        tau = np.array(tau, dtype=float)
        if not self.line:
            self.line.extend(tau.copy() for _ in range(self.cycles))
        self.line.append(tau)
        return self.line.popleft()


class Sensors:
    """Measured (q, q̇, τ): q rounded to ``resolution``; q̇ and τ with noise; τ with ``offset``."""

    def __init__(self, n, resolution=0.0, velocity_noise=0.0, effort_noise=0.0, offset=None,
                 seed=0):
        self.resolution, self.velocity_noise = float(resolution), float(velocity_noise)
        self.effort_noise = float(effort_noise)
        self.offset = np.zeros(n) if offset is None else np.array(offset, dtype=float)
        if min(self.resolution, self.velocity_noise, self.effort_noise) < 0.0 or \
                self.offset.shape != (n,) or not np.isfinite(self.offset).all():
            raise ValueError('sensors need resolution and noise levels >= 0 and one finite '
                             f'effort offset per joint ({n}), got {resolution}, {velocity_noise}, '
                             f'{effort_noise}, {offset}')
        self.rng = np.random.default_rng(seed)

    def measure(self, q, v, effort):
        """Return (q, q̇, τ) as the sensors report them."""
        q, v, effort = (np.array(x, dtype=float) for x in (q, v, effort))
        if self.resolution:
            q = np.round(q / self.resolution) * self.resolution
        if self.velocity_noise:
            v += self.rng.normal(0.0, self.velocity_noise, v.shape)
        if self.effort_noise:
            effort += self.rng.normal(0.0, self.effort_noise, effort.shape)
        return q, v, effort + self.offset


class Friction:
    """The plant's friction beyond the engine's: Stribeck stiction and Gaz's sigmoid (module doc).

    ``stiction`` f_s and ``coulomb`` f_c per joint (f_s ≥ f_c; None: no stiction), ``stribeck``
    v_s > 0, ``coulomb_velocity`` ε; ``sigmoid`` dict(amplitude, slope, offset) per joint or None.
    ``holds``: the Coulomb friction and stiction are dry friction that holds, acting in the
    engine (``breakaway`` f_s per joint, f_c where no stiction; ``InternalEngine
    .hold_dry_friction``), not here: only the sigmoid law remains held over the step.
    """

    def __init__(self, n, stiction=None, coulomb=None, stribeck=0.05, coulomb_velocity=0.01,
                 sigmoid=None, holds=False):
        self.holds, self.breakaway = bool(holds), None
        if self.holds:
            self.breakaway = np.broadcast_to(np.asarray(
                stiction if stiction is not None else coulomb if coulomb is not None else 0.0,
                dtype=float), (n,)).copy()
        self.excess = None
        if stiction is not None:
            coulomb = np.zeros(n) if coulomb is None else np.asarray(coulomb, dtype=float)
            self.excess = np.asarray(stiction, dtype=float) - coulomb
            if self.excess.shape != (n,) or (self.excess < 0).any() or not stribeck > 0:
                raise ValueError(f'stiction needs one breakaway torque per joint ({n}), each >= '
                                 f'its Coulomb friction {coulomb.tolist()}, and a Stribeck '
                                 f'velocity > 0; got {stiction}, {stribeck}')
        self.stribeck, self.epsilon = float(stribeck), float(coulomb_velocity)
        self.sigmoid = None
        if sigmoid is not None:
            self.sigmoid = tuple(np.asarray(sigmoid[k], dtype=float)
                                 for k in ('amplitude', 'slope', 'offset'))
            if any(x.shape != (n,) or not np.isfinite(x).all() for x in self.sigmoid) or \
                    (self.sigmoid[0] < 0).any() or (self.sigmoid[1] <= 0).any():
                raise ValueError(f'sigmoid friction needs amplitude >= 0, slope > 0 and an '
                                 f'offset, one finite value each per joint ({n}); got {sigmoid}')

        if self.holds:
            self.excess = None   # in the engine's dry friction

    @property
    def acts(self):
        """Whether there is any held over the step (stiction or sigmoid friction)."""
        return self.excess is not None or self.sigmoid is not None

    def __call__(self, v):
        """τ_s(q̇) + τ_σ(q̇), N m (N)."""
        v = np.asarray(v, dtype=float)
        tau = np.zeros_like(v)
        if self.excess is not None:
            tau += self.excess * stribeck_sign(v, self.stribeck, self.epsilon)   # rd's law
        if self.sigmoid is not None:
            phi1, phi2, phi3 = self.sigmoid
            tau += phi1 / (1.0 + np.exp(-phi2 * (v + phi3))) - phi1 / (1.0 + np.exp(-phi2 * phi3))
        return tau

    def max_slope(self):
        """An upper bound of |dτ/dq̇| per joint: f_s − f_c over ε, and φ1 φ2 / 4."""
        slope = 0.0
        if self.excess is not None:
            slope = slope + self.excess / self.epsilon
        if self.sigmoid is not None:
            slope = slope + self.sigmoid[0] * self.sigmoid[1] / 4.0
        return slope


class Plant:
    """The layers an engine step goes through: delay, friction, sensors (module docstring).

    ``command(τ)`` is the torque to apply this step (the delayed command); ``friction(q̇)`` the
    torque the plant's extra friction takes from it; ``sense(q, q̇, τ)`` what the sensors report.
    """

    def __init__(self, n, friction=None, delay=0, sensors=None):
        self.n = n
        self._friction = friction if friction is not None and friction.acts else None
        self.delay = CommandDelay(delay)
        self.sensors = sensors or Sensors(n)

    def command(self, tau):
        return self.delay.push(tau)

    def friction(self, v):
        return np.zeros(self.n) if self._friction is None else self._friction(v)

    def sense(self, q, v, effort):
        return self.sensors.measure(q, v, effort)

    def max_friction_slope(self):
        """Upper bound of |dτ_f/dq̇| per joint of the held friction (0: none)."""
        return np.zeros(self.n) if self._friction is None else \
            np.broadcast_to(self._friction.max_slope(), (self.n,))


def perturbed_urdf(urdf_xml, mass_error=0.0, com_error=0.0, seed=0):
    """The URDF with each link's inertial perturbed (module docstring); returns (xml, changes).

    Mass and inertia (about the centre of mass) scale by the same factor 1 + u mass_error, u
    uniform in [-1, 1]: a denser or lighter body of the same shape, positive definite as before.
    The centre of mass moves by r ≤ com_error (r uniform) along a uniformly random direction.
    ``changes``: {link: (mass factor, com shift (3,))}.
    """
    if not (0.0 <= mass_error < 1.0 and com_error >= 0.0):
        raise ValueError(f'mass_error must be in [0, 1) and com_error >= 0, got {mass_error}, '
                         f'{com_error}')
    robot = ET.fromstring(urdf_xml)
    rng, changes = np.random.default_rng(seed), {}
    for link in robot.findall('link'):
        inertial = link.find('inertial')
        if inertial is None or inertial.find('mass') is None:
            continue
        factor = 1.0 + mass_error * rng.uniform(-1.0, 1.0)
        direction = rng.normal(size=3)
        shift = com_error * rng.uniform() * direction / np.linalg.norm(direction)
        mass = inertial.find('mass')
        mass.set('value', repr(float(mass.get('value')) * factor))
        inertia = inertial.find('inertia')
        if inertia is not None:
            for key, value in inertia.attrib.items():
                inertia.set(key, repr(float(value) * factor))
        origin = inertial.find('origin')
        if origin is None:
            origin = ET.SubElement(inertial, 'origin', xyz='0 0 0', rpy='0 0 0')
        xyz = np.array(origin.get('xyz', '0 0 0').split(), dtype=float) + shift  # link axes
        origin.set('xyz', ' '.join(repr(float(x)) for x in xyz))
        changes[link.get('name')] = (factor, shift)
    return ET.tostring(robot, encoding='unicode'), changes
