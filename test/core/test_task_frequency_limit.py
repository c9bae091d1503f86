"""The task-space laws' frequency limit: no mode of the loop faster than max_frequency.

References: closed forms where Λ's eigenvectors are known (the modes of Λ ë + K e = 0 with a
diagonal or rotated Λ and an isotropic K), SciPy's generalized eigenvalues for the rest, and
the physics the limit exists for: the UR5e's light wrist under a stiff rotational spring, its
states 6 ms late (a plant with a command delay: simulation.closed_loop), rings and grows
without the limit (ω ≈ 197 rad/s against the 0.6/delay a critically damped loop tolerates)
and settles with the default.
"""
import numpy as np
import pytest
import scipy.linalg
from scipy.spatial.transform import Rotation

import robot_dynamics as rd
from robot_dynamics import bringup
from robot_dynamics.core.algorithms.task_law import modal_gains
from robot_dynamics.core.task_control import CartesianImpedance
from robot_dynamics.simulation.closed_loop import realistic_plant

ZETA = 0.9


def gains(Lambda, K, w_max):
    lam, U = np.linalg.eigh(Lambda)
    return modal_gains(lam, U, np.asarray(K, dtype=float), ZETA, w_max)


def test_a_diagonal_inertia_caps_each_axis():
    lam = np.array([0.02, 0.5, 3e-4, 2.0, 4.0, 1.5])
    K = np.array([10.0, 10.0, 10.0, 1000.0, 1000.0, 1000.0])
    capped, D = gains(np.diag(lam), K, 50.0)
    expected = np.minimum(K, lam * 50.0 ** 2)   # 10, 10, 0.75; 1000, 1000, 1000
    np.testing.assert_allclose(capped, np.diag(expected), atol=1e-9)
    np.testing.assert_allclose(D, np.diag(2 * ZETA * np.sqrt(lam * expected)), atol=1e-9)


def test_a_rotated_inertia_caps_along_its_eigenvectors():
    R = np.kron(np.eye(2), Rotation.from_rotvec([0.3, -0.5, 0.8]).as_matrix())
    lam = np.array([1e-3, 0.01, 0.1, 1.0, 2.0, 0.2])
    k = 40.0
    capped, D = gains(R @ np.diag(lam) @ R.T, np.full(6, k), 100.0)
    stiffness = np.minimum(k, lam * 100.0 ** 2)   # 10, 40, 40, 40, 40, 40
    np.testing.assert_allclose(capped, R @ np.diag(stiffness) @ R.T, atol=1e-9)
    np.testing.assert_allclose(D, R @ np.diag(2 * ZETA * np.sqrt(lam * stiffness)) @ R.T,
                               atol=1e-9)


@pytest.mark.parametrize('seed', range(5))
def test_the_slow_modes_stay_and_the_fast_ones_stop_at_the_limit(seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(6, 6))
    Lambda = A @ A.T * 0.05 + np.diag([1e-4, 1e-3, 0.01, 0.1, 1, 2])
    K = rng.uniform(1, 2000, 6)
    w_max = 60.0
    before = scipy.linalg.eigh(np.diag(K), Lambda, eigvals_only=True)
    capped, _ = gains(Lambda, K, w_max)
    after = scipy.linalg.eigh(capped, Lambda, eigvals_only=True)
    slow = before[before < w_max ** 2]
    np.testing.assert_allclose(after[:len(slow)], slow, rtol=1e-8)
    np.testing.assert_allclose(after[len(slow):], w_max ** 2, rtol=1e-8)


def test_no_limit_is_the_law_as_it_was():
    lam = np.array([0.02, 0.5, 3e-4, 2.0, 4.0, 1.5])
    K = np.array([10.0, 10.0, 10.0, 1000.0, 1000.0, 1000.0])
    capped, D = gains(np.diag(lam), K, np.inf)
    np.testing.assert_allclose(capped, np.diag(K), atol=1e-12)
    np.testing.assert_allclose(D, np.diag(2 * ZETA * np.sqrt(lam * K)), atol=1e-9)


def wrist_ringing(max_frequency, delay=6, seconds=1.5):
    """UR5e under Cartesian impedance, states ``delay`` ms late; wrist_3's last 0.3 s swing."""
    sim = bringup.load_config(bringup.config_file('ur5e.yaml'))['arm_simulator'][
        'ros__parameters']
    urdf = rd.robot_urdf('ur5e')
    model = rd.load_urdf(urdf, sim['base'], sim['tip'])
    q0 = np.array(sim['initial_position'])[[sim['joints'].index(j) for j in model.joint_names]]
    loop = realistic_plant('internal', urdf, sim['base'], sim['tip'], q0 + [0, 0, 0, 0, 0, 0.02],
                           profile={'plant.command_delay': delay})
    law = CartesianImpedance(model, [10, 10, 10, 1000, 1000, 1000], max_frequency=max_frequency)
    target = rd.frame_pose(model, q0, model.tip)
    _, q, _, _, tau = loop.run(lambda t, q, v: law(q, v, target), seconds)
    last = q[-300:, 5]
    return last.max() - last.min(), np.abs(tau[:, 5]).max()


def test_a_light_wrist_with_late_states_rings_without_the_limit_and_settles_with_it():
    limited, _ = wrist_ringing(50.0)
    unlimited, torque = wrist_ringing(np.inf)
    print(f'UR5e wrist_3, states 6 ms late: swing over the last 0.3 s {unlimited:.2e} rad '
          f'without the limit (peak torque {torque:.2f} N m), {limited:.2e} rad with 50 rad/s')
    assert unlimited > 0.02    # grown beyond the 0.02 rad it started from
    assert limited < 1e-4
