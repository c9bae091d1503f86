"""The controller options for a real arm in the dynamics_controller node, in process (no DDS).

The node's callbacks are called by the test (test_fuzz's Harness: a real rclpy node, its
publisher spied on, a fake monotonic clock); the expected commands come from the closed forms of
the laws (rd.rnea, rd.mass_matrix), not from the node's law objects.
"""
import numpy as np
import pytest
from rclpy.parameter import Parameter

import robot_dynamics as rd
from robot_dynamics.nodes.common import schema
from test_fuzz import JOINTS, POSE, TIMEOUT, URDF, Harness, joint_state

MODEL = rd.load_urdf(URDF, 'panda_link0', 'panda_hand_tcp')
KP, KD = 400.0, 40.0   # config/panda.yaml
ZERO = np.zeros(7)


@pytest.fixture
def controller(ros_in_process):
    h = Harness()
    yield h
    h.node.destroy_node()


def send(h, q, v=ZERO, dt=0.001):
    """One joint state dt after the last (arm clock and fake clock alike); the new command.

    ``h.stamp``: the state's stamp as the node reads it (s; ~2e-7 s from h.now() near 1.8e9 s).
    """
    h.clock += dt
    msg = joint_state(JOINTS, list(q), list(v), h.now())
    h.stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
    h.node.on_joint_state(msg)
    return h.commands[-1]


def set_parameters(h, **values):
    results = h.node.set_parameters([Parameter(k, value=v) for k, v in values.items()])
    return [r.successful for r in results]


def test_integral_term_accumulates_the_held_error_and_restarts_on_a_new_hold(controller):
    """τ = rnea(q, 0, K_p e + z), z = K_I Σ e Δt; a mode switch and a lost state reset z."""
    h, ki, delta = controller, 50.0, np.full(7, 0.0005)   # M K_p δ: within the rate limit
    assert set_parameters(h, ki=[ki] * 7) == [True]
    send(h, POSE)                          # the hold: the first state's position
    q = POSE - delta
    for k in range(1, 101):
        tau = send(h, q)
        z = ki * delta * 0.001 * k        # the first state after the hold integrates 1 ms
        np.testing.assert_allclose(tau, rd.rnea(MODEL, q, ZERO, KP * delta + z), atol=1e-9)
    for mode in ('gravity_compensation', 'computed_torque'):
        assert set_parameters(h, mode=mode) == [True]
    h.tick(0.2)                            # settles the rate limit after the switch
    for _ in range(300):
        tau = send(h, q)                   # the new hold is q: e = 0, z = 0 again
    np.testing.assert_allclose(tau, rd.gravity(MODEL, q), atol=1e-9)
    for _ in range(50):
        send(h, q - delta)                 # z grows again ...
    assert np.abs(tau - send(h, q - delta)).max() > 1e-3
    h.tick(TIMEOUT + 0.1)                  # ... the states stop: back to g(q), then a new hold
    for _ in range(300):
        tau = send(h, q + delta)
    np.testing.assert_allclose(tau, rd.gravity(MODEL, q + delta), atol=1e-9)


def test_integral_torque_is_held_at_integral_limit(controller):
    """|M z| ≤ integral_limit: with a tiny limit the command stays at g + M K_p e + limit."""
    h, limit, delta = controller, 0.05, np.full(7, 0.01)
    assert set_parameters(h, ki=[1e4] * 7, integral_limit=[limit] * 7) == [True, True]
    send(h, POSE)
    q = POSE - delta
    for _ in range(200):
        tau = send(h, q)
    integral = tau - rd.rnea(MODEL, q, ZERO, KP * delta)
    assert np.abs(integral).max() == pytest.approx(limit, rel=1e-9)
    # z stays along K_I e = the same on every joint: M z ∥ M 1
    direction = rd.mass_matrix(MODEL, q) @ np.ones(7)
    np.testing.assert_allclose(integral, limit * direction / np.abs(direction).max(), atol=1e-9)


def test_velocity_filter_feeds_the_laws_the_first_order_lowpass(controller):
    """y = α v (from rest), α = 1 − exp(−2π f_c Δt): τ = rnea(q, y, −K_d y) holding q."""
    h, cutoff = controller, 20.0
    assert set_parameters(h, velocity_filter_cutoff=cutoff) == [True]
    send(h, POSE)
    v = np.linspace(-0.01, 0.01, 7)   # K_d M v within the rate limit
    y = ZERO
    for dt in (0.001, 0.003, 0.001):
        before = h.stamp
        tau = send(h, POSE, v, dt)
        y = y + (1.0 - np.exp(-2 * np.pi * cutoff * (h.stamp - before))) * (v - y)
        np.testing.assert_allclose(tau, rd.rnea(MODEL, POSE, y, -KD * y), atol=1e-9)
    assert set_parameters(h, velocity_filter_cutoff=0.0) == [True]   # off: q̇ as measured
    np.testing.assert_allclose(send(h, POSE, v), rd.rnea(MODEL, POSE, v, -KD * v), atol=1e-9)


def test_friction_deadband_in_gravity_compensation(controller):
    """Below the deadband only the viscous part is compensated, above it all of τ_f."""
    h, fv, fc = controller, 0.3, 0.2
    assert all(set_parameters(h, mode='gravity_compensation', friction_compensation=True,
                              friction_deadband=0.01, **{'friction.viscous': [fv] * 7,
                                                         'friction.coulomb': [fc] * 7}))
    send(h, POSE)
    h.tick(0.2)
    slow, fast = np.full(7, 0.004), np.full(7, 0.05)
    for _ in range(3):
        tau = send(h, POSE, slow)
    np.testing.assert_allclose(tau, rd.gravity(MODEL, POSE) + fv * slow, atol=1e-9)
    for _ in range(3):
        tau = send(h, POSE, fast)
    np.testing.assert_allclose(tau, rd.gravity(MODEL, POSE) + fv * fast +
                               fc * np.tanh(fast / 0.01), atol=1e-9)


def test_bad_option_values_are_rejected(controller):
    h = controller
    assert set_parameters(h, ki=[-1.0] * 7) == [False]
    assert set_parameters(h, integral_limit=[-1.0] * 7) == [False]
    assert set_parameters(h, ki=[1.0] * 6) == [False]
    assert set_parameters(h, friction_deadband=-0.1) == [False]
    assert set_parameters(h, velocity_filter_cutoff=-1.0) == [False]
    assert list(h.node.values['ki']) == [0.0] and h.node.values['velocity_filter_cutoff'] == 0.0


def test_one_gain_value_is_every_joint_s_and_the_defaults_are_the_schema_s(controller):
    """kp, ki and the observer gain take one value for every joint, or one per joint."""
    h = controller
    empty_kd = Parameter('kd', Parameter.Type.DOUBLE_ARRAY, [])
    assert [r.successful for r in h.node.set_parameters([empty_kd])] == [True]
    assert set_parameters(h, kp=[100.0], ki=[2.0]) == [True] * 2
    ct = h.node.config.computed_torque
    assert ct.kp.tolist() == [100.0] * 7 and ct.kd.tolist() == [20.0] * 7   # kd: 2 √kp
    assert ct.ki.tolist() == [2.0] * 7
    assert set_parameters(h, kp=[100.0, 200.0]) == [False]   # neither one nor one per joint
    per_joint = [float(k) for k in range(100, 800, 100)]
    assert set_parameters(h, kp=per_joint) == [True]
    assert h.node.config.computed_torque.kp.tolist() == per_joint   # joints in model order
    defaults = {p.name: p.default for p in schema.load('dynamics_controller')}
    assert (defaults['kp'], defaults['ki'], defaults['collision.observer_gain']) == \
        ([400.0], [0.0], [50.0])
