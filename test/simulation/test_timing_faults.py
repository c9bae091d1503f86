"""simulation.timing_faults: which sensed states reach the controller, and when.

Expected values follow from the fault definitions (module docstring), counted by hand: a state
sensed at step k with delay d steps goes out at k + d; bunches at multiples of n; stalls from
multiples of the period.
"""
import numpy as np
import pytest

from robot_dynamics.simulation.timing_faults import Faults, TimingFaults

DT = 1e-3


def run(faults, steps):
    """{step: [states sensed at steps ...] that went out at it} (states are their step)."""
    relay = TimingFaults(faults, DT)
    return {k: out for k in range(steps) if (out := relay.due(k, k))}


def test_no_faults_pass_each_state_at_once():
    assert run(Faults(), 5) == {k: [k] for k in range(5)}


def test_a_delay_shifts_every_state_by_its_steps():
    out = run(Faults(delay=0.003), 10)
    assert out == {k: [k - 3] for k in range(3, 10)}


def test_jitter_delays_within_its_bounds_and_keeps_the_order():
    out = run(Faults(delay=0.001, jitter=0.004, seed=3), 5000)
    sent = [(k, s) for k, states in out.items() for s in states]
    order = [s for _, s in sent]
    assert order == sorted(order) and len(order) == len(set(order))
    late = np.array([k - s for k, s in sent])
    assert late.min() >= 1 and late.max() <= 5
    assert len(set(late)) == 5   # 1..5 steps all occur


def test_drops_lose_their_share_of_states():
    n = 20000
    sent = sum(len(s) for s in run(Faults(drop=0.05, seed=1), n).values())
    lost = (n - sent) / n
    assert abs(lost - 0.05) < 4 * np.sqrt(0.05 * 0.95 / n)   # four binomial deviations


def test_bunches_go_out_together():
    out = run(Faults(bunch=4), 12)
    assert out == {0: [0], 4: [1, 2, 3, 4], 8: [5, 6, 7, 8]}


def test_a_stall_sends_nothing_then_its_newest_state():
    out = run(Faults(stall=0.05, stall_period=1.0), 1100)
    assert all(k not in out for k in range(1000, 1050))
    assert out[999] == [999] and out[1050] == [1049, 1050] and out[1051] == [1051]
    assert all(out[k] == [k] for k in range(0, 1000))


def test_the_same_seed_gives_the_same_faults():
    faults = Faults(delay=0.001, jitter=0.004, drop=0.05, bunch=2, stall=0.05,
                    stall_period=0.5, seed=7)
    assert run(faults, 3000) == run(faults, 3000)


@pytest.mark.parametrize('values, name', [({'delay': -1e-3}, 'faults.delay'),
                                          ({'drop': 1.0}, 'faults.drop'),
                                          ({'bunch': 0}, 'faults.bunch'),
                                          ({'stall': 0.2, 'stall_period': 0.1},
                                           'faults.stall_period')])
def test_bad_faults_are_refused_naming_the_parameter(values, name):
    with pytest.raises(ValueError, match=name):
        Faults(**values)
