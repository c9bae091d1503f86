"""What both simulation engines share: argument checks, joint order, the tip wrench."""
import numpy as np

WRENCH_FRAMES = ('base', 'tip')


class Engine:
    """An arm integrated at a fixed step dt; every vector is in ``joint_names`` order.

    ``model``: the simulated arm (rd.Model, payload and joint terms included), used as given.
    ``urdf_xml`` and ``payload`` (dict(mass, com, inertia) at the tip, the one in ``model``) are
    for an engine that builds its own copy of the arm from the URDF (MuJoCo).
    ``end_stops``: the joints stop at ``model``'s position limits (the URDF's; each engine its
    own way: the internal one an inelastic impact, MuJoCo its joint limit constraint).

    Subclasses provide the state ``q``, ``v`` and
    ``_advance(tau, F)``: one step with τ and the base-axes tip wrench F (None: none) held;
    ``_acceleration(tau, F)``: q̈ at the current state;
    ``_tip_rotation()``: 3x3 orientation of the tip frame in the base frame;
    ``_set_state(q, v)`` and ``_holding_torque(F)``: g(q) − Jᵀ F at the current q.
    ``_advance`` raises ValueError when the state diverges (MuJoCo: q, q̇ or q̈ non-finite or
    beyond 1e10, where MuJoCo itself would reset the arm to qpos0 and go on).
    """

    def __init__(self, model, joint_names, q0, dt, damping=None, urdf_xml=None, payload=None,
                 end_stops=True):
        self.joint_names = tuple(joint_names)
        #: index in model order of each joint of joint_names
        self.order = joint_order(model, self.joint_names)
        #: the simulated arm as robot_dynamics models it, payload and joint terms included
        self.model = model
        self.payload = dict(payload) if payload else None
        self.dt = float(dt)
        if not (np.isfinite(self.dt) and self.dt > 0.0):
            raise ValueError(f'time step dt must be > 0, got {dt}')
        damping = np.asarray(0.0 if damping is None else damping, dtype=float)
        self.damping = self._joint_vector(damping * np.ones(model.nv) if damping.ndim == 0
                                          else damping, 'damping')
        if (self.damping < 0.0).any():
            raise ValueError(f'damping must be >= 0, got {self.damping}')
        self.q0 = self._joint_vector(q0, 'q0')
        #: the end stops, joints order: the URDF's position limits (±inf: none, as a continuous
        #: joint's, or end_stops off)
        self.end_stops = bool(end_stops)
        self.lower = model.lower[self.order] if end_stops else np.full(model.nv, -np.inf)
        self.upper = model.upper[self.order] if end_stops else np.full(model.nv, np.inf)
        outside = (self.q0 < self.lower) | (self.q0 > self.upper)
        if outside.any():
            raise ValueError('q0 is outside the joint limits (end stops) of ' + ', '.join(
                f'{self.joint_names[i]} ({self.q0[i]} not in [{self.lower[i]}, '
                f'{self.upper[i]}])' for i in np.flatnonzero(outside)) +
                ': start inside them (or turn end_stops off)')
        self.effort = np.zeros(model.nv)
        self.steps = 0

    @property
    def time(self):
        """Return the simulated time, s: steps taken times dt."""
        return self.steps * self.dt

    def step(self, tau, wrench=None, wrench_frame='base'):
        """Advance one step dt with joint torques τ and a tip wrench (moment, force) held.

        ``wrench_frame``: 'base' or 'tip', the axes of the wrench; it acts at the tip origin.
        """
        tau = self._joint_vector(tau, 'tau')
        self._advance(tau, self.tip_wrench(wrench, wrench_frame))
        self.effort = tau   # a torque-sensing arm reports the applied joint torques
        self.steps += 1

    def set_state(self, q, v):
        """Jump to the state (q, q̇), e.g. to carry it over into a rebuilt engine."""
        self._set_state(self._joint_vector(q, 'q'), self._joint_vector(v, 'v'))

    def holding_torque(self, wrench=None, wrench_frame='base'):
        """g(q) − Jᵀ F: the joint torques that hold the arm at rest (what brakes hold)."""
        return self._holding_torque(self.tip_wrench(wrench, wrench_frame))

    def acceleration(self, tau, wrench=None, wrench_frame='base'):
        """q̈ = M⁻¹ (τ − D q̇ + Jᵀ F − C q̇ − g − τ_f) at the current state, without stepping."""
        return self._acceleration(self._joint_vector(tau, 'tau'),
                                  self.tip_wrench(wrench, wrench_frame))

    def _to_model(self, x):
        """A vector in joint_names order -> model order."""
        out = np.empty(len(self.order))
        out[self.order] = x
        return out

    def _joint_vector(self, x, name):
        return joint_vector(x, name, self.joint_names)

    def tip_wrench(self, wrench, frame='base'):
        """Return the wrench in base axes at the tip origin; None for no (or a zero) wrench."""
        if frame not in WRENCH_FRAMES:
            raise ValueError(f"wrench_frame must be 'base' or 'tip', got {frame!r}")
        if wrench is None:
            return None
        F = np.array(wrench, dtype=float)
        if F.shape != (6,) or not np.isfinite(F).all():
            raise ValueError(f'wrench must be 6 finite numbers (moment, force), got {wrench}')
        if not F.any():
            return None
        if self.model.tip is None:
            raise ValueError('a tip wrench needs a tip link: this engine simulates a whole tree')
        if frame == 'tip':
            R = self._tip_rotation()
            F = np.concatenate([R @ F[:3], R @ F[3:]])
        return F


def joint_order(model, joint_names):
    """The model index of each of ``joint_names``, which must name each joint once."""
    if sorted(joint_names) != sorted(model.joint_names):
        raise ValueError(f'joint_names {list(joint_names)} must name each joint of the '
                         f'chain {model.base} -> {model.tip} once: {list(model.joint_names)}')
    return np.array([model.joint_names.index(n) for n in joint_names])


def joint_vector(x, name, joint_names):
    """x as a float array with one finite value per joint, or a ValueError naming it."""
    x = np.array(x, dtype=float)
    if x.shape != (len(joint_names),) or not np.isfinite(x).all():
        raise ValueError(f'{name} must be {len(joint_names)} finite numbers, one per '
                         f'joint {list(joint_names)}, got {x.tolist()}')
    return x
