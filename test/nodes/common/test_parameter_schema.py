"""The nodes' parameter schemas (robot_dynamics/nodes/<node>/parameters.yaml) and their rules.

Completeness is checked both ways on the nodes themselves (built in this process, no model, so
nothing is compiled): what a node declares is what its schema lists, with the schema's
description. The schema files are read here with plain PyYAML, not with the loader under test.
Each rule is tried on values that keep it and values that break it, with the refusal written
out as a user should read it.
"""
import ast
import math
import pathlib

import pytest
import yaml
from rclpy.parameter import Parameter

from robot_dynamics import bringup
from robot_dynamics.core.collision import Reaction
from robot_dynamics.nodes.common import schema
from robot_dynamics.nodes.dynamics_controller import cartesian_modes, command_cycle, configuration
from robot_dynamics.nodes.arm_simulator import ArmSimulator
from robot_dynamics.nodes.dynamics_controller.controller import (COMPUTED_TORQUE,
                                                                 GRAVITY_COMPENSATION,
                                                                 DynamicsController)
from robot_dynamics.nodes.common.schema import ConfigError, Param, check, violation
from robot_dynamics.nodes.wrench_estimator import WrenchEstimator
from robot_dynamics.simulation import ENGINES
from robot_dynamics.tools.record_joint_states import JointStateRecorder

FOLDERS = pathlib.Path(__file__).resolve().parents[3] / 'robot_dynamics' / 'nodes'
NODES = {'dynamics_controller': DynamicsController, 'wrench_estimator': WrenchEstimator,
         'arm_simulator': ArmSimulator, 'record_joint_states': JointStateRecorder}
RCLPY_OWN = {'use_sim_time', 'start_type_description_service'}   # rclpy declares these
NODE_SPECIFIC = {'fast_path'}   # the same name, a different path in each node
TYPES = {'bool': bool, 'int': int, 'double': float, 'string': str, 'double_array': list,
         'int_array': list, 'string_array': list}


def flattened(mapping, prefix=''):
    """{dotted name: entry} of a schema's (nested) mapping."""
    found = {}
    for key, value in mapping.items():
        if 'type' in value:
            found[prefix + key] = value
        else:
            found.update(flattened(value, prefix + key + '.'))
    return found


def schema_file(node):
    """A node's schema file, or a tool's node's (beside the tool)."""
    path = FOLDERS / node / 'parameters.yaml'
    return path if path.exists() else FOLDERS.parent / 'tools' / f'{node}.parameters.yaml'


def own_entries(node):
    """{dotted name: entry} the node's schema file gives itself, read with plain PyYAML."""
    tree = yaml.safe_load(schema_file(node).read_text())
    assert set(tree) <= {node, 'include'}
    return flattened(tree[node])


def entries(node):
    """{dotted name: entry} of a node's schema: its included groups', then its own."""
    tree = yaml.safe_load(schema_file(node).read_text())
    shared = yaml.safe_load((FOLDERS / 'common' / 'parameters.yaml').read_text())
    found = {}
    for group in tree.get('include', []):
        found.update(flattened(shared[group]))
    return {**found, **own_entries(node)}


@pytest.mark.parametrize('node', sorted(NODES))
def test_a_node_declares_exactly_its_schema(ros_in_process, node):
    built = NODES[node]()
    try:
        declared = set(built.list_parameters([], 0).names) - RCLPY_OWN
        listed = entries(node)
        assert declared == set(listed), (f'not in the schema: {sorted(declared - set(listed))}; '
                                         f'not declared: {sorted(set(listed) - declared)}')
        for name, entry in listed.items():
            descriptor = built.describe_parameter(name)
            assert descriptor.description == entry['description'], name
            assert descriptor.read_only == entry.get('read_only', False), name
    finally:
        built.destroy_node()


@pytest.mark.parametrize('node', sorted(NODES))
def test_every_entry_is_complete_and_its_default_keeps_its_rules(node):
    for name, entry in entries(node).items():
        assert set(entry) <= {'type', 'default_value', 'description', 'read_only',
                              'validation'}, name
        assert entry['description'].strip(), f'{name} has no description'
        default = entry['default_value']
        assert isinstance(default, TYPES[entry['type']]), name
        if entry['type'] == 'double_array':
            assert all(isinstance(x, float) for x in default), name
    params = schema.load(node)
    check(params, {p.name: p.default for p in params})


def test_what_several_nodes_declare_is_written_once():
    """A name in two nodes' schemas comes from a group both include, not from two copies."""
    nodes = sorted(NODES)
    for k, a in enumerate(nodes):
        for b in nodes[k + 1:]:
            copies = (set(own_entries(a)) & set(own_entries(b))) - NODE_SPECIFIC
            assert not copies, f'{sorted(copies)} written in both {a} and {b}: a shared group'


def test_the_groups_come_first_in_the_order_included_and_each_is_used():
    shared = yaml.safe_load((FOLDERS / 'common' / 'parameters.yaml').read_text())
    used = set()
    for node in NODES:
        included = yaml.safe_load(schema_file(node).read_text())['include']
        used.update(included)
        expected = [n for g in included for n in flattened(shared[g])] + list(own_entries(node))
        assert [p.name for p in schema.load(node)] == expected
    assert used == set(shared)


def test_the_schemas_choices_are_the_code_s():
    def choices(node, name):
        return entries(node)[name]['validation']['one_of<>'][0]

    assert choices('arm_simulator', 'engine') == list(ENGINES)
    assert choices('dynamics_controller', 'mode') == [GRAVITY_COMPENSATION, COMPUTED_TORQUE,
                                                      *cartesian_modes.MODES]
    assert choices('dynamics_controller', 'collision.reaction') == [r.value for r in Reaction]
    modes = choices('dynamics_controller', 'mode')
    assert list(configuration.MODES) == list(bringup.MODES) == modes   # read from the schema
    assert sorted(command_cycle.LAWS) == sorted(modes)   # every mode has its law in the cycle


def test_a_refused_change_changes_nothing(ros_in_process):
    """All or nothing: a set of values with one bad one leaves every value as it was."""
    node = DynamicsController()
    try:
        result = node.set_parameters_atomically([Parameter('state_timeout', value=0.5),
                                                 Parameter('kp', value=[400.0, -1.0])])
        assert not result.successful
        assert result.reason == 'kp must be >= 0, got [400.0, -1.0]'
        assert node.get_parameter('state_timeout').value == 0.1
        assert node.values['state_timeout'] == 0.1
        result = node.set_parameters_atomically([Parameter('mode', value='impedance')])
        assert result.reason == ("mode must be one of gravity_compensation, computed_torque, "
                                 "cartesian_impedance, operational_space; got 'impedance'")
        assert node.set_parameters_atomically([Parameter('state_timeout', value=0.5)]).successful
        assert node.values['state_timeout'] == 0.5
    finally:
        node.destroy_node()


def param(kind, rule, *args):
    return Param('x', [] if kind.endswith('[]') else 0.0, kind, 'a parameter',
                 rules=((rule, args),))


NAN = math.nan
RULES = [   # (kind, rule, args, values kept, [(value broken, the refusal)])
    ('double', 'gt<>', (0.0,), [1e-9, 5.0], [(0.0, 'x must be > 0, got 0.0'),
                                             (NAN, 'x must be > 0, got nan')]),
    ('double', 'gt_eq<>', (0.0,), [0.0, 3.0], [(-0.5, 'x must be >= 0, got -0.5')]),
    ('double', 'lt<>', (1.0,), [0.5], [(1.0, 'x must be < 1, got 1.0')]),
    ('double', 'lt_eq<>', (1.0,), [1.0], [(1.5, 'x must be <= 1, got 1.5')]),
    ('double', 'bounds<>', (0.0, 0.99), [0.0, 0.99],
     [(1.0, 'x must be in [0, 0.99], got 1.0'), (NAN, 'x must be in [0, 0.99], got nan')]),
    ('integer', 'bounds<>', (1, 1000), [1, 1000], [(0, 'x must be in [1, 1000], got 0')]),
    ('double[]', 'element_gt<>', (0.0,), [[], [0.1, 2.0]],
     [([1.0, 0.0], 'x must be > 0, got [1.0, 0.0]'), ([NAN], 'x must be > 0, got [nan]')]),
    ('double[]', 'lower_element_bounds<>', (0.0,), [[], [0.0, 1.0]],
     [([-1.0, 1.0], 'x must be >= 0, got [-1.0, 1.0]')]),
    ('double[]', 'upper_element_bounds<>', (2.0,), [[2.0, -7.0]],
     [([2.5], 'x must be <= 2, got [2.5]')]),
    ('double[]', 'element_bounds<>', (-1.0, 1.0), [[-1.0, 1.0]],
     [([0.0, 1.5], 'x must be in [-1, 1], got [0.0, 1.5]')]),
    ('double[]', 'fixed_size<>', (3,), [[0.0, 0.0, -9.81]],
     [([0.0, -9.81], 'x needs 3 values, got 2'), ([], 'x needs 3 values, got 0')]),
    ('string[]', 'not_empty<>', (), [['a']], [([], 'x must not be empty, got []')]),
    ('string', 'one_of<>', (('internal', 'mujoco'),), ['internal', 'mujoco'],
     [('mujocoo', "x must be one of internal, mujoco; got 'mujocoo'")]),
]


@pytest.mark.parametrize('kind, rule, args, good, bad', RULES, ids=[r[1] for r in RULES])
def test_each_rule_keeps_good_values_and_names_what_breaks_it(kind, rule, args, good, bad):
    p = param(kind, rule, *args)
    for value in good:
        assert violation(p, value) is None, value
        check([p], {'x': value})
    for value, refusal in bad:
        assert violation(p, value) == refusal
        with pytest.raises(ConfigError) as error:
            check([p], {'x': value})
        assert str(error.value) == refusal


def test_size_matches_joints_needs_the_number_of_joints():
    strict, or_empty = param('double[]', 'size_matches_joints<>'), \
        param('double[]', 'size_matches_joints<>', 0)
    or_one = param('double[]', 'size_matches_joints<>', 1)
    assert violation(strict, [1.0], joints=None) is None   # before the model: not checked
    assert violation(strict, [1.0, 2.0, 3.0], joints=3) is None
    assert violation(strict, [], joints=3) == 'x needs 3 values, one per joint, got 0'
    assert violation(or_empty, [], joints=3) is None
    assert violation(or_empty, [1.0, 2.0], joints=3) == (
        'x needs 3 values, one per joint (or 0), got 2')
    assert violation(or_one, [0.05], joints=7) is None
    assert violation(or_one, [], joints=7) == 'x needs 7 values, one per joint (or 1), got 0'
    assert or_empty.per_joint and strict.per_joint and not or_one.per_joint


def test_check_refuses_on_the_first_broken_rule_and_skips_absent_values():
    p = Param('x', [], 'double[]', 'a parameter', rules=(('size_matches_joints<>', (0,)),
                                                         ('element_gt<>', (0.0,))))
    with pytest.raises(ConfigError, match=r'^x needs 2 values, one per joint \(or 0\), got 3$'):
        check([p], {'x': [-1.0, 1.0, 1.0]}, joints=2)
    with pytest.raises(ConfigError, match=r'^x must be > 0, got \[-1.0, 1.0\]$'):
        check([p], {'x': [-1.0, 1.0]}, joints=2)
    check([p], {})


@pytest.mark.parametrize('text, reason', [
    ('n:\n  a: {type: double, default_value: 1.0, description: d, unit: m}\n', 'unknown keys'),
    ('n:\n  a: {type: float, default_value: 1.0, description: d}\n', "type 'float'"),
    ('n:\n  a: {type: double, default_value: 1.0, description: d,\n'
     '      validation: {positive<>: []}}\n', 'unknown rules'),
    ('n:\n  a: {type: double, default_value: 1.0, description: d}\n'
     '  a: {type: double, default_value: 2.0, description: d}\n', 'given twice'),
    ('m:\n  a: {type: double, default_value: 1.0, description: d}\n', 'top-level key'),
])
def test_the_loader_refuses_a_schema_it_does_not_understand(tmp_path, monkeypatch, text, reason):
    (tmp_path / 'n').mkdir()
    (tmp_path / 'n' / 'parameters.yaml').write_text(text)
    monkeypatch.setattr(schema, 'NODES_DIR', tmp_path)
    with pytest.raises(ValueError, match=reason):
        schema.load.__wrapped__('n')


@pytest.mark.parametrize('text, reason', [
    ('include: [model, nowhere]\nn:\n  b: {type: bool, default_value: true, description: d}\n',
     r"includes \['nowhere'\], not a group of common/parameters.yaml \(model\)"),
    ('include: [model]\nn:\n  a: {type: double, default_value: 2.0, description: d}\n',
     r"\['a'\] given twice"),
])
def test_the_loader_refuses_an_unknown_group_and_a_name_twice(tmp_path, monkeypatch, text, reason):
    for folder in ('n', 'common'):
        (tmp_path / folder).mkdir()
    (tmp_path / 'common' / 'parameters.yaml').write_text(
        'model:\n  a: {type: double, default_value: 1.0, description: d}\n')
    (tmp_path / 'n' / 'parameters.yaml').write_text(text)
    monkeypatch.setattr(schema, 'NODES_DIR', tmp_path)
    with pytest.raises(ValueError, match=reason):
        schema.load.__wrapped__('n')


def test_the_loader_reads_nesting_rules_and_per_joint(tmp_path, monkeypatch):
    (tmp_path / 'n').mkdir()
    (tmp_path / 'n' / 'parameters.yaml').write_text(
        'n:\n'
        '  payload:\n'
        '    mass: {type: double, default_value: 0.0, description: kg,\n'
        '           validation: {bounds<>: [0.0, 1000.0]}}\n'
        '  kp: {type: double_array, default_value: [], description: 1/s^2, read_only: true,\n'
        '       validation: {size_matches_joints<>: [0], lower_element_bounds<>: [0.0]}}\n'
        '  mode: {type: string, default_value: a, description: law,\n'
        '         validation: {one_of<>: [[a, b]]}}\n')
    monkeypatch.setattr(schema, 'NODES_DIR', tmp_path)
    mass, kp, mode = schema.load.__wrapped__('n')
    assert (mass.name, mass.kind, mass.range) == ('payload.mass', 'double', (0.0, 1000.0))
    assert (kp.kind, kp.read_only, kp.per_joint) == ('double[]', True, True)
    assert kp.rules == (('size_matches_joints<>', (0,)), ('lower_element_bounds<>', (0.0,)))
    assert mode.choices == ('a', 'b')
    assert kp.descriptor().additional_constraints == ('one value per joint (or 0 values); '
                                                      'must be >= 0')


LOOKUPS = ('per_joint', 'vector', 'stiffness', 'limits')   # f(values, 'name', ...) helpers


def parameter_names_read(path):
    """(line, name) of each parameter a module reads by a literal name from its values.

    ``values['name']``, ``self.values['name']``, ``values.get('name')`` and the helpers that
    take (values, 'name'); a name built at run time is not seen.
    """
    def is_values(node):
        return ((isinstance(node, ast.Name) and node.id == 'values')
                or (isinstance(node, ast.Attribute) and node.attr == 'values'))

    def literal(node):
        return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) \
            else None

    for node in ast.walk(ast.parse(path.read_text())):
        name = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and \
                is_values(node.value):
            name = literal(node.slice)
        elif isinstance(node, ast.Call) and node.args:
            function = node.func
            called = function.attr if isinstance(function, ast.Attribute) else \
                getattr(function, 'id', None)
            if called == 'get' and isinstance(function, ast.Attribute) and \
                    is_values(function.value):
                name = literal(node.args[0])
            elif called in LOOKUPS and len(node.args) > 1 and is_values(node.args[0]):
                name = literal(node.args[1])
        if name is not None:
            yield node.lineno, name


def readers():
    """(module path, the names it may read): a node's folder its schema, common every node's."""
    schemas = {node: {p.name for p in schema.load(node)} for node in NODES}
    for path in sorted(FOLDERS.glob('*/*.py')):
        folder = path.parent.name
        yield path, (set().union(*schemas.values()) if folder == 'common'
                     else schemas[folder])
    yield FOLDERS.parent / 'tools' / 'record_joint_states.py', schemas['record_joint_states']


def test_every_parameter_the_code_reads_by_name_is_in_its_schema():
    """The string-keyed look-ups are checked against the schemas (a typo is a KeyError late)."""
    undeclared, read = [], 0
    for path, names in readers():
        for line, name in parameter_names_read(path):
            read += 1
            if name not in names:
                undeclared.append(f'{path.relative_to(FOLDERS.parent)}:{line}: {name}')
    assert not undeclared, 'read but not in the schema: ' + ', '.join(undeclared)
    assert read > 150   # the walk finds the look-ups (143 values[...] alone)
