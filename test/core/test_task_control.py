"""Cartesian impedance and operational-space control, closed loop in pure core.

The arm is simulated by rd.forward_dynamics and semi-implicit Euler at 1 kHz (no ROS), an
external wrench F at the tip entering as Jᵀ F (LOCAL_WORLD_ALIGNED: moment about the tip origin
and force, base axes). Figures: hold within 0.1 mm, reach 5–10 cm / 0.1 rad within 1 mm / 2 mrad,
displacement F/k within 5 % under a push, a posture change moving the Panda's elbow, not its tip.
"""
import numpy as np
import pytest
import scipy.linalg
from scipy.spatial.transform import Rotation

import robot_dynamics as rd
from random_trees import ARMS, PinocchioReference, make_case
from robot_dynamics.core.algorithms.operational_space import pose_error
from robot_dynamics.core.task_control import (CartesianImpedance, OperationalSpace, damping_matrix,
                                              pose_interpolation)

START = {"panda": np.array([0.0, -0.4, 0.0, -2.2, 0.0, 1.8, 0.8]),
         "ur5e": np.array([0.3, -1.2, 1.4, -1.5, -1.4, 0.2])}
IMPEDANCE = [60.0] * 3 + [1500.0] * 3   # N·m/rad, N/m
SHAPED = [400.0] * 6                     # 1/s²: 20 rad/s
NULL = dict(nullspace_stiffness=20.0, nullspace_damping=4.0)


@pytest.fixture(scope="module", params=ARMS, ids=["panda", "ur5e"])
def arm(request):
    case = make_case(request.param)
    return case.load(), START[request.param.split("/")[0]], case


LAWS = {"impedance": lambda m, **kw: CartesianImpedance(m, IMPEDANCE, **NULL, **kw),
        "operational_space": lambda m, **kw: OperationalSpace(m, SHAPED, **NULL, **kw),
        "unshaped": lambda m, **kw: OperationalSpace(m, IMPEDANCE, inertia_shaping=False, **NULL,
                                                     **kw)}


def simulate(model, law, q, pose_d, seconds, wrench=np.zeros(6), dt=1e-3):
    """Joint positions after each step, and the final q̇, of the closed loop."""
    v = np.zeros(model.nv)
    qs = []
    for _ in range(round(seconds / dt)):
        tau = law(q, v, pose_d) + rd.frame_jacobian(model, q, model.tip).T @ wrench
        v = v + dt * rd.forward_dynamics(model, q, v, tau)
        q = q + dt * v
        qs.append(q)
    return np.array(qs), v


def tip_poses(model, qs, frame=None):
    return rd.frame_pose(model, qs, frame or model.tip)


def target(T, shift, rotvec):
    """T moved by ``shift`` and rotated by ``rotvec`` (base axes) about its origin."""
    T_d = T.copy()
    T_d[:3, :3] = Rotation.from_rotvec(rotvec).as_matrix() @ T[:3, :3]
    T_d[:3, 3] += shift
    return T_d


def test_laws_against_pinocchio(arm):
    """Both laws recomposed from Pinocchio's J, M, g, h and J̇q̇, scipy's log map, at a state."""
    model, q0, case = arm
    ref = PinocchioReference(case.xml, model.joint_names, case.base, case.gravity)
    rng = np.random.default_rng(6)
    q, v = q0 + rng.uniform(-0.1, 0.1, model.nv), rng.uniform(-0.5, 0.5, model.nv)
    T_d = target(ref.frame_pose(q0, model.tip), [0.02, -0.01, 0.03], [0.1, 0.0, -0.05])
    twist_d, accel_d, wrench_d = rng.normal(size=(3, 6))
    posture, kn, dn = q0 - 0.1, rng.uniform(5, 10, model.nv), rng.uniform(1, 2, model.nv)
    J, M = ref.frame_jacobian(q, model.tip, "LOCAL_WORLD_ALIGNED"), ref.mass_matrix(q)
    Lambda = np.linalg.inv(J @ np.linalg.solve(M, J.T))
    N = np.eye(model.nv) - np.linalg.solve(M, J.T) @ Lambda @ J
    T = ref.frame_pose(q, model.tip)
    e = np.concatenate([Rotation.from_matrix(T_d[:3, :3] @ T[:3, :3].T).as_rotvec(),
                        T_d[:3, 3] - T[:3, 3]])
    e_dot, null = twist_d - J @ v, N.T @ (kn * (posture - q) - dn * v)
    gains = dict(nullspace_stiffness=kn, nullspace_damping=dn, posture=posture)
    K = np.array(IMPEDANCE)
    D = damping_matrix(Lambda, K, 0.8)
    law = CartesianImpedance(model, K, 0.8, **gains)
    np.testing.assert_allclose(law(q, v, T_d, twist_d, wrench_d),
                               J.T @ (K * e + D @ e_dot + wrench_d) + null + ref.gravity(q),
                               rtol=1e-9, atol=1e-9)
    law.coriolis_compensation = True
    np.testing.assert_allclose(law(q, v, T_d, twist_d, wrench_d), J.T @ (
        K * e + D @ e_dot + wrench_d) + null + ref.nonlinear_effects(q, v), rtol=1e-9, atol=1e-9)
    K = np.array(SHAPED)
    a = accel_d + K * e + 2 * 0.8 * np.sqrt(K) * e_dot - ref.frame_bias_acceleration(
        q, v, model.tip, "LOCAL_WORLD_ALIGNED")
    np.testing.assert_allclose(OperationalSpace(model, K, 0.8, **gains)(q, v, T_d, twist_d,
                                                                        accel_d, wrench_d),
                               J.T @ (Lambda @ a + wrench_d) + ref.nonlinear_effects(q, v) + null,
                               rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", ["impedance", "operational_space"])
def test_hold_under_gravity(arm, name):
    model, q0, _ = arm
    T0 = rd.frame_pose(model, q0, model.tip)
    poses = tip_poses(model, simulate(model, LAWS[name](model), q0, T0, 1.0)[0])
    drift = np.linalg.norm(poses[:, :3, 3] - T0[:3, 3], axis=1).max()
    assert drift < 1e-4, f"tip drifted {drift * 1e3:.3f} mm"


@pytest.mark.parametrize("name", ["impedance", "operational_space", "unshaped"])
def test_reach(arm, name):
    """5–10 cm and 0.1 rad away: reached within 1 mm / 2 mrad, no overshoot beyond 1 mm."""
    model, q0, _ = arm
    T0 = rd.frame_pose(model, q0, model.tip)
    shift = np.array([0.05, -0.04, 0.03])   # 7.1 cm
    T_d = target(T0, shift, 0.1 * np.array([0.6, 0.48, -0.64]))
    poses = tip_poses(model, simulate(model, LAWS[name](model), q0, T_d, 1.2)[0])
    e = pose_error(T_d, poses[-1])
    assert np.linalg.norm(e[3:]) < 1e-3 and np.linalg.norm(e[:3]) < 2e-3, e
    beyond = (poses[:, :3, 3] - T_d[:3, 3]) @ shift / np.linalg.norm(shift)
    assert beyond.max() < 1e-3, f"overshoot {beyond.max() * 1e3:.2f} mm"


@pytest.mark.parametrize("axis", [3, 4, 5])
def test_stiffness_under_a_push(arm, axis):
    """K e = −F at equilibrium, the posture law acting: displacement F/k along the pushed axis."""
    model, q0, _ = arm
    T0 = rd.frame_pose(model, q0, model.tip)
    wrench = np.zeros(6)
    wrench[axis] = 15.0
    law = LAWS["impedance"](model, posture=q0 + 0.1)
    qs, v = simulate(model, law, q0, T0, 1.5, wrench)
    poses = tip_poses(model, qs)
    displacement = poses[-1, :3, 3] - T0[:3, 3]
    expected = 15.0 / IMPEDANCE[axis]
    assert displacement[axis - 3] == pytest.approx(expected, rel=0.05)
    assert np.abs(np.delete(displacement, axis - 3)).max() < 1e-3
    assert np.linalg.norm(v) < 1e-3   # at rest: an equilibrium, not a snapshot


@pytest.mark.parametrize("name", ["impedance", "operational_space"])
def test_posture_moves_the_elbow_not_the_tip(name):
    """The posture moved 0.5 rad along the Panda's self-motion (the kernel of J at the start)."""
    model = make_case(ARMS[0]).load()
    q0 = START["panda"]
    T0 = rd.frame_pose(model, q0, model.tip)
    self_motion = scipy.linalg.null_space(rd.frame_jacobian(model, q0, model.tip))[:, 0]
    law = LAWS[name](model, posture=q0 + 0.5 * self_motion)
    qs, _ = simulate(model, law, q0, T0, 1.5)
    tips, elbows = tip_poses(model, qs), tip_poses(model, qs, "panda_link4")
    tip = np.linalg.norm(tips[:, :3, 3] - T0[:3, 3], axis=1).max()
    elbow = np.linalg.norm(elbows[-1, :3, 3] - rd.frame_pose(model, q0, "panda_link4")[:3, 3])
    assert tip < 5e-4 and elbow > 0.02, f"tip {tip * 1e3:.3f} mm, elbow {elbow * 1e3:.1f} mm"


def test_max_error_clips_a_far_target(arm):
    """A target 0.5 m and 2 rad away pulls like one at max_error in the same direction."""
    model, q0, _ = arm
    T0 = rd.frame_pose(model, q0, model.tip)
    direction, axis = np.array([0.6, 0.0, 0.8]), np.array([0.0, 0.6, 0.8])
    v = np.full(model.nv, 0.1)
    for make in LAWS.values():
        law = make(model, max_error=(0.05, 0.2))
        tau = law(q0, v, target(T0, 0.5 * direction, 2.0 * axis))
        np.testing.assert_allclose(tau, law(q0, v, target(T0, 0.05 * direction, 0.2 * axis)),
                                   rtol=1e-9, atol=1e-9)


def test_max_velocity():
    """A far target: the tip speed settles at max_velocity, not above."""
    model = make_case(ARMS[0]).load()
    q0 = START["panda"]
    T0 = rd.frame_pose(model, q0, model.tip)
    law = OperationalSpace(model, SHAPED, max_velocity=(0.1, 1.0), **NULL)
    qs, _ = simulate(model, law, q0, target(T0, [0.0, 0.3, 0.0], [0, 0, 0]), 0.6)
    speed = np.linalg.norm(np.diff(tip_poses(model, qs)[:, :3, 3], axis=0), axis=1) / 1e-3
    assert 0.095 < speed[-1] and speed.max() < 0.1 * 1.01, (speed[-1], speed.max())


def test_first_call_sets_the_posture_and_gives_gravity_at_rest(arm):
    """At rest on target: τ = g(q) (impedance), and the posture becomes the first q."""
    model, q0, _ = arm
    T0 = rd.frame_pose(model, q0, model.tip)
    law = LAWS["impedance"](model)
    assert law.posture is None
    np.testing.assert_allclose(law(q0, np.zeros(model.nv), T0), rd.gravity(model, q0),
                               rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(law.posture, q0)
    assert 1 < law.condition < np.inf


@pytest.mark.parametrize("change, match", [
    (dict(stiffness=[1, 2, 3]), "stiffness must be 6 numbers"),
    (dict(stiffness=[1, 2, 3, 4, 5, -6]), "stiffness must be >= 0"),
    (dict(stiffness=[1, 2, 3, 4, 5, np.nan]), "stiffness contains NaN"),
    (dict(damping_ratio=-0.1), "damping_ratio must be a finite number >= 0"),
    (dict(nullspace_stiffness=[1, 2]), "nullspace_stiffness"),
    (dict(nullspace_damping=-1), "nullspace_damping must be >= 0"),
    (dict(posture=[0, 1]), "posture"),
    (dict(max_error=(0.1, 0)), "max_error must be > 0"),
    (dict(max_velocity=0.1), "max_velocity must be two numbers"),
    (dict(singular_damping=-1), "damping must be"),
    (dict(singular_cutoff=2), "cutoff must be"),
    (dict(damping_ratio=0.0, max_velocity=(0.1, np.inf)), "max_velocity needs damping_ratio > 0"),
])
def test_bad_parameters(arm, change, match):
    model, _, _ = arm
    kwargs = dict(stiffness=IMPEDANCE) | change
    with pytest.raises(ValueError, match=match):
        CartesianImpedance(model, **kwargs)
    law = OperationalSpace(model, SHAPED)
    with pytest.raises(ValueError, match=match):
        for name, value in change.items():
            setattr(law, name, value)


def test_bad_arguments(arm):
    model, q0, _ = arm
    law = LAWS["operational_space"](model)
    v, T = np.zeros(model.nv), np.eye(4)
    with pytest.raises(KeyError, match="unknown frame 'nowhere'"):
        CartesianImpedance(model, IMPEDANCE, frame="nowhere")
    with pytest.raises(ValueError, match="pose_d must be a finite 4x4"):
        law(q0, v, np.eye(3))
    with pytest.raises(ValueError, match="not a rotation matrix"):
        law(q0, v, np.diag([1.0, 1.0, -1.0, 1.0]))
    with pytest.raises(ValueError, match="accel_d contains NaN"):
        law(q0, v, T, accel_d=[0, 0, 0, 0, 0, np.nan])
    with pytest.raises(ValueError, match="q contains NaN"):
        law(np.full(model.nv, np.nan), v, T)


def test_pose_interpolation_moves_at_the_twist():
    """Ends at T0 and T1; the finite-difference twist is pose_error(T1, T0) all the way."""
    rng = np.random.default_rng(5)
    T0, T1 = np.eye(4), np.eye(4)
    T0[:3, :3], T1[:3, :3] = Rotation.random(2, random_state=7).as_matrix()
    T0[:3, 3], T1[:3, 3] = rng.normal(size=3), rng.normal(size=3)
    e = pose_error(T1, T0)
    np.testing.assert_allclose(pose_interpolation(T0, T1, 0.0), T0, atol=1e-12)
    np.testing.assert_allclose(pose_interpolation(T0, T1, 1.0), T1, atol=1e-12)
    h = 1e-6
    for alpha in (0.1, 0.5, 0.9):
        twist = pose_error(pose_interpolation(T0, T1, alpha + h),
                           pose_interpolation(T0, T1, alpha - h)) / (2 * h)
        np.testing.assert_allclose(twist, e, atol=1e-7)
