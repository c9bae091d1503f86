"""Identification: filtering, least squares, payloads, excitation, and the before/after proof.

Data come from the core's own dynamics (rd.rnea, rd.gravity, rd.with_payload, and a simulated
arm integrated with RK4 on rd.mass_matrix / rd.nonlinear_effects) plus friction, armature and
noise that the identification does not know; the checks compare with those hidden truths.
"""
import numpy as np
import pytest

import robot_dynamics as rd
from random_trees import assert_close, make_case
from robot_dynamics.core.excitation import FourierTrajectory, excitation_trajectory
from robot_dynamics.core.identification import (differentiate, identify, identify_payload,
                                                lowpass, physical_consistency)
from robot_dynamics.core.regressor import COULOMB_EPS, parameter_vector
from robot_dynamics.core.spatial import rpy_matrix, standard_parameters, transformed_inertia
from robot_dynamics.core.trajectory import JointTrajectory
from test_regressor import planar_2r

PANDA, UR5E = 'panda/panda_link0/panda_hand', 'ur5e/base_link/tool0'
FIGURES = {}   # the proof's numbers, printed by the proof test


@pytest.fixture(scope='module')
def panda():
    return make_case(PANDA).load()


def random_states(model, n, rng):
    q = rng.uniform(model.lower, model.upper, (n, model.nv))
    v, a = rng.normal(size=(2, n, model.nv))
    return q, v, a


def hidden_joint_terms(model, rng):
    """Viscous, Coulomb friction and armature of the 'real' arm."""
    return (rng.uniform(0.05, 0.3, model.nv), rng.uniform(0.2, 0.8, model.nv),
            rng.uniform(0.05, 0.2, model.nv))


def joint_torques(fv, fc, ia, v, a):
    return fv * v + fc * np.tanh(v / COULOMB_EPS) + ia * a


def perturbed(model, rng, fraction=0.2):
    """Every body's parameters scaled by 1 ± fraction (random signs): masses off by ±20 %."""
    return model.replace(inertia=model.inertia * (
        1.0 + fraction * rng.choice([-1.0, 1.0], (model.nb, 1))))


# ---- filtering and differentiation ----

def test_differentiate_recovers_the_derivatives_of_noisy_sines():
    dt, t = 1e-3, np.arange(0.0, 6.0, 1e-3)
    w = 2 * np.pi * np.array([0.3, 0.7, 1.1])
    q_true = np.sin(t[:, None] * w)
    rng = np.random.default_rng(0)
    q, v, a = differentiate(q_true + rng.normal(scale=1e-5, size=q_true.shape), dt, cutoff=8.0)
    inner = slice(500, -500)   # away from the filter's edge effects
    assert np.abs(q - q_true)[inner].max() < 1e-4
    assert np.abs(v - w * np.cos(t[:, None] * w))[inner].max() < 0.01 * w.max()
    assert np.abs(a + w ** 2 * q_true)[inner].max() < 0.02 * (w ** 2).max()


def test_lowpass_has_no_delay():
    """Zero phase: a 1 Hz sine through a 20 Hz filter comes out where it went in."""
    t = np.arange(0.0, 4.0, 1e-3)
    x = np.sin(2 * np.pi * t)
    assert np.abs(lowpass(x, 1e-3, 20.0) - x)[200:-200].max() < 1e-4


# ---- physical consistency ----

def test_physical_consistency_of_a_box_and_of_impossible_bodies():
    m, (a, b, c) = 2.0, (0.1, 0.2, 0.4)
    moments = m / 12 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])
    box = transformed_inertia(standard_parameters(m, [0.05, -0.1, 0.2], np.diag(moments)),
                              rd_pose(rpy_matrix([0.3, -0.2, 1.0]), [0.1, 0.2, 0.3]))
    report = physical_consistency(box)
    assert report['positive_mass'] and report['positive_definite'] and report['triangle']
    assert_close(report['principal_moments'], np.sort(moments), 1e-12)
    rod_violating = standard_parameters(1.0, [0, 0, 0], np.diag([0.1, 0.1, 0.3]))
    assert not physical_consistency(rod_violating)['triangle']
    assert not physical_consistency(standard_parameters(1.0, [0, 0, 0],
                                                        np.diag([0.1, -0.1, 0.1])))[
        'positive_definite']
    assert not physical_consistency(-box)['positive_mass']


def rd_pose(R, p):
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, p
    return T


# ---- least squares ----

def test_identify_noiseless_data_recovers_the_base_parameters(panda):
    rng = np.random.default_rng(1)
    true = perturbed(panda, rng)
    fv, fc, ia = hidden_joint_terms(panda, rng)
    q, v, a = random_states(panda, 300, rng)
    tau = rd.rnea(true, q, v, a) + joint_torques(fv, fc, ia, v, a)
    result = identify(panda, q, v, a, tau, viscous=True, coulomb=True, armature=True)
    theta_true = parameter_vector(true, fv, fc, ia)
    assert_close(result.theta_base, result.base(theta_true), 1e-9)
    assert_close(result.viscous, fv, 1e-8)
    assert_close(result.coulomb, fc, 1e-8)
    assert_close(result.armature[2:], ia[2:], 1e-8)   # Ia1 and Ia2 merge with link inertias
    assert result.relative_error < 1e-10
    # the full parameters reproduce θ_b, so the fitted model predicts τ on new states
    q, v, a = random_states(panda, 20, rng)
    tau = rd.rnea(true, q, v, a) + joint_torques(fv, fc, ia, v, a)
    assert_close(result.predict(q, v, a), tau, 1e-9)
    tau_model = rd.rnea(result.model, q, v, a) + joint_torques(
        result.viscous, result.coulomb, result.armature, v, a)
    assert_close(tau_model, tau, 1e-9)


def test_weighting_by_the_noise_std(panda):
    """Joint 1 is 30x noisier: weighted least squares beats ordinary least squares.

    The two-step estimate finds the σ, and the reported std describe the actual errors.
    """
    rng = np.random.default_rng(2)
    true = perturbed(panda, rng)
    q, v, a = random_states(panda, 1500, rng)
    sigma = np.full(panda.nv, 0.02)
    sigma[0] = 0.6
    tau = rd.rnea(true, q, v, a) + rng.normal(size=q.shape) * sigma
    target = None
    errors = {}
    for weights in (None, sigma, 'estimate'):
        result = identify(panda, q, v, a, tau, noise_std=weights)
        target = result.base(parameter_vector(true))
        errors[str(weights)[:8]] = error = result.theta_base - target
        assert np.all(np.abs(error) < 5 * result.std_base)
    assert np.linalg.norm(errors[str(sigma)[:8]]) < 0.5 * np.linalg.norm(errors['None'])
    assert_close(result.residual_rms, sigma, 0.1)


def test_inconsistent_parameters_are_reported_not_fixed():
    """A 'real' arm whose second link has a negative inertia about its joint (impossible).

    The fit reproduces it and the report names the body.
    """
    model = planar_2r()
    inertia = model.inertia.copy()
    inertia[1, 6] = -0.1   # Izz of link 2 about joint 2
    true = model.replace(inertia=inertia)
    rng = np.random.default_rng(3)
    q, v, a = random_states(model, 100, rng)
    result = identify(model, q, v, a, rd.rnea(true, q, v, a))
    assert_close(result.theta_base, result.base(true.inertia.ravel()), 1e-9)
    assert result.consistency[0]['positive_definite'] and result.consistency[0]['triangle']
    assert not result.consistency[1]['positive_definite']
    assert not result.consistent
    assert 'inconsistent bodies: joint2' in result.summary()
    assert not any(c['determined'] for c in result.consistency)   # the masses stay combined


# ---- payload ----

PAYLOADS = [(0.5, [0.0, 0.0, 0.05]), (1.2, [0.03, -0.02, 0.08]), (3.0, [-0.06, 0.04, 0.12])]


@pytest.mark.parametrize('arm', [PANDA, UR5E])
@pytest.mark.parametrize('mass, com', PAYLOADS)
def test_payload_from_static_poses(arm, mass, com):
    model = make_case(arm).load()
    rng = np.random.default_rng(int(mass * 10))
    inertia = np.diag([0.004, 0.006, 0.003]) * mass
    loaded = rd.with_payload(model, mass, com, inertia)
    q = rng.uniform(np.maximum(model.lower, -np.pi), np.minimum(model.upper, np.pi),
                    (12, model.nv))
    tau = rd.gravity(loaded, q) + rng.normal(scale=0.05, size=q.shape)   # torque sensor noise
    estimate = identify_payload(model, q, tau)
    assert abs(estimate.mass - mass) < 0.02 * mass
    assert np.linalg.norm(estimate.com - com) < 0.005
    assert_close(estimate.residual_rms, np.full(model.nv, 0.05), 0.5)
    identified = rd.with_payload(model, **estimate.payload)
    q_test = rng.uniform(np.maximum(model.lower, -np.pi), np.minimum(model.upper, np.pi),
                         (5, model.nv))
    error = rd.gravity(identified, q_test) - rd.gravity(loaded, q_test)
    assert np.abs(error).max() < 0.02 * np.abs(rd.gravity(loaded, q_test)).max()


def test_payload_inertia_from_a_motion(panda):
    rng = np.random.default_rng(5)
    mass, com = 2.0, np.array([0.02, -0.03, 0.1])
    R = rpy_matrix([0.4, -0.3, 0.9])
    inertia = R @ np.diag([0.01, 0.02, 0.025]) @ R.T
    loaded = rd.with_payload(panda, mass, com, inertia)
    trajectory = excitation_trajectory(panda, period=4.0, harmonics=3, evaluations=0)
    q, v, a = trajectory.sample_many(np.arange(0.0, 4.0, 0.005))
    tau = rd.rnea(loaded, q, v, a) + rng.normal(scale=0.01, size=q.shape)
    estimate = identify_payload(panda, q, tau, v, a)
    assert abs(estimate.mass - mass) < 0.02 * mass
    assert np.linalg.norm(estimate.com - com) < 0.005
    assert np.linalg.norm(estimate.inertia - inertia) < 0.1 * np.linalg.norm(inertia)
    assert_close(rd.with_payload(panda, **estimate.payload).inertia, loaded.inertia, 0.01)


def test_payload_needs_a_frame_that_moves(panda):
    with pytest.raises(ValueError, match='fixed to the base'):
        identify_payload(panda, np.zeros((2, 7)), np.zeros((2, 7)), frame='panda_link0')


# ---- excitation ----

def test_excitation_respects_limits_starts_at_rest_and_improves_conditioning():
    model = make_case(UR5E).load()
    acceleration_limit = np.full(model.nv, 4.0)
    trajectory = excitation_trajectory(model, period=6.0, harmonics=4, samples=60,
                                       acceleration_limit=acceleration_limit, evaluations=150,
                                       time_budget=60.0, cycles=2)
    assert trajectory.condition_number < 0.8 * trajectory.initial_condition_number
    t = np.linspace(0.0, trajectory.duration, 48001)
    q, v, a = trajectory.sample_many(t)
    assert np.all(q >= model.lower) and np.all(q <= model.upper)
    assert np.all(np.abs(v) <= model.velocity_limit)
    assert np.all(np.abs(a) <= acceleration_limit)
    # one joint at least reaches 90 % of some limit: the scaling uses the room it has
    reach = np.maximum(np.abs(v).max(0) / model.velocity_limit,
                       np.abs(a).max(0) / acceleration_limit)
    assert reach.max() > 0.9
    # derivatives agree with finite differences of the positions (formulas checked)
    dt = t[1] - t[0]
    assert_close(np.gradient(q, dt, axis=0)[1:-1], v[1:-1], 1e-4)
    assert_close(np.gradient(v, dt, axis=0)[1:-1], a[1:-1], 1e-4)
    # at rest at q0 at the start, at the end, and outside; two identical cycles
    for time in (0.0, trajectory.duration, -1.0, trajectory.duration + 1.0):
        qs, vs, as_ = trajectory.sample(time)
        assert_close(qs, trajectory.q0, 0.0, 1e-12)
        assert_close(np.concatenate([vs, as_]), np.zeros(2 * model.nv), 0.0, 1e-12)
    assert_close(trajectory.sample(1.3)[0], trajectory.sample(1.3 + trajectory.period)[0],
                 1e-12)


def test_excitation_feeds_a_joint_trajectory():
    """Knots (q, q̇, q̈) every 20 ms make a quintic JointTrajectory that follows the series."""
    model = make_case(UR5E).load()
    series = excitation_trajectory(model, period=5.0, harmonics=3, evaluations=0)
    assert isinstance(series, FourierTrajectory)
    knots = np.linspace(0.0, series.duration, 251)
    spline = JointTrajectory(knots, *series.sample_many(knots))
    for t in (0.51, 2.333, 4.9):
        assert_close(spline.sample(t)[0], series.sample(t)[0], 1e-6)


# ---- proof: a model with masses off by ±20 %, friction and armature unknown ----

GAINS = np.array([600.0, 600.0, 600.0, 600.0, 250.0, 150.0, 50.0]), np.array(
    [50.0, 50.0, 50.0, 50.0, 30.0, 25.0, 15.0])   # libfranka examples' joint PD gains


def simulate(true, hidden, trajectory, feedforward, dt=1e-3):
    """Simulate the 'real' arm (M + diag I_a) q̈ = τ - C q̇ - g - f(q̇) by RK4.

    Under computed torque τ = feedforward(q_d, q̇_d, q̈_d) + K_p e + K_d ė. Returns q, τ, q_d.
    """
    fv, fc, ia = hidden
    kp, kd = GAINS

    def acceleration(q, v, tau):
        M = rd.mass_matrix(true, q) + np.diag(ia)
        return np.linalg.solve(M, tau - rd.nonlinear_effects(true, q, v) - joint_torques(
            fv, fc, 0.0, v, 0.0))

    n = int(round(trajectory.duration / dt))
    desired = trajectory.sample_many(np.arange(n) * dt)
    q, v = desired[0][0].copy(), np.zeros(true.nv)
    log_q, log_tau = np.empty((n, true.nv)), np.empty((n, true.nv))
    for k in range(n):
        qd, vd, ad = desired[0][k], desired[1][k], desired[2][k]
        tau = feedforward(qd, vd, ad) + kp * (qd - q) + kd * (vd - v)
        log_q[k], log_tau[k] = q, tau
        a1 = acceleration(q, v, tau)
        a2 = acceleration(q + dt / 2 * v, v + dt / 2 * a1, tau)
        a3 = acceleration(q + dt / 2 * (v + dt / 2 * a1), v + dt / 2 * a2, tau)
        a4 = acceleration(q + dt * (v + dt / 2 * a2), v + dt * a3, tau)
        q = q + dt * v + dt * dt / 6 * (a1 + a2 + a3)
        v = v + dt / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
    return log_q, log_tau, desired[0]


def rms(x):
    return np.linalg.norm(np.sqrt(np.mean(x ** 2, axis=0)))


def test_identification_cuts_feedforward_and_tracking_errors_tenfold(panda):
    rng = np.random.default_rng(42)
    true, hidden, nominal = panda, hidden_joint_terms(panda, rng), perturbed(panda, rng)
    excitation = excitation_trajectory(nominal, period=8.0, harmonics=4, samples=80,
                                       evaluations=120, time_budget=60.0)
    q, tau, _ = simulate(true, hidden, excitation, lambda *x: rd.rnea(nominal, *x))
    dt, cutoff = 1e-3, 10.0
    q, v, a = differentiate(q + rng.normal(scale=1e-5, size=q.shape), dt, cutoff)   # encoders
    tau = lowpass(tau + rng.normal(scale=0.05, size=tau.shape), dt, cutoff)   # torque sensors
    keep = slice(200, -200, 4)
    result = identify(nominal, q[keep], v[keep], a[keep], tau[keep], viscous=True, coulomb=True,
                      armature=True, noise_std='estimate')

    def identified(*x):
        return rd.rnea(result.model, *x) + joint_torques(result.viscous, result.coulomb,
                                                         result.armature, x[1], x[2])

    test = excitation_trajectory(nominal, period=3.0, harmonics=3, evaluations=0, seed=7)
    qt, vt, at = test.sample_many(np.arange(0.0, test.duration, 0.002))
    tau_true = rd.rnea(true, qt, vt, at) + joint_torques(*hidden, vt, at)
    feedforward = [rms(rd.rnea(nominal, qt, vt, at) - tau_true),
                   rms(identified(qt, vt, at) - tau_true)]
    tracking = []
    for model_torques in (lambda *x: rd.rnea(nominal, *x), identified):
        q_log, _, q_desired = simulate(true, hidden, test, model_torques)
        tracking.append(rms(q_log - q_desired))
    FIGURES.update(condition=(excitation.initial_condition_number, excitation.condition_number),
                   feedforward=feedforward, tracking=tracking, fit=result.summary())
    print(FIGURES)
    assert feedforward[0] > 10 * feedforward[1]
    assert tracking[0] > 10 * tracking[1]
