"""Momentum observer on simulated arms (RK4 at 1 kHz) with a known external wrench at the tip."""
import numpy as np
import pytest

import robot_dynamics as rd
from robot_dynamics.core.control import ComputedTorque
from robot_dynamics.core.observers import MomentumObserver

PANDA = rd.load_urdf(rd.robot_urdf("panda"), base="panda_link0", tip="panda_hand")
UR5E = rd.load_urdf(rd.robot_urdf("ur5e"), base="base_link", tip="tool0")
Q_PANDA = np.array([0.1, -0.6, 0.2, -2.0, 0.1, 1.6, 0.7])
Q_UR5E = np.array([0.3, -1.2, 1.4, -1.6, -1.5, 0.2])
F_TIP = np.array([0.8, -0.5, 0.3, 6.0, -4.0, 10.0])  # (moment N m, force N), hand origin, base axes
GAIN = np.array([20.0, 25.0, 30.0, 35.0, 40.0, 45.0, 50.0])
DT = 1e-3


def external_torque(q, wrench=F_TIP):
    return rd.frame_jacobian(PANDA, q, "panda_hand", rd.LOCAL_WORLD_ALIGNED).T @ wrench


def simulate(controller, q0, t_end, wrench_on, v0=np.zeros(7), model=PANDA,
             external=external_torque):
    """RK4 of M q̈ + C q̇ + g + τ_f = τ + τ_ext and of the ideal lag ṙ = K (τ_ext − r).

    τ_ext = external(q), by default Jᵀ F of the tip wrench, while wrench_on(t). Returns the
    samples t, q, q̇, the motor torque τ (what a torque-sensing arm reports), τ_ext and the
    ideal lag r, every DT.
    """
    n = PANDA.nv

    def f(t, x):
        q, v, r = x[:n], x[n:2 * n], x[2 * n:]
        tau_ext = external(q) if wrench_on(t) else np.zeros(n)
        qdd = rd.forward_dynamics(model, q, v, controller(t, q, v) + tau_ext)
        return np.concatenate([v, qdd, GAIN * (tau_ext - r)])

    x, out = np.concatenate([q0, v0, np.zeros(n)]), []
    for t in np.arange(0.0, t_end + DT / 2, DT):
        q, v = x[:n], x[n:2 * n]
        tau_ext = external(q) if wrench_on(t) else np.zeros(n)
        out.append((t, q, v, controller(t, q, v), tau_ext, x[2 * n:]))
        k1 = f(t, x)
        k2 = f(t + DT / 2, x + DT / 2 * k1)
        k3 = f(t + DT / 2, x + DT / 2 * k2)
        k4 = f(t + DT, x + DT * k3)
        x = x + DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return [np.array(column) for column in zip(*out)]


def test_tracks_the_ideal_lag_while_moving_with_variable_dt():
    """Smooth motion (a knot's jerk jump would cost the trapezoidal rule O(dt Δτ̇))."""
    amp, omega = np.array([0.5, 0.3, -0.4, 0.4, 0.6, -0.3, 0.8]), np.linspace(3.0, 6.0, 7)

    def reference(t):
        s, c = np.sin(omega * t), np.cos(omega * t)
        return Q_PANDA + amp * s, amp * omega * c, -amp * omega**2 * s

    ct = ComputedTorque(PANDA, kp=400.0, kd=40.0)
    t, q, v, tau, tau_ext, r_ideal = simulate(lambda t, q, v: ct(q, v, *reference(t)),
                                              Q_PANDA, 1.0, lambda t: True, reference(0.0)[1])
    obs = MomentumObserver(PANDA, GAIN)
    rng, k, previous, errors = np.random.default_rng(5), 0, 0, []
    while k < len(t):  # samples 1 to 3 ms apart
        estimate = obs.update(q[k], v[k], tau[k], t[k] - t[previous])
        errors.append(np.abs(estimate - r_ideal[k]).max())
        previous, k = k, k + 1 + rng.integers(3)
    assert np.abs(v).max() > 1.0  # the arm really moves
    assert max(errors) < 1e-3 * np.abs(tau_ext).max()


@pytest.mark.parametrize("external", ["constant", "wrench"])
def test_armature_and_friction_are_no_external_torque(external):
    """An arm with armature and friction, moving, an external torque from 0.3 s.

    With the model's joint terms the residual has no bias before it and follows its ideal lag
    after it: a constant torque is reached (K t >= 14); an observer of the rigid arm alone takes
    the rotors' inertia and the friction for external torques.
    """
    model = PANDA.replace(armature=np.linspace(0.3, 0.1, 7), viscous=np.linspace(2.0, 0.5, 7),
                          coulomb=np.linspace(2.0, 0.5, 7), coulomb_velocity=0.05)
    amp, omega = np.array([0.5, 0.3, -0.4, 0.4, 0.6, -0.3, 0.8]), np.linspace(3.0, 6.0, 7)

    def reference(t):
        s, c = np.sin(omega * t), np.cos(omega * t)
        return Q_PANDA + amp * s, amp * omega * c, -amp * omega**2 * s

    ct = ComputedTorque(model, kp=400.0, kd=40.0)
    constant = external_torque(Q_PANDA)
    t, q, v, tau, tau_ext, r_ideal = simulate(
        lambda t, q, v: ct(q, v, *reference(t)), Q_PANDA, 1.0, lambda t: t >= 0.3 - 1e-9,
        reference(0.0)[1], model=model,
        external=(lambda q: constant) if external == "constant" else external_torque)
    estimates = {name: np.array([obs.update(*sample, DT) for sample in zip(q, v, tau)])
                 for name, obs in (("joint terms", MomentumObserver(model, GAIN)),
                                   ("rigid", MomentumObserver(PANDA, GAIN)))}
    r, scale = estimates["joint terms"], np.abs(tau_ext).max()
    assert np.abs(v).max() > 1.0 and scale > 1.0
    assert np.abs(r[t < 0.3]).max() < 1e-3 * scale               # no bias
    assert np.abs(r - r_ideal).max() < 1e-3 * scale              # the ideal lag
    if external == "constant":
        assert np.abs(r[-1] - constant).max() < 1e-3 * scale
    assert np.abs(estimates["rigid"][t < 0.3]).max() > 0.5 * scale


def hold_and_step(obs):
    """The arm held at Q_PANDA by stiff computed torque; F_TIP switched on at 0.1 s."""
    ct = ComputedTorque(PANDA, kp=2500.0, kd=100.0)
    zero = np.zeros(7)
    t, q, v, tau, tau_ext, _ = simulate(lambda t, q, v: ct(q, v, Q_PANDA, zero, zero),
                                        Q_PANDA, 0.7, wrench_on=lambda t: t >= 0.1 - 1e-9)
    estimates = np.array([obs.update(*sample, DT) for sample in zip(q, v, tau)])
    return t, q, tau_ext, estimates


def test_step_response_rise_time_final_value_wrench_and_tare():
    obs = MomentumObserver(PANDA, GAIN)
    t, q, tau_ext, r = hold_and_step(obs)
    np.testing.assert_allclose(r[t < 0.1], 0, atol=1e-9)
    final = tau_ext[-1]
    assert np.linalg.norm(r[-1] - final) < 1e-3 * np.linalg.norm(final)
    after = t >= 0.1 - 1e-9
    # 63 % rise time = 1/K, per joint; the arm yields a little, which changes a small Jᵀ F
    for i in np.flatnonzero(np.abs(final) > 0.2 * np.abs(final).max()):
        fraction = r[after, i] / final[i]
        k = np.argmax(fraction >= 1 - np.exp(-1))
        t_rise = t[after][k - 1] + DT * (1 - np.exp(-1) - fraction[k - 1]) / (
            fraction[k] - fraction[k - 1]) - 0.1
        assert abs(t_rise * GAIN[i] - 1) < 0.1, (i, t_rise, 1 / GAIN[i])

    F = obs.wrench(q[-1], r[-1], "panda_hand")
    assert np.linalg.norm(F - F_TIP) < 1e-3 * np.linalg.norm(F_TIP)
    R = rd.frame_pose(PANDA, q[-1], "panda_hand")[:3, :3]
    F_local = obs.wrench(q[-1], r[-1], "panda_hand", reference=rd.LOCAL)
    np.testing.assert_allclose(F_local, np.concatenate([R.T @ F_TIP[:3], R.T @ F_TIP[3:]]),
                               atol=1e-3 * np.linalg.norm(F_TIP))

    obs.tare()
    zero = np.zeros(7)
    g = rd.gravity(PANDA, q[-1])
    held = obs.update(q[-1], zero, g - tau_ext[-1], DT)
    assert np.abs(held).max() < 1e-3 * np.abs(final).max()


def test_constant_torque_step_is_exact_for_any_dt_and_bad_dt_holds():
    """Arm at rest, τ = g − τ_ext: r(t) = τ_ext (1 − e^(−K t)) at every sample."""
    q, zero = Q_PANDA, np.zeros(7)
    tau_ext = external_torque(q)
    tau = rd.gravity(PANDA, q) - tau_ext
    obs = MomentumObserver(PANDA, GAIN)
    obs.update(q, zero, tau, 0.0)
    t = 0.0
    for dt in np.random.default_rng(1).uniform(1e-4, 5e-3, 50):
        t += dt
        r = obs.update(q, zero, tau, dt)
        np.testing.assert_allclose(r, tau_ext * (1 - np.exp(-GAIN * t)), rtol=1e-9, atol=1e-12)
    for bad in (0.0, -1e-3, np.nan, np.inf, 10.0):
        np.testing.assert_array_equal(obs.update(q, zero, tau, bad), r)
    obs.reset(q, zero)
    np.testing.assert_allclose(obs.update(q, zero, tau, 1e-3),
                               tau_ext * (1 - np.exp(-GAIN * 1e-3)), rtol=1e-12)


@pytest.mark.parametrize("model, q, frame", [(PANDA, Q_PANDA, "panda_hand"),
                                             (UR5E, Q_UR5E, "tool0")])
@pytest.mark.parametrize("reference", [rd.LOCAL_WORLD_ALIGNED, rd.LOCAL])
def test_wrench_inverts_jacobian_transpose(model, q, frame, reference):
    J = rd.frame_jacobian(model, q, frame, reference)
    obs = MomentumObserver(model, 10.0)
    F = np.random.default_rng(2).normal(size=6)
    np.testing.assert_allclose(obs.wrench(q, J.T @ F, frame, reference, damping=0.0), F,
                               atol=1e-9)
    np.testing.assert_allclose(obs.wrench(q, J.T @ F, frame, reference, damping=1e-4), F,
                               rtol=1e-5, atol=1e-6)


def test_damping_is_relative_to_the_largest_singular_value():
    """Along the left singular vector u_i of J, F is scaled by σ_i² / (σ_i² + (d σ_max)²)."""
    q = np.array([0.0, -1.5, 0.05, -1.5, 0.0, 0.0])  # near the elbow singularity
    J = rd.frame_jacobian(UR5E, q, "tool0")
    U, s, _ = np.linalg.svd(J)
    d = 0.05
    F = MomentumObserver(UR5E, 10.0).wrench(q, J.T @ U[:, -1], "tool0", damping=d)
    np.testing.assert_allclose(F, U[:, -1] * s[-1]**2 / (s[-1]**2 + (d * s[0])**2), atol=1e-12)


def test_invalid_arguments():
    with pytest.raises(ValueError, match="gain must be > 0"):
        MomentumObserver(PANDA, np.zeros(7))
    with pytest.raises(ValueError, match=r"gain must have shape \(7,\)"):
        MomentumObserver(PANDA, np.ones(6))
    obs = MomentumObserver(PANDA, 10.0)
    with pytest.raises(ValueError, match=r"tau must have shape \(7,\).*got shape \(6,\)"):
        obs.update(Q_PANDA, np.zeros(7), np.zeros(6), DT)
    with pytest.raises(ValueError, match="damping"):
        obs.wrench(Q_PANDA, np.zeros(7), "panda_hand", damping=-1.0)
    with pytest.raises(ValueError, match="nv = 7"):
        obs.model = UR5E
