"""Task-space control laws as plain objects: Cartesian impedance and operational-space control.

The task is the pose of one frame (default: the model's tip) in ``LOCAL_WORLD_ALIGNED``:
twists (ω, ṗ) and wrenches (moment about the frame origin, force), base axes, angular first.
The error e = pose_error(T_d, T) = (log(R_d Rᵀ), p_d − p) is on SO(3) x R³ (never Euler angles),
ė = ẋ_d − J q̇. A redundant arm's remaining freedom follows a joint posture law
τ_null = K_n (q_n − q) − D_n q̇ through the dynamically consistent Nᵀ = 1 − Jᵀ J̄ᵀ, which
exerts no force at the frame (J̄ᵀ Nᵀ = 0); a 6-dof arm has N = 0.

Stiffness at equilibrium, null space included: with q̇ = q̈ = 0 and a wrench F at the frame,
M q̈ + h = τ + Jᵀ F and τ = Jᵀ K e + Nᵀ τ_null + g give Jᵀ (K e + F) + Nᵀ τ_null = 0.
Multiplying by J̄ᵀ, with J̄ᵀ Jᵀ = (J J̄)ᵀ = (J M⁻¹ Jᵀ Λ)ᵀ = 1 and J̄ᵀ Nᵀ = (N J̄)ᵀ = 0, leaves
K e = −F whatever τ_null: the frame is displaced by K⁻¹ F. A projector that is not
dynamically consistent (e.g. 1 − J⁺ J) has J̄ᵀ Nᵀ ≠ 0 and lets the posture push the frame.
(J J̄ = 1 needs Λ = (J M⁻¹ Jᵀ)⁻¹: away from singularities, where the default cut-off is inactive.)
"""
import numpy as np
from scipy.spatial.transform import Rotation

from .algorithms import task_law
from .algorithms.crba import mass_matrix
from .algorithms.jacobians import (LOCAL_WORLD_ALIGNED, frame_bias_acceleration, frame_jacobian,
                                   frame_pose)
from .algorithms.operational_space import check_regular, cutoff_value, pose_error
from .algorithms.rnea import gravity, nonlinear_effects
from .algorithms.task_law import damping_kernel
from .arguments import damping_value
from .control import JointGains, ModelBound, finite_joint_vector
from .model import Data

INF2 = (np.inf, np.inf)


def damping_matrix(Lambda, stiffness, damping_ratio):
    """D = 2ζ S (S⁺ K S⁺)^{1/2} S, S = Λ^{1/2}: modal damping ratio ζ of Λ ë + D ė + K e = 0.

    Double diagonalisation (Albu-Schäffer, Ott, Frese & Hirzinger, ICRA 2003): with Λ = QᵀQ and
    K = Qᵀ diag(ω²) Q, D = 2ζ Qᵀ diag(ω) Q puts every mode at ratio ζ, also when Λ couples
    the axes; the simpler Λ^{1/2}K^{1/2} + K^{1/2}Λ^{1/2} does so only when Λ and K commute. Here
    Q = Vᵀ S for the eigenvectors V of S⁺ K S⁺; directions where Λ = 0 (cut off) get no damping.
    ``stiffness``: K's diagonal (6).
    """
    return damping_kernel(np.ascontiguousarray(Lambda, dtype=float),
                          np.ascontiguousarray(stiffness, dtype=float), float(damping_ratio))


def pose_interpolation(T0, T1, alpha):
    """The pose a fraction α of the way from T0 to T1 (4x4, base frame) at a constant twist.

    With e = pose_error(T1, T0) = (e_ω, e_v): R = exp(α [e_ω]) R0, p = p0 + α e_v, so the pose
    moves at the twist (ω, ṗ) = e per unit of α (LOCAL_WORLD_ALIGNED, as ė = ẋ_d − ẋ).
    """
    e = pose_error(T1, T0)
    T = np.eye(4)
    T[:3, :3] = Rotation.from_rotvec(alpha * e[:3]).as_matrix() @ np.asarray(T0)[:3, :3]
    T[:3, 3] = np.asarray(T0)[:3, 3] + alpha * e[3:]
    return T


def six_vector(x, name):
    """x as a finite float (6,) array, or a ValueError naming it."""
    try:
        x = np.array(x, dtype=float).reshape(6)
    except (TypeError, ValueError):
        raise ValueError(f'{name} must be 6 numbers (angular first), got {x!r}') from None
    if not np.isfinite(x).all():
        raise ValueError(f'{name} contains NaN or Inf: {x}')
    return x


def limit_pair(x, name):
    """(translation, rotation) limits as an array: two numbers > 0 (inf: no limit)."""
    try:
        x = np.array(x, dtype=float).reshape(2)
    except (TypeError, ValueError):
        raise ValueError(f'{name} must be two numbers (translation, rotation), got {x!r}') from None
    if not (x > 0).all():
        raise ValueError(f'{name} must be > 0 (inf: no limit), got {x}')
    return x


def check_velocity_limit(damping_ratio, max_velocity):
    """A velocity limit acts through D: it needs damping_ratio > 0 (else ValueError)."""
    if damping_ratio == 0.0 and np.isfinite(max_velocity).any():
        raise ValueError('max_velocity needs damping_ratio > 0: the limit acts through the '
                         'damping (K e + D ė = D (v − ẋ))')


class TaskSpaceLaw(ModelBound):
    """Parameters, validation and the task-space terms both laws share (see the subclasses).

    ``stiffness`` (6): K = diag(rotation ×3, translation ×3), angular first, base axes.
    ``damping_ratio`` ζ sets D. ``nullspace_stiffness``, ``nullspace_damping``: K_n, D_n,
    a scalar or (nv,); ``posture`` q_n (None: the q of the first call). ``max_error``
    (translation m, rotation rad) clips |e| per part; ``max_velocity`` (m/s, rad/s) saturates the
    velocity the spring asks for, v = ẋ_d + D⁺ K e, per part (Khatib 1987's velocity limit:
    K e + D ė = D (v − ẋ) unsaturated). ``singular_damping`` and ``singular_cutoff`` make Λ
    robust (robust_inverse). ``max_frequency`` ω_max (rad/s, inf: none) bounds every mode of
    the closed loop: a mode of Λ ë + D ė + K e = 0 faster than ω_max gets the stiffness
    λ ω_max² instead (task_law.modal_gains), so that a late state costs it at most a phase of
    ω_max times the delay. ``condition`` holds κ(J M⁻¹ Jᵀ) of the last call. A call is one
    compiled kernel (algorithms/task_law.py) on the constants packed once (``constants``).
    """

    nullspace_stiffness, nullspace_damping = JointGains(), JointGains()

    def __init__(self, model, stiffness, damping_ratio=1.0, frame=None, nullspace_stiffness=0.0,
                 nullspace_damping=0.0, posture=None, max_error=INF2, max_velocity=INF2,
                 singular_damping=0.0, singular_cutoff=1e-6, max_frequency=np.inf):
        self._model, self._data = model, Data(model)
        self.frame = model.tip if frame is None else frame
        self.stiffness, self.damping_ratio = stiffness, damping_ratio
        self.nullspace_stiffness, self.nullspace_damping = nullspace_stiffness, nullspace_damping
        self.posture, self.max_error, self.max_velocity = posture, max_error, max_velocity
        self.singular_damping, self.singular_cutoff = singular_damping, singular_cutoff
        self.max_frequency = max_frequency
        self.condition = np.nan
        self._packed = None

    def _bind(self, model):
        model.frame_index(self._frame)   # KeyError: the new model lacks the task frame
        super()._bind(model)

    @property
    def frame(self):
        return self._frame

    @frame.setter
    def frame(self, frame):
        if frame is None:
            raise ValueError('frame: the model has no tip; name the task frame')
        self._model.frame_index(frame)   # KeyError listing the known frames
        self._frame = frame

    @property
    def stiffness(self):
        return self._stiffness

    @stiffness.setter
    def stiffness(self, stiffness):
        stiffness = six_vector(stiffness, 'stiffness')
        if (stiffness < 0).any():
            raise ValueError(f'stiffness must be >= 0, got {stiffness}')
        self._stiffness = stiffness

    @property
    def damping_ratio(self):
        return self._damping_ratio

    @damping_ratio.setter
    def damping_ratio(self, ratio):
        ratio = damping_value(ratio, 'damping_ratio')
        check_velocity_limit(ratio, getattr(self, '_max_velocity', INF2))
        self._damping_ratio = ratio

    @property
    def posture(self):
        return self._posture

    @posture.setter
    def posture(self, q_n):
        self._posture = None if q_n is None else finite_joint_vector(self._model, q_n,
                                                                     'posture').copy()

    @property
    def max_error(self):
        return self._max_error

    @max_error.setter
    def max_error(self, limits):
        self._max_error = limit_pair(limits, 'max_error')

    @property
    def max_velocity(self):
        return self._max_velocity

    @max_velocity.setter
    def max_velocity(self, limits):
        limits = limit_pair(limits, 'max_velocity')
        check_velocity_limit(self._damping_ratio, limits)
        self._max_velocity = limits

    @property
    def singular_damping(self):
        return self._singular_damping

    @singular_damping.setter
    def singular_damping(self, damping):
        self._singular_damping = damping_value(damping)

    @property
    def singular_cutoff(self):
        return self._singular_cutoff

    @singular_cutoff.setter
    def singular_cutoff(self, cutoff):
        self._singular_cutoff = cutoff_value(cutoff)

    @property
    def max_frequency(self):
        return self._max_frequency

    @max_frequency.setter
    def max_frequency(self, frequency):
        frequency = float(frequency)
        if not frequency > 0:
            raise ValueError(f'max_frequency must be > 0 rad/s (inf: no limit), got {frequency}')
        self._max_frequency = frequency

    def __setattr__(self, name, value):
        """Setting a parameter drops the packed constants (``constants``)."""
        super().__setattr__(name, value)
        if name not in ('condition', '_packed'):
            super().__setattr__('_packed', None)

    def constants(self):
        """(gains, joint_gains, frame index): the parameters as task_law packs them, cached."""
        if self._packed is None:
            m = self._model
            gains = np.concatenate([self._stiffness, [self._damping_ratio], self._max_error,
                                    self._max_velocity, [self._singular_damping,
                                                         self._singular_cutoff,
                                                         self._max_frequency]])
            posture = np.zeros(m.nv) if self._posture is None else self._posture
            joint_gains_ = np.array([self._nullspace_stiffness, self._nullspace_damping, posture,
                                     m.continuous], dtype=float)
            self._packed = gains, joint_gains_, m.frame_index(self._frame)
        return self._packed

    def torque(self, q, v, pose_d, twist_d, accel_d, wrench_d):
        """τ for float arrays already checked (``arguments``: the node's reader checks its own).

        Without mimic joints one compiled call (task_law_kernel); with them the model terms are
        computed here, in independent coordinates, and task_law_state does the rest.
        """
        if self._posture is None:
            self.posture = q
        m, data, law = self._model, self._data, self.kind
        gains, joint_gains_, f = self.constants()
        target = np.concatenate([pose_d.reshape(16), twist_d, accel_d, wrench_d])
        tau = np.empty(m.nv)
        if m.mimic:
            J = frame_jacobian(m, q, self._frame, LOCAL_WORLD_ALIGNED, data)
            h = gravity(m, q, data) if law == task_law.IMPEDANCE else nonlinear_effects(m, q, v,
                                                                                        data)
            bias_acceleration = (frame_bias_acceleration(m, q, v, self._frame, data=data)
                                 if law >= task_law.SHAPED else np.zeros(6))
            condition = task_law.task_law_state(
                law, J, mass_matrix(m, q, data), frame_pose(m, q, self._frame, data), h,
                bias_acceleration, q, v, target, gains, joint_gains_, tau)
        else:
            condition = task_law.task_law_kernel(m.table, m.frames, f, law, q, v, data.ws,
                                                 target, gains, joint_gains_, tau)
        self.condition = condition
        check_regular(condition < 1e12 or gains[task_law.DAMPING] > 0.0
                      or gains[task_law.CUTOFF] > 0.0)
        return tau

    def arguments(self, q, v, pose_d, twist_d, accel_d, wrench_d):
        """The call's arguments checked: q, q̇ (nv,), T_d 4x4 (a rotation), 6-vectors."""
        m = self._model
        q, v = finite_joint_vector(m, q, 'q'), finite_joint_vector(m, v, 'v')
        T = np.asarray(pose_d, dtype=float)
        if T.shape != (4, 4) or not np.isfinite(T).all():
            raise ValueError(f'pose_d must be a finite 4x4 pose, got {pose_d!r}')
        R = T[:3, :3]
        if np.abs(R.T @ R - np.eye(3)).max() > 1e-6 or np.linalg.det(R) < 0:
            raise ValueError(f'pose_d: the upper-left 3x3 is not a rotation matrix:\n{R}')
        zero = np.zeros(6)
        return (q, v, T, *(zero if x is None else six_vector(x, name) for x, name in
                           ((twist_d, 'twist_d'), (accel_d, 'accel_d'), (wrench_d, 'wrench_d'))))


class CartesianImpedance(TaskSpaceLaw):
    """τ = Jᵀ (K e + D ė + F_d) + Nᵀ τ_null + g(q): a spring-damper at the frame (Hogan 1985).

    K in N·m/rad (×3) and N/m (×3); D = damping_matrix(Λ, K, ζ), Albu-Schäffer's double
    diagonalisation against the singularity-robust Λ (exact modal ratio ζ with coupled Λ).
    The C q̇ term: left out by default, so that the closed loop
    M q̈ + C q̇ = Jᵀ (K e + D ė) + Nᵀ τ_null is passive (Ṁ − 2C skew; Ott 2008, §3.2) and the
    arm feels like the spring-damper also while moving; ``coriolis_compensation`` adds
    C q̇ + τ_f (τ = ... + nonlinear_effects instead of g).
    """

    def __init__(self, model, stiffness, damping_ratio=1.0, coriolis_compensation=False,
                 **kwargs):
        super().__init__(model, stiffness, damping_ratio, **kwargs)
        self.coriolis_compensation = bool(coriolis_compensation)

    def __call__(self, q, v, pose_d, twist_d=None, wrench_d=None):
        """τ of the state (q, q̇) towards T_d (4x4 in the base frame), ẋ_d and F_d (6)."""
        q, v, pose_d, twist_d, accel_d, wrench_d = self.arguments(q, v, pose_d, twist_d, None,
                                                                  wrench_d)
        return self.torque(q, v, pose_d, twist_d, accel_d, wrench_d)

    @property
    def kind(self):
        """The task_law code: IMPEDANCE, or IMPEDANCE_CORIOLIS with coriolis_compensation."""
        return task_law.IMPEDANCE_CORIOLIS if self.coriolis_compensation else task_law.IMPEDANCE


class OperationalSpace(TaskSpaceLaw):
    """τ = Jᵀ (Λ (ẍ_d + K e + D ė − J̇q̇) + F_d) + h + Nᵀ τ_null (Khatib 1987; L&P §11.5).

    h = C q̇ + g + τ_f = nonlinear_effects. Khatib's μ + p = J̄ᵀ h − Λ J̇q̇, and
    Jᵀ (μ + p) + Nᵀ h = h because Jᵀ J̄ᵀ + Nᵀ = 1: h is compensated in the null space too, so
    that τ_null need not hold the posture against gravity. With an exact model and J J̄ = 1,
    J M⁻¹ Nᵀ = 0 and the frame obeys ë + D ė + K e = 0: K in 1/s², D = 2ζ √K per axis.

    Without ``inertia_shaping``: τ = Jᵀ (Λ (ẍ_d − J̇q̇) + K e + D ė + F_d) + h + Nᵀ τ_null,
    the frame keeps its own inertia, Λ ë + D ė + K e = 0, K in N/m and N·m/rad and D from
    damping_matrix as in CartesianImpedance.
    """

    def __init__(self, model, stiffness, damping_ratio=1.0, inertia_shaping=True, **kwargs):
        super().__init__(model, stiffness, damping_ratio, **kwargs)
        self.inertia_shaping = bool(inertia_shaping)

    def __call__(self, q, v, pose_d, twist_d=None, accel_d=None, wrench_d=None):
        """τ of (q, q̇) tracking T_d (4x4, base frame), ẋ_d, ẍ_d (classical) and F_d (6)."""
        q, v, pose_d, twist_d, accel_d, wrench_d = self.arguments(q, v, pose_d, twist_d, accel_d,
                                                                  wrench_d)
        return self.torque(q, v, pose_d, twist_d, accel_d, wrench_d)

    @property
    def kind(self):
        """The task_law code: SHAPED with inertia_shaping, else UNSHAPED."""
        return task_law.SHAPED if self.inertia_shaping else task_law.UNSHAPED
