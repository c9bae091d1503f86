"""Partial trajectories: the joints a JointTrajectory does not name keep their reference.

In process, on the controller's conversion of a trajectory_msgs/JointTrajectory (the topic and
the FollowJointTrajectory action share it): the named joints reach their points, the others
stay at the position the current reference had when the trajectory starts.
"""
import numpy as np
import pytest
from builtin_interfaces.msg import Duration
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

import robot_dynamics as rd
from robot_dynamics.nodes.common.joint_states import BadInput
from robot_dynamics.nodes.dynamics_controller.reference import Setpoint, trajectory_from_msg

PANDA = rd.load_urdf(rd.robot_urdf('panda'), base='panda_link0', tip='panda_hand')
HOME = np.array([0.0, -0.4, 0.0, -2.0, 0.0, 1.6, 0.8])
START = 10.0


def message(names, points):
    """A JointTrajectory: points are (time s, positions[, velocities])."""
    msg = JointTrajectory(joint_names=list(names))
    for t, q, *v in points:
        sec, nanosec = divmod(int(round(t * 1e9)), 10**9)
        msg.points.append(JointTrajectoryPoint(
            positions=list(q), velocities=list(v[0]) if v else [],
            time_from_start=Duration(sec=sec, nanosec=nanosec)))
    return msg


def test_unnamed_joints_hold_the_current_reference():
    names = [PANDA.joint_names[1], PANDA.joint_names[3]]
    goal = [-0.2, -1.6]
    msg = message(reversed(names), [(0.5, [-1.8, -0.3]), (1.0, list(reversed(goal)))])
    timed = trajectory_from_msg(msg, PANDA, START, Setpoint(HOME))
    named = [1, 3]
    held = [i for i in range(7) if i not in named]
    for t in np.linspace(START, START + 1.5, 31):
        q, v, a = timed.sample(t)
        np.testing.assert_allclose(q[held], HOME[held], atol=1e-12)
        np.testing.assert_allclose(v[held], 0.0, atol=1e-12)
        np.testing.assert_allclose(a[held], 0.0, atol=1e-12)
    np.testing.assert_allclose(timed.sample(START)[0], HOME, atol=1e-12)   # blends from it
    np.testing.assert_allclose(timed.sample(START + 0.5)[0][named], [-0.3, -1.8], atol=1e-12)
    np.testing.assert_allclose(timed.sample(START + 1.0)[0][named], goal, atol=1e-12)


def test_partial_velocities_are_zero_for_the_held_joints():
    name = PANDA.joint_names[6]
    msg = message([name], [(1.0, [1.2], [0.0])])
    timed = trajectory_from_msg(msg, PANDA, START, Setpoint(HOME))
    q, v, _ = timed.sample(START + 1.0)
    assert q[6] == pytest.approx(1.2)
    np.testing.assert_allclose(q[:6], HOME[:6], atol=1e-12)
    np.testing.assert_allclose(v, 0.0, atol=1e-12)


@pytest.mark.parametrize('names, fault', [
    (['joint_x'], 'joint_x'),
    (['panda_joint1', 'panda_joint1'], 'distinct'),
    ([], 'distinct'),
])
def test_unknown_duplicate_or_no_joints_are_refused(names, fault):
    msg = message(names, [(1.0, [0.1] * len(names))])
    with pytest.raises(BadInput, match=fault):
        trajectory_from_msg(msg, PANDA, START, Setpoint(HOME))


def test_a_partial_point_outside_the_limits_is_refused():
    msg = message([PANDA.joint_names[3]], [(1.0, [PANDA.upper[3] + 0.1])])
    with pytest.raises(BadInput, match='outside the joint limits'):
        trajectory_from_msg(msg, PANDA, START, Setpoint(HOME))
