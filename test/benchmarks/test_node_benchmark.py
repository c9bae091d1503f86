"""The node benchmark's pieces: its ratios and tables, and its ping-pong on the minimal nodes.

No timing is asserted: the ping-pong test checks that every state is answered and counted.
"""
import pytest

from robot_dynamics.benchmarks import nodes


def figures(cpu, median, p99):
    return dict(cpu_us=cpu, median_us=median, p99_us=p99, answered=1000, lost=0)


def test_ratios_are_taken_within_each_round():
    rounds = [{'minimal': figures(200, 400, 600), 'minimal_raw': figures(100, 200, 300),
               'computed_torque': figures(300, 600, 1200)},
              {'minimal': figures(100, 400, 600), 'minimal_raw': figures(50, 200, 300),
               'computed_torque': figures(200, 400, 600)}]
    summary = nodes.summary(rounds)
    ct = summary['computed_torque']
    assert ct['vs_minimal']['cpu_us'] == dict(median=1.75, min=1.5, max=2.0)
    assert ct['vs_minimal_raw']['p99_us'] == dict(median=3.0, min=2.0, max=4.0)
    assert summary['minimal']['vs_minimal']['median_us'] == dict(median=1.0, min=1.0, max=1.0)
    assert ct['cpu_us'] == dict(median=250.0, min=200.0, max=300.0)
    row = nodes.node_table(summary).splitlines()[-1]
    assert row.startswith('| dynamics_controller, computed_torque | 250 | 1.75 (1.50–2.00) |')


@pytest.mark.parametrize('label', ['minimal', 'minimal_raw'])
def test_ping_pong_answers_every_state(ros, tmp_path, label):
    target = next(t for t in nodes.targets(tmp_path) if t.label == label)
    nodes.start(target, ros.env, tmp_path)
    bench = nodes.Bench([target], nodes.arm_state())
    try:
        nodes.wait_until_answering(bench, target, tmp_path)
        result = nodes.measure_ping_pong(bench, target, 200)
    finally:
        bench.close()
        nodes.stop(target)
    assert result['answered'] == 200 and result['lost'] == 0
    # CPU time is counted in 10 ms clock ticks: 200 cheap answers may fall within one
    assert result['cpu_us'] >= 0 and 0 < result['median_us'] <= result['p99_us']


def test_callback_costs_serve_every_state_on_both_paths(ros_in_process):
    """The in-process callback measurement runs on the controller as it is (no timing asserted).

    Each mode's states are served (none rejected: ``callback_costs`` asserts it) on both paths.
    """
    costs = nodes.callback_costs(modes=('computed_torque', 'cartesian_impedance'), rounds=1,
                                 states=5)
    assert set(costs) == {'computed_torque', 'cartesian_impedance'}
    assert all(set(c) == {'fast', 'plain'} and min(c.values()) > 0 for c in costs.values())
