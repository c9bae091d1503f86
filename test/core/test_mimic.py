"""Mimic joints as dependent coordinates: the reduced system's identities and its users.

Batched calls, and the users of the algorithms (identification, payload, control, observer) on a
mimic model.

The model: example-robot-data's Panda as a whole tree, whose second finger mimics the first
(``mimic_panda``), with armature and friction on every joint.
"""
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import robot_dynamics as rd
from robot_dynamics.core.control import ComputedTorque, GravityCompensation
from robot_dynamics.core.observers import MomentumObserver
from robot_dynamics.core.task_control import CartesianImpedance, OperationalSpace, damping_matrix
from mimic_panda import MODEL, RIGID


FRAME = 'panda_rightfinger'   # carried by the mimic joint's body


def states(n, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.uniform(np.maximum(MODEL.lower, -2), np.minimum(MODEL.upper, 2), (n, MODEL.nv))
    return q, rng.normal(size=(n, MODEL.nv)), rng.normal(size=(n, MODEL.nv))


def close(a, b, tol=1e-10):
    np.testing.assert_allclose(a, b, rtol=0, atol=tol * max(1.0, np.abs(b).max()))


def test_the_model_lists_its_mimic_joint():
    assert MODEL.nv == 8 and MODEL.nb == 9
    assert MODEL.mimic == (('panda_finger_joint2', 'panda_finger_joint1', 1.0, 0.0),)
    assert 'panda_finger_joint2' in MODEL.body_names
    assert 'panda_finger_joint2' not in MODEL.joint_names


def test_reduced_coriolis_is_christoffel_consistent():
    """Ṁ = C + Cᵀ (central differences of M along q̇) and C q̇ = nle - g - τ_f."""
    (q,), (v,), _ = states(1, seed=3)
    h = 1e-6
    M_dot = (rd.mass_matrix(RIGID, q + h * v) - rd.mass_matrix(RIGID, q - h * v)) / (2 * h)
    C = rd.coriolis_matrix(RIGID, q, v)
    close(C + C.T, M_dot, 1e-8)
    close(C @ v, rd.nonlinear_effects(RIGID, q, v) - rd.gravity(RIGID, q), 1e-12)


def test_forward_dynamics_inverts_rnea_with_joint_terms():
    q, v, a = states(3, seed=1)
    tau = rd.rnea(MODEL, q, v, a)
    close(rd.forward_dynamics(MODEL, q, v, tau), a, 1e-9)
    close(rd.forward_dynamics(MODEL, q[0], v[0], tau[0]), a[0], 1e-9)


def test_joint_friction_is_that_of_the_independent_joints():
    _, v, _ = states(3, seed=11)
    close(rd.joint_friction(MODEL, v), MODEL.viscous * v + MODEL.coulomb * np.tanh(v / 0.01))


def test_joint_terms_belong_to_the_independent_joints():
    """M - M_rigid = diag(armature); rnea - rnea_rigid = armature q̈ + τ_f(q̇)."""
    q, v, a = states(2, seed=2)
    close(rd.mass_matrix(MODEL, q[0]) - rd.mass_matrix(RIGID, q[0]), np.diag(MODEL.armature))
    close(rd.rnea(MODEL, q, v, a) - rd.rnea(RIGID, q, v, a),
          MODEL.armature * a + MODEL.viscous * v + MODEL.coulomb * np.tanh(v / 0.01))


@pytest.mark.parametrize('name, call', [
    ('rnea', lambda q, v, a: rd.rnea(MODEL, q, v, a)),
    ('gravity', lambda q, v, a: rd.gravity(MODEL, q)),
    ('nonlinear_effects', lambda q, v, a: rd.nonlinear_effects(MODEL, q, v)),
    ('mass_matrix', lambda q, v, a: rd.mass_matrix(MODEL, q)),
    ('coriolis_matrix', lambda q, v, a: rd.coriolis_matrix(MODEL, q, v)),
    ('forward_dynamics', lambda q, v, a: rd.forward_dynamics(MODEL, q, v, a)),
    ('frame_pose', lambda q, v, a: rd.frame_pose(MODEL, q, FRAME)),
    ('frame_jacobian', lambda q, v, a: rd.frame_jacobian(MODEL, q, FRAME, rd.LOCAL)),
    ('frame_velocity', lambda q, v, a: rd.frame_velocity(MODEL, q, v, FRAME)),
    ('frame_bias_acceleration', lambda q, v, a: rd.frame_bias_acceleration(MODEL, q, v, FRAME)),
    ('task_space_inertia', lambda q, v, a: rd.task_space_inertia(MODEL, q, FRAME)),
    ('translational_inertia', lambda q, v, a: rd.translational_inertia(MODEL, q, FRAME)),
    ('inverse_task_space_inertia',
     lambda q, v, a: rd.inverse_task_space_inertia(MODEL, q, FRAME)),
    ('regressor', lambda q, v, a: rd.regressor(MODEL, q, v, a, True, True, True)),
])
def test_batched_calls_equal_one_state_calls(name, call):
    q, v, a = states(4, seed=4)
    batch = call(q, v, a)
    close(batch, np.array([call(*state) for state in zip(q, v, a)]), 1e-12)


@pytest.mark.parametrize('name, call', [
    ('rnea', lambda q, v, a, **out: rd.rnea(MODEL, q, v, a, **out)),
    ('gravity', lambda q, v, a, **out: rd.gravity(MODEL, q, **out)),
    ('nonlinear_effects', lambda q, v, a, **out: rd.nonlinear_effects(MODEL, q, v, **out)),
    ('mass_matrix', lambda q, v, a, **out: rd.mass_matrix(MODEL, q, **out)),
    ('frame_jacobian', lambda q, v, a, **out: rd.frame_jacobian(MODEL, q, FRAME, **out)),
])
def test_out_receives_the_reduced_result(name, call):
    for q, v, a in (tuple(x[0] for x in states(1, seed=5)), states(3, seed=6)):   # 1, N states
        expected = call(q, v, a)
        out = np.full(expected.shape, np.nan)
        assert call(q, v, a, out=out) is out
        close(out, expected, 0.0)
        with pytest.raises(ValueError, match='out must be a writeable float64 array'):
            call(q, v, a, out=out[..., :-1])


def test_frame_velocity_is_the_jacobian_times_q_dot():
    q, v, _ = states(1, seed=5)
    close(rd.frame_velocity(MODEL, q[0], v[0], FRAME),
          rd.frame_jacobian(MODEL, q[0], FRAME) @ v[0], 1e-12)


def test_task_space_inertia_and_effective_mass_are_those_of_the_reduced_system():
    (q,), _, _ = states(1, seed=6)
    J, M = rd.frame_jacobian(MODEL, q, FRAME), rd.mass_matrix(MODEL, q)
    close(rd.task_space_inertia(MODEL, q, FRAME), np.linalg.inv(J @ np.linalg.solve(M, J.T)),
          1e-9)
    u = np.array([0.0, 0.6, 0.8])
    J_v = J[3:]
    close(rd.effective_mass(MODEL, q, FRAME, u), 1.0 / (u @ J_v @ np.linalg.solve(M, J_v.T) @ u))


def test_regressor_times_parameters_is_rnea():
    q, v, a = states(3, seed=7)
    theta = rd.parameter_vector(MODEL, True, True, True)
    close(rd.regressor(MODEL, q, v, a, True, True, True) @ theta, rd.rnea(MODEL, q, v, a))
    assert len(theta) == 10 * MODEL.nb + 3 * MODEL.nv


def test_payload_on_the_mimic_finger_weighs_through_its_jacobian():
    """g changes by -J_vᵀ m g for a point mass at the frame origin."""
    (q,), _, _ = states(1, seed=8)
    heavy = rd.with_payload(MODEL, 0.5, frame=FRAME)
    J_v = rd.frame_jacobian(MODEL, q, FRAME)[3:]
    close(rd.gravity(heavy, q) - rd.gravity(MODEL, q), -J_v.T @ (0.5 * MODEL.gravity), 1e-12)


def test_identification_and_payload_identification_on_a_mimic_model():
    q, v, a = states(60, seed=9)
    result = rd.identify(RIGID, q, v, a, rd.rnea(RIGID, q, v, a))
    close(result.predict(q, v, a), rd.rnea(RIGID, q, v, a), 1e-8)
    heavy = rd.with_payload(RIGID, 1.2, com=(0.0, 0.01, 0.05), frame='panda_hand')
    estimate = rd.identify_payload(RIGID, q[:10], rd.gravity(heavy, q[:10]), frame='panda_hand')
    assert estimate.mass == pytest.approx(1.2, rel=1e-9)
    close(estimate.com, [0.0, 0.01, 0.05], 1e-9)


def test_controllers_and_observer_work_in_independent_coordinates():
    (q,), (v,), (a,) = states(1, seed=10)
    close(GravityCompensation(MODEL)(q), rd.gravity(MODEL, q))
    control = ComputedTorque(MODEL, kp=100.0, kd=20.0)
    close(control(q, v, q, v, a), rd.rnea(MODEL, q, v, a))
    # held still (q̇ = 0) against a wrench F on the mimic finger: τ = g(q) - Jᵀ F
    F = np.array([0.1, -0.2, 0.05, 3.0, -1.0, 2.0])
    tau_ext = rd.frame_jacobian(MODEL, q, FRAME).T @ F
    observer = MomentumObserver(MODEL, gain=50.0)
    observer.reset(q, np.zeros(8))
    for _ in range(300):
        estimate = observer.update(q, np.zeros(8), rd.gravity(MODEL, q) - tau_ext, 0.01)
    close(estimate, tau_ext, 1e-9)
    close(observer.wrench(q, estimate, FRAME, damping=0.0), F, 1e-8)


def test_task_space_laws_in_independent_coordinates():
    """Both laws at the mimic finger recomposed from the model's J, M, g, h, J̇q̇ (all reduced)."""
    (q,), (v,), (posture,) = states(1, seed=11)
    rng = np.random.default_rng(11)
    twist_d, accel_d, wrench_d = rng.normal(size=(3, 6))
    T = rd.frame_pose(MODEL, q, FRAME)
    T_d = T.copy()
    T_d[:3, :3] = Rotation.from_rotvec([0.05, -0.02, 0.03]).as_matrix() @ T[:3, :3]
    T_d[:3, 3] += [0.01, 0.02, -0.01]
    e = np.concatenate([[0.05, -0.02, 0.03], [0.01, 0.02, -0.01]])
    J, M = rd.frame_jacobian(MODEL, q, FRAME), rd.mass_matrix(MODEL, q)
    Lambda = np.linalg.inv(J @ np.linalg.solve(M, J.T))
    N = np.eye(8) - np.linalg.solve(M, J.T) @ Lambda @ J
    e_dot, null = twist_d - J @ v, N.T @ (3.0 * (posture - q) - 0.5 * v)
    gains = dict(frame=FRAME, nullspace_stiffness=3.0, nullspace_damping=0.5, posture=posture,
                 singular_cutoff=0.0)
    K = rng.uniform(10.0, 500.0, 6)
    D = damping_matrix(Lambda, K, 0.8)
    law = CartesianImpedance(MODEL, K, 0.8, **gains)
    close(law(q, v, T_d, twist_d, wrench_d),
          J.T @ (K * e + D @ e_dot + wrench_d) + null + rd.gravity(MODEL, q), 1e-9)
    law.coriolis_compensation = True
    close(law(q, v, T_d, twist_d, wrench_d),
          J.T @ (K * e + D @ e_dot + wrench_d) + null + rd.nonlinear_effects(MODEL, q, v), 1e-9)
    bias = rd.frame_bias_acceleration(MODEL, q, v, FRAME)
    h = rd.nonlinear_effects(MODEL, q, v)
    close(OperationalSpace(MODEL, K, 0.8, inertia_shaping=False, **gains)(
        q, v, T_d, twist_d, accel_d, wrench_d),
        J.T @ (Lambda @ (accel_d - bias) + K * e + D @ e_dot + wrench_d) + h + null, 1e-9)
    a = accel_d + K * e + 2 * 0.8 * np.sqrt(K) * e_dot - bias
    close(OperationalSpace(MODEL, K, 0.8, **gains)(q, v, T_d, twist_d, accel_d, wrench_d),
          J.T @ (Lambda @ a + wrench_d) + h + null, 1e-9)


def test_a_mimic_joint_is_refused_in_place_of_a_joint_argument_shape():
    with pytest.raises(ValueError, match=r'q must have shape \(8,\).*panda_finger_joint1'):
        rd.rnea(MODEL, np.zeros(9), np.zeros(9), np.zeros(9))
