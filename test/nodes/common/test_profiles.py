"""Hardware profiles: what the command and the efforts mean on each arm, and several arms at once.

Unit checks of robot_dynamics.nodes.common.profiles against Pinocchio; the shipped profile files;
then over DDS: a fake FR3 (our Panda URDF under franka_ros2's fr3_ names, config/fr3.yaml) fed still
joint states, the UR profile's estimator fed motor currents, and two simulated arms in two
namespaces (FR3 profile and UR currents, on both engines), closed loop.
"""
import pathlib
import time

import numpy as np
import pinocchio as pin
import pytest
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

import robot_dynamics as rd
from robot_dynamics import bringup
from robot_dynamics.nodes.common.arm import ArmBuilder
from robot_dynamics.nodes.arm_simulator import ArmSimulator
from robot_dynamics.nodes.dynamics_controller import DynamicsController
from robot_dynamics.nodes.common.joint_states import wrench_message
from robot_dynamics.nodes.common.parameters import ConfigError, check
from robot_dynamics.nodes.common.profiles import profile
from robot_dynamics.nodes.wrench_estimator import WrenchEstimator
from random_trees import PinocchioReference
from ros_harness import BEST_EFFORT, ArmView, stamp_of, to_time

CLASSES = {'arm_simulator': ArmSimulator, 'dynamics_controller': DynamicsController,
           'wrench_estimator': WrenchEstimator}
PROFILES = ('fr3', 'panda_franka_ros2', 'ur5e_ros2_driver', 'lbr_iiwa7', 'lbr_iiwa14')
PANDA_XML = pathlib.Path(rd.robot_urdf('panda')).read_text()
FR3_XML = PANDA_XML.replace('panda_', 'fr3_')    # franka_ros2's names on our Panda model
UR_XML = pathlib.Path(rd.robot_urdf('ur5e')).read_text()
K_UR = [13.0, 13.0, 10.0, 7.5, 7.5, 7.5]         # N m/A: a test value, not UR's
Q_STILL = np.array([0.3, -0.5, 0.2, -2.0, 0.4, 1.6, 0.6])


def section(name, node):
    return bringup.config_section(bringup.config_file(f'{name}.yaml'), node)


def values_of(node_class, config, **extra):
    """Every declared parameter of the node: defaults, the config section, ``extra``."""
    values = {p.name: p.default for p in node_class.PARAMS}
    return {**values, **section(config, node_class.NAME), **extra}


# -- the profile itself --------------------------------------------------------------------------

def test_currents_need_positive_torque_constants():
    values = values_of(WrenchEstimator, 'ur5e_ros2_driver', robot_description=UR_XML)
    arm = ArmBuilder()(values, UR_XML)
    with pytest.raises(ConfigError, match='measured_effort current needs torque_constants'):
        profile(values, arm)
    with pytest.raises(ConfigError, match='torque_constants must be > 0'):
        checked_profile({**values, 'torque_constants': [1.0, 0.0, 1.0, 1.0, 1.0, 1.0]}, arm)
    with pytest.raises(ConfigError, match='needs 6'):
        checked_profile({**values, 'torque_constants': [1.0] * 5}, arm)


def checked_profile(values, arm):
    """The profile as the node builds it: the schema's rules first (nodes.schema), then it."""
    check(WrenchEstimator.PARAMS, values, len(arm.joints))
    return profile(values, arm)


def test_command_excludes_the_gravity_the_robot_compensates():
    """τ − g_robot(q): g_robot without payload.*, unless the robot's load setting holds it."""
    joints = [f'fr3_joint{i}' for i in range(1, 8)]
    load = {'payload.mass': 1.5, 'payload.com': [0.0, 0.02, 0.05]}
    values = values_of(DynamicsController, 'fr3', **load)
    arm = ArmBuilder()(values, FR3_XML)
    tau = np.linspace(-3.0, 3.0, 7)
    q = arm.to_model(Q_STILL)
    g_arm = arm.to_model(PinocchioReference(FR3_XML, joints).gravity(Q_STILL))
    np.testing.assert_allclose(profile(values, arm).command(q, tau), tau - g_arm, atol=1e-9)
    loaded = profile({**values, 'hardware_compensates_payload': True}, arm)
    # the payload's gravity torque, -J_cᵀ m g at its centre of mass (Pinocchio's tip Jacobian)
    model = pin.buildModelFromXML(FR3_XML)
    data, index = model.createData(), [model.joints[model.getJointId(j)].idx_v for j in joints]
    full = pin.neutral(model)
    full[index] = Q_STILL
    tip = model.getFrameId('fr3_hand_tcp')
    J = pin.computeFrameJacobian(model, data, full, tip, pin.LOCAL_WORLD_ALIGNED)[:, index]
    c = data.oMf[tip].rotation @ np.array(load['payload.com'])
    J_c = J[:3] - pin.skew(c) @ J[3:]
    g_load = -J_c.T @ (1.5 * np.array([0.0, 0.0, -9.81]))
    np.testing.assert_allclose(loaded.command(q, tau), tau - g_arm - arm.to_model(g_load),
                               atol=1e-9)
    assert np.array_equal(profile({**values, 'hardware_compensates_gravity': False}, arm)
                          .command(q, tau), tau)


@pytest.mark.parametrize('measured', ['torque', 'current', 'torque_minus_gravity'])
def test_reported_effort_and_joint_torque_are_inverse(measured):
    values = values_of(WrenchEstimator, 'ur5e_ros2_driver', robot_description=UR_XML,
                       measured_effort=measured, torque_constants=K_UR)
    arm = ArmBuilder()(values, UR_XML)
    p, q = profile(values, arm), arm.model.neutral_position + 0.2
    tau = np.array([5.0, -40.0, 12.0, 1.0, -2.0, 0.5])
    effort = p.reported_effort(q, tau)
    np.testing.assert_allclose(p.joint_torque(q, effort), tau, rtol=1e-12, atol=1e-12)
    if measured == 'current':
        np.testing.assert_allclose(effort, tau / arm.to_model(np.array(K_UR)))


@pytest.mark.parametrize('name', PROFILES)
def test_shipped_profiles_declare_known_parameters(name):
    """Every parameter a shipped profile sets is declared by its node, with a value per joint."""
    for node, node_class in CLASSES.items():
        values = section(name, node)
        declared = {p.name: p for p in node_class.PARAMS}
        assert values, f'{name}.yaml has no {node} section'
        assert set(values) <= set(declared), (node, set(values) - set(declared))
        for key, value in values.items():
            if declared[key].per_joint:
                assert len(value) == len(values['joints']), (name, node, key)


@pytest.mark.parametrize('name, xml, extra', [
    ('fr3', FR3_XML, {}), ('panda_franka_ros2', PANDA_XML, {}),
    ('ur5e_ros2_driver', UR_XML, {'torque_constants': K_UR})])
def test_shipped_profiles_configure_on_a_matching_urdf(name, xml, extra):
    for node_class in CLASSES.values():
        values = values_of(node_class, name, **extra)
        arm = ArmBuilder()(values, xml)
        assert list(arm.joints) == values['joints']
        profile(values, arm)


# -- a fake FR3 and a UR reporting currents, over DDS ------------------------------------------

def fake_arm_specs():
    """Four nodes in four namespaces, each fed its own joint states by the probe."""
    fr3 = bringup.config_file('fr3.yaml')
    ur = bringup.config_file('ur5e_ros2_driver.yaml')
    common = {'robot_description': FR3_XML, 'state_timeout': 1.0}
    return [
        bringup.NodeSpec('dynamics_controller', 'dynamics_controller', fr3, common, 'fr3'),
        bringup.NodeSpec('dynamics_controller', 'dynamics_controller', fr3,
                         {**common, 'mode': 'computed_torque'}, 'fr3_ct'),
        bringup.NodeSpec('dynamics_controller', 'dynamics_controller', fr3,
                         {**common, 'hardware_compensates_gravity': False}, 'fr3_total'),
        bringup.NodeSpec('wrench_estimator', 'wrench_estimator', ur,
                         {'robot_description': UR_XML, 'torque_constants': K_UR,
                          'state_timeout': 1.0}, 'ur')]


def still_state(joints, q, effort):
    msg = JointState(name=list(joints), position=[float(x) for x in q],
                     velocity=[0.0] * len(joints), effort=[float(x) for x in effort])
    msg.header.stamp = to_time(time.time())
    return msg


def test_fake_fr3_commands_exclude_gravity_and_ur_currents_give_no_phantom_force(ros):
    probe = ros.probe
    fr3_joints = section('fr3', 'dynamics_controller')['joints']
    ur_joints = section('ur5e_ros2_driver', 'wrench_estimator')['joints']
    g_fr3 = PinocchioReference(FR3_XML, fr3_joints).gravity(Q_STILL)
    q_ur = np.array([0.3, -1.2, 1.5, -1.9, -1.57, 0.4])
    current = PinocchioReference(UR_XML, ur_joints).gravity(q_ur) / np.array(K_UR)
    commands = {ns: probe.record(Float64MultiArray, f'/{ns}/effort_controller/commands')
                for ns in ('fr3', 'fr3_ct', 'fr3_total')}
    wrenches = probe.record(WrenchStamped, '/ur/wrench_estimator/wrench')
    publishers = {ns: probe.create_publisher(JointState, f'/{ns}/joint_states', 10)
                  for ns in ('fr3', 'fr3_ct', 'fr3_total', 'ur')}
    try:
        with ros.launch(fake_arm_specs()) as launch:
            launch.ready()
            for publisher in publishers.values():
                probe.wait_for_subscribers(publisher)
            recorders = (*commands.values(), wrenches)
            deadline = time.monotonic() + 60.0
            while min(len(r) for r in recorders) < 50:   # still states at ~200 Hz until
                assert time.monotonic() < deadline, launch.logs()   # each node answered 50
                for ns in ('fr3', 'fr3_ct', 'fr3_total'):
                    publishers[ns].publish(still_state(fr3_joints, Q_STILL, g_fr3))
                publishers['ur'].publish(still_state(ur_joints, q_ur, current))
                time.sleep(0.005)
            sent = {ns: np.array([m.data for m in r.messages]) for ns, r in commands.items()}
            forces = np.array([[w.wrench.force.x, w.wrench.force.y, w.wrench.force.z]
                               for w in wrenches.messages[-50:]])
    finally:
        probe.stop_recording(*commands.values(), wrenches)
        probe.remove_publishers(*publishers.values())
    print(f"fake FR3: max |command| gravity compensation {np.abs(sent['fr3']).max():.2e}, "
          f"computed torque {np.abs(sent['fr3_ct']).max():.2e} N m; without the flag "
          f"{np.round(sent['fr3_total'][-1], 4).tolist()}; UR currents: max |F| "
          f'{np.linalg.norm(forces, axis=1).max():.3f} N')
    assert np.abs(sent['fr3']).max() < 1e-6
    assert np.abs(sent['fr3_ct']).max() < 1e-6
    np.testing.assert_allclose(sent['fr3_total'], np.tile(g_fr3, (len(sent['fr3_total']), 1)),
                               atol=1e-9)
    assert np.abs(g_fr3).max() > 10.0       # so the first two are not zero by accident
    assert np.linalg.norm(forces, axis=1).max() < 0.5


# -- two simulated arms, two namespaces, two profiles, closed loop -----------------------------

class SimulatedArm(ArmView):
    """One arm's bring-up specs and what the probe records of it."""

    def __init__(self, probe, namespace, specs, joints):
        self.namespace, self.specs, self.joints = namespace, specs, joints
        self.states = probe.record(JointState, f'/{namespace}/joint_states', BEST_EFFORT)
        self.commands = probe.record(Float64MultiArray, f'/{namespace}/effort_controller/commands')
        self.wrenches = probe.record(WrenchStamped, f'/{namespace}/wrench_estimator/wrench')

    def recorders(self):
        return self.states, self.commands, self.wrenches

    def positions(self, since):
        return self.joint_arrays(self.joints, since)[1]

    def force(self, since):
        """Estimated forces stamped from ``since`` on (waiting for the probe, which may lag)."""
        self.wrenches.wait_for_stamp(since + 0.05, timeout=20.0)
        w = [m.wrench.force for m in list(self.wrenches.messages) if stamp_of(m) >= since]
        assert w, f'{self.namespace}: no wrench estimate since {since}'
        return np.array([[f.x, f.y, f.z] for f in w])


def two_arms(probe, tmp_path, engines):
    fr3_urdf = tmp_path / 'fr3.urdf'
    fr3_urdf.write_text(FR3_XML)
    k = {'torque_constants': K_UR}
    left = bringup.nodes('simulated_arm', urdf=str(fr3_urdf), config='fr3', namespace='left',
                         engine=engines[0])
    right = bringup.nodes('simulated_arm', robot='ur5e', config='ur5e_ros2_driver',
                          namespace='right', engine=engines[1],
                          overrides={node: k for node in CLASSES})
    return (SimulatedArm(probe, 'left', left, section('fr3', 'arm_simulator')['joints']),
            SimulatedArm(probe, 'right', right,
                         section('ur5e_ros2_driver', 'arm_simulator')['joints']))


@pytest.mark.parametrize('engines', [('internal', 'mujoco'), ('mujoco', 'internal')])
def test_two_arms_each_under_its_profile(ros, tmp_path, engines):
    """FR3 (robot adds g) and UR5e (efforts are currents) float; a push on one moves only it."""
    left, right = two_arms(ros.probe, tmp_path, engines)
    push = wrench_message(section('fr3', 'arm_simulator')['base'], [0, 0, 0, 0, 0, -15.0])
    pusher = ros.probe.create_publisher(WrenchStamped, '/left/arm_simulator/external_wrench', 10)
    try:
        with ros.launch(left.specs + right.specs) as launch:
            launch.ready()
            for arm in (left, right):
                assert arm.commands.wait(1, timeout=60), launch.logs()
                arm.released = arm.now()
                arm.wait(1.0)
            drift = {a.namespace: np.abs(a.positions(a.released) - a.positions(a.released)[0])
                     .max() for a in (left, right)}
            left_command = np.abs(np.array(left.commands.messages[-1].data)).max()
            rest = {a.namespace: np.linalg.norm(a.force(a.now() - 0.3), axis=1).max()
                    for a in (left, right)}
            right_before = right.positions(right.now() - 0.05)[-1]
            ros.probe.wait_for_subscribers(pusher)
            pusher.publish(push)
            left.wait(0.3)
            pushed = left.force(left.now() - 0.05).mean(axis=0)
            right.wait(0.1)
            right_moved = np.abs(right.positions(right.now() - 0.05)[-1] - right_before).max()
            right_force = np.linalg.norm(right.force(right.now() - 0.2), axis=1).max()
    finally:
        ros.probe.stop_recording(*left.recorders(), *right.recorders())
        ros.probe.remove_publishers(pusher)
    print(f'{engines}: drift over 1 s {drift}; FR3 command at rest {left_command:.2e} N m; '
          f'|F| at rest {rest}; push -15 N z estimated {np.round(pushed, 3).tolist()} on the '
          f'left, right moved {right_moved:.1e} rad, |F| {right_force:.3f} N')
    assert max(drift.values()) < 1e-3
    assert left_command < 0.5        # the robot holds its own weight: we send ~0 at rest
    assert max(rest.values()) < 0.5
    assert abs(pushed[2] + 15.0) < 1.0 and np.abs(pushed[:2]).max() < 1.0
    assert right_moved < 1e-4 and right_force < 0.5


def test_prefix_and_namespace_for_a_description_with_prefixed_names(tmp_path):
    """franka_fr3_duo style: left_fr3_joint1..; the prefix reaches every name the config gives."""
    specs = bringup.nodes('simulated_arm', urdf=str(tmp_path / 'unused.urdf'), config='fr3',
                          use_description_topic=True, namespace='left', prefix='left_')
    by_name = {s.name: s for s in specs}
    assert {s.namespace for s in specs} == {'left'}
    assert {s.label for s in specs} == {f'left.{n}' for n in CLASSES}
    for name, spec in by_name.items():
        assert spec.parameters['joints'] == [f'left_fr3_joint{i}' for i in range(1, 8)]
        assert (spec.parameters['base'], spec.parameters['tip']) == \
            ('left_fr3_link0', 'left_fr3_hand_tcp')
    assert by_name['wrench_estimator'].parameters['reference_frame'] == 'left_fr3_link0'
    with pytest.raises(ValueError, match="no parameter file 'fr4'"):
        bringup.nodes('simulated_arm', config='fr4')
