"""The identities of DESIGN.md section 3, on the shipped arms and on random branched trees.

Each algorithm is checked against another one, or against finite differences of a lower-level
quantity (4th-order central differences: error ~1e-11, tolerance 1e-8); the exact identities
hold to 1e-9 relative. No reference library is involved here.
"""
import zlib

import numpy as np
import pytest

import robot_dynamics as rd
from random_trees import (ARMS, MORE_ARMS, TREES, Case, add_fixed_link, assert_close,
                          christoffel_coriolis, derivative, fd_twist, make_case, random_rotation,
                          random_state, urdf_inertials, urdf_joints)

REFERENCES = {"LOCAL": rd.LOCAL, "WORLD": rd.WORLD, "LOCAL_WORLD_ALIGNED": rd.LOCAL_WORLD_ALIGNED}
EXACT, FD = 1e-9, 1e-8


@pytest.fixture(scope="module", params=ARMS + MORE_ARMS + TREES)
def case(request):
    case = make_case(request.param)
    model = case.load()
    rng = np.random.default_rng(zlib.crc32(request.param.encode()))
    states = [random_state(model.lower, model.upper, rng) for _ in range(2)]
    return case, model, states


def body_links(case, model):
    """Return the URDF link of each body: the child link of its joint."""
    joints = urdf_joints(case.xml)
    return [joints[name]["child"] for name in model.joint_names]


def masses(case, model):
    """List (frame, mass, com in frame axes) of the URDF links with <inertial> and a frame."""
    inertials = urdf_inertials(case.xml)
    return [(f, *inertials[f][:2]) for f in model.frame_names if f in inertials]


def potential_energy(case, model, q):
    """V(q) = -sum_i m_i g . c_i, c_i the centre of mass of link i in base coordinates."""
    V = 0.0
    for frame, m, com in masses(case, model):
        T = rd.frame_pose(model, q, frame)
        V -= m * model.gravity @ (T[:3, :3] @ com + T[:3, 3])
    return V


@pytest.mark.nojit
def test_gravity_is_rnea_at_rest(case):
    _, model, states = case
    zero = np.zeros(model.nv)
    for q, _, _ in states:
        assert_close(rd.gravity(model, q), rd.rnea(model, q, zero, zero), EXACT)


def test_gravity_from_com_jacobians(case):
    """g(q) = dV/dq = -sum_i J_com,i^T m_i g, J_com = J_v - [R c] J_w (LOCAL_WORLD_ALIGNED)."""
    case, model, states = case
    for q, _, _ in states:
        tau = np.zeros(model.nv)
        for frame, m, com in masses(case, model):
            J = rd.frame_jacobian(model, q, frame, reference=rd.LOCAL_WORLD_ALIGNED)
            r = rd.frame_pose(model, q, frame)[:3, :3] @ com
            J_com = J[3:] - np.cross(r, J[:3].T).T
            tau -= m * J_com.T @ model.gravity
        assert_close(rd.gravity(model, q), tau, EXACT)


def test_gravity_is_gradient_of_potential(case):
    case, model, states = case
    q = states[0][0]
    grad = [derivative(lambda t: potential_energy(case, model, q + t * e))
            for e in np.eye(model.nv)]
    assert_close(rd.gravity(model, q), grad, FD)


@pytest.mark.nojit
def test_mass_matrix_columns_are_rnea(case):
    _, model, states = case
    check_mass_matrix_columns(model, states)


def check_mass_matrix_columns(model, states):
    """Column i of M = rnea(q, v, e_i) - rnea(q, v, 0); M symmetric positive definite."""
    for q, v, _ in states:
        M = rd.mass_matrix(model, q)
        bias = rd.rnea(model, q, v, np.zeros(model.nv))
        columns = [rd.rnea(model, q, v, e) - bias for e in np.eye(model.nv)]
        assert_close(M, np.column_stack(columns), EXACT)
        assert_close(M, M.T, 1e-14)
        assert np.linalg.eigvalsh(M)[0] > 0


@pytest.mark.nojit
def test_coriolis_times_velocity_is_rnea_without_gravity(case):
    case, model, states = case
    free = case.load(gravity=(0.0, 0.0, 0.0))
    for q, v, _ in states:
        C = rd.coriolis_matrix(model, q, v)
        assert_close(C @ v, rd.rnea(free, q, v, np.zeros(model.nv)), EXACT)
        assert_close(rd.nonlinear_effects(model, q, v), C @ v + rd.gravity(model, q), EXACT)


def test_coriolis_matrix_is_christoffel(case):
    """Mdot = C + C^T (Mdot - 2C skew), and C is the Christoffel-symbol matrix (Spong 6.63)."""
    _, model, states = case
    for q, v, _ in states:
        C = rd.coriolis_matrix(model, q, v)
        Mdot = derivative(lambda t: rd.mass_matrix(model, q + t * v))
        assert_close(C + C.T, Mdot, FD)
        assert_close(C, christoffel_coriolis(lambda x: rd.mass_matrix(model, x), q, v), FD)


@pytest.mark.nojit
def test_forward_dynamics_inverts_rnea(case):
    _, model, states = case
    for q, v, a in states:
        assert_close(rd.forward_dynamics(model, q, v, rd.rnea(model, q, v, a)), a, EXACT)


def test_external_force(case):
    """Check rnea(q, v, a, F on body i) = rnea(q, v, a) - J_i^T F.

    J_i is the LOCAL Jacobian of body i's frame; with wrenches on all bodies the effects add
    up, and forward dynamics with f_ext inverts rnea with f_ext.
    """
    case, model, states = case
    rng = np.random.default_rng(11)
    q, v, a = states[0]
    tau = rd.rnea(model, q, v, a)
    f_ext, expected = np.zeros((model.nb, 6)), tau.copy()
    for i, link in enumerate(body_links(case, model)):
        F = rng.normal(size=6)
        single = np.zeros((model.nb, 6))
        single[i] = f_ext[i] = F
        JtF = rd.frame_jacobian(model, q, link, reference=rd.LOCAL).T @ F
        assert_close(rd.rnea(model, q, v, a, single), tau - JtF, EXACT)
        expected -= JtF
    assert_close(rd.rnea(model, q, v, a, f_ext), expected, EXACT)
    qdd = rd.forward_dynamics(model, q, v, tau, f_ext)
    assert_close(rd.rnea(model, q, v, qdd, f_ext), tau, EXACT)


def test_jacobian_is_pose_derivative(case):
    """J v = the finite-difference twist of the frame pose, in each reference."""
    case, model, states = case
    q, v, _ = states[0]
    for frame in {model.tip or "tool", *body_links(case, model)}:
        for name, reference in REFERENCES.items():
            twist = fd_twist(lambda x: rd.frame_pose(model, x, frame), q, v, name)
            J = rd.frame_jacobian(model, q, frame, reference=reference)
            assert_close(J @ v, twist, FD, label=name)
            assert_close(rd.frame_velocity(model, q, v, frame, reference=reference), J @ v, EXACT)


def test_bias_acceleration_is_jacobian_derivative(case):
    """frame_bias_acceleration = (d/dt J) v along q(t) = q + t v."""
    case, model, states = case
    q, v, _ = states[0]
    for frame in {model.tip or "tool", *body_links(case, model)}:
        for name, reference in REFERENCES.items():
            Jdot = derivative(lambda t: rd.frame_jacobian(model, q + t * v, frame,
                                                          reference=reference))
            assert_close(rd.frame_bias_acceleration(model, q, v, frame, reference=reference),
                         Jdot @ v, FD, label=name)


@pytest.mark.parametrize("name", ARMS)
def test_task_space(name):
    """Check Lambda = (J M^-1 J^T)^-1 at regular poses of the 6- and 7-dof arms.

    Translational Lambda = (J_v M^-1 J_v^T)^-1 (not a block of Lambda); effective mass along
    u = 1 / (u^T J_v M^-1 J_v^T u) = 1 / (u^T Lambda_v^-1 u).
    """
    case = make_case(name)
    model = case.load()
    rng = np.random.default_rng(2)
    for _ in range(3):
        q = random_state(model.lower, model.upper, rng)[0]
        Minv = np.linalg.inv(rd.mass_matrix(model, q))
        J = {n: rd.frame_jacobian(model, q, model.tip, reference=r) for n, r in REFERENCES.items()}
        assert np.linalg.svd(J["LOCAL"], compute_uv=False)[-1] > 1e-2, "pick a regular pose"
        for n, r in REFERENCES.items():
            assert_close(rd.task_space_inertia(model, q, model.tip, reference=r),
                         np.linalg.inv(J[n] @ Minv @ J[n].T), EXACT, label=n)
        Jv = J["LOCAL_WORLD_ALIGNED"][3:]
        Lambda_v = rd.translational_inertia(model, q, model.tip)
        assert_close(Lambda_v, np.linalg.inv(Jv @ Minv @ Jv.T), EXACT)
        for u in np.vstack([np.eye(3), rng.normal(size=(2, 3))]):
            u /= np.linalg.norm(u)
            m_u = rd.effective_mass(model, q, model.tip, u)
            assert_close(m_u, 1.0 / (u @ Jv @ Minv @ Jv.T @ u), EXACT)
            assert_close(m_u, 1.0 / (u @ np.linalg.solve(Lambda_v, u)), EXACT)


def rk4_step(model, q, v, dt):
    """One classical Runge-Kutta step of qdd = forward_dynamics(q, v, 0)."""
    zero = np.zeros(model.nv)

    def f(x):
        return np.concatenate([x[model.nv:], rd.forward_dynamics(model, x[:model.nv],
                                                                 x[model.nv:], zero)])
    x = np.concatenate([q, v])
    k1 = f(x)
    k2 = f(x + dt / 2 * k1)
    k3 = f(x + dt / 2 * k2)
    k4 = f(x + dt * k3)
    x = x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return x[:model.nv], x[model.nv:]


@pytest.mark.parametrize("name", ["panda/panda_link0/panda_hand", "tree-4-12", "chain-7-12"])
def test_energy_is_conserved(name):
    """Check tau = 0 without damping keeps 0.5 v^T M v + V(q) constant.

    One second of RK4 at dt = 1 ms. RK4's own drift, measured on the Panda (whose wrist
    spins up to 24 rad/s here): 4e-5, 2.6e-6, 1.6e-7 of the largest kinetic energy at
    dt = 4, 2, 1 ms (the dt^4 law).
    """
    case = make_case(name)
    model = case.load()
    q, v, _ = random_state(model.lower, model.upper, np.random.default_rng(0))
    energies, kinetic = [], []
    for step in range(1000):
        if step % 10 == 0:
            kinetic.append(0.5 * v @ rd.mass_matrix(model, q) @ v)
            energies.append(kinetic[-1] + potential_energy(case, model, q))
        q, v = rk4_step(model, q, v, 1e-3)
    drift = np.ptp(energies) / max(kinetic)
    assert drift < 1e-6, f"energy drift {drift:.2e} of the largest kinetic energy"


@pytest.mark.parametrize("name", ARMS + ("chain-7-12", "tree-4-12"))
def test_with_payload_is_a_fixed_link(name):
    """with_payload(mass, com, inertia) at a frame == the URDF with that link fixed there."""
    case = make_case(name)
    model = case.load()
    rng = np.random.default_rng(4)
    R = random_rotation(rng)
    inertia = R @ np.diag([0.02, 0.03, 0.04]) @ R.T
    mass, com = 1.3, np.array([0.01, -0.02, 0.05])
    before = rd.mass_matrix(model, np.zeros(model.nv))
    for frame in (model.tip, body_links(case, model)[-1]):
        if frame is None:
            continue
        reference = Case(name, add_fixed_link(case.xml, frame, "payload", mass, com, inertia),
                         case.base, case.tip, case.gravity).load()
        payload = rd.with_payload(model, mass, com, inertia, frame=frame) \
            if frame != model.tip else rd.with_payload(model, mass, com, inertia)
        for q, v, a in (random_state(model.lower, model.upper, rng) for _ in range(2)):
            assert_close(rd.rnea(payload, q, v, a), rd.rnea(reference, q, v, a), EXACT)
            assert_close(rd.mass_matrix(payload, q), rd.mass_matrix(reference, q), EXACT)
            assert_close(rd.gravity(payload, q), rd.gravity(reference, q), EXACT)
    assert_close(rd.mass_matrix(model, np.zeros(model.nv)), before, 0.0)  # model unchanged
