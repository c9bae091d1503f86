"""The lifecycle transitions over DDS (test/lifecycle_checks.py), in a test process of their own.

Late in the whole suite, a node process started by the suite's probe took about 12 s (four of
Fast DDS's 3 s heartbeat periods) to match the probe's endpoints, against 0.1-3 s in a fresh
process: the lifecycle checks' first service calls then went unanswered for their 10 s. They
run in a fresh pytest process, with a probe of their own, as when run alone. Also here, in this
process: a destroyed managed node leaves the ROS graph.
"""
import pathlib
import subprocess
import sys
import time

import pytest
from rclpy.parameter import Parameter

import robot_dynamics as rd
from robot_dynamics.nodes.dynamics_controller import DynamicsController
from robot_dynamics.nodes.wrench_estimator import WrenchEstimator

CHECKS = pathlib.Path(__file__).with_name('lifecycle_checks.py')


@pytest.mark.dds   # its checks start node processes
def test_lifecycle_transitions_over_dds():
    done = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider',
                           '--timeout=300', str(CHECKS)], capture_output=True, text=True,
                          timeout=900, cwd=CHECKS.parents[3])
    print(done.stdout[-3000:])
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert '\n3 passed' in done.stdout


@pytest.mark.parametrize('node_class', [DynamicsController, WrenchEstimator])
def test_a_destroyed_managed_node_leaves_the_graph(ros_in_process, node_class):
    """rclpy's lifecycle state machine holds the node: destroy_node releases it too."""
    probe = ros_in_process.probe
    values = {'robot_description': pathlib.Path(rd.robot_urdf('panda')).read_text()}
    if node_class is DynamicsController:
        values['mode'] = 'gravity_compensation'
    node = node_class(namespace='/destroyed', parameter_overrides=[
        Parameter(k, value=v) for k, v in values.items()])
    assert (node_class.NAME, '/destroyed') in probe.get_node_names_and_namespaces()
    node.destroy_node()
    deadline = time.monotonic() + 5.0
    while (node_class.NAME, '/destroyed') in probe.get_node_names_and_namespaces():
        assert time.monotonic() < deadline, 'the destroyed node is still in the graph'
        time.sleep(0.05)
