"""The SROS2 policies (config/security/<node>.policy.xml) list exactly what each node creates.

The simulated_arm bring-up (every node, control_msgs importable: the test interfaces) over DDS;
each node's publishers, subscriptions, services and action servers are read from the ROS graph
and compared with its policy file both ways. An action shows in the graph as its hidden
``_action/`` topics and services; the policy names the action. Names under the node's own name
are written ``~/...`` in the policy, the others relative to the namespace except the few the
nodes make absolute. ``ROBOT_DYNAMICS_WRITE_POLICIES=1`` writes the files from the graph instead
(then review the diff).
"""
import os
import pathlib
import time
import xml.etree.ElementTree as ET

import pytest
from rclpy.action import get_action_server_names_and_types_by_node
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

from robot_dynamics import bringup
from ros_harness import module_finished

POLICIES = pathlib.Path(__file__).resolve().parents[3] / 'config' / 'security'
NODES = ('arm_simulator', 'dynamics_controller', 'wrench_estimator')
ABSOLUTE = {'/diagnostics', '/clock', '/rosout', '/parameter_events'}
KINDS = (('topics', 'publish'), ('topics', 'subscribe'), ('services', 'reply'),
         ('actions', 'execute'))


def policy_name(name, node):
    """A graph name as a policy writes it: ~/ under the node, else namespace-relative."""
    own = f'/{node}/'
    if name.startswith(own):
        return '~/' + name[len(own):]
    return name if name in ABSOLUTE else name.lstrip('/')


def graph_endpoints(probe, node, timeout=20.0):
    """{(kind, access): names} of ``node`` (in the root namespace) from the graph.

    rcl refuses to answer for a node it has not discovered yet: asked again until ``timeout``.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return node_endpoints(probe, node)
        except _rclpy.RCLError:   # NodeNameNonExistentError among them
            assert time.monotonic() < deadline, f'{node} is not in the graph'
            time.sleep(0.2)


def node_endpoints(probe, node):
    """graph_endpoints' answer, if rcl has discovered the node."""
    actions = {policy_name(n, node) for n, _ in
               get_action_server_names_and_types_by_node(probe, node, '/')}

    def named(pairs):
        return {policy_name(n, node) for n, _ in pairs if '/_action/' not in n}
    return {('topics', 'publish'): named(probe.get_publisher_names_and_types_by_node(node, '/')),
            ('topics', 'subscribe'): named(
                probe.get_subscriber_names_and_types_by_node(node, '/')),
            ('services', 'reply'): named(probe.get_service_names_and_types_by_node(node, '/')),
            ('actions', 'execute'): actions}


def policy_endpoints(path):
    """{(kind, access): names} of a policy file's one profile."""
    profile = ET.parse(path).getroot().find('enclaves/enclave/profiles/profile')
    found = {key: set() for key in KINDS}
    for group in profile:
        for access in ('publish', 'subscribe', 'reply', 'execute'):
            if group.get(access) == 'ALLOW':
                found[(group.tag, access)] |= {e.text for e in group}
    return found


def write_policy(path, node, endpoints):
    """The policy file of ``node`` with these endpoints (ROBOT_DYNAMICS_WRITE_POLICIES)."""
    policy = ET.Element('policy', version='0.2.0')
    enclave = ET.SubElement(ET.SubElement(policy, 'enclaves'), 'enclave', path=f'/{node}')
    profile = ET.SubElement(ET.SubElement(enclave, 'profiles'), 'profile', ns='/', node=node)
    for (kind, access), names in endpoints.items():
        if names:
            group = ET.SubElement(profile, kind, {access: 'ALLOW'})
            for name in sorted(names):
                ET.SubElement(group, kind[:-1]).text = name
    ET.indent(policy)
    path.write_text('<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(
        policy, encoding='unicode') + '\n')


@pytest.fixture(scope='module')
def bring_up(ros, control_msgs_prefix):
    launch = ros.launch(bringup.nodes('simulated_arm', robot='panda', mode='computed_torque'))
    launch.ready()
    assert launch.wait_for_log('dynamics_controller', 'active: taking joint states')
    yield ros
    codes = launch.processes.stop(timeout=20.0)
    assert set(codes.values()) == {0}, launch.logs()
    assert module_finished() == []


@pytest.mark.parametrize('node', NODES)
def test_the_policy_lists_exactly_the_node_s_endpoints(bring_up, node):
    probe, path = bring_up.probe, POLICIES / f'{node}.policy.xml'
    deadline = time.monotonic() + 20.0
    while True:   # discovery: every endpoint of the node is seen within seconds
        endpoints = graph_endpoints(probe, node)
        if os.environ.get('ROBOT_DYNAMICS_WRITE_POLICIES'):
            time.sleep(5.0)
            write_policy(path, node, graph_endpoints(probe, node))
        listed = policy_endpoints(path)
        if endpoints == listed or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for key in KINDS:
        assert endpoints[key] == listed[key], (
            f'{node} {key}: created, not in the policy: {sorted(endpoints[key] - listed[key])}; '
            f'in the policy, not created: {sorted(listed[key] - endpoints[key])}')
    assert endpoints[('topics', 'subscribe')] and endpoints[('services', 'reply')]
