"""'ready' means ready: no kernel compiles at the first state of a controller, estimator, simulator.

On both paths, and for the controller in every mode and also across a switch of mode (a new
reader and compiled cycle: an unmapped reader once had a type of its own, which compiled the
cycle again, 1.5 s into a running computed-torque loop on a fresh install), joint modes into
task-space ones and back.

Without the nodes' warm_up, a fresh install's first state waited seconds for numba (computed
torque 3 s, the observer 3.6 s, measured cold on this machine). Each check runs in a fresh
interpreter, so kernels compiled by other tests in this process cannot hide a missing warm-up;
a kernel loaded from numba's disk cache counts as compiled, as it does for the node.
"""
import subprocess
import sys
import textwrap

import pytest
from ros_harness import warm_numba_cache

pytestmark = pytest.mark.dds   # starts node processes (robot_dynamics.run or a script)

COMPILED = textwrap.dedent('''
    import sys, time
    import numpy as np
    import rclpy, yaml
    from numba.core.dispatcher import Dispatcher
    from rclpy.parameter import Parameter
    from rclpy.serialization import serialize_message
    import robot_dynamics as rd
    from robot_dynamics import bringup

    def compiled():
        return {(module.__name__, name, str(signature))
                for module in list(sys.modules.values())
                if getattr(module, '__name__', '').startswith('robot_dynamics')
                for name, kernel in list(vars(module).items()) if isinstance(kernel, Dispatcher)
                for signature in kernel.signatures}
''')
SCRIPT = COMPILED + textwrap.dedent('''
    from sensor_msgs.msg import JointState
    from robot_dynamics.nodes.dynamics_controller import DynamicsController
    from robot_dynamics.nodes.wrench_estimator import WrenchEstimator

    node_class = {'dynamics_controller': DynamicsController,
                  'wrench_estimator': WrenchEstimator}[sys.argv[1]]
    values = bringup.load_config(bringup.config_file('panda.yaml'))[sys.argv[1]]
    name, value = sys.argv[2].split('=')
    values = {**values['ros__parameters'], 'robot_description':
              open(rd.robot_urdf('panda')).read(), name: yaml.safe_load(value)}
    rclpy.init()
    node = node_class(namespace='/warm_up', parameter_overrides=[
        Parameter(k, value=v) for k, v in values.items()])
    before = compiled()
    assert before, 'no kernel compiled at all: is numba disabled?'
    model = node.arm.model
    q, start = np.array([0.1, -0.5, 0.2, -2.0, 0.1, 1.6, 0.7]), int(time.time())

    def states(ks):   # on the fast path (the default: bytes, compiled cycles) and the plain one
        for k in ks:
            msg = JointState(name=list(node.arm.joints), position=list(q + 1e-4 * k),
                             velocity=[0.01] * 7, effort=list(rd.gravity(model, q)))
            msg.header.stamp.sec, msg.header.stamp.nanosec = start, 1000000 * k
            node.on_serialized_joint_state(serialize_message(msg))
        node.on_joint_state(msg)
    states(range(3))
    new = sorted(compiled() - before)
    assert not new, f'compiled at the first joint states: {new}'
    if sys.argv[1] == 'dynamics_controller':   # another mode: a new reader, a new cycle
        other = {'gravity_compensation': 'computed_torque',
                 'computed_torque': 'cartesian_impedance',
                 'cartesian_impedance': 'operational_space'}.get(values['mode'],
                                                                 'gravity_compensation')
        assert node.set_parameters([Parameter('mode', value=other)])[0].successful
        before = compiled()   # the switch warmed the new mode up: loaded from the full cache
        states(range(3, 6))
    node.diagnostics.publish()
    new = sorted(compiled() - before)
    assert not new, f'compiled at the first joint states: {new}'
    print(f'{len(before)} kernel signatures compiled before ready, none after')
''')


@pytest.mark.parametrize('node, setting', [
    ('dynamics_controller', 'mode=gravity_compensation'),
    ('dynamics_controller', 'mode=computed_torque'),
    ('dynamics_controller', 'mode=cartesian_impedance'),
    ('dynamics_controller', 'mode=operational_space'),
    ('wrench_estimator', 'damping=0.001'),
])
def test_first_joint_states_compile_nothing(node, setting):
    warm_numba_cache()   # a switch of mode waits for a complete cache
    result = subprocess.run([sys.executable, '-c', SCRIPT, node, setting], capture_output=True,
                            text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    print(result.stdout)


SIMULATOR_SCRIPT = COMPILED + textwrap.dedent('''
    from geometry_msgs.msg import WrenchStamped
    from std_msgs.msg import Float64MultiArray
    from robot_dynamics.nodes.arm_simulator import ArmSimulator

    values = bringup.load_config(bringup.config_file('panda.yaml'))['arm_simulator']
    values = {**values['ros__parameters'], 'robot_description':
              open(rd.robot_urdf('panda')).read(), 'joint_damping': [1.0] * 7,
              **yaml.safe_load(sys.argv[1])}
    rclpy.init()
    node = ArmSimulator(namespace='/warm_up', parameter_overrides=[
        Parameter(k, value=v) for k, v in values.items()])
    node.publisher.publish = lambda _: None
    before = compiled()
    assert before, 'no kernel compiled at all: is numba disabled?'

    def steps(k):
        for _ in range(k):
            node.step()
            node.publish(time.time())

    def wrench(frame, force):
        msg = WrenchStamped()
        msg.header.frame_id, msg.wrench.force.z = frame, force
        node.on_wrench(msg)

    steps(2)                        # braked
    wrench('panda_hand_tcp', 5.0)   # in tip axes
    steps(2)
    command = Float64MultiArray(data=[0.0, 0.0, 0.0, -5.0, 0.0, 1.0, 0.0])
    node.on_serialized_command(serialize_message(command))   # brakes released
    node.on_command(command)
    steps(2)
    wrench('panda_link0', -5.0)     # in base axes
    steps(2)
    wrench('panda_link0', 0.0)      # none
    steps(2)
    new = sorted(compiled() - before)
    assert not new, f'compiled at the first steps: {new}'
    print(f'{len(before)} kernel signatures compiled before ready, none after')
''')


@pytest.mark.parametrize('setting', ['{}', '{fast_path: false}', '{plant.profile: realistic}',
                                     '{hardware_compensates_gravity: true}'])
def test_first_simulator_steps_compile_nothing(setting):
    result = subprocess.run([sys.executable, '-c', SIMULATOR_SCRIPT, setting],
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    print(result.stdout)
