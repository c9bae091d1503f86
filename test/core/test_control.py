"""Control laws: gravity compensation, computed torque in closed loop (RK4 at 1 kHz), clamping."""
import numpy as np
import pytest

import robot_dynamics as rd
from robot_dynamics.core.control import (ComputedTorque, GravityCompensation, VelocityFilter,
                                         clamp_effort, deadband_weight, position_error,
                                         unwrap_positions)
from robot_dynamics.core.trajectory import JointTrajectory

PANDA = rd.load_urdf(rd.robot_urdf("panda"), base="panda_link0", tip="panda_hand")
UR5E = rd.load_urdf(rd.robot_urdf("ur5e"), base="base_link", tip="tool0")
Q_PANDA = np.array([0.1, -0.6, 0.2, -2.0, 0.1, 1.6, 0.7])
Q_UR5E = np.array([0.3, -1.2, 1.4, -1.6, -1.5, 0.2])
RNG = np.random.default_rng(3)
JOINT_TERMS = dict(armature=np.linspace(0.3, 0.1, 7), viscous=np.linspace(2.0, 0.5, 7),
                   coulomb=np.linspace(2.0, 0.5, 7), coulomb_velocity=0.05)
PANDA_WITH_JOINT_TERMS = PANDA.replace(**JOINT_TERMS)


def simulate(model, torque, q, v, t_end, dt=1e-3):
    """RK4 on M q̈ + C q̇ + g = τ(t, q, q̇), the control law evaluated at every stage."""
    n = model.nv

    def f(t, x):
        return np.concatenate([x[n:], rd.forward_dynamics(model, x[:n], x[n:],
                                                          torque(t, x[:n], x[n:]))])

    x, ts, xs = np.concatenate([q, v]), np.arange(0.0, t_end + dt / 2, dt), []
    for t in ts:
        xs.append(x)
        k1 = f(t, x)
        k2 = f(t + dt / 2, x + dt / 2 * k1)
        k3 = f(t + dt / 2, x + dt / 2 * k2)
        k4 = f(t + dt, x + dt * k3)
        x = x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    xs = np.array(xs)
    return ts, xs[:, :n], xs[:, n:]


@pytest.mark.parametrize("model, q0", [(PANDA, Q_PANDA), (UR5E, Q_UR5E)])
def test_gravity_compensation_is_gravity_and_holds_the_arm(model, q0):
    gc = GravityCompensation(model)
    for q in q0 + RNG.uniform(-0.5, 0.5, (5, model.nv)):
        np.testing.assert_allclose(gc(q, np.zeros(model.nv)), rd.gravity(model, q), atol=1e-12)
        np.testing.assert_allclose(rd.forward_dynamics(model, q, np.zeros(model.nv), gc(q)), 0,
                                   atol=1e-9)


def test_gravity_compensation_carries_the_payload():
    """The payload adds −J_pᵀ m g_vec, J_p the Jacobian of its centre of mass (independent)."""
    mass, com = 2.0, np.array([0.01, -0.02, 0.08])  # in panda_hand axes
    gc = GravityCompensation(rd.with_payload(PANDA, mass, com))
    q = Q_PANDA
    T = rd.frame_pose(PANDA, q, "panda_hand")
    J = rd.frame_jacobian(PANDA, q, "panda_hand", rd.LOCAL_WORLD_ALIGNED)
    r = T[:3, :3] @ com  # hand origin -> payload com, base axes; v_p = v - r x w
    J_p = J[3:] - np.cross(r, J[:3].T).T
    expected = rd.gravity(PANDA, q) - J_p.T @ (mass * PANDA.gravity)
    np.testing.assert_allclose(gc(q), expected, atol=1e-10)


def test_friction_compensation_adds_the_joint_friction_when_asked():
    model = PANDA_WITH_JOINT_TERMS
    q, v = Q_PANDA, RNG.uniform(-1.0, 1.0, 7)
    g, tau_f = rd.gravity(model, q), rd.joint_friction(model, v)
    np.testing.assert_allclose(tau_f, model.viscous * v + model.coulomb * np.tanh(v / 0.05),
                               atol=1e-14)
    np.testing.assert_array_equal(GravityCompensation(model)(q, v), g)   # off by default
    gc = GravityCompensation(model, friction_compensation=True)
    np.testing.assert_allclose(gc(q, v), g + tau_f, atol=1e-12)
    np.testing.assert_array_equal(gc(q), g)                              # no q̇: none
    np.testing.assert_array_equal(gc(q, np.zeros(7)), g)
    with pytest.raises(ValueError, match=r"v must have shape \(7,\)"):
        gc(q, np.zeros(6))


def test_computed_torque_includes_armature_and_friction():
    model = PANDA_WITH_JOINT_TERMS
    ct = ComputedTorque(model, kp=100.0, kd=20.0)
    q, v, q_d, v_d, a_d = Q_PANDA + RNG.uniform(-0.3, 0.3, (5, 7))
    a = a_d + 100.0 * (q_d - q) + 20.0 * (v_d - v)
    M = rd.mass_matrix(PANDA, q) + np.diag(model.armature)
    expected = (M @ a + rd.coriolis_matrix(PANDA, q, v) @ v + rd.gravity(PANDA, q)
                + model.viscous * v + model.coulomb * np.tanh(v / model.coulomb_velocity))
    np.testing.assert_allclose(ct(q, v, q_d, v_d, a_d), expected, atol=1e-10)


def test_computed_torque_is_one_inverse_dynamics_call():
    ct = ComputedTorque(PANDA, kp=np.full(7, 100.0), kd=20.0)
    q, v, q_d, v_d, a_d = Q_PANDA + RNG.uniform(-0.3, 0.3, (5, 7))
    a = a_d + 100.0 * (q_d - q) + 20.0 * (v_d - v)
    expected = (rd.mass_matrix(PANDA, q) @ a + rd.coriolis_matrix(PANDA, q, v) @ v
                + rd.gravity(PANDA, q))
    np.testing.assert_allclose(ct(q, v, q_d, v_d, a_d), expected, atol=1e-10)


@pytest.mark.parametrize("model", [PANDA, PANDA_WITH_JOINT_TERMS], ids=["rigid", "joint terms"])
def test_exact_model_error_follows_the_critically_damped_response(model):
    """ë + K_d ė + K_p e = 0: e(t) = (e₀ + (ė₀ + ω e₀) t) e^(−ωt) with K_p = ω², K_d = 2ω.

    Also on an arm with armature and friction, which the model (rnea) compensates exactly.
    """
    w = 20.0
    ct = ComputedTorque(model, kp=w**2, kd=2 * w)
    amp, freq = RNG.uniform(-0.4, 0.4, 7), RNG.uniform(0.3, 0.8, 7)

    def reference(t):
        s, c = np.sin(2 * np.pi * freq * t), np.cos(2 * np.pi * freq * t)
        return Q_PANDA + amp * s, amp * 2 * np.pi * freq * c, -amp * (2 * np.pi * freq)**2 * s

    e0 = np.array([0.05, -0.03, 0.0, 0.02, 0.0, -0.04, 0.01])
    ts, q, v = simulate(model, lambda t, q, v: ct(q, v, *reference(t)),
                        Q_PANDA - e0, reference(0.0)[1], t_end=2.0)
    e = np.array([reference(t)[0] for t in ts]) - q
    e_closed_form = (e0 + w * e0 * ts[:, None]) * np.exp(-w * ts[:, None])
    np.testing.assert_allclose(e, e_closed_form, atol=1e-8)
    assert np.abs(e[ts > 1.0]).max() < 1e-6  # tracking error once the initial error has decayed


def test_perturbed_model_stays_stable_with_the_predicted_steady_error():
    """An unknown 0.3 kg payload: at rest M̂ K_p e = g − ĝ, so e_ss = K_p⁻¹ M̂⁻¹ (g − ĝ)."""
    true_model = rd.with_payload(UR5E, 0.3, (0.0, 0.0, 0.05))
    kp = np.full(6, 400.0)
    ct = ComputedTorque(UR5E, kp=kp, kd=40.0)
    waypoints = Q_UR5E + np.array([[0, 0, 0, 0, 0, 0], [0.4, -0.3, 0.5, 0.3, -0.2, 0.6],
                                   [-0.2, 0.2, 0.1, -0.3, 0.4, 0.0]])
    traj = JointTrajectory([0.0, 0.6, 1.2], waypoints)
    ts, q, v = simulate(true_model, lambda t, q, v: ct(q, v, *traj.sample(t)),
                        waypoints[0], np.zeros(6), t_end=2.5)
    e = waypoints[-1] - q[-1]
    g_error = rd.gravity(true_model, q[-1]) - rd.gravity(UR5E, q[-1])
    e_ss = np.linalg.solve(rd.mass_matrix(UR5E, q[-1]), g_error) / kp
    assert np.abs(e_ss).max() > 0.05  # the light wrist feels it: M̂ is small there
    np.testing.assert_allclose(e, e_ss, rtol=1e-4, atol=1e-7)
    assert np.abs(v[-1]).max() < 1e-4
    assert np.abs([traj.sample(t)[0] for t in ts] - q).max() < 0.2


def test_gains_and_model_are_replaceable_and_validated():
    ct = ComputedTorque(PANDA, kp=np.full(7, 10.0), kd=np.full(7, 1.0))
    q, zero = Q_PANDA, np.zeros(7)
    ct.kp = np.full(7, 50.0)
    np.testing.assert_allclose(ct(q, zero, q + 0.01, zero, zero),
                               rd.mass_matrix(PANDA, q) @ np.full(7, 0.5) + rd.gravity(PANDA, q),
                               atol=1e-10)
    ct.model = rd.with_payload(PANDA, 1.0)
    np.testing.assert_allclose(ct(q, zero, q, zero, zero),
                               rd.gravity(rd.with_payload(PANDA, 1.0), q), atol=1e-10)
    with pytest.raises(ValueError, match=r"kp must have shape \(7,\)"):
        ct.kp = np.ones(6)
    with pytest.raises(ValueError, match="kd must be >= 0"):
        ct.kd = -np.ones(7)
    with pytest.raises(ValueError, match="nv = 7"):
        ct.model = UR5E
    with pytest.raises(ValueError, match=r"v_d must have shape \(7,\).*got shape \(6,\)"):
        ct(q, zero, q, np.zeros(6), zero)
    with pytest.raises(ValueError, match="q contains NaN"):
        GravityCompensation(PANDA)(np.full(7, np.nan))


def test_clamp_effort():
    tau, mask = clamp_effort([5.0, -12.0, 3.0, -1.0], [10.0, 10.0, np.inf, 0.5])
    np.testing.assert_array_equal(tau, [5.0, -10.0, 3.0, -0.5])
    np.testing.assert_array_equal(mask, [False, True, False, True])
    with pytest.raises(ValueError, match=">= 0"):
        clamp_effort([1.0], [-1.0])
    with pytest.raises(ValueError, match="same length"):
        clamp_effort([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="NaN"):
        clamp_effort([np.nan], [1.0])


def continuous_wrist_ur5e():
    """UR5e whose wrist_3_joint is continuous (no position limits), as on many arms' wrists."""
    xml = open(rd.robot_urdf("ur5e")).read().replace(
        '<joint name="wrist_3_joint" type="revolute">', '<joint name="wrist_3_joint" '
        'type="continuous">')
    return rd.load_urdf(xml, base="base_link", tip="tool0")


def wrap(angle):
    return np.arctan2(np.sin(angle), np.cos(angle))


def test_only_continuous_joints_wrap():
    model = continuous_wrist_ur5e()
    assert model.continuous.tolist() == [False] * 5 + [True]
    assert not UR5E.continuous.any() and not PANDA.continuous.any()
    q_d = np.full(6, 3.1)
    q = np.full(6, -3.1)
    expected = np.full(6, 6.2)
    expected[5] = 6.2 - 2 * np.pi  # the short way from -3.1 to 3.1 crosses ±π
    np.testing.assert_allclose(position_error(model, q_d, q), expected, atol=1e-15)
    points = [np.full(6, 3.0), np.full(6, -3.0), np.full(6, -2.0)]
    unwrapped = unwrap_positions(model, np.full(6, 2.9), points)
    np.testing.assert_array_equal(np.array(unwrapped)[:, :5], np.array(points)[:, :5])
    np.testing.assert_allclose(np.array(unwrapped)[:, 5], [3.0, 2 * np.pi - 3.0, 2 * np.pi - 2.0],
                               atol=1e-15)


def test_computed_torque_tracks_a_continuous_joint_across_pi():
    """Reference and measurement wrapped into (−π, π], the arm starting behind, crossing ±π.

    The error decays as e₀ (1 + ω t) e^(−ω t) (critically damped, ω = 20) through the crossing.
    """
    model = continuous_wrist_ur5e()
    ct = ComputedTorque(model, kp=400.0, kd=40.0)
    r0 = np.array([0.0, -1.2, 1.5, -1.9, -1.57, np.pi - 0.04])
    v_d = np.zeros(6)
    v_d[5] = 0.4   # the reference crosses +π at t = 0.1 s, 0.02 rad ahead of the arm
    e0 = np.zeros(6)
    e0[5] = 0.05

    def torque(t, q, v):
        return ct(wrap(q), v, wrap(r0 + v_d * t), v_d, np.zeros(6))

    ts, qs, _ = simulate(model, torque, r0 - e0, v_d, 1.0)
    e = np.outer((1 + 20 * ts) * np.exp(-20 * ts), e0)
    np.testing.assert_allclose(qs, r0 + np.outer(ts, v_d) - e, atol=1e-7)


D = np.array([3.0, -4.0, 2.0, 2.5, -0.5, 0.4, -0.3])   # N m: a torque the model misses


def hold_against_disturbance(ct, t_end=2.5):
    """The exact Panda holding Q_PANDA + 0.05 with τ − D applied; (ts, q, v, M z per call)."""
    q_d, zero, torques = Q_PANDA + 0.05, np.zeros(7), []

    def law(t, q, v):
        tau = ct(q, v, q_d, zero, zero, t=t)
        torques.append(rd.mass_matrix(PANDA, q) @ ct.integral)
        return tau - D

    ts, q, v = simulate(PANDA, law, q_d, zero, t_end)
    return q_d, q, v, np.array(torques)


def test_without_integral_a_missed_torque_leaves_the_steady_error_of_the_closed_form():
    """At rest M (K_p e) = D: e = K_p⁻¹ M⁻¹ D; K_I = 0 (the default) changes nothing."""
    ct = ComputedTorque(PANDA, kp=400.0, kd=40.0)
    q_d, q, v, _ = hold_against_disturbance(ct)
    assert np.abs(v[-1]).max() < 1e-6
    np.testing.assert_allclose(q_d - q[-1], np.linalg.solve(rd.mass_matrix(PANDA, q[-1]), D) / 400,
                               rtol=1e-4)


def test_integral_term_drives_the_steady_error_to_zero_and_its_torque_to_the_disturbance():
    """e⃛ + K_d ë + K_p ė + K_I e = 0 (K_I < K_p K_d): e → 0 and τ_I = M z → D."""
    ct = ComputedTorque(PANDA, kp=400.0, kd=40.0, ki=1500.0)
    q_d, q, v, torques = hold_against_disturbance(ct)
    e_without = np.linalg.solve(rd.mass_matrix(PANDA, q[-1]), D) / 400
    assert np.abs(q_d - q[-1]).max() < 1e-4 * np.abs(e_without).max()
    np.testing.assert_allclose(torques[-1], D, rtol=1e-4)


def test_integral_torque_saturates_at_its_limit_and_the_balance_holds_there():
    """|M z| ≤ limit at every call (anti-windup); at rest M (K_p e + z) = D on each joint."""
    limit = 1.5   # below |D| on the first four joints
    ct = ComputedTorque(PANDA, kp=400.0, kd=40.0, ki=1500.0, integral_limit=limit)
    q_d, q, v, torques = hold_against_disturbance(ct)
    assert np.abs(torques).max() <= limit * (1 + 1e-12)
    assert np.abs(torques[-1]).max() == pytest.approx(limit, rel=1e-12)
    assert np.abs(v[-1]).max() < 1e-5
    M = rd.mass_matrix(PANDA, q[-1])
    np.testing.assert_allclose(M @ (400 * (q_d - q[-1]) + ct.integral), D, rtol=1e-5, atol=1e-6)
    assert np.abs(q_d - q[-1]).max() > 1e-3   # the saturated integral leaves an error


def test_integral_integrates_only_over_time_and_resets():
    ct = ComputedTorque(PANDA, kp=0.0, kd=0.0, ki=10.0)
    q, zero = Q_PANDA, np.zeros(7)
    e = np.full(7, 0.01)
    ct(q, zero, q + e, zero, zero)            # no t: no integration
    ct(q, zero, q + e, zero, zero, t=1.0)     # the first time: nothing before it
    np.testing.assert_array_equal(ct.integral, 0.0)
    ct(q, zero, q + e, zero, zero, t=1.002)
    np.testing.assert_allclose(ct.integral, 10.0 * 0.01 * 0.002, rtol=1e-12)
    ct(q, zero, q + e, zero, zero, t=5.0)      # a gap counts as MAX_INTEGRATION_STEP
    np.testing.assert_allclose(ct.integral, 10.0 * 0.01 * (0.002 + ct.MAX_INTEGRATION_STEP))
    tau = ct(q, zero, q, zero, zero, t=4.0)    # back in time: no step, z stays
    np.testing.assert_allclose(tau, rd.mass_matrix(PANDA, q) @ ct.integral + rd.gravity(PANDA, q))
    ct.reset()
    np.testing.assert_array_equal(ct.integral, 0.0)
    with pytest.raises(ValueError, match="ki must be >= 0"):
        ComputedTorque(PANDA, 1.0, 1.0, ki=-1.0)
    with pytest.raises(ValueError, match="integral_limit must be >= 0"):
        ComputedTorque(PANDA, 1.0, 1.0, ki=1.0, integral_limit=-np.ones(7))


def test_friction_deadband_takes_coulomb_compensation_away_smoothly_below_it():
    """τ = g + f_v q̇ + w(q̇) f_c tanh(q̇/ε), w: 0 up to v_d, smoothstep to 1 at 2 v_d."""
    model, vd = PANDA_WITH_JOINT_TERMS, 0.02
    gc = GravityCompensation(model, friction_compensation=True, friction_deadband=vd)
    speeds = np.array([0.0, 0.5 * vd, vd, 1.5 * vd, 2 * vd, 3 * vd, -1.5 * vd])
    w = np.array([0.0, 0.0, 0.0, 0.5, 1.0, 1.0, 0.5])
    v = speeds
    expected = rd.gravity(model, Q_PANDA) + JOINT_TERMS["viscous"] * v + \
        w * JOINT_TERMS["coulomb"] * np.tanh(v / JOINT_TERMS["coulomb_velocity"])
    np.testing.assert_allclose(gc(Q_PANDA, v), expected, atol=1e-12)
    x = np.linspace(-3 * vd, 3 * vd, 6001)
    weight = deadband_weight(x, vd)
    slope = np.diff(weight) / np.diff(x)
    assert np.abs(np.diff(slope)).max() < 1e-2 * np.abs(slope).max()   # C¹: no jump in slope
    assert weight.min() == 0.0 and weight.max() == 1.0
    np.testing.assert_array_equal(deadband_weight(x, 0.0), 1.0)
    np.testing.assert_allclose(GravityCompensation(model, True)(Q_PANDA, v),
                               rd.gravity(model, Q_PANDA) + rd.joint_friction(model, v))
    with pytest.raises(ValueError, match="friction_deadband"):
        GravityCompensation(model, True, friction_deadband=-1.0)


def test_velocity_filter_has_the_closed_form_response_of_its_discretisation():
    """At fixed Δt: H(e^{jωΔt}) = α / (1 − (1 − α) e^{−jωΔt}), α = 1 − e^{−2π f_c Δt}."""
    dt, cutoff = 1e-3, 30.0
    alpha = 1.0 - np.exp(-2 * np.pi * cutoff * dt)
    t = np.arange(4000) * dt
    for f in (1.0, 30.0, 200.0):
        lowpass = VelocityFilter(cutoff)
        lowpass(np.zeros(1), -dt)   # starts at rest
        y = np.array([lowpass(np.array([np.exp(2j * np.pi * f * tk).real]), tk)[0]
                      for tk in t])
        H = alpha / (1.0 - (1.0 - alpha) * np.exp(-2j * np.pi * f * dt))
        settled = t > 0.5   # transients gone: e^{−2π 30 · 0.5}
        np.testing.assert_allclose(y[settled], (H * np.exp(2j * np.pi * f * t[settled])).real,
                                   atol=1e-9)
    noise = np.random.default_rng(0).normal(0.0, 1.0, 100000)
    lowpass = VelocityFilter(cutoff)
    out = np.array([lowpass(np.array([x]), k * dt)[0] for k, x in enumerate(noise)])
    assert np.std(out[100:]) == pytest.approx(np.sqrt(alpha / (2 - alpha)), rel=0.02)


def test_velocity_filter_is_exact_for_a_held_step_whatever_the_sample_gaps():
    """ẏ = 2π f_c (1 − y) from y = 0: y(t) = 1 − e^{−2π f_c t} at every stamp, irregular or not."""
    lowpass, cutoff = VelocityFilter(10.0), 10.0
    lowpass(np.zeros(2), 0.0)
    stamps = np.cumsum(np.random.default_rng(1).uniform(1e-4, 5e-3, 200))
    y = np.array([lowpass(np.ones(2), t) for t in stamps])
    np.testing.assert_allclose(y, (1 - np.exp(-2 * np.pi * cutoff * stamps))[:, None] * [1, 1],
                               rtol=1e-12)
    lowpass.reset()
    np.testing.assert_array_equal(lowpass(np.full(2, 3.0), 9.0), 3.0)   # first after reset
    with pytest.raises(ValueError, match="cutoff"):
        VelocityFilter(0.0)
