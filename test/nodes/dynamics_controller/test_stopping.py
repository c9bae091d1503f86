"""A graceful stop of dynamics_controller ends on its safe final command; the heartbeat (DDS).

One controller process per case, fed joint states by the test at a pose, moving (q̇ ≠ 0, so
that every mode but gravity compensation commands something else than g(q)), then sent SIGINT
or SIGTERM. The last command received must be the documented final command, g(q_last) from
Pinocchio on the same URDF (0 on an arm that adds its own gravity compensation: the Franka
profile), it must come after the signal, and the process must exit 0. ``~/command_stamp``
carries the stamp of each state a command answered, and nothing after the signal. About 10 s
per case on an idle machine.
"""
import signal
import time

import numpy as np
import pinocchio as pin
import pytest
from builtin_interfaces.msg import Time
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

import robot_dynamics as rd
from robot_dynamics import bringup
from ros_harness import module_finished, to_time

JOINTS = [f'panda_joint{i}' for i in range(1, 8)]
POSE = np.array([0.3, -0.5, 0.2, -2.0, 0.4, 1.6, -0.7])
VELOCITY = np.array([0.2, -0.1, 0.15, 0.1, -0.2, 0.3, -0.25])   # rad/s
STATES = 30          # states sent before the signal, 10 ms apart
EXIT_WAIT = 15.0     # s: generous (a stop ramps for at most 1 s and waits 1 s for acks)

# (mode, config, parameters, signal): every mode; the Franka profile (the robot adds g(q)) and
# rclpy's own (de)serialization once each
CASES = [
    ('gravity_compensation', '', {}, signal.SIGINT),
    ('computed_torque', '', {}, signal.SIGINT),
    ('cartesian_impedance', '', {'fast_path': False}, signal.SIGINT),
    ('operational_space', '', {}, signal.SIGTERM),
    ('computed_torque', 'panda_franka_ros2', {}, signal.SIGTERM),
]


def gravity(q):
    """g(q) of the panda URDF by Pinocchio (the fingers at 0), in JOINTS order."""
    model = pin.buildModelFromUrdf(rd.robot_urdf('panda'))
    data = model.createData()
    index = [model.joints[model.getJointId(j)].idx_v for j in JOINTS]
    full = pin.neutral(model)
    full[index] = q
    return pin.computeGeneralizedGravity(model, data, full)[index]


def state(q, v, t):
    msg = JointState(name=JOINTS, position=[float(x) for x in q],
                     velocity=[float(x) for x in v], effort=[0.0] * 7)
    msg.header.stamp = to_time(t)
    return msg


@pytest.fixture(scope='module', autouse=True)
def probe_clean():
    yield
    assert module_finished() == []


@pytest.mark.parametrize('mode, config, parameters, sig', CASES,
                         ids=[f'{c[0]}-{c[1] or "panda"}-{c[3].name}' for c in CASES])
def test_a_graceful_stop_ends_on_the_final_command(ros, mode, config, parameters, sig):
    probe = ros.probe
    commands = probe.record(Float64MultiArray, 'effort_controller/commands')
    beats = probe.record(Time, '/dynamics_controller/command_stamp')
    states = probe.create_publisher(JointState, 'joint_states', 10)
    overrides = {'mode': mode, 'state_timeout': 30.0, **parameters}   # no stale ramp here
    specs = bringup.nodes('gravity_compensation', robot='panda', config=config,
                          overrides={'dynamics_controller': overrides})
    launch = ros.launch(specs)
    process = launch.processes.procs['dynamics_controller']
    try:
        launch.ready()
        probe.wait_for_publishers(commands)
        probe.wait_for_publishers(beats)
        try:
            probe.until_answered(states, lambda: state(POSE, VELOCITY, time.time()), commands)
        except AssertionError as error:
            raise AssertionError(f'{error}\n{launch.logs()}') from None
        sent = []
        for k in range(STATES):
            q_last = POSE + 0.002 * k * VELOCITY
            sent.append(state(q_last, VELOCITY, time.time()))
            states.publish(sent[-1])
            time.sleep(0.01)
        last_stamp = sent[-1].header.stamp
        deadline = time.monotonic() + 10.0
        while not (beats.messages and beats.messages[-1] == last_stamp):
            assert time.monotonic() < deadline, f'no heartbeat for the last state\n{launch.logs()}'
            time.sleep(0.02)
        answered, beaten = len(commands), len(beats)
        running = np.array(commands.messages[-1].data)

        process.send_signal(sig)
        code = process.wait(EXIT_WAIT)

        assert code == 0, launch.logs()
        assert commands.wait(answered + 1, timeout=5.0), f'no command after {sig.name}'
        time.sleep(0.2)
        final = np.array(commands.messages[-1].data)
        expected = np.zeros(7) if config == 'panda_franka_ros2' else gravity(q_last)
        np.testing.assert_allclose(final, expected, rtol=1e-9, atol=1e-9)
        if mode != 'gravity_compensation':   # the stop had something to change
            assert np.abs(running - expected).max() > 1e-3
        assert len(beats) == beaten, 'a heartbeat after the signal: the loop had ended'
        stamps = [m.sec + 1e-9 * m.nanosec for m in beats.messages]
        assert np.all(np.diff(stamps) > 0), 'one heartbeat per state, in order'
        assert launch.count('dynamics_controller', 'stopping: published the final') == 1
    finally:
        launch.stop()
        probe.stop_recording(commands, beats)
        probe.remove_publishers(states)
