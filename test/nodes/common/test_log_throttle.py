"""Throttled warnings are throttled by their kind, not their text.

A rejection's text carries numbers ("stamp jumped 0.31 s ahead"): throttled by the text, every
new number passed, and one run printed the same warning 3,013 times.
"""
from robot_dynamics.nodes.common.node import Throttled


def test_texts_differing_in_their_numbers_are_one_kind():
    logged = []
    warn = Throttled(logged.append, period=60.0)
    for k in range(100):
        warn(f'joint_states ignored: stamp jumped {0.3 + k * 1e-3:.3f} s ahead of 1.5e+09')
    warn('joint_states ignored: out of order: stamped 0.05 s before the newest')
    assert logged == ['joint_states ignored: stamp jumped 0.300 s ahead of 1.5e+09',
                      'joint_states ignored: out of order: stamped 0.05 s before the newest']


def test_a_kind_logs_again_after_its_period(monkeypatch):
    now = [0.0]
    monkeypatch.setattr('robot_dynamics.nodes.common.node.time.monotonic', lambda: now[0])
    logged = []
    warn = Throttled(logged.append, period=1.0)
    warn('late by 3 ms')
    now[0] = 0.5
    warn('late by 4 ms')
    now[0] = 1.5
    warn('late by 5 ms')
    assert logged == ['late by 3 ms', 'late by 5 ms']
