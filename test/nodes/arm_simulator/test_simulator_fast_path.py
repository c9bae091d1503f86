"""arm_simulator's fast path against its plain path: the same states, to the bit.

Two in-process simulators with the same parameters: one on the fast path (commands read from
their CDR bytes, the internal engine's compiled ``sensed_step``, states pre-serialized), the
other on the plain path (messages; the step through the hardware profile and ``Engine.step``).
They get the same commands and external wrenches, step for step; every state they publish must
be the same to the bit. Plants: joint damping, the arm's own joint terms and a payload, the
realistic and Gaz profiles (stiction or sigmoid friction, command delay, seeded sensor noise and
quantisation), and a gravity-compensating arm (which both run through the profile). Commands
vary, saturate, and some are bad; the wrench acts in base and in tip axes, then not at all; the
damping changes on the way (the engine is rebuilt).
"""
import copy

import numpy as np
import pytest
from geometry_msgs.msg import WrenchStamped
from rclpy.parameter import Parameter
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

import robot_dynamics as rd
from robot_dynamics import bringup
from robot_dynamics.nodes.arm_simulator import ArmSimulator

PARAMS = bringup.load_config(bringup.config_file('panda.yaml'))['arm_simulator'][
    'ros__parameters']
URDF = open(rd.robot_urdf('panda')).read()
CONFIGS = {
    'damping': {'joint_damping': [2.0] * 7},
    'joint_terms_and_payload': {
        'joint_damping': [0.5] * 7, 'armature': [0.1] * 7, 'friction.viscous': [0.3] * 7,
        'friction.coulomb': [0.4] * 7, 'friction.stiction': [0.6] * 7,
        'friction.coulomb_velocity': 0.05, 'payload.mass': 1.5,
        'payload.com': [0.0, 0.01, 0.08], 'payload.inertia': [2e-3, 0.0, 0.0, 2e-3, 0.0, 1e-3]},
    'realistic': {'plant.profile': 'realistic', 'plant.seed': 3},
    'panda_gaz2019': {'plant.profile': 'panda_gaz2019'},
    'compensating_arm': {'hardware_compensates_gravity': True,
                         'measured_effort': 'torque_minus_gravity'},
}


class Twin:
    """Two simulators, plain and fast, driven alike; their states recorded."""

    def __init__(self, overrides):
        values = {**PARAMS, 'robot_description': URDF, **overrides}
        self.nodes = [ArmSimulator(namespace=f'/{path}', parameter_overrides=[
            Parameter(k, value=v) for k, v in {**values, 'fast_path': fast}.items()])
            for path, fast in (('plain', False), ('fast', True))]
        self.states = ([], [])
        for node, states in zip(self.nodes, self.states):
            node.publisher.publish = lambda m, states=states: states.append(
                m if isinstance(m, bytes) else serialize_message(m))
        self.k = 0

    def command(self, tau):
        msg = Float64MultiArray(data=list(tau))
        self.nodes[0].on_command(copy.deepcopy(msg))
        self.nodes[1].on_serialized_command(serialize_message(msg))

    def wrench(self, wrench, frame):
        msg = WrenchStamped()
        msg.header.frame_id = frame
        w = msg.wrench
        (w.torque.x, w.torque.y, w.torque.z), (w.force.x, w.force.y, w.force.z) = \
            wrench[:3], wrench[3:]
        for node in self.nodes:
            node.on_wrench(copy.deepcopy(msg))

    def parameter(self, name, value):
        for node in self.nodes:
            assert node.set_parameters([Parameter(name, value=value)])[0].successful

    def step(self):
        self.k += 1
        for node in self.nodes:
            node.step()
            node.publish(1000.0 + self.k * 1e-3)
        plain, fast = (deserialize_message(states[-1], JointState) for states in self.states)
        assert plain.header.stamp == fast.header.stamp and plain.name == fast.name
        for field in ('position', 'velocity', 'effort'):
            a, b = (np.array(getattr(m, field)).view(np.uint64) for m in (plain, fast))
            assert np.array_equal(a, b), (self.k, field, getattr(plain, field),
                                          getattr(fast, field))
        assert self.nodes[0].braked == self.nodes[1].braked

    def close(self):
        for node in self.nodes:
            node.destroy_node()


@pytest.mark.parametrize('config', CONFIGS)
def test_the_fast_path_publishes_the_plain_paths_states(ros_in_process, config):
    twin = Twin(CONFIGS[config])
    try:
        plain, fast = twin.nodes
        assert fast.sensed == (config != 'compensating_arm') and not plain.sensed
        model = plain.arm.model
        rng = np.random.default_rng(4)
        for _ in range(5):   # braked: the holding torque
            twin.step()
        for k in range(400):
            q = plain.arm.to_model(plain.engine.q)
            tau = plain.arm.to_joints(plain.config.profile.command(q, rd.gravity(model, q)))
            tau = tau + 6.0 * np.sin(6e-3 * k + np.arange(7)) + rng.normal(0.0, 0.3, 7)
            if k % 97 == 5:
                tau[k % 7] = 500.0   # beyond the effort limit: clamped
            if k % 101 == 7:
                tau[1] = np.nan      # ignored: the previous command holds
            twin.command(tau)
            if k % 100 == 0:
                frame = (model.base, model.tip, model.base, model.base)[k // 100]
                wrench = rng.normal(0.0, 4.0, 6) if k < 300 else np.zeros(6)
                twin.wrench(wrench, frame)
            if k == 250:
                twin.parameter('joint_damping', [1.0] * 7)
            twin.step()
        assert not plain.braked and np.abs(plain.engine.v).max() > 0.05   # it moved
    finally:
        twin.close()
