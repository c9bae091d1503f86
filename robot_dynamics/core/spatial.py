"""Rigid-body vocabulary of so(3)/se(3), angular-first (Lynch & Park ch. 3 and 8).

Kernels here are allocation-free and work on flat arrays: a rotation is a 9-vector (row-major),
a spatial vector a 6-vector ``(angular, linear)``, and a rigid-body inertia a 10-vector of
standard parameters about the body origin, in body axes::

    (m, m cx, m cy, m cz, Ixx, Iyy, Izz, Ixy, Ixz, Iyz)

so that the 6x6 spatial inertia is ``G = [[I, [h]], [[h]^T, m 1]]`` with ``h = m c`` (L&P eq. 8.32,
about a point other than the centre of mass).
"""
import numpy as np

from ._jit import jit


@jit
def rodrigues(axis, angle):
    """exp([a] θ) = I + sin θ [a] + (1 - cos θ) [a]^2 for a unit axis, row-major 9-tuple (L&P eq. 3.51)."""
    ax, ay, az = axis[0], axis[1], axis[2]
    s, c = np.sin(angle), np.cos(angle)
    t = 1.0 - c
    return (c + t * ax * ax, t * ax * ay - s * az, t * ax * az + s * ay,
            t * ax * ay + s * az, c + t * ay * ay, t * ay * az - s * ax,
            t * ax * az - s * ay, t * ay * az + s * ax, c + t * az * az)


@jit
def compose(Ra, pa, Rb, pb, R, p):
    """(R, p) = (Ra, pa)(Rb, pb): R = Ra Rb, p = Ra pb + pa. Outputs must not alias inputs."""
    for r in range(3):
        for c in range(3):
            R[3 * r + c] = (Ra[3 * r] * Rb[c] + Ra[3 * r + 1] * Rb[3 + c]
                            + Ra[3 * r + 2] * Rb[6 + c])
        p[r] = Ra[3 * r] * pb[0] + Ra[3 * r + 1] * pb[1] + Ra[3 * r + 2] * pb[2] + pa[r]


@jit
def rotate(R, x, out):
    """out = R x."""
    x0, x1, x2 = x[0], x[1], x[2]
    for r in range(3):
        out[r] = R[3 * r] * x0 + R[3 * r + 1] * x1 + R[3 * r + 2] * x2


@jit
def rotate_transpose(R, x, out):
    """out = R^T x."""
    x0, x1, x2 = x[0], x[1], x[2]
    for c in range(3):
        out[c] = R[c] * x0 + R[3 + c] * x1 + R[6 + c] * x2


@jit
def transform_inertia(inertia, R, p, out):
    """Standard parameters of a body whose frame has pose (R, p) in the target frame.

    m' = m, h' = R h + m p, I' = R I R^T - [p][h'] - [h'][p] + m [p][p]   (parallel axis theorem,
    L&P eq. 8.31, written without dividing by m so composite or massless bodies work).
    """
    m = inertia[0]
    hx, hy, hz = inertia[1], inertia[2], inertia[3]
    rh0 = R[0] * hx + R[1] * hy + R[2] * hz
    rh1 = R[3] * hx + R[4] * hy + R[5] * hz
    rh2 = R[6] * hx + R[7] * hy + R[8] * hz
    Ixx, Iyy, Izz, Ixy, Ixz, Iyz = (inertia[4], inertia[5], inertia[6],
                                    inertia[7], inertia[8], inertia[9])
    # A = R I (3x3), then B = A R^T
    a00 = R[0] * Ixx + R[1] * Ixy + R[2] * Ixz
    a01 = R[0] * Ixy + R[1] * Iyy + R[2] * Iyz
    a02 = R[0] * Ixz + R[1] * Iyz + R[2] * Izz
    a10 = R[3] * Ixx + R[4] * Ixy + R[5] * Ixz
    a11 = R[3] * Ixy + R[4] * Iyy + R[5] * Iyz
    a12 = R[3] * Ixz + R[4] * Iyz + R[5] * Izz
    a20 = R[6] * Ixx + R[7] * Ixy + R[8] * Ixz
    a21 = R[6] * Ixy + R[7] * Iyy + R[8] * Iyz
    a22 = R[6] * Ixz + R[7] * Iyz + R[8] * Izz
    bxx = a00 * R[0] + a01 * R[1] + a02 * R[2]
    byy = a10 * R[3] + a11 * R[4] + a12 * R[5]
    bzz = a20 * R[6] + a21 * R[7] + a22 * R[8]
    bxy = a00 * R[3] + a01 * R[4] + a02 * R[5]
    bxz = a00 * R[6] + a01 * R[7] + a02 * R[8]
    byz = a10 * R[6] + a11 * R[7] + a12 * R[8]
    px, py, pz = p[0], p[1], p[2]
    # with u = R h: -[p][h'] - [h'][p] + m[p][p] = 2(p.u) 1 - u p^T - p u^T + m (|p|^2 1 - p p^T)
    pu = px * rh0 + py * rh1 + pz * rh2
    pp = px * px + py * py + pz * pz
    out[0] = m
    out[1] = rh0 + m * px
    out[2] = rh1 + m * py
    out[3] = rh2 + m * pz
    out[4] = bxx + 2.0 * pu - 2.0 * px * rh0 + m * (pp - px * px)
    out[5] = byy + 2.0 * pu - 2.0 * py * rh1 + m * (pp - py * py)
    out[6] = bzz + 2.0 * pu - 2.0 * pz * rh2 + m * (pp - pz * pz)
    out[7] = bxy - px * rh1 - py * rh0 - m * px * py
    out[8] = bxz - px * rh2 - pz * rh0 - m * px * pz
    out[9] = byz - py * rh2 - pz * rh1 - m * py * pz


@jit
def inertia_times_motion(inertia, V, out):
    """out = G V: momentum (I w + h x v, m v - h x w) of a twist V = (w, v) (L&P eq. 8.42)."""
    m, hx, hy, hz = inertia[0], inertia[1], inertia[2], inertia[3]
    Ixx, Iyy, Izz, Ixy, Ixz, Iyz = (inertia[4], inertia[5], inertia[6],
                                    inertia[7], inertia[8], inertia[9])
    wx, wy, wz, vx, vy, vz = V[0], V[1], V[2], V[3], V[4], V[5]
    out[0] = Ixx * wx + Ixy * wy + Ixz * wz + hy * vz - hz * vy
    out[1] = Ixy * wx + Iyy * wy + Iyz * wz + hz * vx - hx * vz
    out[2] = Ixz * wx + Iyz * wy + Izz * wz + hx * vy - hy * vx
    out[3] = m * vx - (hy * wz - hz * wy)
    out[4] = m * vy - (hz * wx - hx * wz)
    out[5] = m * vz - (hx * wy - hy * wx)


@jit
def inertia_matrix(inertia, G):
    """The 6x6 spatial inertia G = [[I, [h]], [[h]^T, m 1]] of standard parameters."""
    m, hx, hy, hz = inertia[0], inertia[1], inertia[2], inertia[3]
    G[:, :] = 0.0
    G[0, 0], G[1, 1], G[2, 2] = inertia[4], inertia[5], inertia[6]
    G[0, 1] = G[1, 0] = inertia[7]
    G[0, 2] = G[2, 0] = inertia[8]
    G[1, 2] = G[2, 1] = inertia[9]
    G[0, 4], G[0, 5], G[1, 3], G[1, 5], G[2, 3], G[2, 4] = -hz, hy, hz, -hx, -hy, hx
    G[4, 0], G[5, 0], G[3, 1], G[5, 1], G[3, 2], G[4, 2] = -hz, hy, hz, -hx, -hy, hx
    G[3, 3] = G[4, 4] = G[5, 5] = m


# ---- plain numpy helpers for model construction (not on the hot path) ----

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


def standard_parameters(mass, com, inertia_com):
    """10-vector about the body origin from mass, centre of mass and inertia about the COM."""
    out = np.empty(10)
    at_com = np.array([mass, 0.0, 0.0, 0.0, inertia_com[0, 0], inertia_com[1, 1],
                       inertia_com[2, 2], inertia_com[0, 1], inertia_com[0, 2], inertia_com[1, 2]])
    transform_inertia(at_com, np.eye(3).ravel(), np.asarray(com, dtype=float), out)
    return out


def transformed_inertia(inertia, T):
    """Standard parameters re-expressed through the 4x4 pose T of the body frame."""
    out = np.empty(10)
    transform_inertia(inertia, np.ascontiguousarray(T[:3, :3]).ravel(),
                      np.ascontiguousarray(T[:3, 3]), out)
    return out
