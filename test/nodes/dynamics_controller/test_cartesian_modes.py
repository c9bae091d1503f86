"""cartesian_modes's message handling without DDS: targets in model frames, the streamed velocity.

A stand-in host gives TaskSpace its Context (newest q, parameter values) and records what it
would count or warn. References: rd.frame_pose of the model (the
transform), scipy's rotations, and the circle's own velocity for the finite difference.
"""
import types
import time

import numpy as np
import pytest
from builtin_interfaces.msg import Time
from geometry_msgs.msg import PoseStamped, WrenchStamped
from scipy.spatial.transform import Rotation

import robot_dynamics as rd
from robot_dynamics.nodes.common.context import Context
from robot_dynamics.nodes.dynamics_controller import cartesian_modes
from robot_dynamics.nodes.common.parameters import ConfigError, check

Q = np.array([0.0, -0.4, 0.0, -2.1, 0.0, 1.7, 0.8])


class Host:
    """What TaskSpace's Context gives it, and what it records.

    It gives the newest q, the parameter values and a clock a test may set; it records
    warnings and counts; its publishers publish nowhere.
    """

    def __init__(self, model):
        self.model, self.q_last = model, Q
        self.values = {'mode': 'cartesian_impedance', 'nullspace.posture': []}
        self.warnings, self.counts = [], []
        self.limiter = types.SimpleNamespace(enabled=False, s=1.0, observe=lambda q, v: None)

    def monotonic_time(self):
        """The node's time for intervals (ArmNode.monotonic_time): the wall clock here."""
        return time.monotonic()

    def context(self):
        logger = types.SimpleNamespace(info=lambda *a, **k: None, error=lambda *a, **k: None)
        return Context('task_space_test', lambda: self.values, logger, self.warnings.append,
                       None, lambda: self.monotonic_time(), lambda: self.q_last,
                       types.SimpleNamespace(count=self.counts.append),
                       lambda *a, **k: types.SimpleNamespace(publish=lambda msg: None),
                       lambda *a, **k: None, lambda *a, **k: None, lambda timer: None)


def task_space_of(host, limiter=None):
    """A TaskSpace on ``host``'s Context (and its stand-in limiter unless one is given)."""
    space = cartesian_modes.TaskSpace(host.context(), limiter or host.limiter)
    space.host = host
    return space


@pytest.fixture
def task():
    model = rd.load_urdf(rd.robot_urdf('panda'), 'panda_link0', 'panda_hand_tcp')
    values = {p.name: p.default for p in cartesian_modes.PARAMS}
    values['mode'] = 'cartesian_impedance'
    arm = types.SimpleNamespace(model=model, per_joint=None)
    space = task_space_of(Host(model))
    space.apply(cartesian_modes.configure(values, arm))
    space.hold(Q)
    return space


def pose_msg(frame, p, rotvec, stamp=0.0):
    msg = PoseStamped()
    msg.header.frame_id = frame
    sec, nanosec = divmod(int(round(stamp * 1e9)), 10**9)
    msg.header.stamp = Time(sec=sec, nanosec=nanosec)
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = [float(x) for x in p]
    o = msg.pose.orientation
    o.x, o.y, o.z, o.w = Rotation.from_rotvec(rotvec).as_quat().tolist()
    return msg


def test_a_target_in_a_moving_frame_is_transformed_at_the_newest_pose(task):
    offset = np.eye(4)
    offset[:3, :3] = Rotation.from_rotvec([0.1, 0.0, -0.05]).as_matrix()
    offset[:3, 3] = (0.01, 0.02, 0.03)
    task.on_target_pose(pose_msg('panda_link4', offset[:3, 3], [0.1, 0.0, -0.05]))
    expected = rd.frame_pose(task.law.model, Q, 'panda_link4') @ offset
    np.testing.assert_allclose(task.pose_d, expected, atol=1e-12)


def test_bad_targets_are_rejected_and_counted(task):
    held = task.pose_d.copy()
    task.on_target_pose(pose_msg('no_such_link', [0, 0, 0], [0, 0, 0]))
    bad = pose_msg('', [0, 0, 0], [0, 0, 0])
    bad.pose.orientation.w = 0.0
    task.on_target_pose(bad)
    wrench = WrenchStamped()
    wrench.wrench.force.x = float('nan')
    task.on_target_wrench(wrench)
    assert len(task.host.counts) == 3
    assert 'unknown frame_id' in task.host.warnings[0]
    assert 'non-zero quaternion' in task.host.warnings[1]
    assert 'non-finite' in task.host.warnings[2]
    np.testing.assert_array_equal(task.pose_d, held)


def test_a_quaternion_of_huge_components_is_its_rotation_not_a_zero_matrix(task):
    """|q| of (1e300, 0, 0, 1e300) overflows; the target is still its quarter turn about x."""
    msg = pose_msg('', [0.3, 0.1, 0.5], [0, 0, 0])
    o = msg.pose.orientation
    o.x, o.y, o.z, o.w = 1e300, 0.0, 0.0, 1e300
    task.on_target_pose(msg)
    c = np.cos(np.pi / 2)
    np.testing.assert_allclose(task.pose_d[:3, :3], [[1, 0, 0], [0, c, -1], [0, 1, c]],
                               atol=1e-15)
    assert not task.host.counts


def test_a_wrench_in_tip_axes_is_rotated_into_base_axes(task):
    msg = WrenchStamped()
    msg.header.frame_id = 'panda_hand_tcp'
    msg.wrench.force.z, msg.wrench.torque.x = 5.0, 0.5
    task.on_target_wrench(msg)
    R = rd.frame_pose(task.law.model, Q, 'panda_hand_tcp')[:3, :3]
    np.testing.assert_allclose(task.wrench_d, np.r_[R @ [0.5, 0, 0], R @ [0, 0, 5.0]])


def test_a_stream_of_stamped_targets_sets_the_target_velocity(task):
    """Points of a circle 50 ms apart: ẋ_d is the circle's velocity to O(dt²); then it lapses."""
    centre, radius, omega, dt = np.array([0.4, 0.0, 0.4]), 0.05, np.pi, 0.05
    for k in range(3):
        t = 100.0 + k * dt
        p = centre + radius * np.array([np.cos(omega * t), np.sin(omega * t), 0.0])
        task.on_target_pose(pose_msg('', p, [0.0, 0.0, omega * t], stamp=t))
    t_mid = 100.0 + 1.5 * dt
    velocity = radius * omega * np.array([-np.sin(omega * t_mid), np.cos(omega * t_mid), 0.0])
    twist = task.target_twist()
    np.testing.assert_allclose(twist[3:], velocity, atol=1e-3)
    np.testing.assert_allclose(twist[:3], [0.0, 0.0, omega], atol=1e-9)
    time.sleep(2.5 * dt)
    assert task.target_twist() is None
    task.on_target_pose(pose_msg('', centre, [0, 0, 0], stamp=101.0))   # 0.9 s later: no stream
    assert task.target_twist() is None
    task.on_target_pose(pose_msg('', centre, [0, 0, 0]))                # unstamped
    assert task.target_twist() is None


@pytest.mark.parametrize('name, value, reason', [
    ('cartesian.stiffness', [1.0] * 5, 'needs 6'),
    ('operational_space.stiffness', [1.0] * 5 + [-1.0], '>= 0'),
    ('cartesian.max_error', [0.05], 'needs 2'),
    ('cartesian.max_velocity', [float('nan'), 1.0], 'needs 2'),
    ('cartesian.damping_ratio', 0.0, 'damping_ratio > 0')])
def test_configure_rejects_with_a_reason(name, value, reason):
    model = rd.load_urdf(rd.robot_urdf('ur5e'), 'base_link', 'tool0')
    values = {p.name: p.default for p in cartesian_modes.PARAMS}
    values.update({'mode': 'operational_space', 'cartesian.max_velocity': [0.5, 1.0], name: value})
    with pytest.raises(ConfigError, match=reason):   # as the node: the schema's rules first
        check(cartesian_modes.PARAMS, values)
        cartesian_modes.configure(values, types.SimpleNamespace(model=model))
