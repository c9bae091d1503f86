"""The dynamics are linear in the inertial parameters: τ = Y(q, q̇, q̈) θ (Spong eq. 6.122).

Parameter vector θ, 10 per moving body in model order (mimic joints' bodies too: their rows
enter as Gᵀ Y_body, mimic.py), then the optional joint columns::

    θ = (θ_1, ..., θ_nb [, f_v (nv)] [, f_c (nv)] [, I_a (nv)] [, f_s (nv)])
    θ_i = (m, m cx, m cy, m cz, Ixx, Iyy, Izz, Ixy, Ixz, Iyz)

the standard parameters of body i about its body (joint) frame origin, in body axes, which is
exactly the row ``model.inertia[i]``: ``θ = model.inertia.ravel()``. The optional columns are one
per joint, appended in this order when asked for, the joint terms of model.py:

- viscous friction ``f_v``: τ_i += f_v,i q̇_i;
- Coulomb friction ``f_c``: τ_i += f_c,i tanh(q̇_i / ε), the smooth sign of friction.py with
  ε = ``model.coulomb_velocity`` (default model.COULOMB_VELOCITY, 0.01 rad/s or
  m/s: 99.5 % of f_c at 3 ε);
- armature ``I_a`` (rotor inertia reflected through the gear): τ_i += I_a,i q̈_i;
- stiction ``f_s`` (the Stribeck term): τ_i += f_s,i exp(−(q̇_i / v_s,i)²) tanh(q̇_i / ε), v_s
  = ``model.stribeck_velocity`` fixed (friction.py).

So ``regressor(model, q, v, a, True, True, True, True) @ parameter_vector(model, True, True,
True, True)``
is ``rnea(model, q, v, a)``, the model's own joint terms included; without the flags, Y θ is
the rigid-body part alone, rnea of the model with zero joint terms.

Derivation. The Newton-Euler wrench of body j (L&P eq. 8.53 without its children) is linear in
θ_j::

    F_j = G_j V̇_j - ad_{V_j}^T G_j V_j = (Φ(V̇_j) + [ad_{V_j}]^* Φ(V_j)) θ_j = K_j θ_j   (6x10)

where Φ(X) θ = G X and [ad_V]^* = -ad_V^T. Joint i carries the wrenches of its subtree, each
moved into frame i by Ad^T_{T_{j,i}}, so::

    Y[i, block j] = A_i^T Ad^T_{T_{j,i}} K_j   for j in subtree(i), 0 elsewhere.

Gravity enters, as in rnea, as the base acceleration V̇_0 = (0, -g). The twists V_j, V̇_j and the
poses T_{λ,j} come from the core's RNEA forward pass, in the kernels' body frames (the model's
turned so that each joint axis is z, model.py); the rest is numpy (offline use), O(nb · depth)
small products per state, vectorised over the states.
"""
import numpy as np

from .algorithms.friction import smooth_sign, stribeck_sign
from .algorithms.rnea import forward_pass
from .layout import BODY_AXES, PRISMATIC, WS_A, WS_PREL, WS_RREL, WS_V
from .mimic import REGRESSOR, reduced
from .model import JOINT_TERMS, Data   # JOINT_TERMS: the order of the optional columns
from .spatial import homogeneous, skew, transformed_inertia

INERTIAL_NAMES = ('m', 'mx', 'my', 'mz', 'Ixx', 'Iyy', 'Izz', 'Ixy', 'Ixz', 'Iyz')
CHUNK = 1024   # states per vectorised pass


def regressor(model, q, v, a, viscous=False, coulomb=False, armature=False, stiction=False,
              sign=None, stribeck=None):
    """Y with τ = Y θ: shape (nv, 10 nb + extra) for one state, (N, nv, ...) for (N, nv) input.

    ``viscous``, ``coulomb``, ``armature``, ``stiction``: append nv columns each, q̇_i,
    tanh(q̇_i / ε), q̈_i and exp(−(q̇_i / v_s,i)²) tanh(q̇_i / ε) on row i, in that order
    (module docstring), ε = ``model.coulomb_velocity``. θ is ``parameter_vector(model, ...)``.
    ``sign``, ``stribeck``: the Coulomb and stiction columns' values, shaped as q, if computed
    already (e.g. low-pass filtered as the torques: parallel filtering).
    """
    q, v, a = (np.asarray(x, dtype=float) for x in (q, v, a))
    single = q.ndim == 1
    q, v, a = (np.atleast_2d(x) for x in (q, v, a))
    if q.shape[-1] != model.nv or not q.shape == v.shape == a.shape:
        raise ValueError(f'q, v, a must all have shape ({model.nv},) or (N, {model.nv}), got '
                         f'{q.shape}, {v.shape}, {a.shape}')
    Y = np.empty((q.shape[0], model.nv, 10 * model.nb))
    inertial = (_inertial_regressor if not model.mimic else   # mimic joints: Gᵀ Y_body
                lambda model, *state: reduced(_inertial_regressor, model, *state, out=REGRESSOR))
    for k in range(0, q.shape[0], CHUNK):   # bounded scratch memory for long logs
        Y[k:k + CHUNK] = inertial(model, q[k:k + CHUNK], v[k:k + CHUNK], a[k:k + CHUNK])
    columns = [Y]
    if coulomb:
        sign = smooth_sign(v, model.coulomb_velocity) if sign is None else np.atleast_2d(sign)
    if stiction:
        stribeck = (stribeck_sign(v, model.stribeck_velocity, model.coulomb_velocity)
                    if stribeck is None else np.atleast_2d(stribeck))
    for flag, x in zip((viscous, coulomb, armature, stiction), (v, sign, a, stribeck)):
        if flag:
            columns.append(np.eye(model.nv) * x[:, None, :])   # row i: x_i in column i
    Y = np.concatenate(columns, axis=2)
    return Y[0] if single else Y


def parameter_vector(model, viscous=None, coulomb=None, armature=None, stiction=None):
    """θ of ``model`` (``model.inertia.ravel()``), then the per-joint coefficients asked for.

    Each of viscous, Coulomb, armature, stiction (appended in that order) is True for the model's
    own (``model.viscous`` etc.), the coefficients themselves (a number or nv values), or None or
    False for none: ``regressor(..., viscous=True) @ θ`` then matches.
    """
    parts = [model.inertia.ravel()]
    for name, x in zip(JOINT_TERMS, (viscous, coulomb, armature, stiction)):
        flag = isinstance(x, (bool, np.bool_))
        if x is None or (flag and not x):
            continue
        x = getattr(model, name) if flag else x
        parts.append(np.broadcast_to(np.asarray(x, dtype=float), (model.nv,)))
    return np.concatenate(parts)


def parameter_names(model, viscous=False, coulomb=False, armature=False, stiction=False):
    """Names of the columns of Y, e.g. 'panda_joint2.mx' or 'panda_joint2.viscous'."""
    names = [f'{joint}.{p}' for joint in model.body_names for p in INERTIAL_NAMES]
    for flag, kind in zip((viscous, coulomb, armature, stiction), JOINT_TERMS):
        if flag:
            names += [f'{joint}.{kind}' for joint in model.joint_names]
    return names


def body_motion(model, q, v, a):
    """The RNEA forward pass over N states, in the kernels' body frames.

    Twists V_j and accelerations V̇_j (N, nb, 6) of the bodies (gravity included) and each
    body's pose in its parent's frame, R (N, nb, 3, 3) and p (N, nb, 3).
    """
    N, nb = q.shape[0], model.nb
    ws = Data(model).ws
    V, dV = np.empty((N, nb, 6)), np.empty((N, nb, 6))
    R, p = np.empty((N, nb, 3, 3)), np.empty((N, nb, 3))
    for k in range(N):
        forward_pass(model.table, q[k], v[k], a[k], True, ws)
        V[k], dV[k] = ws[:, WS_V:WS_V + 6], ws[:, WS_A:WS_A + 6]
        R[k] = ws[:, WS_RREL:WS_RREL + 9].reshape(nb, 3, 3)
        p[k] = ws[:, WS_PREL:WS_PREL + 3]
    return V, dV, R, p


def _inertial_regressor(model, q, v, a):
    """The (N, nv, 10 nb) inertial part: Y[i, block j] = A_i^T Ad^T_{T_{j,i}} K_j.

    The forward pass works in the kernels' body frames, the model's turned by R_a (model.py);
    K_j is formed there and applied to the kernel-frame parameters parameter_map((R_a^T, 0)) θ_j.
    """
    N, nb = q.shape[0], model.nb
    V, dV, R, p = body_motion(model, q, v, a)
    K = momentum_matrix(dV) + _force_cross_matrix(V) @ momentum_matrix(V)   # (N, nb, 6, 10)
    X = np.zeros((N, nb, 6, 6))   # Ad^T_{T_{i,λ}}: a wrench of body i in its parent's frame
    X[..., :3, :3] = X[..., 3:, 3:] = R
    X[..., :3, 3:] = skew(p) @ R
    R_a = model.table[:, BODY_AXES:BODY_AXES + 9].reshape(nb, 3, 3)
    A = _joint_screws(model, R_a)
    Y = np.zeros((N, nb, nb, 10))
    for j in range(nb):   # W: body j's wrench matrix, expressed in the frame of body i
        W, i = K[:, j] @ parameter_map(homogeneous(R_a[j].T, np.zeros(3))), j
        while True:
            Y[:, i, j] = np.einsum('s,nsk->nk', A[i], W)
            if model.parent[i] < 0:
                break
            W, i = X[:, i] @ W, model.parent[i]
    return Y.reshape(N, nb, 10 * nb)


def parameter_map(T):
    """The 10x10 matrix of θ -> transformed_inertia(θ, T), linear in θ.

    It re-expresses standard parameters given about a frame at pose T (4x4) about the origin
    T is relative to (parallel axes). Its first four columns map (m, m c) to (m, h).
    """
    return np.column_stack([transformed_inertia(e, T) for e in np.eye(10)])


def _joint_screws(model, R_a):
    """A_i (nb, 6) in the kernels' body frames.

    (R_a^T axis, 0) for a revolute, (0, R_a^T axis) for a prismatic joint.
    """
    axis = np.einsum('nji,nj->ni', R_a, model.joint_axis)
    prismatic = (model.joint_type == PRISMATIC)[:, None]
    return np.concatenate([np.where(prismatic, 0.0, axis), np.where(prismatic, axis, 0.0)], 1)


def momentum_matrix(X):
    """Φ(X) (..., 6, 10) with G X = Φ(X) θ for motions X = (w, u) (..., 6).

    G X = (I w + h × u, m u - h × w) = [[0, -[u], L(w)], [u, [w], 0]] θ, with L(w) the 3x6
    matrix of I w = L(w) (Ixx, Iyy, Izz, Ixy, Ixz, Iyz).
    """
    w, u = X[..., :3], X[..., 3:]
    Phi = np.zeros(X.shape[:-1] + (6, 10))
    Phi[..., :3, 1:4] = -skew(u)
    wx, wy, wz = w[..., 0], w[..., 1], w[..., 2]
    Phi[..., 0, 4], Phi[..., 0, 7], Phi[..., 0, 8] = wx, wy, wz
    Phi[..., 1, 5], Phi[..., 1, 7], Phi[..., 1, 9] = wy, wx, wz
    Phi[..., 2, 6], Phi[..., 2, 8], Phi[..., 2, 9] = wz, wx, wy
    Phi[..., 3:, 0] = u
    Phi[..., 3:, 1:4] = skew(w)
    return Phi


def _force_cross_matrix(V):
    """-ad_V^T = [[[w], [u]], [0, [w]]] (..., 6, 6), the bias operator of L&P eq. 8.42."""
    C = np.zeros(V.shape[:-1] + (6, 6))
    W = skew(V[..., :3])
    C[..., :3, :3] = C[..., 3:, 3:] = W
    C[..., :3, 3:] = skew(V[..., 3:])
    return C


class BaseParameters:
    """The identifiable combinations of θ: Y θ = Y_b θ_b for every state.

    With::

        θ_b = P θ,   Y_b = Y[:, independent],   P[:, independent] = 1, P[:, dependent] = β

    where Y[:, dependent] = Y[:, independent] β holds identically (the structural dependencies
    among the columns, found on random states). A column that is identically zero (a parameter
    that never acts, such as m of the first body of a chain) is dependent with β = 0.
    """

    def __init__(self, independent, dependent, beta, names, flags):
        self.independent, self.dependent, self.beta = independent, dependent, beta
        self.names = [names[k] for k in independent]   # each named after its leading column
        self.flags = flags    # the regressor's keyword flags (viscous, ..., stiction)
        self.P = np.zeros((len(independent), len(names)))
        self.P[:, independent] = np.eye(len(independent))
        self.P[:, dependent] = beta

    @property
    def count(self):
        """Number of base parameters."""
        return len(self.independent)

    def __call__(self, theta):
        """θ_b = P θ."""
        return self.P @ theta

    def regressor(self, model, q, v, a):
        """Y_b(q, q̇, q̈) (same shapes as ``regressor``)."""
        return regressor(model, q, v, a, **self.flags)[..., self.independent]


def base_parameters(model, viscous=False, coulomb=False, armature=False, stiction=False,
                    states=None, seed=0, tol=1e-8):
    """The base parameters of ``model``: QR with column pivoting of Y stacked over random states.

    Columns are scaled to unit norm, then ``scipy.linalg.qr(..., pivoting=True)`` orders them;
    the rank r counts |R_kk| > tol |R_00|, and β = R_11^-1 R_12 (rescaled) expresses the other
    columns through the first r (Gautier 1990's numerical method). ``states``: how many random
    states (default enough for 3x as many rows as columns); q is uniform within the limits
    (±π where absent), q̇ and q̈ standard normal.
    """
    from scipy.linalg import qr, solve_triangular   # here: the nodes that import this never call it
    flags = dict(viscous=viscous, coulomb=coulomb, armature=armature, stiction=stiction)
    names = parameter_names(model, **flags)
    n = states or 3 * len(names) // model.nv + 10
    rng = np.random.default_rng(seed)
    lower = np.where(np.isfinite(model.lower), model.lower, -np.pi)
    upper = np.where(np.isfinite(model.upper), model.upper, np.pi)
    q = rng.uniform(lower, upper, (n, model.nv))
    v, a = rng.normal(size=(2, n, model.nv))
    W = regressor(model, q, v, a, **flags).reshape(n * model.nv, -1)
    norms = np.linalg.norm(W, axis=0)
    acting = np.flatnonzero(norms > tol * norms.max())
    _, R, pivots = qr(W[:, acting] / norms[acting], mode='economic', pivoting=True)
    r = int(np.sum(np.abs(np.diag(R)) > tol * abs(R[0, 0])))
    beta = np.zeros((len(names), len(names)))
    beta_scaled = solve_triangular(R[:r, :r], R[:r, r:])
    lead, rest = acting[pivots[:r]], acting[pivots[r:]]
    beta[np.ix_(lead, rest)] = beta_scaled * norms[rest] / norms[lead][:, None]
    independent = np.sort(lead)
    dependent = np.setdiff1d(np.arange(len(names)), independent)
    return BaseParameters(independent, dependent, beta[np.ix_(independent, dependent)], names,
                          flags)
