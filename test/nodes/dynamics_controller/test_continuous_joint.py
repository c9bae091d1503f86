"""A continuous joint crossing ±π under computed torque, real processes over loopback DDS.

The UR5e with its wrist_3_joint made continuous starts at 2.9 rad; a trajectory to -3.0 rad
(the same orientation as 2π − 3.0 = 3.283 rad) must take the short way, across +π, not swing
5.9 rad back through 0. About 12 s.
"""
import numpy as np
import pytest
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

import robot_dynamics as rd
from robot_dynamics import bringup
from ros_harness import BEST_EFFORT, stamp_of, to_duration, to_time

CONFIG = bringup.load_config(bringup.config_file('ur5e.yaml'))['arm_simulator']['ros__parameters']
JOINTS = CONFIG['joints']
WRIST = JOINTS.index('wrist_3_joint')
Q0 = np.array(CONFIG['initial_position'])
Q0[WRIST] = 2.9
GOAL = Q0.copy()
GOAL[WRIST] = -3.0
DURATION = 1.0


@pytest.fixture(scope='module')
def urdf(tmp_path_factory):
    path = tmp_path_factory.mktemp('continuous') / 'ur5e_continuous_wrist.urdf'
    path.write_text(open(rd.robot_urdf('ur5e')).read().replace(
        '<joint name="wrist_3_joint" type="revolute">',
        '<joint name="wrist_3_joint" type="continuous">'))
    return str(path)


def test_trajectory_takes_the_short_way_across_pi(ros, urdf):
    states = ros.probe.record(JointState, 'joint_states', BEST_EFFORT)
    commands = ros.probe.record(Float64MultiArray, 'effort_controller/commands', BEST_EFFORT)
    specs = bringup.nodes('simulated_arm', robot='ur5e', urdf=urdf, mode='computed_torque',
                          overrides={'arm_simulator': {'initial_position': Q0.tolist()}})
    with ros.launch([s for s in specs if s.name != 'wrench_estimator']) as launch:
        launch.ready()
        assert commands.wait(1, timeout=20), launch.logs()
        ros.probe.stop_recording(commands)
        start = stamp_of(states.last()) + 0.5
        msg = JointTrajectory(joint_names=JOINTS)
        msg.header.stamp = to_time(start)
        msg.points = [JointTrajectoryPoint(positions=GOAL.tolist(),
                                           time_from_start=to_duration(DURATION))]
        publisher = ros.probe.create_publisher(JointTrajectory,
                                               '/dynamics_controller/joint_trajectory', 10)
        ros.probe.wait_for_subscribers(publisher)
        publisher.publish(msg)
        # 2 s to settle: a trajectory that reaches the controller after its stamp starts late
        states.wait_for_stamp(start + DURATION + 2.0, timeout=30)
        ros.probe.stop_recording(states)
    index = [list(states.messages[0].name).index(j) for j in JOINTS]
    q = np.array([np.asarray(m.position)[index] for m in states.messages
                  if stamp_of(m) >= start - 0.2])
    wrist = q[:, WRIST]
    print(f'wrist_3: {wrist[0]:.4f} -> {wrist[-1]:.4f} rad, lowest {wrist.min():.4f}')
    assert abs(wrist[0] - 2.9) < 1e-3
    assert abs(wrist[-1] - (2 * np.pi - 3.0)) < 1e-3
    assert wrist.min() > 2.9 - 1e-3 and wrist.max() < 2 * np.pi - 3.0 + 1e-3
    np.testing.assert_allclose(np.delete(q[-1], WRIST), np.delete(GOAL, WRIST), atol=1e-3)
