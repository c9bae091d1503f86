"""Closed-form dynamics of the seeds' planar examples, derived here from their Lagrangians.

Each arm moves in the x-y plane of its first link's parent frame, joints about z, links along
x, gravity g along -y of that plane. The loader wants positive-definite inertias, so a "point
mass" carries a tiny inertia eps about its centre of mass; eps enters the closed forms.
"""
import numpy as np
import pytest

import robot_dynamics as rd
from random_trees import assert_close, rpy_matrix

G, EPS = 9.81, 1e-6


def inertial(mass, com, izz, ixx=None):
    """<inertial> with principal axes along the link axes; ixx = iyy = izz unless given."""
    ixx = izz if ixx is None else ixx
    com = [float(x) for x in com]
    return (f'<inertial><origin xyz="{com[0]!r} {com[1]!r} 0"/><mass value="{mass!r}"/>'
            f'<inertia ixx="{ixx!r}" ixy="0" ixz="0" iyy="{izz!r}" iyz="0" izz="{izz!r}"/>'
            '</inertial>')


def _numbers(values):
    return " ".join(repr(float(x)) for x in values)


def planar_urdf(types, inertials, lengths, rpy=(0, 0, 0), xyz=(0, 0, 0)):
    """Write a base link and one link per joint; joint i+1 sits at x = lengths[i] of link i."""
    links = '<link name="base"/>' + "".join(
        f'<link name="link{i + 1}">{x}</link>' for i, x in enumerate(inertials))
    joints, origin, parent = "", (xyz, rpy), "base"
    for i, kind in enumerate(types):
        (o_xyz, o_rpy), axis = origin, "1 0 0" if kind == "prismatic" else "0 0 1"
        joints += (f'<joint name="q{i + 1}" type="{kind}"><parent link="{parent}"/>'
                   f'<child link="link{i + 1}"/><axis xyz="{axis}"/>'
                   f'<origin xyz="{_numbers(o_xyz)}" rpy="{_numbers(o_rpy)}"/>'
                   '<limit lower="-10" upper="10" effort="100" velocity="10"/></joint>')
        origin, parent = ((lengths[i], 0.0, 0.0), (0, 0, 0)), f"link{i + 1}"
    return f'<robot name="planar">{links}{joints}</robot>'


def check(model, M, C, g, q, v, a):
    """Compare rd with the closed form: M, C, g, and tau = M a + C v + g."""
    assert_close(rd.mass_matrix(model, q), M, 1e-12)
    assert_close(rd.coriolis_matrix(model, q, v), C, 1e-12)
    assert_close(rd.gravity(model, q), g, 1e-12)
    assert_close(rd.rnea(model, q, v, a), M @ a + C @ v + g, 1e-12)


STATES = [np.random.default_rng(s).uniform(-2, 2, (3, 2)) for s in range(3)]


@pytest.mark.parametrize("state", STATES)
def test_planar_2r_point_masses(state):
    """Lynch & Park 9.1.1: point masses m1, m2 at the ends of links L1, L2.

    With x2 = L1 c1 + L2 c12, K = (m1 L1^2 th1'^2 + m2 |x2'|^2) / 2 gives
    M11 = m1 L1^2 + m2 (L1^2 + 2 L1 L2 c2 + L2^2), M12 = m2 (L1 L2 c2 + L2^2), M22 = m2 L2^2
    (plus eps I1 + I2 terms), Christoffel C = h [[th2', th1' + th2'], [-th1', 0]] with
    h = -m2 L1 L2 s2, and P = m1 g L1 s1 + m2 g (L1 s1 + L2 s12) gives
    g = ((m1 + m2) g L1 c1 + m2 g L2 c12, m2 g L2 c12).
    """
    m1, m2, L1, L2 = 2.0, 1.5, 0.7, 0.45
    xml = planar_urdf(["revolute", "revolute"],
                      [inertial(m1, (L1, 0), EPS), inertial(m2, (L2, 0), EPS)], [L1, L2])
    model = rd.load_urdf(xml, gravity=(0, -G, 0))
    (q1, q2), v, a = state
    c2, s2 = np.cos(q2), np.sin(q2)
    M = np.array([[m1 * L1**2 + m2 * (L1**2 + 2 * L1 * L2 * c2 + L2**2) + 2 * EPS,
                   m2 * (L1 * L2 * c2 + L2**2) + EPS],
                  [m2 * (L1 * L2 * c2 + L2**2) + EPS, m2 * L2**2 + EPS]])
    h = -m2 * L1 * L2 * s2
    C = h * np.array([[v[1], v[0] + v[1]], [-v[0], 0.0]])
    g = np.array([(m1 + m2) * G * L1 * np.cos(q1) + m2 * G * L2 * np.cos(q1 + q2),
                  m2 * G * L2 * np.cos(q1 + q2)])
    check(model, M, C, g, state[0], v, a)


@pytest.mark.parametrize("state", STATES)
def test_planar_elbow_distributed_inertia(state):
    """Spong 6.4, the planar elbow with distributed link inertia.

    Links of mass m_i, length l_i, centre of mass at lc_i, inertia I_i about it (a rod
    here). The arm's plane is tilted in the base frame, and so is
    gravity, to exercise the frames:
    d11 = m1 lc1^2 + m2 (l1^2 + lc2^2 + 2 l1 lc2 c2) + I1 + I2, d12 = m2 (lc2^2 + l1 lc2 c2) + I2,
    d22 = m2 lc2^2 + I2; C = h [[q2', q1' + q2'], [-q1', 0]], h = -m2 l1 lc2 s2;
    g1 = (m1 lc1 + m2 l1) g c1 + m2 lc2 g c12, g2 = m2 lc2 g c12.
    """
    m1, m2, l1, l2 = 3.0, 1.8, 0.8, 0.6
    lc1, lc2 = 0.35, 0.25
    I1, I2 = m1 * l1**2 / 12, m2 * l2**2 / 12  # uniform rods about their centres
    rpy, xyz = (0.3, -0.4, 0.5), (0.1, -0.2, 0.3)
    xml = planar_urdf(["revolute", "continuous"],
                      [inertial(m1, (lc1, 0), I1, ixx=1e-4), inertial(m2, (lc2, 0), I2, ixx=1e-4)],
                      [l1, l2], rpy=rpy, xyz=xyz)
    model = rd.load_urdf(xml, gravity=rpy_matrix(rpy) @ (0, -G, 0))
    (q1, q2), v, a = state
    c2, s2 = np.cos(q2), np.sin(q2)
    d12 = m2 * (lc2**2 + l1 * lc2 * c2) + I2
    M = np.array([[m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * c2) + I1 + I2, d12],
                  [d12, m2 * lc2**2 + I2]])
    h = -m2 * l1 * lc2 * s2
    C = h * np.array([[v[1], v[0] + v[1]], [-v[0], 0.0]])
    g = np.array([(m1 * lc1 + m2 * l1) * G * np.cos(q1) + m2 * lc2 * G * np.cos(q1 + q2),
                  m2 * lc2 * G * np.cos(q1 + q2)])
    check(model, M, C, g, state[0], v, a)


def rp_arm():
    """Load the RP arm of rp_manipulator_effective_inertia.txt.

    Link 1 (m1, COM c1 in link axes, H1 about z) turns by theta; link 2 (m2, COM at the
    slider, H2) slides by r along link 1's x.
    """
    m1, m2, c1, H1, H2 = 2.5, 1.2, np.array([0.3, 0.05]), 0.04, 0.02
    xml = planar_urdf(["revolute", "prismatic"],
                      [inertial(m1, c1, H1), inertial(m2, (0, 0), H2)], [0.0, 0.0])
    return rd.load_urdf(xml, gravity=(0, -G, 0)), m1, m2, c1, H1, H2


@pytest.mark.parametrize("state", STATES)
def test_rp_arm(state):
    """RP arm: M, C, g from its Lagrangian.

    c2 = r (cos th, sin th), so v2 = r' (c, s) + r th' (-s, c) and
    K = (H1 + m1 |c1|^2 + H2 + m2 r^2) th'^2 / 2 + m2 r'^2 / 2: M = diag(Hbar + m2 r^2, m2).
    Only dM11/dr = 2 m2 r is non-zero: C = [[m2 r r', m2 r th'], [-m2 r th', 0]] (so that
    C v = (2 m2 r r' th', -m2 r th'^2)). P = m1 g (R(th) c1)_y + m2 g r sin th gives
    g = (m1 g (c1x cos th - c1y sin th) + m2 g r cos th, m2 g sin th).
    """
    model, m1, m2, c1, H1, H2 = rp_arm()
    (th, r), (dth, dr), a = state
    M = np.diag([H1 + m1 * c1 @ c1 + H2 + m2 * r**2, m2])
    C = np.array([[m2 * r * dr, m2 * r * dth], [-m2 * r * dth, 0.0]])
    g = np.array([m1 * G * (c1[0] * np.cos(th) - c1[1] * np.sin(th)) + m2 * G * r * np.cos(th),
                  m2 * G * np.sin(th)])
    check(model, M, C, g, state[0], state[1], a)


@pytest.mark.parametrize("state", STATES)
def test_rp_arm_effective_inertia(state):
    """RP arm: effective inertia at the slider point p = r (cos th, sin th).

    J = [t r, e] with e = (c, s), t = (-s, c), so
    J M^-1 J^T = e e^T / m2 + t t^T r^2 / (Hbar + m2 r^2). Effective mass: m2 along e,
    (Hbar + m2 r^2) / r^2 along t; a force f at p changes p'' by J M^-1 J^T f.
    """
    model, m1, m2, c1, H1, H2 = rp_arm()
    (th, r), v, _ = state
    q = np.array([th, r])
    Hbar = H1 + m1 * c1 @ c1 + H2
    e = np.array([np.cos(th), np.sin(th), 0.0])
    t = np.array([-np.sin(th), np.cos(th), 0.0])
    assert_close(rd.effective_mass(model, q, "link2", e), m2, 1e-12)
    assert_close(rd.effective_mass(model, q, "link2", t), (Hbar + m2 * r**2) / r**2, 1e-12)
    f = np.array([1.7, -0.6, 0.0])
    R = rd.frame_pose(model, q, "link2")[:3, :3]
    f_ext = np.zeros((2, 6))
    f_ext[1, 3:] = R.T @ f  # the force at link 2's origin p, in link 2 axes
    tau = np.array([0.3, -0.2])
    dqdd = rd.forward_dynamics(model, q, v, tau, f_ext) - rd.forward_dynamics(model, q, v, tau)
    Jv = rd.frame_jacobian(model, q, "link2", reference=rd.LOCAL_WORLD_ALIGNED)[3:]
    expected = e * (e @ f) / m2 + t * (t @ f) * r**2 / (Hbar + m2 * r**2)
    assert_close(Jv @ dqdd, expected, 1e-12)
