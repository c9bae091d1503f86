"""record_joint_states over real DDS, and fit_dynamics' YAML loaded by the real nodes.

The recorder runs as its own process
(``python -m robot_dynamics.tools.record_joint_states --ros-args ...``); the test publishes
joint states, good and bad, then stops it with SIGINT (or lets ``duration`` end it) and compares
the file with what was sent. The fitted YAML is given to a
dynamics_controller and a wrench_estimator as their parameter file; their parameter services
must answer the fitted values. About 10 s.
"""
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from builtin_interfaces.msg import Time
from rclpy.duration import Duration
from sensor_msgs.msg import JointState

import robot_dynamics as rd
from robot_dynamics import bringup
from robot_dynamics.tools import fit_dynamics, recording
from ros_harness import RELIABLE
from test_tools import node_parameters

START = 1_700_000_000 * 10**9 + 123_456_789   # ns, the first stamp
DT = 2_000_000                                # ns between stamps


def joint_state(k, names=('j1', 'j2', 'j3'), effort=True, velocity=True, stamp=None):
    """The k-th message: position 10 j + k/8, velocity -j - k/16, effort 100 j + k/4."""
    ns = START + k * DT if stamp is None else stamp
    values = {n: (10.0 * i + k / 8, -i - k / 16, 100.0 * i + k / 4)
              for i, n in enumerate(('j1', 'j2', 'j3', 'j4'), 1)}
    msg = JointState(name=list(names))
    msg.header.stamp = Time(sec=ns // 10**9, nanosec=ns % 10**9)
    msg.position = [values[n][0] for n in names]
    msg.velocity = [values[n][1] for n in names] if velocity else []
    msg.effort = [values[n][2] for n in names] if effort else []
    return msg


STARTED = []   # the record_joint_states processes the running test started


class Recorder:
    """A record_joint_states process writing ``output``, with its log."""

    def __init__(self, ros, output, *parameters, topic='joint_states'):
        self.log_path = pathlib.Path(output).with_suffix('.log')
        argv = [sys.executable, '-m', 'robot_dynamics.tools.record_joint_states', '--ros-args',
                '-r', f'joint_states:={topic}',
                '-p', f'output:={output}', '-p', 'joint_states_reliability:=reliable']
        for p in parameters:
            argv += ['-p', p]
        self.process = subprocess.Popen(argv, env=ros.env, stdout=open(self.log_path, 'w'),
                                        stderr=subprocess.STDOUT)
        STARTED.append(self.process)

    def log(self):
        return self.log_path.read_text()

    def ready(self, timeout=90):
        """Until the node logs 'ready' (its signal handlers are installed by then)."""
        deadline = time.monotonic() + timeout
        while ']: ready: ' not in self.log():
            assert self.process.poll() is None and time.monotonic() < deadline, self.log()
            time.sleep(0.05)

    def wait(self, timeout=90):
        try:
            return self.process.wait(timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()


@pytest.fixture(autouse=True)
def no_recorder_outlives_its_test():
    """A test that fails before its recorder's stop leaves no process behind."""
    yield
    while STARTED:
        process = STARTED.pop()
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture
def publisher(ros, request):
    """A publisher on a topic of the test's own.

    The subscriptions of earlier tests' processes, still matched until their DDS leases expire,
    can then neither take nor hold up its messages.
    """
    topic = f'/joint_states_{request.node.name.replace("[", "_").replace("]", "")}'
    publisher = ros.probe.create_publisher(JointState, topic, RELIABLE)
    yield publisher
    ros.probe.remove_publishers(publisher)


def publish(ros, publisher, messages, recorder):
    """Publish to the ready recorder and wait until it has acknowledged every message.

    Ready first: a recorder that is still starting (numba compiling on a cold cache) may have
    matched the publisher before its signal handlers are installed. The acknowledgements wait
    until the recorder has matched the publisher too: late in the whole suite that took 11.8 s
    (four of Fast DDS's 3 s heartbeat periods), against 0.1-3 s in a fresh process.
    """
    recorder.ready()
    ros.probe.wait_for_subscribers(publisher, timeout=90)
    for msg in messages:
        publisher.publish(msg)
    assert publisher.wait_for_all_acked(Duration(seconds=60)), recorder.log()


def test_recorder_writes_what_it_received_on_sigint(ros, publisher, tmp_path):
    """joints [j2, j1] of messages with a third joint; bad messages are rejected and counted."""
    output = tmp_path / 'log.npz'
    recorder = Recorder(ros, output, 'joints:=[j2, j1]', 'urdf:=/robots/arm.urdf',
                        'robot_description:=<robot name="arm"/>', topic=publisher.topic_name)
    good = [0, 1, 2, 3, 5, 6]
    messages = [joint_state(k) for k in good[:4]]
    messages += [joint_state(4, effort=False),                          # no efforts
                 joint_state(4, names=('j1', 'j2')),                    # joint set changed
                 joint_state(4, stamp=START + 3 * DT),                  # stamp not increasing
                 joint_state(4, names=('j4',)),                         # not ours: ignored
                 joint_state(5, names=('j3', 'j1', 'j2'))]              # reordered: recorded
    bad = joint_state(4)
    bad.position[1] = float('nan')
    messages.insert(4, bad)
    messages.append(joint_state(6))
    publish(ros, publisher, messages, recorder)
    recorder.process.send_signal(signal.SIGINT)
    assert recorder.wait() == 0, recorder.log()
    data = recording.load(output)
    k = np.array(good)
    assert data.joint_names == ('j2', 'j1')
    assert data.start_time == START * 1e-9
    assert np.array_equal(data.t, (k * DT) * 1e-9)
    assert np.array_equal(data.q, np.column_stack([20.0 + k / 8, 10.0 + k / 8]))
    assert np.array_equal(data.v, np.column_stack([-2.0 - k / 16, -1.0 - k / 16]))
    assert np.array_equal(data.tau, np.column_stack([200.0 + k / 4, 100.0 + k / 4]))
    assert (data.urdf, data.robot_description) == ('/robots/arm.urdf', '<robot name="arm"/>')
    log = recorder.log()
    assert 'rejected 4 messages' in log and 'ignored 1 messages' in log
    assert "non-finite position for ['j2']" in log and 'no efforts' in log
    assert 'the joint set changed' in log and 'stamp not after the previous one' in log
    assert f'wrote {output}: 6 samples of 2 joints over 0.012 s (416.7 Hz)' in log


def test_recorder_stops_after_duration_and_csv_without_velocities(ros, publisher, tmp_path):
    output = tmp_path / 'log.csv'
    recorder = Recorder(ros, output, 'duration:=0.006', topic=publisher.topic_name)
    publish(ros, publisher, [joint_state(k, names=('j3', 'j1'), velocity=False)
                             for k in range(6)], recorder)
    assert recorder.wait() == 0, recorder.log()   # ended by the stamp 0.008 s > 0.006 s
    data = recording.load(output)
    k = np.arange(4)
    assert data.joint_names == ('j3', 'j1') and data.v is None
    assert np.array_equal(data.t, k * DT * 1e-9)
    assert np.array_equal(data.q, np.column_stack([30.0 + k / 8, 10.0 + k / 8]))
    assert 'without velocities' in recorder.log()


def test_recorder_records_currents_as_torques(ros, publisher, tmp_path):
    """measured_effort current: efforts times torque_constants (joints order); refused without."""
    output = tmp_path / 'log.npz'
    refused = Recorder(ros, tmp_path / 'x.npz', 'measured_effort:=current')
    recorder = Recorder(ros, output, 'duration:=0.006', 'joints:=[j2, j1]',
                        'measured_effort:=current', 'torque_constants:=[3.0, 0.5]',
                        topic=publisher.topic_name)
    publish(ros, publisher, [joint_state(k) for k in range(6)], recorder)
    assert recorder.wait() == 0, recorder.log()
    assert refused.wait() == 1 and 'needs joints and one torque constant' in refused.log()
    k = np.arange(4)
    assert np.array_equal(recording.load(output).tau,
                          np.column_stack([3.0 * (200.0 + k / 4), 0.5 * (100.0 + k / 4)]))


def test_recorder_refuses_a_bad_output_and_too_few_samples(ros, tmp_path):
    bad = Recorder(ros, tmp_path / 'log.txt')
    few = Recorder(ros, tmp_path / 'few.npz', 'min_samples:=5')
    assert bad.wait() == 1 and 'a recording file ends in .npz or .csv' in bad.log()
    few.ready()
    few.process.send_signal(signal.SIGTERM)
    assert few.wait() == 1, few.log()
    assert 'fewer than min_samples = 5: no file written' in few.log()
    assert not (tmp_path / 'few.npz').exists()


def test_nodes_load_the_fitted_yaml(ros, tmp_path):
    """The YAML of a payload, friction and armature fit is the nodes' parameter file."""
    model = rd.load_urdf(rd.robot_urdf('panda'), 'panda_link0', 'panda_hand_tcp')
    rng = np.random.default_rng(0)
    true = rd.with_payload(model.replace(viscous=rng.uniform(0.1, 0.5, 7),
                                         coulomb=rng.uniform(0.3, 1.0, 7),
                                         armature=rng.uniform(0.05, 0.3, 7)), 1.0, [0, 0, 0.05])
    trajectory = rd.excitation_trajectory(model, period=4.0, harmonics=3, evaluations=0)
    t = np.arange(0.0, trajectory.duration, 0.002)
    q, v, a = trajectory.sample_many(t)
    order = [6, 5, 4, 3, 2, 1, 0]
    recording.save(recording.Recording(t, q[:, order], v[:, order],
                                       rd.rnea(true, q, v, a)[:, order],
                                       [model.joint_names[i] for i in order]),
                   tmp_path / 'log.npz')
    params = tmp_path / 'fitted.yaml'
    assert fit_dynamics.main([str(tmp_path / 'log.npz'), '--robot', 'panda', '--payload',
                              '--friction', '--armature', '-o', str(params)]) == 0
    document = bringup.load_config(params)
    specs = bringup.nodes('gravity_compensation', robot='panda', config=str(params))
    specs.append(bringup.NodeSpec('wrench_estimator', 'wrench_estimator', str(params),
                                  {'robot_description': specs[0].parameters['robot_description']}))
    with ros.launch(specs) as launch:
        launch.ready()
        for node in fit_dynamics.NODES:
            expected = node_parameters(document, node)
            found = ros.probe.get_parameters(node, *expected)
            assert found.keys() == expected.keys()
            for name, value in expected.items():
                assert np.array_equal(found[name], value) if isinstance(value, list) else \
                    found[name] == value, (node, name)
            assert 'does not declare' not in launch.log(node)
