"""Collision detection on synthetic residual streams and in a pure-core closed loop at 1 kHz."""
import numpy as np
import pytest

import robot_dynamics as rd
from robot_dynamics.core.collision import (CollisionDetector, Comply, Reaction,
                                           default_thresholds, stop_reference)
from robot_dynamics.core.control import ComputedTorque
from robot_dynamics.core.observers import MomentumObserver
from robot_dynamics.core.trajectory import JointTrajectory

PANDA = rd.load_urdf(rd.robot_urdf('panda'), base='panda_link0', tip='panda_hand')
Q0 = np.array([0.0, -0.4, 0.0, -2.1, 0.0, 1.7, 0.8])
DT = 1e-3


def test_default_thresholds_formula():
    # (ρ + φ) τ_max: 15 % of 87 N m and of 12 N m
    np.testing.assert_allclose(default_thresholds(PANDA), [13.05] * 4 + [1.8] * 3, rtol=1e-12)
    with_friction = PANDA.replace(coulomb=np.array([0.5, 0.5, 0, 0, 0, 0, 0.1]))
    np.testing.assert_allclose(default_thresholds(with_friction, 0.1, 0.05),
                               [8.7, 8.7, 13.05, 13.05, 1.8, 1.8, 1.2], rtol=1e-12)
    unlimited = PANDA.replace(effort_limit=np.r_[np.inf, PANDA.effort_limit[1:]])
    with pytest.raises(ValueError, match=r"no effort limit for joints \['panda_joint1'\]"):
        default_thresholds(unlimited)
    with pytest.raises(ValueError, match='thresholds must be > 0'):
        CollisionDetector(PANDA, thresholds=0.0)
    with pytest.raises(ValueError, match='samples must be an integer >= 1'):
        CollisionDetector(PANDA, samples=0)
    assert [r.value for r in Reaction] == ['none', 'stop', 'comply']


def test_noise_and_isolated_spikes_never_trip():
    """60 s at 1 kHz: white noise at a quarter of the thresholds, spikes above them alone."""
    detector = CollisionDetector(PANDA, samples=3)
    rng = np.random.default_rng(19)
    noise = rng.normal(0.0, 0.25, (60_000, 7)) * detector.thresholds
    noise[::50] = 1.5 * detector.thresholds * rng.choice([-1, 1], (1200, 7))   # every 50th
    noise[1::50] = -1.2 * detector.thresholds                                   # and the next
    assert (np.abs(noise) > detector.thresholds).any(axis=1).mean() > 0.04
    for k, r in enumerate(noise):
        assert detector.update(k * DT, r) is None, k


def test_a_step_trips_after_n_samples_and_stays_latched_until_reset():
    detector = CollisionDetector(PANDA, samples=4)
    step = np.zeros(7)
    step[[1, 5]] = [-14.0, 1.9]   # over 13.05 and 1.8
    events = [detector.update(k * DT, step if 100 <= k < 110 else np.zeros(7))
              for k in range(200)]
    first = next(k for k, e in enumerate(events) if e is not None)
    assert first == 100 + 4 - 1   # the designed delay: N − 1 cycles after the crossing
    event = events[first]
    assert all(e is event for e in events[first:])   # latched after the step has gone
    assert event.time == pytest.approx(0.103) and event.onset == pytest.approx(0.100)
    assert event.joints == ('panda_joint2', 'panda_joint6')
    assert event.torques == (-14.0, 1.9) and event.thresholds == pytest.approx((13.05, 1.8))
    assert 'panda_joint2 -14 (threshold 13.1)' in str(event)
    detector.reset()
    assert detector.update(0.2, np.zeros(7)) is None
    # an interrupted run restarts the count
    for k, r in enumerate([step, step, step, np.zeros(7), step, step, step]):
        assert detector.update(k * DT, r) is None


def test_intended_wrench_is_not_a_collision_and_the_force_threshold():
    q = Q0 + 0.1
    J = rd.frame_jacobian(PANDA, q, 'panda_hand', rd.LOCAL_WORLD_ALIGNED)
    F_d = np.array([1.0, -2.0, 0.5, 20.0, -30.0, -40.0])   # the arm pushes on its environment
    reaction = -J.T @ F_d                                   # what the observer sees
    assert (np.abs(reaction) > default_thresholds(PANDA)).any()
    for target, trips in ((F_d, False), (None, True), (-F_d, True)):
        detector = CollisionDetector(PANDA, samples=1)
        assert (detector.update(0.0, reaction, q, target) is not None) == trips
    # force threshold at the hand: 30 N, the joint thresholds out of reach; least squares
    # (damping 0) recovers the force exactly from τ = Jᵀ F
    F = np.array([0.0, 0.0, 0.0, 24.0, 0.0, -18.0])   # |f| = 30 N
    for size, trips in ((0.99, False), (1.01, True)):
        detector = CollisionDetector(PANDA, thresholds=1e3, samples=1, force_threshold=30.0,
                                     damping=0.0)
        event = detector.update(0.0, size * J.T @ F, q)
        assert (event is not None) == trips
    assert event.joints == () and event.force == pytest.approx(30.3, rel=1e-9)
    with pytest.raises(ValueError, match='a force threshold needs q'):
        CollisionDetector(PANDA, force_threshold=30.0).update(0.0, np.zeros(7))
    with pytest.raises(ValueError, match='target_wrench: expected 6 finite values'):
        CollisionDetector(PANDA).update(0.0, np.zeros(7), q, np.zeros(3))


def test_comply_is_gravity_compensation_plus_damping():
    q, v = Q0 + 0.2, np.linspace(-1.0, 1.0, 7)
    comply = Comply(PANDA)
    D = 0.1 * PANDA.effort_limit / PANDA.velocity_limit
    np.testing.assert_allclose(comply(q, v), rd.rnea(PANDA, q, np.zeros(7), np.zeros(7)) - D * v,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Comply(PANDA, 2.0)(q, v), rd.gravity(PANDA, q) - 2.0 * v)
    q_d, v_d, a_d = stop_reference(q)
    np.testing.assert_array_equal(q_d, q)
    assert not v_d.any() and not a_d.any()


class Arm:
    """The true arm (payload known to the controller, friction not), RK4 at 1 kHz, noisy sensors."""

    def __init__(self, model, q, seed):
        self.model, self.q, self.v = model, q.copy(), np.zeros(model.nv)
        self.rng = np.random.default_rng(seed)

    def step(self, tau, F_tip):
        tau = np.clip(tau, -self.model.effort_limit, self.model.effort_limit)

        def f(q, v):
            J = rd.frame_jacobian(self.model, q, 'panda_hand', rd.LOCAL_WORLD_ALIGNED)
            return v, rd.forward_dynamics(self.model, q, v, tau + J.T @ F_tip)

        q, v = self.q, self.v
        k1 = f(q, v)
        k2 = f(q + DT / 2 * k1[0], v + DT / 2 * k1[1])
        k3 = f(q + DT / 2 * k2[0], v + DT / 2 * k2[1])
        k4 = f(q + DT * k3[0], v + DT * k3[1])
        self.q = q + DT / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        self.v = v + DT / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        return self.q + self.rng.normal(0, 1e-5, 7), self.v + self.rng.normal(0, 1e-3, 7), tau


MODEL = rd.with_payload(PANDA, mass=1.0, com=[0.0, 0.0, 0.08])   # the controller's model
TRUE = MODEL.replace(viscous=np.full(7, 0.2))                     # + unmodelled friction
PUSH = np.array([0.0, 0.0, 0.0, 0.0, 36.0, -48.0])               # 60 N at the hand
MOTION = JointTrajectory([0.0, 0.5, 1.0], [Q0, Q0 + [0.5, 0.3, -0.4, 0.4, 0.5, -0.3, 0.5], Q0])


def run(arm, steps, control, detector=None, observer=None, push_at=np.inf, t0=0.0):
    """Closed loop, stopped at a detection; returns the event (or None), tip positions, commands."""
    event, tips, commands = None, [], []
    q, v = arm.q, arm.v
    for k in range(1, steps + 1):
        t = t0 + k * DT
        tau = control(t, q, v)
        commands.append(tau)
        q, v, tau_measured = arm.step(tau, PUSH if t > push_at else np.zeros(6))
        tips.append(rd.frame_pose(arm.model, arm.q, 'panda_hand')[:3, 3])
        if detector is not None:
            event = detector.update(t, observer.update(q, v, tau_measured, DT), q)
            if event is not None:
                break
    return event, np.array(tips), np.array(commands)


def tracking(model):
    computed_torque = ComputedTorque(model, 400.0, 40.0)
    return lambda t, q, v: computed_torque(q, v, *MOTION.sample(t))


def observed(model):
    observer = MomentumObserver(model, 50.0)
    observer.update(Q0, np.zeros(7), rd.gravity(model, Q0), 0.0)
    return observer


def test_no_false_detection_over_a_fast_motion():
    arm = Arm(TRUE, Q0, seed=1)
    detector = CollisionDetector(MODEL)
    event, _, _ = run(arm, 1100, tracking(MODEL), detector, observed(MODEL))
    assert event is None


def test_a_60_newton_push_is_detected_within_20_ms_then_stop_or_comply():
    arm, push_at = Arm(TRUE, Q0, seed=2), 0.3
    event, _, _ = run(arm, 400, tracking(MODEL), CollisionDetector(MODEL), observed(MODEL),
                      push_at)
    assert event is not None and push_at < event.time <= push_at + 0.020, event
    assert 'panda_joint2' in event.joints or 'panda_joint4' in event.joints
    t, q_stop = event.time, arm.q.copy()
    state = arm.q.copy(), arm.v.copy()

    # stop: hold the position at detection with computed torque, the push still on
    hold = ComputedTorque(MODEL, 400.0, 40.0)
    _, _, commands = run(arm, 300, lambda t, q, v: hold(q, v, *stop_reference(q_stop)),
                         push_at=0.0, t0=t)
    assert np.abs(arm.v).max() < 0.05
    assert np.isfinite(commands).all()

    # comply: gravity compensation and damping, the arm yields along the push
    arm.q, arm.v = state
    comply = Comply(MODEL)
    tip0 = rd.frame_pose(MODEL, arm.q, 'panda_hand')[:3, 3]
    _, tips, commands = run(arm, 300, lambda t, q, v: comply(q, v), push_at=0.0, t0=t)
    displacement = (tips[-1] - tip0) @ (PUSH[3:] / 60.0)
    assert displacement > 0.02, displacement
    assert np.isfinite(commands).all()
    assert (np.abs(commands) <= MODEL.effort_limit).all()
