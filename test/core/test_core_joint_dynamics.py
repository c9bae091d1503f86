"""The joints' armature and friction: Model.armature, viscous, coulomb, stiction and their scales.

M(q) q̈ + C q̇ + g + τ_f(q̇) = τ with diag(I_a) in M and
τ_f = f_v q̇ + [f_c + f_s exp(−(q̇ / v_s)²)] tanh(q̇ / ε): the
closed forms of the difference they make, the identities of DESIGN.md §3 with them (batched and
threaded too), the energy they dissipate, and the checks of bad values. Pinocchio
(model.armature) and MuJoCo (dof_armature, dof_damping) cross-checks are in
test_core_pinocchio.py and test_core_mujoco.py.
"""
import zlib

import numpy as np
import pytest

import robot_dynamics as rd
from random_trees import (ARMS, TREES, assert_close, derivative, joint_terms, make_case,
                          random_state, random_urdf)
from robot_dynamics.core.algorithms import threaded
from robot_dynamics.core.model import COULOMB_VELOCITY
from robot_dynamics.core.model import COULOMB_VELOCITY as COULOMB_EPS
from test_core_identities import check_mass_matrix_columns, potential_energy

EXACT, FD = 1e-9, 1e-8


@pytest.fixture(scope="module", params=ARMS + TREES)
def case(request):
    case = make_case(request.param)
    rigid = case.load()
    rng = np.random.default_rng(zlib.crc32(request.param.encode()))
    model = rigid.replace(**joint_terms(rigid.nv, rng))
    states = [random_state(model.lower, model.upper, rng) for _ in range(2)]
    return rigid, model, states


def friction(model, v):
    """The closed form f_v q̇ + [f_c + f_s exp(−(q̇ / v_s)²)] tanh(q̇ / ε)."""
    breakaway = model.coulomb + model.stiction * np.exp(-(v / model.stribeck_velocity) ** 2)
    return model.viscous * v + breakaway * np.tanh(v / model.coulomb_velocity)


# ---- the fields ----

@pytest.mark.nojit
def test_defaults_are_zero_and_the_urdf_dynamics_element_is_not_read():
    xml = random_urdf(3, 6)
    assert '<dynamics damping="0.3" friction="0.1"' in xml
    model = rd.load_urdf(xml)
    for name in ("armature", "viscous", "coulomb", "stiction"):
        assert np.array_equal(getattr(model, name), np.zeros(model.nv))
        assert not getattr(model, name).flags.writeable
    assert model.coulomb_velocity == COULOMB_VELOCITY == COULOMB_EPS == 0.01
    assert np.array_equal(model.stribeck_velocity, np.full(model.nv, 0.05))
    q, v, a = random_state(model.lower, model.upper, np.random.default_rng(0))
    assert np.array_equal(rd.joint_friction(model, v), np.zeros(model.nv))


@pytest.mark.nojit
def test_replace_and_with_payload_keep_the_fields(case):
    rigid, model, _ = case
    assert np.array_equal(rigid.replace(armature=model.armature).armature, model.armature)
    if model.tip is not None:
        loaded = rd.with_payload(model, 1.5, (0.0, 0.0, 0.1))
        for name in ("armature", "viscous", "coulomb", "coulomb_velocity", "stiction",
                     "stribeck_velocity"):
            assert np.array_equal(getattr(loaded, name), getattr(model, name))


BAD = [
    (dict(armature=[0.1, 0.2]), r"armature must be 3 finite numbers >= 0, one per joint "
                                r"\(joint1, joint2, joint3\)"),
    (dict(viscous=[0.1, -0.2, 0.0]), "viscous must be 3 finite numbers >= 0"),
    (dict(coulomb=[0.1, np.nan, 0.0]), "coulomb must be 3 finite numbers >= 0"),
    (dict(coulomb=[0.1, np.inf, 0.0]), "coulomb must be 3 finite numbers >= 0"),
    (dict(armature="heavy"), "armature must be 3 finite numbers"),
    (dict(viscous=0.5), "viscous must be 3 finite numbers"),
    (dict(coulomb_velocity=0.0), r"coulomb_velocity \(ε of the smooth sign tanh\(q̇ / ε\)\) must "
                                 "be a finite number > 0"),
    (dict(coulomb_velocity=-0.01), "coulomb_velocity .* must be a finite number > 0"),
    (dict(coulomb_velocity=np.inf), "coulomb_velocity .* must be a finite number > 0"),
    (dict(coulomb_velocity="fast"), "coulomb_velocity .* must be a finite number > 0"),
    (dict(stiction=[0.1, -0.1, 0.0]), "stiction must be 3 finite numbers >= 0"),
    (dict(stribeck_velocity=0.0), r"stribeck_velocity \(v_s of the Stribeck term .*\) must be "
                                  "one or 3 finite numbers > 0"),
    (dict(stribeck_velocity=[0.1, 0.2]), "stribeck_velocity .* must be one or 3 finite numbers"),
    (dict(stribeck_velocity=[0.1, np.inf, 0.1]), "stribeck_velocity .* finite numbers > 0"),
    (dict(stribeck_velocity="slow"), "stribeck_velocity .* finite numbers > 0"),
]


@pytest.mark.nojit
@pytest.mark.parametrize("change, message", BAD, ids=[str(c) for c, _ in BAD])
def test_bad_values_are_rejected(change, message):
    model = make_case("chain-3-7").load()
    assert model.joint_names == ("joint1", "joint2", "joint3")
    with pytest.raises(ValueError, match=message):
        model.replace(**change)


@pytest.mark.nojit
def test_joint_friction_shapes_and_errors():
    rigid = make_case("chain-3-7").load()
    model = rigid.replace(viscous=[1.0, 2.0, 0.0], coulomb=[0.5, 0.0, 3.0], coulomb_velocity=0.1)
    v = np.array([[0.0, 0.0, 0.0], [0.1, -1.0, -0.1], [100.0, 2.0, 100.0]])
    expected = [[0.0, 0.0, 0.0], [0.1 + 0.5 * np.tanh(1.0), -2.0, -3.0 * np.tanh(1.0)],
                [100.5, 4.0, 3.0]]
    assert_close(rd.joint_friction(model, v), expected, 1e-15)
    assert_close(rd.joint_friction(model, [0.1, -1, -0.1]), expected[1], 1e-15)  # a list
    assert rd.joint_friction(model, np.zeros((0, 3))).shape == (0, 3)
    with pytest.raises(ValueError, match=r"v must have shape \(3,\) for this model"):
        rd.joint_friction(model, np.zeros(2))
    with pytest.raises(ValueError, match=r"v must .*shape \(3,\)"):
        rd.joint_friction(model, np.zeros((2, 2, 3)))


@pytest.mark.nojit
def test_stribeck_term_in_closed_form():
    """f_s exp(−(q̇ / v_s)²) tanh(q̇ / ε): breakaway f_c + f_s near rest, f_c beyond a few v_s."""
    rigid = make_case("chain-3-7").load()
    coulomb = rigid.replace(coulomb=[0.2, 0.0, 1.0], coulomb_velocity=0.01)
    model = coulomb.replace(stiction=[0.1, 0.3, 0.0], stribeck_velocity=[0.05, 0.5, 0.05])
    assert np.array_equal(model.replace(stribeck_velocity=0.05).stribeck_velocity, [0.05] * 3)
    v = np.array([[0.0, 0.0, 0.0], [0.05, -0.5, 0.05], [0.1, 0.2, -0.3], [1.0, -5.0, 1.0]])
    # at q̇ = v_s, e^-1 of f_s
    expected = [[0.0, 0.0, 0.0], [(0.2 + 0.1 * np.exp(-1.0)) * np.tanh(5.0),
                                  -0.3 * np.exp(-1.0) * np.tanh(50.0), np.tanh(5.0)],
                [(0.2 + 0.1 * np.exp(-4.0)) * np.tanh(10.0), 0.3 * np.exp(-0.16) * np.tanh(20.0),
                 -np.tanh(30.0)],
                [0.2 + 0.1 * np.exp(-400.0), -0.3 * np.exp(-100.0), 1.0]]
    assert_close(rd.joint_friction(model, v), expected, 1e-15)
    # near rest the friction reaches the breakaway torque f_c + f_s (v_s ≫ ε)
    assert_close(rd.joint_friction(model, [0.001, 0.05, 0.0])[:2],
                 [(0.2 + 0.1 * np.exp(-0.0004)) * np.tanh(0.1),
                  0.3 * np.exp(-0.01) * np.tanh(5.0)], 1e-15)


# ---- what they change, in closed form ----

@pytest.mark.nojit
def test_closed_forms(case):
    """τ gains I_a q̈ + τ_f(q̇), M gains diag(I_a); g and C are unchanged."""
    rigid, model, states = case
    zero = np.zeros(model.nv)
    for q, v, a in states:
        tau_f = friction(model, v)
        assert_close(rd.joint_friction(model, v), tau_f, 1e-14)
        assert_close(rd.rnea(model, q, v, a) - rd.rnea(rigid, q, v, a), model.armature * a + tau_f,
                     EXACT)
        assert_close(rd.nonlinear_effects(model, q, v) - rd.nonlinear_effects(rigid, q, v), tau_f,
                     EXACT)
        assert_close(rd.rnea(model, q, zero, a) - rd.rnea(rigid, q, zero, a),
                     model.armature * a, EXACT)
        assert np.array_equal(rd.gravity(model, q), rd.gravity(rigid, q))
        assert_close(rd.gravity(model, q), rd.rnea(model, q, zero, zero), EXACT)
        assert_close(rd.mass_matrix(model, q) - rd.mass_matrix(rigid, q), np.diag(model.armature),
                     EXACT)
        assert np.array_equal(rd.coriolis_matrix(model, q, v), rd.coriolis_matrix(rigid, q, v))


# ---- the identities, with armature and friction ----

@pytest.mark.nojit
def test_mass_matrix_columns_are_rnea(case):
    _, model, states = case
    check_mass_matrix_columns(model, states)


@pytest.mark.nojit
def test_forward_dynamics_inverts_rnea(case):
    _, model, states = case
    f_ext = np.random.default_rng(1).normal(size=(model.nb, 6))
    for q, v, a in states:
        assert_close(rd.forward_dynamics(model, q, v, rd.rnea(model, q, v, a)), a, EXACT)
        assert_close(rd.forward_dynamics(model, q, v, rd.rnea(model, q, v, a, f_ext), f_ext), a,
                     EXACT)


@pytest.mark.nojit
def test_coriolis_times_velocity(case):
    _, model, states = case
    for q, v, _ in states:
        C = rd.coriolis_matrix(model, q, v)
        assert_close(C @ v, rd.nonlinear_effects(model, q, v) - rd.gravity(model, q)
                     - rd.joint_friction(model, v), EXACT)


def test_mdot_is_c_plus_c_transpose(case):
    """The armature is constant: Ṁ − 2C stays skew-symmetric."""
    _, model, states = case
    for q, v, _ in states:
        C = rd.coriolis_matrix(model, q, v)
        assert_close(C + C.T, derivative(lambda t: rd.mass_matrix(model, q + t * v)), FD)


@pytest.mark.parametrize("name", ARMS)
def test_task_space_inertia_feels_the_armature(name):
    rigid = make_case(name).load()
    rng = np.random.default_rng(5)
    model = rigid.replace(**joint_terms(rigid.nv, rng))
    for _ in range(2):
        q = random_state(model.lower, model.upper, rng)[0]
        J = rd.frame_jacobian(model, q, model.tip)
        Lambda = np.linalg.inv(J @ np.linalg.solve(rd.mass_matrix(model, q), J.T))
        assert_close(rd.task_space_inertia(model, q, model.tip), Lambda, EXACT)
        Jv = J[3:]
        assert_close(rd.translational_inertia(model, q, model.tip),
                     np.linalg.inv(Jv @ np.linalg.solve(rd.mass_matrix(model, q), Jv.T)), EXACT)
        assert not np.allclose(Lambda, rd.task_space_inertia(rigid, q, model.tip), rtol=1e-3)


@pytest.mark.nojit
def test_batched_and_threaded_calls_are_per_state(case):
    _, model, states = case
    Q, V, A = (np.array(x) for x in zip(*states))
    tau = rd.rnea(model, Q, V, A)
    rows = [rd.rnea(model, *state) for state in states]
    np.testing.assert_allclose(tau, rows, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(threaded.rnea(model, Q, V, A), rows, rtol=1e-12, atol=1e-12)
    nle = [rd.nonlinear_effects(model, q, v) for q, v, _ in states]
    np.testing.assert_allclose(rd.nonlinear_effects(model, Q, V), nle, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(threaded.nonlinear_effects(model, Q, V), nle, rtol=1e-12,
                               atol=1e-12)
    M = [rd.mass_matrix(model, q) for q, _, _ in states]
    np.testing.assert_allclose(rd.mass_matrix(model, Q), M, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(threaded.mass_matrix(model, Q), M, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rd.forward_dynamics(model, Q, V, tau), A, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(rd.joint_friction(model, V), [friction(model, v) for v in V],
                               rtol=1e-14, atol=1e-15)


# ---- energy ----

@pytest.mark.parametrize("name", ["panda/panda_link0/panda_hand", "chain-7-12"])
def test_energy_balance(name):
    """d/dt (½ q̇ᵀ M q̇ + V) = −q̇ᵀ τ_f at τ = 0: E + W constant, W = ∫ q̇ᵀ τ_f dt.

    W integrated by the same RK4 steps (1 ms, 1 s); without friction E alone is conserved. The
    Coulomb slope f_c / ε stays well inside RK4's stability region (ε = 0.1).
    """
    case = make_case(name)
    rigid = case.load()
    rng = np.random.default_rng(0)
    terms = joint_terms(rigid.nv, rng) | dict(coulomb_velocity=0.1)
    q0, v0, _ = random_state(rigid.lower, rigid.upper, rng)
    for model in (rigid.replace(armature=terms["armature"]), rigid.replace(**terms)):
        n = model.nv

        def f(x):
            q, v = x[:n], x[n:2 * n]
            tau_f = rd.joint_friction(model, v)
            qdd = rd.forward_dynamics(model, q, v, np.zeros(n))
            return np.concatenate([v, qdd, [v @ tau_f]])

        def energy(x):
            q, v = x[:n], x[n:2 * n]
            return 0.5 * v @ rd.mass_matrix(model, q) @ v + potential_energy(case, model, q)

        x, dt = np.concatenate([q0, v0, [0.0]]), 1e-3
        balance, kinetic = [], []
        for step in range(1000):
            if step % 10 == 0:
                balance.append(energy(x) + x[-1])
                kinetic.append(0.5 * x[n:2 * n] @ rd.mass_matrix(model, x[:n]) @ x[n:2 * n])
            k1 = f(x)
            k2 = f(x + dt / 2 * k1)
            k3 = f(x + dt / 2 * k2)
            k4 = f(x + dt * k3)
            x = x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        drift = np.ptp(balance) / max(kinetic)
        assert drift < 1e-6, f"energy balance off by {drift:.2e} of the largest kinetic energy"
    assert x[-1] > 0.01 * max(kinetic)   # friction did dissipate energy
