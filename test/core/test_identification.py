"""Identification: filtering, least squares, physical parameters, payloads, excitation, proof.

Algebraic checks take torques from the core's own dynamics (rd.rnea of a 'real' model with
joint terms the fit does not know). The proof and the payload cases run on the simulation
engines instead (robot_dynamics.simulation: the internal RK4 and MuJoCo, an independent
engine): the 'real' Panda is the URDF with hidden armature, viscous and Coulomb friction (and
a payload), driven in closed loop; the checks compare with those hidden truths.
"""
from time import perf_counter

import numpy as np
import pytest

import robot_dynamics as rd
from random_trees import PinocchioReference, assert_close, make_case
from robot_dynamics.core.control import ComputedTorque
from robot_dynamics.core.excitation import FourierTrajectory, excitation_trajectory
from robot_dynamics.core.identification import (PSEUDO_INERTIA_BASIS, body_units, differentiate,
                                                identify, identify_payload, inertia_about_com,
                                                inertial_parameters, log_cholesky_parameters,
                                                lowpass, physical_consistency, pseudo_inertia)
from robot_dynamics.core.observers import MomentumObserver
from robot_dynamics.core.regressor import parameter_vector, regressor
from robot_dynamics.core.spatial import rpy_matrix, standard_parameters, transformed_inertia
from robot_dynamics.core.trajectory import JointTrajectory
from robot_dynamics.simulation import ENGINES, make_engine
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
    """Armature, viscous and Coulomb friction of the 'real' arm (rd.Model's joint terms)."""
    return dict(armature=rng.uniform(0.05, 0.2, model.nv),
                viscous=rng.uniform(0.05, 0.3, model.nv),
                coulomb=rng.uniform(0.2, 0.8, model.nv))


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
    hidden = hidden_joint_terms(panda, rng)
    true = perturbed(panda, rng).replace(**hidden)
    q, v, a = random_states(panda, 300, rng)
    result = identify(panda, q, v, a, rd.rnea(true, q, v, a), viscous=True, coulomb=True,
                      armature=True)
    theta_true = parameter_vector(true, True, True, True)
    assert_close(result.theta_base, result.base(theta_true), 1e-9)
    assert_close(result.viscous, hidden['viscous'], 1e-8)
    assert_close(result.coulomb, hidden['coulomb'], 1e-8)
    assert_close(result.armature[2:], hidden['armature'][2:], 1e-8)   # Ia1, Ia2 merge with links
    assert result.relative_error < 1e-10 and result.consistent and not result.notes
    # the identified model carries the joint terms: rnea of it alone predicts τ on new states
    assert_close(result.model.viscous, hidden['viscous'], 1e-8)
    assert_close(result.model.coulomb, hidden['coulomb'], 1e-8)
    q, v, a = random_states(panda, 20, rng)
    tau = rd.rnea(true, q, v, a)
    assert_close(result.predict(q, v, a), tau, 1e-9)
    assert_close(rd.rnea(result.model, q, v, a), tau, 1e-9)


def test_identify_recovers_the_stiction_of_a_stribeck_term(panda):
    """f_s (v_s known) fitted with f_v, f_c: noiseless torques give them back to round-off."""
    rng = np.random.default_rng(12)
    hidden = hidden_joint_terms(panda, rng) | dict(stiction=rng.uniform(0.05, 0.3, panda.nv))
    true = perturbed(panda, rng).replace(**hidden, stribeck_velocity=0.3)
    prior = panda.replace(armature=hidden['armature'], stribeck_velocity=0.3)
    states = random_states(panda, 300, rng)
    tau = rd.rnea(true, *states)
    flags = dict(viscous=True, coulomb=True, stiction=True)
    result = identify(prior, *states, tau, **flags)
    assert_close(result.theta_base, result.base(parameter_vector(true, **flags)), 1e-9)
    for kind in ('viscous', 'coulomb', 'stiction'):
        assert_close(getattr(result, kind), hidden[kind], 1e-8, label=kind)
        assert_close(getattr(result.model, kind), hidden[kind], 1e-8, label=kind)
    assert result.armature is None and result.relative_error < 1e-10 and not result.notes
    q, v, a = random_states(panda, 20, rng)
    assert_close(rd.rnea(result.model, q, v, a), rd.rnea(true, q, v, a), 1e-9)
    # without the stiction columns the same data leave a residual: f_v, f_c cannot absorb it
    assert identify(prior, *states, tau, viscous=True, coulomb=True).relative_error > 1e-4


def test_known_joint_terms_of_the_prior_are_not_absorbed_by_the_links(panda):
    """The prior knows the armature; only friction is fitted: the armature stays out of θ_b."""
    rng = np.random.default_rng(11)
    hidden = hidden_joint_terms(panda, rng)
    true = perturbed(panda, rng).replace(**hidden)
    prior = panda.replace(armature=hidden['armature'], coulomb_velocity=true.coulomb_velocity)
    q, v, a = random_states(panda, 300, rng)
    result = identify(prior, q, v, a, rd.rnea(true, q, v, a), viscous=True, coulomb=True)
    assert_close(result.theta_base, result.base(parameter_vector(true, True, True)), 1e-9)
    assert result.armature is None
    assert np.array_equal(result.model.armature, hidden['armature'])   # kept from the prior
    q, v, a = random_states(panda, 20, rng)
    assert_close(rd.rnea(result.model, q, v, a), rd.rnea(true, q, v, a), 1e-9)
    assert_close(result.predict(q, v, a), rd.rnea(true, q, v, a), 1e-9)


def test_log_cholesky_parameters_make_physical_bodies_and_invert():
    """Any φ gives a body with J ≻ 0; the Panda's bodies map to φ and back; dθ/dφ is exact."""
    panda = rd.load_urdf(rd.robot_urdf('panda'), 'panda_link0', 'panda_hand_tcp')
    units = body_units(panda)
    scaled = np.einsum('nk,kab->nab', panda.inertia, PSEUDO_INERTIA_BASIS) / (
        units[:, :, None] * units[:, None, :])
    theta, _ = inertial_parameters(log_cholesky_parameters(scaled), units)
    assert_close(theta, panda.inertia, 1e-12)
    phi = np.random.default_rng(0).normal(scale=2.0, size=(panda.nb, 10))
    theta, gradient = inertial_parameters(phi, units)
    for body in theta:
        check = physical_consistency(body)
        assert check['positive_definite'] and check['triangle']
        assert np.linalg.eigvalsh(pseudo_inertia(body))[0] > 0.0
    h = 1e-6   # central differences, column by column
    for k in range(10):
        step = h * np.eye(10)[k]
        difference = (inertial_parameters(phi + step, units)[0]
                      - inertial_parameters(phi - step, units)[0]) / (2 * h)
        assert_close(gradient[:, :, k], difference, 1e-7, 1e-9)


def pinocchio_rnea(case, model, q, v, a):
    """τ of Pinocchio with the model's inertias and armature, and its friction by its law."""
    import pinocchio as pin
    reference = PinocchioReference(case.xml, model.joint_names, case.base)
    for name, theta in zip(model.joint_names, model.inertia):
        reference.model.inertias[reference.model.getJointId(name)] = pin.Inertia(
            theta[0], theta[1:4] / theta[0], inertia_about_com(theta))
    reference.model.armature[reference.iv] = model.armature
    return np.array([reference.rnea(*x) for x in zip(q, v, a)]) + model.viscous * v + \
        model.coulomb * np.tanh(v / model.coulomb_velocity)


def test_consistent_fit_of_a_perturbed_panda(panda):
    """Noisy data, masses off by ±20 %, joint terms unknown: a physical model, as good.

    Least squares gives bodies that cannot exist; the consistent fit gives physical ones at
    almost the same residual, and its model predicts held-out torques as well (its rnea checked
    against Pinocchio's with the same parameters).
    """
    rng = np.random.default_rng(0)
    true = perturbed(panda, rng).replace(**hidden_joint_terms(panda, rng))
    nominal = perturbed(panda, rng)
    q, v, a = random_states(panda, 300, rng)
    noise = 0.01
    tau = rd.rnea(true, q, v, a) + rng.normal(scale=noise, size=q.shape)
    flags = dict(viscous=True, coulomb=True, armature=True)
    nearest = identify(nominal, q, v, a, tau, **flags, physical=False)
    physical = identify(nominal, q, v, a, tau, **flags, base=nearest.base)
    assert not nearest.consistent
    assert physical.consistent and not physical.notes
    assert np.array_equal(physical.theta_base, nearest.theta_base)   # least squares either way
    assert_close(physical.least_squares_rms, np.full(7, noise), 0.1)
    assert np.all(physical.residual_rms <= 1.01 * physical.least_squares_rms)
    for body in physical.model.inertia:
        assert np.linalg.eigvalsh(pseudo_inertia(body))[0] > 0.0
    assert all(getattr(physical.model, k).min() >= 0.0 for k in flags)
    q, v, a = random_states(panda, 50, rng)
    held_out = rd.rnea(true, q, v, a)
    errors = [rms(result.predict(q, v, a) - held_out) for result in (nearest, physical)]
    assert errors[1] < 1.05 * errors[0] and errors[1] < 0.01 * rms(held_out)
    assert_close(rd.rnea(physical.model, q, v, a), physical.predict(q, v, a), 1e-9)
    assert_close(pinocchio_rnea(make_case(PANDA), physical.model, q[:5], v[:5], a[:5]),
                 rd.rnea(physical.model, q[:5], v[:5], a[:5]), 1e-9)


def test_negative_joint_terms_are_reported_and_not_put_on_the_model(panda):
    """Least squares reports a negative viscous term; the consistent fit stops at 0."""
    rng = np.random.default_rng(5)
    q, v, a = random_states(panda, 100, rng)
    tau = rd.rnea(panda, q, v, a) - 0.2 * v
    result = identify(panda, q, v, a, tau, viscous=True, physical=False)
    assert_close(result.viscous, np.full(7, -0.2), 1e-9)
    assert np.array_equal(result.model.viscous, np.zeros(7))
    assert 'negative viscous, 0 in the model: panda_joint1 (-0.2)' in result.summary()
    bounded = identify(panda, q, v, a, tau, viscous=True, base=result.base)
    assert np.all(bounded.viscous >= 0.0) and bounded.viscous.max() < 1e-6
    assert np.all(bounded.residual_rms > 0.5 * 0.2 * np.sqrt(np.mean(v ** 2, axis=0)))


def test_a_precomputed_regressor(panda):
    """Y= (the full regressor, e.g. with filtered columns) gives what identify computes itself."""
    rng = np.random.default_rng(4)
    true = perturbed(panda, rng).replace(**hidden_joint_terms(panda, rng))
    q, v, a = random_states(panda, 100, rng)
    tau = rd.rnea(true, q, v, a)
    flags = dict(viscous=True, coulomb=True, armature=True)
    own = identify(panda, q, v, a, tau, **flags)
    given = identify(panda, q, v, a, tau, **flags, base=own.base,
                     Y=regressor(panda, q, v, a, **flags))
    assert_close(given.theta_base, own.theta_base, 1e-12)
    assert_close(given.theta, own.theta, 1e-8)
    with pytest.raises(ValueError, match=r'Y must have shape \(100, 7, 91\)'):
        identify(panda, q, v, a, tau, **flags, base=own.base, Y=regressor(panda, q, v, a))


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


def test_an_impossible_arm_gets_the_nearest_physical_model():
    """A 'real' arm whose second link has a negative inertia about its joint (impossible).

    Least squares reproduces it and the report names the body; the consistent fit returns
    physical bodies and pays in residual.
    """
    model = planar_2r()
    inertia = model.inertia.copy()
    inertia[1, 6] = -0.1   # Izz of link 2 about joint 2
    true = model.replace(inertia=inertia)
    rng = np.random.default_rng(3)
    q, v, a = random_states(model, 100, rng)
    tau = rd.rnea(true, q, v, a)
    result = identify(model, q, v, a, tau, physical=False)
    assert_close(result.theta_base, result.base(true.inertia.ravel()), 1e-9)
    assert result.consistency[0]['positive_definite'] and result.consistency[0]['triangle']
    assert not result.consistency[1]['positive_definite']
    assert not result.consistent
    assert 'inconsistent bodies: joint2' in result.summary()
    assert not any(c['determined'] for c in result.consistency)   # the masses stay combined
    physical = identify(model, q, v, a, tau, base=result.base)
    assert physical.consistent
    assert np.all(physical.residual_rms > 1e3 * result.residual_rms + 1e-6)


# ---- payload ----

PAYLOADS = [(0.5, [0.0, 0.0, 0.05]), (1.2, [0.03, -0.02, 0.08]), (3.0, [-0.06, 0.04, 0.12])]


def hold_poses(engine, model, poses, hold=0.4, last=0.1, omega=50.0):
    """q, q̇ and the applied τ over the ``last`` s of ``hold`` s at each pose, every 10th step.

    The engine jumps to each pose at rest and computed torque on ``model`` (without the payload)
    holds it there: at rest, whatever the controller, τ balances the real arm's gravity.
    """
    controller, zero = ComputedTorque(model, omega ** 2, 2.0 * omega), np.zeros(model.nv)
    steps, logged = int(round(hold / engine.dt)), int(round(last / engine.dt))
    log = []
    for pose in poses:
        engine.set_state(pose, zero)
        for k in range(steps):
            q, v = engine.q, engine.v
            tau = controller(q, v, pose, zero, zero)
            if k >= steps - logged and k % 10 == 0:
                log.append((q, v, tau))
            engine.step(tau)
    return (np.array(x) for x in zip(*log))


@pytest.mark.parametrize('engine', ENGINES)
@pytest.mark.parametrize('arm', [PANDA, UR5E])
@pytest.mark.parametrize('mass, com', PAYLOADS)
def test_payload_from_static_poses_on_an_engine(arm, engine, mass, com):
    """A hidden payload on the simulated arm, identified from a few held poses.

    The arm's joint terms are known (identified before, ``model``), the payload is not. As the
    controller's payload service does, the model's friction is taken out of τ: the smooth
    Coulomb law has no stiction, so a held arm settles rather than sticks.
    """
    case = make_case(arm)
    rng = np.random.default_rng(int(mass * 10))
    model = case.load()
    model = model.replace(**hidden_joint_terms(model, rng))
    payload = dict(mass=mass, com=com, inertia=np.diag([0.004, 0.006, 0.003]) * mass)
    sim = make_engine(engine, case.xml, case.base, case.tip, model.joint_names,
                      model.neutral_position, 1e-3, payload=payload, joint_dynamics={
                          k: getattr(model, k) for k in ('armature', 'viscous', 'coulomb')})
    lower, upper = np.maximum(model.lower, -np.pi), np.minimum(model.upper, np.pi)
    q, v, tau = hold_poses(sim, model, rng.uniform(lower, upper, (8, model.nv)))
    tau += rng.normal(scale=0.05, size=tau.shape)   # torque sensor noise
    estimate = identify_payload(model, q, tau - rd.joint_friction(model, v))
    errors = abs(estimate.mass / mass - 1.0), np.linalg.norm(estimate.com - com)
    FIGURES[f'payload {arm.split("/")[0]} {engine} {mass} kg: mass, com errors'] = errors
    print(f'\n{arm} {engine}: payload {mass} kg, mass error {100 * errors[0]:.3f} %, com error '
          f'{1000 * errors[1]:.3f} mm')
    assert errors[0] < 0.02 and errors[1] < 0.005
    assert_close(estimate.residual_rms, np.full(model.nv, 0.05), 0.5)
    loaded = rd.with_payload(model, **payload)
    identified = rd.with_payload(model, **estimate.payload)
    q_test = rng.uniform(lower, upper, (5, model.nv))
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

DT = 1e-3           # s, the engines' step
OMEGA = 20.0        # rad/s: computed torque's error dynamics ë + 2ω ė + ω² e = 0
OBSERVER_GAIN = 50.0   # 1/s
TIP = 'panda_hand'


@pytest.fixture(scope='module')
def proof(panda):
    """The 'real' arm's hidden joint terms, the nominal model, the excitation, a test motion."""
    rng = np.random.default_rng(42)
    hidden, nominal = hidden_joint_terms(panda, rng), perturbed(panda, rng)
    excitation = excitation_trajectory(nominal, period=6.0, harmonics=4, samples=60,
                                       evaluations=40)
    test = excitation_trajectory(nominal, period=3.0, harmonics=3, evaluations=0, seed=7)
    return dict(xml=make_case(PANDA).xml, hidden=hidden, nominal=nominal, excitation=excitation,
                test=test)


def closed_loop(engine, controller, trajectory):
    """τ_k = controller(q_k, q̇_k, q_d, q̇_d, q̈_d at t_k), held over step k on the engine.

    Returns q, q̇, τ and q_d, each (N, nv), N = duration / dt.
    """
    n = int(round(trajectory.duration / engine.dt))
    desired = trajectory.sample_many(np.arange(n) * engine.dt)
    log = np.empty((3, n, len(engine.q)))
    for k in range(n):
        q, v = engine.q, engine.v
        tau = controller(q, v, desired[0][k], desired[1][k], desired[2][k])
        log[:, k] = q, v, tau
        engine.step(tau)
    return log[0], log[1], log[2], desired[0]


def real_arm(name, proof, q0):
    """The engine ``name`` as the real arm: the URDF with the hidden joint terms."""
    return make_engine(name, proof['xml'], 'panda_link0', TIP, proof['nominal'].joint_names,
                       q0, DT, joint_dynamics=proof['hidden'])


def computed_torque(model):
    return ComputedTorque(model, OMEGA ** 2, 2.0 * OMEGA)


def rms(x):
    """|RMS over the samples of each column| (a norm over the joints or components)."""
    return float(np.linalg.norm(np.sqrt(np.mean(x ** 2, axis=0))))


@pytest.fixture(scope='module', params=ENGINES)
def identified(request, proof):
    """rd.identify on the excitation, tracked by computed torque on the nominal model.

    Encoder and torque noise are added to the log; q is differentiated and τ filtered offline.
    """
    start = perf_counter()
    nominal, excitation = proof['nominal'], proof['excitation']
    rng = np.random.default_rng(ENGINES.index(request.param))
    sim = real_arm(request.param, proof, excitation.q0)
    q, _, tau, _ = closed_loop(sim, computed_torque(nominal), excitation)
    cutoff = 10.0
    q, v, a = differentiate(q + rng.normal(scale=1e-5, size=q.shape), DT, cutoff)
    tau = lowpass(tau + rng.normal(scale=0.05, size=tau.shape), DT, cutoff)
    keep = slice(200, -200, 4)
    result = identify(nominal, q[keep], v[keep], a[keep], tau[keep], viscous=True,
                      coulomb=True, armature=True, noise_std='estimate')
    seconds = perf_counter() - start
    print(f'\n{request.param}: {result.summary()}\nidentified in {seconds:.1f} s')
    return request.param, result


def test_identification_cuts_the_tracking_error_tenfold(proof, identified):
    """Computed torque on the nominal, then on the identified model, along a new motion."""
    engine, result = identified
    test = proof['test']
    tracking = []
    for model in (proof['nominal'], result.model):
        q, _, _, q_desired = closed_loop(real_arm(engine, proof, test.q0), computed_torque(model),
                                         test)
        tracking.append(rms(q - q_desired))
    FIGURES[f'{engine}: tracking RMS, rad'] = tracking
    print(f'\n{engine}: computed-torque tracking RMS {tracking[0]:.3g} -> {tracking[1]:.3g} rad '
          f'({tracking[0] / tracking[1]:.0f}x)')
    assert tracking[0] > 10 * tracking[1]


def test_identification_cuts_the_observer_bias_tenfold(proof, identified):
    """The momentum observer along the test motion without external force: τ_ext should be 0.

    The same log (closed loop on the identified model) goes to an observer on each model; the
    bias is the RMS of its τ_ext estimate and of the tip wrench behind it.
    """
    engine, result = identified
    test = proof['test']
    q, v, tau, _ = closed_loop(real_arm(engine, proof, test.q0), computed_torque(result.model),
                               test)
    bias = {}
    for label, model in (('nominal', proof['nominal']), ('identified', result.model)):
        observer = MomentumObserver(model, OBSERVER_GAIN)
        tau_ext = np.array([observer.update(*x, DT) for x in zip(q, v, tau)])
        wrench = np.array([observer.wrench(x, r, TIP) for x, r in zip(q[::10], tau_ext[::10])])
        bias[label] = rms(tau_ext), rms(wrench[:, 3:]), rms(wrench[:, :3])
    before, after = bias['nominal'], bias['identified']
    FIGURES[f'{engine}: observer bias RMS τ_ext N m, force N, moment N m'] = before, after
    print(f'\n{engine}: observer bias RMS, nominal -> identified: τ_ext {before[0]:.3g} -> '
          f'{after[0]:.3g} N m ({before[0] / after[0]:.0f}x), tip force {before[1]:.3g} -> '
          f'{after[1]:.3g} N ({before[1] / after[1]:.0f}x), tip moment {before[2]:.3g} -> '
          f'{after[2]:.3g} N m ({before[2] / after[2]:.0f}x)')
    for x, y in zip(before, after):
        assert x > 10 * y
