"""Operational-space quantities against Pinocchio, their identities, and the SO(3) log map.

Λ, J̄ = M⁻¹JᵀΛ, N = 1 − J̄J are recomposed with numpy from Pinocchio's frame Jacobian
(LOCAL_WORLD_ALIGNED, rows swapped to angular first) and mass matrix (crba) on the shipped arms
and random trees; the pose error's log map against scipy's Rotation; the damping design against
the eigenvalues of the closed loop it is meant to produce.
"""
import zlib

import numpy as np
import pytest
import scipy.linalg
from scipy.spatial.transform import Rotation

import robot_dynamics as rd
from random_trees import ARMS, PinocchioReference, assert_close, make_case, random_state
from robot_dynamics.core.algorithms.operational_space import (dynamically_consistent_inverse,
                                                              null_space_projector,
                                                              operational_space, pose_error,
                                                              robust_inverse,
                                                              robust_inverse_eigen, rotation_log)
from robot_dynamics.core.algorithms.task_law import modal_damping
from robot_dynamics.core.task_control import damping_matrix

TREES = ("chain-7-12", "tree-4-12", "subtree-5-9", "tilted-6-6", "tree-2-4")


@pytest.fixture(scope="module", params=ARMS + TREES)
def case(request):
    case = make_case(request.param)
    model = case.load()
    ref = PinocchioReference(case.xml, model.joint_names, case.base, case.gravity)
    rng = np.random.default_rng(zlib.crc32(request.param.encode()))
    states = [random_state(model.lower, model.upper, rng) for _ in range(3)]
    return model, ref, model.tip or "tool", states


def pinocchio_quantities(ref, q, frame):
    """(J, Φ, Λ, J̄, N) from Pinocchio's J and M; Λ = Φ⁻¹, or its pseudo-inverse if rank < 6."""
    J = ref.frame_jacobian(q, frame, "LOCAL_WORLD_ALIGNED")
    M = ref.mass_matrix(q)
    Phi = J @ np.linalg.solve(M, J.T)
    full = np.linalg.matrix_rank(J) == 6
    Lambda = np.linalg.inv(Phi) if full else np.linalg.pinv(Phi, rcond=1e-9, hermitian=True)
    J_bar = np.linalg.solve(M, J.T) @ Lambda
    return J, Phi, Lambda, J_bar, np.eye(len(q)) - J_bar @ J, full


def small(x, scale, label):
    """|x| <= 1e-9 scale (an identity that must vanish)."""
    assert np.linalg.norm(x) <= 1e-9 * scale, f"{label}: |{np.linalg.norm(x):.2e}| not ~ 0"


def test_against_pinocchio(case):
    model, ref, frame, states = case
    for q, _, _ in states:
        J, Phi, Lambda, J_bar, N, full = pinocchio_quantities(ref, q, frame)
        ts = operational_space(model, q, frame, cutoff=0.0 if full else 1e-9)
        assert_close(ts.J, J, label="operational_space J")
        assert_close(ts.M, ref.mass_matrix(q), label="operational_space M")
        assert_close(ts.Lambda, Lambda, label="operational_space Lambda")
        assert_close(ts.J_bar, J_bar, label="operational_space J_bar")
        assert_close(ts.N, N, atol=1e-10, label="operational_space N")
        if full:
            assert ts.condition == pytest.approx(np.linalg.cond(Phi), rel=1e-6)
            assert_close(ts.Lambda, rd.task_space_inertia(model, q, frame))
        else:
            assert ts.condition == np.inf


def test_identities(case):
    """N J̄ = 0, J N = 0, J M⁻¹ Nᵀ = 0 (J̄ᵀ Nᵀ = 0), N² = N; J J̄ = 1 at full rank."""
    model, ref, frame, states = case
    for q, _, _ in states:
        full = np.linalg.matrix_rank(ref.frame_jacobian(q, frame, "LOCAL_WORLD_ALIGNED")) == 6
        J, M, Lambda, J_bar, N, _ = operational_space(model, q, frame,
                                                      cutoff=0.0 if full else 1e-9)
        scale = np.linalg.norm(J_bar) * np.linalg.norm(J) + 1.0
        small(N @ J_bar, np.linalg.norm(J_bar), "N J_bar")
        small(J @ N, scale * np.linalg.norm(J), "J N")
        small(J_bar.T @ N.T, np.linalg.norm(J_bar), "J_bar^T N^T")
        small(J @ np.linalg.solve(M, N.T), scale * np.linalg.norm(np.linalg.inv(M)),
              "J M^-1 N^T")
        small(N @ N - N, scale, "N^2 - N")
        if full:
            small(J @ J_bar - np.eye(6), 1.0, "J J_bar - 1")


def test_bias_acceleration_against_pinocchio(case):
    """J̇q̇ of the task (classical acceleration of the frame origin at q̈ = 0)."""
    model, ref, frame, states = case
    for q, v, _ in states:
        assert_close(rd.frame_bias_acceleration(model, q, v, frame),
                     ref.frame_bias_acceleration(q, v, frame, "LOCAL_WORLD_ALIGNED"),
                     label="J_dot v")


def test_damped_and_truncated_inverse():
    """Damped: (Φ + λ1)⁻¹ as task_space_inertia(damping); truncated: the pseudo-inverse."""
    model = make_case(ARMS[0]).load()
    q = np.array([0.1, -0.3, 0.2, -2.0, 0.1, 1.7, 0.5])
    ts = operational_space(model, q, model.tip, damping=0.05)
    assert_close(ts.Lambda, rd.task_space_inertia(model, q, model.tip, damping=0.05))
    J, M = ts.J, ts.M
    Phi = J @ np.linalg.solve(M, J.T)
    assert_close(ts.Lambda, np.linalg.inv(Phi + 0.05 * np.eye(6)))
    s, U = np.linalg.eigh(Phi)
    kept = s > 0.02 * s[-1]
    assert 0 < kept.sum() < 6
    truncated = operational_space(model, q, model.tip, cutoff=0.02).Lambda
    assert_close(truncated, U[:, kept] @ np.diag(1 / s[kept]) @ U[:, kept].T)


def test_wrappers_and_batches():
    model = make_case(ARMS[0]).load()
    Q = np.random.default_rng(5).uniform(model.lower, model.upper, (4, model.nv))
    batch = operational_space(model, Q, model.tip)
    for k, q in enumerate(Q):
        one = operational_space(model, q, model.tip)
        for name, x in one._asdict().items():
            np.testing.assert_allclose(getattr(batch, name)[k], x, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(dynamically_consistent_inverse(model, q, model.tip),
                                      one.J_bar)
        np.testing.assert_array_equal(null_space_projector(model, q, model.tip), one.N)


def test_six_dof_arm_has_no_null_space():
    """UR5e: J square, J̄ = J⁻¹ and N = 0."""
    model = make_case(ARMS[1]).load()
    q = np.array([0.3, -1.2, 1.4, -1.5, -1.4, 0.2])
    J, _, _, J_bar, N, condition = operational_space(model, q, model.tip)
    assert_close(J_bar, np.linalg.inv(J))
    assert np.abs(N).max() < 1e-9 and np.isfinite(condition)


def test_singular_pose():
    """UR5e with its wrist aligned (q5 = 0): Φ is singular; undamped raises, robust does not."""
    model = make_case(ARMS[1]).load()
    q = np.array([0.3, -1.2, 1.4, -1.5, 0.0, 0.2])
    with pytest.raises(ValueError, match="singular here.*damping > 0 or cutoff > 0"):
        operational_space(model, q, model.tip)
    damped = operational_space(model, q, model.tip, damping=1e-3)
    truncated = operational_space(model, q, model.tip, cutoff=1e-6)
    assert damped.condition > 1e12 and np.isfinite(damped.Lambda).all()
    assert np.linalg.norm(damped.Lambda, 2) <= 1e3 * (1 + 1e-9)   # |Λ| <= 1 / damping
    small(truncated.J @ truncated.N, np.linalg.norm(truncated.J) ** 2, "J N, truncated")
    for bad, match in [(dict(damping=-1), "damping must be"), (dict(cutoff=1.0), "cutoff must"),
                       (dict(cutoff="x"), "cutoff must")]:
        with pytest.raises(ValueError, match=match):
            robust_inverse(np.eye(6), **bad)


def rotations():
    """Random rotations and the hard cases: identity, tiny angles, π and just below."""
    rng = np.random.default_rng(11)
    axes = rng.normal(size=(6, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    angles = [0.0, 1e-10, 1e-5, np.pi / 2, np.pi - 1e-7, np.pi]
    special = [Rotation.from_rotvec(a * t) for a, t in zip(axes, angles)]
    return special + list(Rotation.random(20, random_state=3))


def test_rotation_log_against_scipy():
    for r in rotations():
        expected = r.as_rotvec()
        omega = rotation_log(r.as_matrix())
        if np.linalg.norm(expected) > np.pi - 1e-6:   # ±ω are the same rotation at π
            assert np.allclose(omega, expected, atol=1e-7) or np.allclose(omega, -expected,
                                                                          atol=1e-7)
        else:
            np.testing.assert_allclose(omega, expected, rtol=1e-9, atol=1e-15)
    R = np.stack([r.as_matrix() for r in rotations()[6:]])
    np.testing.assert_allclose(rotation_log(R), Rotation.from_matrix(R).as_rotvec(), atol=1e-12)


def test_pose_error():
    """R_d = exp([e_ω]) R (base axes) and e_p = p_d − p."""
    rng = np.random.default_rng(2)
    for r, r_d in zip(Rotation.random(5, random_state=7), Rotation.random(5, random_state=8)):
        T, T_d = np.eye(4), np.eye(4)
        T[:3, :3], T_d[:3, :3] = r.as_matrix(), r_d.as_matrix()
        T[:3, 3], T_d[:3, 3] = rng.normal(size=(2, 3))
        e = pose_error(T_d, T)
        np.testing.assert_allclose(Rotation.from_rotvec(e[:3]).as_matrix() @ T[:3, :3],
                                   T_d[:3, :3], atol=1e-12)
        np.testing.assert_allclose(e[3:], T_d[:3, 3] - T[:3, 3], atol=1e-15)


def test_damping_matrix_places_every_mode_at_the_ratio():
    """Λ ë + D ė + K e = 0: eigenvalues −ζω ± iω√(1 − ζ²), ω² the eigenvalues of (K, Λ)."""
    rng = np.random.default_rng(4)
    A = rng.normal(size=(6, 6))
    Lambda = A @ A.T + 0.5 * np.eye(6)        # coupled, not commuting with K
    K = rng.uniform(10, 1000, 6)
    zeta = 0.4
    D = damping_matrix(Lambda, K, zeta)
    assert_close(D, D.T, label=None)
    state = np.block([[np.zeros((6, 6)), np.eye(6)],
                      [-np.linalg.solve(Lambda, np.diag(K)), -np.linalg.solve(Lambda, D)]])
    poles = np.linalg.eigvals(state)
    omega = np.sqrt(scipy.linalg.eigh(np.diag(K), Lambda, eigvals_only=True))
    expected = np.concatenate([-zeta * omega + 1j * omega * np.sqrt(1 - zeta ** 2),
                               -zeta * omega - 1j * omega * np.sqrt(1 - zeta ** 2)])
    np.testing.assert_allclose(np.sort_complex(poles), np.sort_complex(expected), rtol=1e-9)
    m, k = 3.0, 500.0    # a single mass: D = 2ζ√(mk)
    np.testing.assert_allclose(damping_matrix(m * np.eye(6), np.full(6, k), 0.7),
                               2 * 0.7 * np.sqrt(m * k) * np.eye(6), rtol=1e-12)


@pytest.mark.parametrize("rank, damping, cutoff", [(6, 0.0, 0.0), (6, 0.05, 1e-6), (4, 0.0, 1e-6),
                                                   (5, 0.02, 1e-3)])
def test_modal_damping_from_the_mobility_eigenvectors(rank, damping, cutoff):
    """The laws' D from Φ's eigenvectors: damping_matrix(Λ) at full rank, a closed form if cut.

    With a cut-off: 2ζ U_r R (R⁻¹ U_rᵀ K U_r R⁻¹)^{1/2} R U_rᵀ, R = diag(√λ_r) on the kept
    directions U_r (no damping in the cut ones), the root by scipy's sqrtm.
    """
    rng = np.random.default_rng(rank)
    A = rng.normal(size=(6, rank))
    Phi = A @ A.T + (0.1 * np.eye(6) if rank == 6 else 0.0)
    K, zeta = rng.uniform(0.0, 1000.0, 6), 0.7
    lam, U, condition = robust_inverse_eigen(Phi, damping, cutoff)
    D = modal_damping(lam, U, K, zeta)
    Lambda, expected_condition = robust_inverse(Phi, damping, cutoff)
    np.testing.assert_allclose((U * lam) @ U.T, Lambda, rtol=1e-12, atol=1e-12 * abs(Lambda).max())
    assert condition == expected_condition
    if rank == 6:
        assert_close(D, damping_matrix(Lambda, K, zeta), rtol=1e-10, label=None)
        return
    s, V = np.linalg.eigh(Phi)
    kept = s > cutoff * s.max()
    assert kept.sum() == rank
    U_r, R = V[:, kept], np.diag(np.sqrt(1.0 / (s[kept] + damping)))
    R_inv = np.linalg.inv(R)
    C = scipy.linalg.sqrtm(R_inv @ U_r.T @ np.diag(K) @ U_r @ R_inv).real
    assert_close(D, 2 * zeta * U_r @ R @ C @ R @ U_r.T, rtol=1e-10, label=None)
