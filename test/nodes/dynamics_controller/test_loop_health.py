"""nodes.loop_health: late states against what the mode tolerates, and a loop gone unstable.

The tolerated delay is the closed form of doc/guides/timing_faults.md: a critically damped
mode of natural frequency ω_n is lost at ω_n T = 0.65, T the state's delay plus 1.5 periods.
"""
import numpy as np

import robot_dynamics as rd
from robot_dynamics.core.control import ComputedTorque
from robot_dynamics.core.task_control import CartesianImpedance, OperationalSpace
from robot_dynamics.nodes.common.diagnostics import ERROR, OK, WARN
from robot_dynamics.nodes.dynamics_controller.loop_health import (LoopHealth, comply_damping,
                                                                  natural_frequency)

RATE = 1000.0
CT_TOLERATED = 0.65 / 20.0 - 1.5e-3   # kp = 400: ω_n = 20 rad/s


def panda():
    return rd.load_urdf(rd.robot_urdf('panda'), 'panda_link0', 'panda_hand_tcp')


def test_each_mode_has_the_frequency_of_its_fastest_feedback():
    model = panda()
    ct = ComputedTorque(model, np.r_[np.full(6, 100.0), 400.0], np.full(7, 20.0))
    assert natural_frequency('gravity_compensation', ct, None) is None
    assert natural_frequency('computed_torque', ct, None) == 20.0
    impedance = CartesianImpedance(model, np.ones(6), max_frequency=50.0)
    assert natural_frequency('cartesian_impedance', ct, impedance) == 50.0
    impedance.max_frequency = np.inf   # no bound known without the arm's inertia
    assert natural_frequency('cartesian_impedance', ct, impedance) is None
    shaped = OperationalSpace(model, np.full(6, 400.0), max_frequency=50.0)
    assert natural_frequency('operational_space', ct, shaped) == 20.0
    shaped.max_frequency = 10.0
    assert natural_frequency('operational_space', ct, shaped) == 10.0


def test_states_late_for_the_mode_warn_then_fail():
    health = LoopHealth()
    level, _, values = health.check(20.0, RATE, np.full(100, 0.002), 100, 0)
    assert level == OK and values['tolerated_delay_ms'] == round(1e3 * CT_TOLERATED, 1)
    level, message, _ = health.check(20.0, RATE, np.full(100, 0.6 * CT_TOLERATED), 200, 0)
    assert level == WARN and 'ms late' in message
    level, message, _ = health.check(20.0, RATE, np.full(100, 1.2 * CT_TOLERATED), 300, 0)
    assert level == ERROR and f'{1e3 * CT_TOLERATED:.1f} ms' in message
    level, _, values = health.check(None, RATE, np.full(100, 10.0), 400, 0)
    assert level == OK and values == {}   # gravity compensation: no limit


def test_many_commands_saturated_warn_and_twice_in_a_row_latch_until_reset():
    health = LoopHealth()
    ages = np.zeros(10)
    level, message, _ = health.check(20.0, RATE, ages, 1000, 400)
    assert level == WARN and '40 %' in message and health.unstable is None
    level, message, _ = health.check(20.0, RATE, ages, 2000, 800)
    assert level == ERROR and 'unstable' in message and health.unstable is not None
    level, _, _ = health.check(20.0, RATE, ages, 3000, 1200)   # still latched
    assert level == ERROR
    health.reset()
    assert health.check(20.0, RATE, ages, 4000, 1200)[0] == OK


def test_a_few_saturated_commands_do_not_count():
    health = LoopHealth()
    for k in range(1, 5):
        assert health.check(20.0, RATE, np.zeros(10), 1000 * k, 200 * k)[0] == OK


def test_the_settling_damping_keeps_a_delayed_damping_loop_stable():
    """M v̇ = −D v(t − T) is stable while M⁻¹ D < π / (2T): the largest eigenvalue is 1 / (2T)."""
    model = panda()
    M = rd.mass_matrix(model, model.neutral_position + 0.3)
    D = comply_damping(M, 0.006)
    largest = np.linalg.eigvals(np.linalg.solve(M, np.diag(D))).real.max()
    assert abs(largest - 1 / (2 * 0.006)) < 1e-6 * largest
    assert (D > 0).all()
