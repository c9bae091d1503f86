"""Model: the constant description of a kinematic tree; Data: the reusable per-call workspace.

Bodies are numbered so that ``parent[i] < i`` (``-1`` is the fixed base). Body ``i`` moves with one
joint, revolute or prismatic, whose frame is the body frame: at configuration ``q_i`` the body frame
sits at ``X_tree[i] @ exp([A_i] q_i)`` in its parent's frame, with ``A_i = (axis, 0)`` for a
revolute and ``(0, axis)`` for a prismatic joint (L&P eq. 8.43, the screw axis expressed in
frame ``i``).

Each joint also carries the terms a rigid-body model leaves out, one value per joint (model
order, default 0), so that every algorithm solves
``M(q) q̈ + C(q, q̇) q̇ + g(q) + τ_f(q̇) = τ + τ_ext`` with M including diag(armature):

- ``armature`` I_a: the rotor inertia reflected through the gear (n² I_rotor), kg m² or kg;
  it adds I_a q̈ to τ and I_a to M's diagonal (as Pinocchio's ``model.armature`` and MuJoCo's
  ``dof_armature``). Being constant, it leaves C (and Ṁ = C + Cᵀ) unchanged.
- ``viscous`` f_v, ``coulomb`` f_c and ``stiction`` f_s: the joint friction
  ``τ_f(q̇) = f_v q̇ + [f_c + f_s exp(−(q̇ / v_s)²)] tanh(q̇ / ε)`` (``joint_friction``), with
  ε = ``coulomb_velocity`` (default COULOMB_VELOCITY = 0.01 rad/s or m/s: 76 % of f_c at
  q̇ = ε, 99.5 % at 3 ε) and the Stribeck velocity v_s = ``stribeck_velocity`` (one number or
  one per joint, default STRIBECK_VELOCITY = 0.05 rad/s or m/s): f_s is the stiction excess of
  the breakaway torque over f_c. The smooth sign is exactly 0 at q̇ = 0, so
  g(q) = rnea(q, 0, 0) still holds; it makes τ_f differentiable and the regressor linear in
  f_c and f_s.

These come from configuration or identification (``identify``), not from the URDF: its
``<dynamics damping friction>`` are simulator tuning values in most files and ``load_urdf`` does
not read them (Pinocchio too keeps them out of its dynamics). Set them with
``model.replace(armature=..., viscous=..., coulomb=..., stiction=...)``; the Model checks them.
"""
import collections
import dataclasses
import threading

import numpy as np

from .layout import (
    BODY_ARMATURE, BODY_AXES, BODY_COULOMB, BODY_COULOMB_VELOCITY, BODY_GRAVITY, BODY_INERTIA,
    BODY_PARENT, BODY_POS, BODY_ROT, BODY_STICTION, BODY_STRIBECK_VELOCITY, BODY_TYPE,
    BODY_VISCOUS, BODY_WIDTH,
    FRAME_BODY, FRAME_POS, FRAME_ROT, FRAME_WIDTH, WS_M)
from .layout import PRISMATIC, REVOLUTE  # noqa: F401 (the values of Model.joint_type)
from .spatial import homogeneous, standard_parameters, transformed_inertia

COULOMB_VELOCITY = 0.01   # ε of the Coulomb friction's smooth sign tanh(q̇ / ε), rad/s or m/s
STRIBECK_VELOCITY = 0.05  # v_s of the Stribeck term exp(−(q̇ / v_s)²), rad/s or m/s
# the per-joint fields beyond the rigid bodies, in the order of the regressor's joint columns
JOINT_TERMS = ('viscous', 'coulomb', 'armature', 'stiction')
Mimic = collections.namedtuple('Mimic', 'name leader multiplier offset')
Mimic.__doc__ = 'A dependent joint: q_name = multiplier · q_leader + offset (leader independent).'


@dataclasses.dataclass(frozen=True, eq=False)
class Model:
    """Constant description of a tree of rigid bodies, one joint coordinate per body.

    Mimic joints (``mimic``, a tuple of ``Mimic``) are dependent coordinates, as in Pinocchio 3:
    the bodies' coordinates are ``q_body = G q + offset`` (``coupling``), where q holds the
    independent joints ``joint_names`` (nv of them; the bodies' joints are ``body_names``,
    nb >= nv). The body arrays (joint_type ... inertia) have nb rows, the joint arrays (lower ...
    coulomb) nv. Every public algorithm takes and returns independent coordinates (mimic.py);
    ``full`` is the same tree with every joint independent, what the kernels compute on.
    Without mimic joints nb == nv, G = 1, ``full`` is the model itself and nothing is mapped.

    Its joints' armature and friction (armature, viscous, coulomb, stiction; coulomb_velocity
    and stribeck_velocity their velocity scales; see the module docstring) default to zero and
    never come from the URDF: give them from a configuration or an identification.
    """

    joint_names: tuple
    joint_type: np.ndarray       # (nb,) REVOLUTE or PRISMATIC
    parent: np.ndarray           # (nb,) parent body, -1 for the base
    joint_axis: np.ndarray       # (nb, 3) unit axis in the body frame
    joint_placement: np.ndarray  # (nb, 4, 4) body frame at q = 0 in the parent's frame
    inertia: np.ndarray          # (nb, 10) standard parameters about the body origin, body axes
    lower: np.ndarray            # (nv,) position limits, -inf / inf where absent
    upper: np.ndarray
    velocity_limit: np.ndarray
    effort_limit: np.ndarray
    frame_names: tuple           # named frames: URDF links (merged ones too) and the base
    frame_body: np.ndarray       # (nf,) body carrying the frame, -1 for the base
    frame_placement: np.ndarray  # (nf, 4, 4) frame in its body's frame
    base: str
    tip: str                     # the chain's tip link, None for a whole tree
    gravity: np.ndarray = dataclasses.field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))
    armature: np.ndarray = None  # (nv,) I_a, kg m² (revolute) or kg (prismatic); None: zeros
    viscous: np.ndarray = None   # (nv,) f_v, N m s/rad or N s/m; None: zeros
    coulomb: np.ndarray = None   # (nv,) f_c, N m or N; None: zeros
    coulomb_velocity: float = COULOMB_VELOCITY   # ε, rad/s or m/s
    stiction: np.ndarray = None  # (nv,) f_s, the stiction excess over f_c, N m or N; None: zeros
    stribeck_velocity: object = STRIBECK_VELOCITY   # v_s, one or (nv,) numbers, rad/s or m/s
    body_names: tuple = None     # (nb,) joint of each body; None: joint_names (no mimic joint)
    mimic: tuple = ()            # Mimic joints, one per dependent body

    def __post_init__(self):
        object.__setattr__(self, 'body_names', tuple(
            self.joint_names if self.body_names is None else self.body_names))
        object.__setattr__(self, 'mimic', tuple(Mimic(*m) for m in self.mimic))
        object.__setattr__(self, 'coupling', _coupling(self))
        for name in JOINT_TERMS:
            object.__setattr__(self, name, _joint_coefficients(self, name))
        object.__setattr__(self, 'coulomb_velocity', _coulomb_velocity(self.coulomb_velocity))
        object.__setattr__(self, 'stribeck_velocity', _stribeck_velocity(self))
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, np.ndarray):
                value = np.array(value, dtype=int if value.dtype.kind in 'iu' else float)
                value.flags.writeable = False
                object.__setattr__(self, field.name, value)
        object.__setattr__(self, 'full', _full_model(self) if self.mimic else self)
        object.__setattr__(self, 'table', self.full.table if self.mimic else _body_table(self))
        object.__setattr__(self, 'frames', _frame_table(self))
        object.__setattr__(self, 'workspaces', _Workspaces(self.nb))
        object.__setattr__(self, '_frame_index', {n: i for i, n in enumerate(self.frame_names)})
        # (nv,) bool: revolute joints without position limits (URDF continuous): angles wrap
        continuous = (self.joint_type[self.independent] == REVOLUTE) & np.isneginf(
            self.lower) & np.isposinf(self.upper)
        continuous.flags.writeable = False
        object.__setattr__(self, 'continuous', continuous)

    @property
    def nb(self):
        """Number of moving bodies (one joint coordinate each, mimic joints included)."""
        return len(self.body_names)

    @property
    def nv(self):
        """Number of degrees of freedom: the independent joints."""
        return len(self.joint_names)

    @property
    def independent(self):
        """(nv,) body index of each independent joint."""
        return self.coupling[2]

    @property
    def neutral_position(self):
        """q = 0 clamped into the joint limits (a new array)."""
        return np.clip(np.zeros(self.nv), self.lower, self.upper)

    def frame_index(self, frame):
        """Index of a named frame, with the known names in the error."""
        try:
            return self._frame_index[frame]
        except (KeyError, TypeError):
            raise KeyError(f"unknown frame {frame!r}; known frames: "
                           f"{', '.join(self.frame_names)}") from None

    def replace(self, **changes):
        """A new Model with some fields changed (the Model itself is immutable)."""
        return dataclasses.replace(self, **changes)


def _coupling(model):
    """(G, offset, independent): q_body = G q + offset, and the body of each independent joint.

    G (nb x nv) has a 1 in row b for an independent joint and, for a mimic joint, its
    multiplier in its leader's column (Pinocchio 3's mimic joints; leaders are independent).
    """
    body = {name: b for b, name in enumerate(model.body_names)}
    column = {name: i for i, name in enumerate(model.joint_names)}
    dependent = {m.name: m for m in model.mimic}
    if (len(body) != len(model.body_names) or set(column) | set(dependent) != set(body)
            or len(column) + len(dependent) != len(body) or len(column) != len(model.joint_names)):
        raise ValueError('body_names must be the joint_names and the mimic joints, each once, '
                         f'got {model.body_names} for {model.joint_names} and mimic joints '
                         f'{tuple(dependent)}')
    G, offset = np.zeros((len(body), len(column))), np.zeros(len(body))
    for name, b in body.items():
        m = dependent.get(name)
        if m is None:
            G[b, column[name]] = 1.0
        elif m.leader in column and np.isfinite([m.multiplier, m.offset]).all():
            G[b, column[m.leader]], offset[b] = m.multiplier, m.offset
        else:
            raise ValueError(f"mimic joint '{name}' must follow an independent joint with a "
                             f'finite multiplier and offset, got {m}')
    independent = np.array([body[name] for name in model.joint_names], dtype=int)
    for x in (G, offset, independent):
        x.flags.writeable = False
    return G, offset, independent


def _full_model(model):
    """The same bodies with every joint independent: what the kernels compute on.

    The mimic bodies get no limits, armature or friction: those belong to the independent joints.
    """
    def spread(x, fill):
        full = np.full(model.nb, fill)
        full[model.independent] = x
        return full
    return dataclasses.replace(
        model, joint_names=model.body_names, body_names=None, mimic=(),
        lower=spread(model.lower, -np.inf), upper=spread(model.upper, np.inf),
        velocity_limit=spread(model.velocity_limit, np.inf),
        effort_limit=spread(model.effort_limit, np.inf),
        stribeck_velocity=spread(model.stribeck_velocity, STRIBECK_VELOCITY),
        **{name: spread(getattr(model, name), 0.0) for name in JOINT_TERMS})


def joint_axes(axis):
    """R_a, a rotation whose z column is the unit ``axis`` (the identity for z itself)."""
    a = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    if np.allclose(a, [0.0, 0.0, 1.0], rtol=0.0, atol=1e-15):
        return np.eye(3)
    x = np.cross([1.0, 0.0, 0.0] if abs(a[0]) < 0.9 else [0.0, 1.0, 0.0], a)
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(a, x), a])


def _body_table(model):
    """The constants of every body, one row each, in the columns BODY_* (what kernels read)."""
    nb = model.nb
    R_a = np.array([joint_axes(axis) for axis in model.joint_axis]).reshape(nb, 3, 3)
    R_parent = np.array([R_a[j] if j >= 0 else np.eye(3) for j in model.parent]).reshape(nb, 3, 3)
    R_tree, p_tree = model.joint_placement[:, :3, :3], model.joint_placement[:, :3, 3]
    table = np.zeros((nb, BODY_WIDTH))
    table[:, BODY_PARENT] = model.parent
    table[:, BODY_TYPE] = model.joint_type
    table[:, BODY_ROT:BODY_ROT + 9] = (R_parent.transpose(0, 2, 1) @ R_tree @ R_a).reshape(nb, 9)
    table[:, BODY_POS:BODY_POS + 3] = np.einsum('nji,nj->ni', R_parent, p_tree)
    for i in range(nb):
        table[i, BODY_INERTIA:BODY_INERTIA + 10] = transformed_inertia(
            model.inertia[i], homogeneous(R_a[i].T, np.zeros(3)))
    table[:, BODY_GRAVITY:BODY_GRAVITY + 3] = model.gravity
    table[:, BODY_AXES:BODY_AXES + 9] = R_a.reshape(nb, 9)
    table[:, BODY_ARMATURE] = model.armature
    table[:, BODY_VISCOUS] = model.viscous
    table[:, BODY_COULOMB] = model.coulomb
    table[:, BODY_COULOMB_VELOCITY] = model.coulomb_velocity
    table[:, BODY_STICTION] = model.stiction
    table[:, BODY_STRIBECK_VELOCITY] = model.stribeck_velocity
    return table   # writable: numba types a read-only array on a slow path (a cost on every call)


def _joint_coefficients(model, name):
    """The field ``name`` as a float (nv,) array, finite and >= 0 (zeros for None)."""
    value = getattr(model, name)
    if value is None:
        return np.zeros(model.nv)
    try:
        x = np.array(value, dtype=float)
    except (TypeError, ValueError):
        x = None
    if x is None or x.shape != (model.nv,) or not np.all(np.isfinite(x)) or (x < 0.0).any():
        raise ValueError(f'{name} must be {model.nv} finite numbers >= 0, one per joint '
                         f'({", ".join(model.joint_names)}), got {value!r}')
    return x


def _coulomb_velocity(value):
    """ε as a finite float > 0."""
    try:
        eps = float(value)
    except (TypeError, ValueError):
        eps = np.nan
    if not 0.0 < eps < np.inf:
        raise ValueError(f'coulomb_velocity (ε of the smooth sign tanh(q̇ / ε)) must be a '
                         f'finite number > 0, rad/s or m/s, got {value!r}')
    return eps


def _stribeck_velocity(model):
    """v_s as a float (nv,) array, finite and > 0 (one number applies to every joint)."""
    try:
        v_s = np.broadcast_to(np.array(model.stribeck_velocity, dtype=float), (model.nv,))
    except (TypeError, ValueError):
        v_s = None
    if v_s is None or not np.all((v_s > 0.0) & (v_s < np.inf)):
        raise ValueError(f'stribeck_velocity (v_s of the Stribeck term exp(−(q̇ / v_s)²)) must '
                         f'be one or {model.nv} finite numbers > 0, rad/s or m/s, got '
                         f'{model.stribeck_velocity!r}')
    return v_s.copy()


def _frame_table(model):
    """Body and placement (R row-major, p) of every named frame, in the columns FRAME_*."""
    R_a = [joint_axes(model.joint_axis[b]) if b >= 0 else np.eye(3) for b in model.frame_body]
    T = model.frame_placement
    frames = np.zeros((len(model.frame_names), FRAME_WIDTH))
    frames[:, FRAME_BODY] = model.frame_body
    frames[:, FRAME_ROT:FRAME_ROT + 9] = [(R.T @ T_f[:3, :3]).ravel() for R, T_f in zip(R_a, T)]
    frames[:, FRAME_POS:FRAME_POS + 3] = [R.T @ T_f[:3, 3] for R, T_f in zip(R_a, T)]
    return frames


class Data:
    """Scratch space of the algorithms for one model (Pinocchio's Data, MuJoCo's mjData).

    Pass it as ``data=`` to choose the workspace yourself; without it every thread reuses its own
    workspace of the model (``model.workspaces.ws``, made on the thread's first call), so that
    no call allocates scratch space. The columns of ``ws`` are the WS_* above.
    """

    def __init__(self, model):
        self.ws = workspace_array(model.nb)


def workspace_array(nb):
    """The (nb, WS_M + nb) scratch array of a model with nb bodies."""
    return np.zeros((nb, WS_M + nb))


class _Workspaces(threading.local):
    """Per-thread workspace ``ws`` of a model, made in each thread on first use.

    threading.local calls __init__ once per thread; copies and pickles start afresh.
    """

    def __init__(self, nb):
        self.nb, self.ws = nb, workspace_array(nb)

    def __reduce__(self):
        return _Workspaces, (self.nb,)


def _numbers(value, shape, message):
    """value as a finite float array of the given shape, else ValueError(message)."""
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f'{message}, got {value!r}') from None
    if array.shape != shape or not np.all(np.isfinite(array)):
        raise ValueError(f'{message}, got {value!r}')
    return array


def with_payload(model, mass, com=(0.0, 0.0, 0.0), inertia=None, frame=None):
    """A new Model carrying a rigid payload at ``frame`` (default: the tip).

    ``com`` is the payload's centre of mass and ``inertia`` (3x3, default zero) its inertia about
    the centre of mass, both in the frame's axes. A payload at a base frame changes nothing.
    """
    frame = model.tip if frame is None else frame
    if frame is None:
        raise ValueError('with_payload needs a frame: the model has no tip')
    mass = _numbers(mass, (), 'payload mass must be a finite number')
    com = _numbers(com, (3,), 'payload com must be 3 finite numbers')
    inertia = _numbers(np.zeros((3, 3)) if inertia is None else inertia, (3, 3),
                       'payload inertia must be a finite 3x3 matrix')
    if mass < 0.0:
        raise ValueError(f'payload mass must be >= 0, got {mass}')
    if not np.allclose(inertia, inertia.T) or np.linalg.eigvalsh(inertia).min() < -1e-12:
        raise ValueError('payload inertia must be symmetric positive semi-definite')
    f = model.frame_index(frame)
    b = model.frame_body[f]
    if b < 0:
        return model
    payload = transformed_inertia(standard_parameters(mass, com, inertia), model.frame_placement[f])
    new_inertia = model.inertia.copy()
    new_inertia[b] += payload
    return model.replace(inertia=new_inertia)
