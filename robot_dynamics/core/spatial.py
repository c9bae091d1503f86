"""Rigid-body vocabulary of so(3)/se(3), angular first (Lynch & Park ch. 3 and 8), for the kernels.

Kernels pass small quantities as tuples of floats, which numba keeps in registers: a 3-vector is
a 3-tuple, a rotation a row-major 9-tuple, a spatial vector two 3-tuples (angular, linear), and a
rigid-body inertia the 10-tuple of standard parameters about the body origin, in body axes::

    (m, m cx, m cy, m cz, Ixx, Iyy, Izz, Ixy, Ixz, Iyz)

so that the 6x6 spatial inertia is ``G = [[I, [h]], [[h]^T, m 1]]`` with ``h = m c`` (L&P eq. 8.32,
about a point other than the centre of mass). Arrays hold these in rows: ``load3(a, i, c)`` reads
``a[i, c:c + 3]``, ``store(a, i, c, x)`` writes it back and ``accumulate`` adds it.
"""
import numpy as np

from ._jit import jit

ZERO = (0.0, 0.0, 0.0)


# ---- rows of arrays <-> tuples ----

@jit
def load3(a, i, c):
    """a[i, c:c + 3] as a tuple."""
    return (a[i, c], a[i, c + 1], a[i, c + 2])


@jit
def load4(a, i, c):
    """a[i, c:c + 4] as a tuple."""
    return (a[i, c], a[i, c + 1], a[i, c + 2], a[i, c + 3])


@jit
def load9(a, i, c):
    """a[i, c:c + 9] as a tuple."""
    return (a[i, c], a[i, c + 1], a[i, c + 2], a[i, c + 3], a[i, c + 4], a[i, c + 5],
            a[i, c + 6], a[i, c + 7], a[i, c + 8])


@jit
def load10(a, i, c):
    """a[i, c:c + 10] as a tuple."""
    return (a[i, c], a[i, c + 1], a[i, c + 2], a[i, c + 3], a[i, c + 4], a[i, c + 5],
            a[i, c + 6], a[i, c + 7], a[i, c + 8], a[i, c + 9])


@jit
def store(a, i, c, x):
    """a[i, c:c + len(x)] = x."""
    for k in range(len(x)):
        a[i, c + k] = x[k]


@jit
def accumulate(a, i, c, x):
    """a[i, c:c + len(x)] += x."""
    for k in range(len(x)):
        a[i, c + k] += x[k]


# ---- 3-vectors and rotations ----

@jit
def add(x, y):
    """x + y."""
    return (x[0] + y[0], x[1] + y[1], x[2] + y[2])


@jit
def sub(x, y):
    """x - y."""
    return (x[0] - y[0], x[1] - y[1], x[2] - y[2])


@jit
def scale(x, s):
    """s x."""
    return (s * x[0], s * x[1], s * x[2])


@jit
def dot(x, y):
    """x . y."""
    return x[0] * y[0] + x[1] * y[1] + x[2] * y[2]


@jit
def cross(x, y):
    """x × y = [x] y."""
    return (x[1] * y[2] - x[2] * y[1], x[2] * y[0] - x[0] * y[2], x[0] * y[1] - x[1] * y[0])


@jit
def rotate(R, x):
    """R x."""
    return (R[0] * x[0] + R[1] * x[1] + R[2] * x[2],
            R[3] * x[0] + R[4] * x[1] + R[5] * x[2],
            R[6] * x[0] + R[7] * x[1] + R[8] * x[2])


@jit
def rotate_transpose(R, x):
    """R^T x."""
    return (R[0] * x[0] + R[3] * x[1] + R[6] * x[2],
            R[1] * x[0] + R[4] * x[1] + R[7] * x[2],
            R[2] * x[0] + R[5] * x[1] + R[8] * x[2])


@jit
def rotation_product(A, B):
    """A B."""
    return (A[0] * B[0] + A[1] * B[3] + A[2] * B[6], A[0] * B[1] + A[1] * B[4] + A[2] * B[7],
            A[0] * B[2] + A[1] * B[5] + A[2] * B[8],
            A[3] * B[0] + A[4] * B[3] + A[5] * B[6], A[3] * B[1] + A[4] * B[4] + A[5] * B[7],
            A[3] * B[2] + A[4] * B[5] + A[5] * B[8],
            A[6] * B[0] + A[7] * B[3] + A[8] * B[6], A[6] * B[1] + A[7] * B[4] + A[8] * B[7],
            A[6] * B[2] + A[7] * B[5] + A[8] * B[8])


@jit
def rodrigues(axis, angle):
    """exp([a] θ) = I + sin θ [a] + (1 - cos θ) [a]^2 for a unit axis (L&P eq. 3.51)."""
    ax, ay, az = axis[0], axis[1], axis[2]
    s, c = np.sin(angle), np.cos(angle)
    t = 1.0 - c
    return (c + t * ax * ax, t * ax * ay - s * az, t * ax * az + s * ay,
            t * ax * ay + s * az, c + t * ay * ay, t * ay * az - s * ax,
            t * ax * az - s * ay, t * ay * az + s * ax, c + t * az * az)


# ---- spatial vectors (angular, linear) and inertias ----

@jit
def motion_to_child(R, p, w, v):
    """Ad_{T^-1} V for the child's pose T = (R, p) in the parent: (R^T w, R^T (v + w × p))."""
    return rotate_transpose(R, w), rotate_transpose(R, add(v, cross(w, p)))


@jit
def force_to_parent(R, p, m, f):
    """Ad_{T^-1}^T F, a child's wrench in the parent frame: (R m + p × R f, R f) (L&P eq. 8.53)."""
    Rf = rotate(R, f)
    return add(rotate(R, m), cross(p, Rf)), Rf


@jit
def motion_cross(w, v, x_w, x_v):
    """ad_V X = (w × x_w, v × x_w + w × x_v) (L&P eq. 8.38)."""
    return cross(w, x_w), add(cross(v, x_w), cross(w, x_v))


@jit
def force_cross(w, v, m, f):
    """-ad_V^T F = (w × m + v × f, w × f), the bias term of the Newton-Euler equation 8.42."""
    return add(cross(w, m), cross(v, f)), cross(w, f)


@jit
def inertia_times_motion(inertia, w, v):
    """G V = (I w + h × v, m v - h × w): the momentum of the twist V = (w, v)."""
    m, h = inertia[0], (inertia[1], inertia[2], inertia[3])
    Ixx, Iyy, Izz, Ixy, Ixz, Iyz = (inertia[4], inertia[5], inertia[6],
                                    inertia[7], inertia[8], inertia[9])
    Iw = (Ixx * w[0] + Ixy * w[1] + Ixz * w[2],
          Ixy * w[0] + Iyy * w[1] + Iyz * w[2],
          Ixz * w[0] + Iyz * w[1] + Izz * w[2])
    return add(Iw, cross(h, v)), sub(scale(v, m), cross(h, w))


@jit
def transform_inertia(inertia, R, p):
    """Standard parameters of a body whose frame has pose (R, p) in the target frame.

    m' = m, h' = R h + m p, I' = R I R^T - [p][h'] - [h'][p] + m [p][p]   (parallel axis theorem,
    L&P eq. 8.31, written without dividing by m so composite or massless bodies work).
    """
    m = inertia[0]
    u = rotate(R, (inertia[1], inertia[2], inertia[3]))
    Ixx, Iyy, Izz, Ixy, Ixz, Iyz = (inertia[4], inertia[5], inertia[6],
                                    inertia[7], inertia[8], inertia[9])
    a = rotation_product(R, (Ixx, Ixy, Ixz, Ixy, Iyy, Iyz, Ixz, Iyz, Izz))   # R I
    bxx = a[0] * R[0] + a[1] * R[1] + a[2] * R[2]                          # (R I R^T)_rc
    byy = a[3] * R[3] + a[4] * R[4] + a[5] * R[5]
    bzz = a[6] * R[6] + a[7] * R[7] + a[8] * R[8]
    bxy = a[0] * R[3] + a[1] * R[4] + a[2] * R[5]
    bxz = a[0] * R[6] + a[1] * R[7] + a[2] * R[8]
    byz = a[3] * R[6] + a[4] * R[7] + a[5] * R[8]
    px, py, pz = p[0], p[1], p[2]
    # -[p][h'] - [h'][p] + m[p][p] = 2 (p.u) 1 - u p^T - p u^T + m (|p|^2 1 - p p^T), h' = u + m p
    pu, pp = dot(p, u), dot(p, p)
    return (m, u[0] + m * px, u[1] + m * py, u[2] + m * pz,
            bxx + 2.0 * pu - 2.0 * px * u[0] + m * (pp - px * px),
            byy + 2.0 * pu - 2.0 * py * u[1] + m * (pp - py * py),
            bzz + 2.0 * pu - 2.0 * pz * u[2] + m * (pp - pz * pz),
            bxy - px * u[1] - py * u[0] - m * px * py,
            bxz - px * u[2] - pz * u[0] - m * px * pz,
            byz - py * u[2] - pz * u[1] - m * py * pz)


# ---- plain numpy helpers for model construction and tests (not on the hot path) ----

def rpy_matrix(rpy):
    """URDF fixed-axis roll-pitch-yaw: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def homogeneous(R, p):
    """4x4 homogeneous transform of a rotation and a translation."""
    T = np.eye(4)
    T[:3, :3] = np.reshape(R, (3, 3))
    T[:3, 3] = p
    return T


def skew(x):
    """[x], the 3x3 matrix of x × (L&P eq. 3.30)."""
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


def inertia_from_core(Ixx, Iyy, Izz, Ixy, Ixz, Iyz):
    """The symmetric 3x3 inertia of its six entries in the core order (standard parameters)."""
    return np.array([[Ixx, Ixy, Ixz], [Ixy, Iyy, Iyz], [Ixz, Iyz, Izz]], dtype=float)


def inertia_from_urdf(ixx, ixy, ixz, iyy, iyz, izz):
    """The symmetric 3x3 inertia of its six entries in the URDF order (row by row, upper part)."""
    return inertia_from_core(ixx, iyy, izz, ixy, ixz, iyz)


def inertia_to_core(J):
    """(Ixx, Iyy, Izz, Ixy, Ixz, Iyz) of a 3x3 inertia: the core order."""
    return J[0, 0], J[1, 1], J[2, 2], J[0, 1], J[0, 2], J[1, 2]


def joint_motion(revolute, axis, q):
    """exp([A] q) as a 4x4 transform: a rotation about or a translation along the unit axis."""
    if revolute:
        return homogeneous(np.array(rodrigues(axis, q)), np.zeros(3))
    return homogeneous(np.eye(3), np.asarray(axis, dtype=float) * q)


def twist_transform(T):
    """Ad of T^-1 (6x6): a twist in the parent's coordinates seen in the child's, T its pose."""
    R, p = T[:3, :3], T[:3, 3]
    return np.block([[R.T, np.zeros((3, 3))], [-R.T @ skew(p), R.T]])


def standard_parameters(mass, com, inertia_com):
    """10-vector about the body origin from mass, centre of mass and inertia about the COM."""
    J = np.asarray(inertia_com, dtype=float)
    return transformed_inertia([mass, 0.0, 0.0, 0.0, *inertia_to_core(J)],
                               homogeneous(np.eye(3), com))


def transformed_inertia(inertia, T):
    """Standard parameters re-expressed through the 4x4 pose T of the body frame.

    The numpy twin of the kernel ``transform_inertia``, for building models.
    """
    m, h = inertia[0], np.asarray(inertia[1:4])
    T = np.asarray(T, dtype=float)
    R, P = T[:3, :3], skew(T[:3, 3])
    h_new = R @ h + m * T[:3, 3]
    J = R @ inertia_from_core(*inertia[4:10]) @ R.T
    J = J - P @ skew(h_new) - skew(h_new) @ P + m * P @ P
    return np.array([m, *h_new, *inertia_to_core(J)])


def inertia_matrix(inertia):
    """The 6x6 spatial inertia G = [[I, [h]], [[h]^T, m 1]] of standard parameters (L&P 8.32)."""
    H = skew(inertia[1:4])
    return np.block([[inertia_from_core(*inertia[4:10]), H], [H.T, inertia[0] * np.eye(3)]])
