"""The controller's ~/controller_state component alone, on recording publishers (no DDS).

Its decimation on the states' clock, off costing nothing, and what each message carries, with
control_msgs (JointTrajectoryControllerState) and without (the sensor_msgs/JointState
fallbacks). The node's publication over DDS: test_trajectory_action.py.
"""
import math
import types

import numpy as np
import pytest

from robot_dynamics.nodes.dynamics_controller import controller_state

NAMES = ['a', 'b', 'c']
Q, V = np.array([0.1, -0.2, 0.3]), np.array([0.5, 0.0, -0.5])
REFERENCE = (np.array([0.15, -0.2, 0.25]), np.array([0.4, 0.1, -0.5]), np.array([1.0, 2.0, 3.0]))
COMMAND = np.array([10.0, -20.0, 30.0])


class Recording:
    """A publisher that keeps what it is given."""

    def __init__(self, msg_type, topic, depth):
        self.type, self.topic, self.messages = msg_type, topic, []

    def publish(self, msg):
        assert isinstance(msg, self.type)
        self.messages.append(msg)


def component(control_msgs=False, scaling=1.0):
    """A ControllerState on recording publishers; ``made``: the publishers it created."""
    made = []

    def create_publisher(*args):
        made.append(Recording(*args))
        return made[-1]

    context = types.SimpleNamespace(
        create_publisher=create_publisher,
        arm=lambda: types.SimpleNamespace(model=types.SimpleNamespace(joint_names=NAMES)))
    state = controller_state.ControllerState(context, lambda: COMMAND, lambda: scaling)
    if not control_msgs:
        state.type = None   # as where control_msgs does not import
    return state, made


def serve(state, stamps, reference=REFERENCE):
    """Offer the states stamped ``stamps`` (ns) as the controller does; those published."""
    published = []
    for stamp in stamps:
        if stamp >= state.due:
            state.publish(stamp, Q, V, reference)
            published.append(stamp)
    return published


def test_one_state_per_period_of_the_states_clock():
    state, _ = component()
    state.apply(50.0)
    start = 1_764_300_000_123_456_789   # ns: a 1 kHz arm's stamps, off the 20 ms grid
    published = serve(state, [start + k * 10**6 for k in range(2000)])
    assert published[0] == start   # the first state after the rate is set
    # then the first state at or after each multiple of 20 ms: 100 in 2 s
    assert len(published) == 1 + 100
    assert all(0 <= s % 20_000_000 < 10**6 for s in published[1:])
    assert set(np.diff(published[1:])) == {20_000_000}


def test_a_state_stream_slower_than_the_rate_is_published_whole():
    state, _ = component()
    state.apply(1000.0)
    stamps = [k * 5 * 10**6 for k in range(1, 50)]   # 200 Hz
    assert serve(state, stamps) == stamps


def test_off_creates_nothing_and_publishes_nothing():
    state, made = component()
    state.apply(0.0)
    assert state.due == math.inf and not made
    assert serve(state, range(0, 10**9, 10**6)) == []
    state.apply(50.0)
    state.apply(0.0)   # on, then off again: the publishers stay, silent
    assert serve(state, range(0, 10**9, 10**6)) == [] and made
    assert not any(p.messages for p in made)


def test_the_fallback_is_a_joint_state_per_part():
    state, made = component()
    state.apply(50.0)
    serve(state, [3 * 10**9 + 7])
    topics = {p.topic: p.messages for p in made}
    assert set(topics) == {f'~/controller_state/{part}'
                           for part in ('reference', 'feedback', 'error', 'output')}
    (reference,), (feedback,), (error,), (output,) = (
        topics[f'~/controller_state/{part}'] for part in ('reference', 'feedback', 'error',
                                                          'output'))
    for msg in (reference, feedback, error, output):
        assert list(msg.name) == NAMES
        assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (3, 7)
    np.testing.assert_array_equal(reference.position, REFERENCE[0])
    np.testing.assert_array_equal(reference.velocity, REFERENCE[1])
    np.testing.assert_array_equal(feedback.position, Q)
    np.testing.assert_array_equal(feedback.velocity, V)
    np.testing.assert_array_equal(error.position, REFERENCE[0] - Q)
    np.testing.assert_array_equal(error.velocity, REFERENCE[1] - V)
    np.testing.assert_array_equal(output.effort, COMMAND)
    assert not len(output.position) and not len(feedback.effort)


def test_without_a_joint_reference_only_feedback_and_output_go_out():
    state, made = component()
    state.apply(50.0)
    serve(state, [10**9], reference=None)
    sent = {p.topic.rsplit('/', 1)[1]: len(p.messages) for p in made}
    assert sent == {'reference': 0, 'feedback': 1, 'error': 0, 'output': 1}


def test_the_control_msgs_state_carries_every_part(control_msgs_prefix):
    state, made = component(control_msgs=True, scaling=0.7)
    assert state.available
    state.apply(50.0)
    serve(state, [2 * 10**9 + 5])
    (publisher,) = made
    assert publisher.topic == '~/controller_state'
    (msg,) = publisher.messages
    assert list(msg.joint_names) == NAMES
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (2, 5)
    np.testing.assert_array_equal(msg.reference.positions, REFERENCE[0])
    np.testing.assert_array_equal(msg.reference.velocities, REFERENCE[1])
    np.testing.assert_array_equal(msg.reference.accelerations, REFERENCE[2])
    np.testing.assert_array_equal(msg.feedback.positions, Q)
    np.testing.assert_array_equal(msg.feedback.velocities, V)
    np.testing.assert_array_equal(msg.error.positions, REFERENCE[0] - Q)
    np.testing.assert_array_equal(msg.error.velocities, REFERENCE[1] - V)
    np.testing.assert_array_equal(msg.output.effort, COMMAND)
    assert msg.speed_scaling_factor == pytest.approx(0.7)
