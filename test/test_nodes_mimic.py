"""The node glue on a URDF with mimic joints (example-robot-data's whole Panda, no DDS needed).

Joint states as joint_state_publisher and ros2_control publish them carry the mimic joints too:
they are read by name and the mimic joint's entry is ignored. A mimic joint in the ``joints``
parameter is refused with a message naming its leader.
"""
import importlib.metadata
import warnings

import numpy as np
import pytest
from sensor_msgs.msg import JointState

import robot_dynamics as rd
from robot_dynamics.nodes.common.arm import joint_order
from robot_dynamics.nodes.common.joint_states import JointStateReader
from robot_dynamics.nodes.common.parameters import ConfigError


def whole_panda():
    files = importlib.metadata.distribution('example-robot-data').files
    xml = next(f.locate() for f in files if f.name == 'panda.urdf').read_text()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return rd.load_urdf(xml)


MODEL = whole_panda()


def test_joint_states_carrying_the_mimic_joint_are_read_by_name():
    names = [*MODEL.joint_names, 'panda_finger_joint2'][::-1]   # reordered, mimic included
    q = np.linspace(-0.5, 0.5, MODEL.nv)
    position = dict(zip(MODEL.joint_names, q)) | {'panda_finger_joint2': q[-1]}
    msg = JointState(name=names, position=[position[n] for n in names],
                     velocity=[0.0] * len(names))
    read_q, read_v, _ = JointStateReader(MODEL.joint_names, ('position', 'velocity')).read(msg)
    np.testing.assert_array_equal(read_q, q)
    np.testing.assert_array_equal(read_v, np.zeros(MODEL.nv))


def test_a_mimic_joint_in_the_joints_parameter_is_refused_naming_its_leader():
    joints = list(MODEL.joint_names[:-1]) + ['panda_finger_joint2']
    with pytest.raises(ConfigError, match=r"mimic joints 'panda_finger_joint2' \(it follows "
                                          r"'panda_finger_joint1'\).*list its leader instead"):
        joint_order(MODEL, joints)
    assert joint_order(MODEL, list(MODEL.joint_names)[::-1])[0][0] == 'panda_finger_joint1'
