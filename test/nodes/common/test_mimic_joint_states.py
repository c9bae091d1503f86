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
    return next(f.locate() for f in files if f.name == 'panda.urdf').read_text()


MODEL_XML = whole_panda()
with warnings.catch_warnings():
    warnings.simplefilter('ignore')
    MODEL = rd.load_urdf(MODEL_XML)


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


@pytest.mark.nojit
@pytest.mark.parametrize('node_class', ['DynamicsController', 'WrenchEstimator'])
def test_a_node_on_a_mimic_model_starts_without_its_compiled_cycle(node_class):
    """The compiled cycles index q by body, so a mimic model would take them past their arrays.

    The node starts (warm-up included, and every mode's, as the background compile runs them)
    without building one; as plain Python (make test-nojit) an index past an array raises.
    """
    from rclpy.parameter import Parameter
    from robot_dynamics.nodes import dynamics_controller, wrench_estimator
    from ros_harness import session
    from robot_dynamics.nodes.wrench_estimator import estimator_cycle
    cls = getattr(dynamics_controller if node_class == 'DynamicsController' else wrench_estimator,
                  node_class)
    session()   # the suite's rclpy context
    values = {'robot_description': MODEL_XML, 'mode': 'gravity_compensation'}
    if cls is wrench_estimator.WrenchEstimator:
        del values['mode']
    overrides = [Parameter(k, value=v) for k, v in values.items()]
    node = cls(namespace='/mimic', parameter_overrides=overrides)
    try:
        assert node.active and node.config is not None
        assert node.cycle is None
        for _, step in node.warm_up_steps(node.config, every_mode=True):
            step()
        if cls is wrench_estimator.WrenchEstimator:
            with pytest.raises(ValueError, match='without mimic joints'):
                estimator_cycle.EstimatorCycle(node.observer, node.reader, node.writers, None,
                                               None, 1e-3, node.arm.order)
    finally:
        node.destroy_node()
