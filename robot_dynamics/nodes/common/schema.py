"""Parameter schemas as data: ``<node>/parameters.yaml`` -> ``Param`` tuples, and their rules.

A node's schema is one YAML file in the format of ros2_control's generate_parameter_library:
the node's name as the top-level key, then each parameter as a mapping with ``type`` (bool, int,
double, string, double_array, int_array, string_array), ``default_value``, ``description``, optional
``read_only`` and ``validation`` (rule name -> list of arguments); a dotted name
(``payload.mass``) is a nested mapping. The rules are generate_parameter_library's ``gt<>``,
``gt_eq<>``, ``lt<>``, ``lt_eq<>``, ``bounds<>`` (scalars), ``element_bounds<>``,
``lower_element_bounds<>``, ``upper_element_bounds<>``, ``fixed_size<>``, ``not_empty<>``,
``one_of<>``, and two of this package's:

- ``element_gt<>: [x]``: every element of an array > x (the library's element bounds are
  inclusive; a gain or a limit must be strictly positive);
- ``size_matches_joints<>: [sizes...]``: one value per joint, in the order of ``joints``, or one
  of the listed sizes (``[0]``: or empty, the parameter's documented fallback). It needs the
  model, so ``check`` applies it only when given the number of joints.

What several nodes declare is written once, in ``common/parameters.yaml``: named groups of
entries (the model, the joint-state input, the real-time settings, ...), which a node's schema
lists in a top-level ``include``; they come first, in that order, then the node's own entries
(as ros2_controllers' steering_controllers_library shares its parameters with the controllers
built on it). A group is not a namespace; a name given twice, in two groups or in a group and
the node, is refused.

``check`` raises ConfigError naming the parameter, the rule and the value. Rules that relate two
parameters are no schema's business: the node modules check those, each in a named function.
"""
import dataclasses
import functools
import pathlib

import numpy as np
import yaml
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType

NODES_DIR = pathlib.Path(__file__).resolve().parent.parent   # <node>/parameters.yaml
COMMON = 'common'   # NODES_DIR/common/parameters.yaml: the groups node schemas include
TOOLS_DIR = NODES_DIR.parent / 'tools'   # <tool>.parameters.yaml: a tool node's schema
TYPES = {'bool': ParameterType.PARAMETER_BOOL, 'double': ParameterType.PARAMETER_DOUBLE,
         'integer': ParameterType.PARAMETER_INTEGER,
         'string': ParameterType.PARAMETER_STRING,
         'double[]': ParameterType.PARAMETER_DOUBLE_ARRAY,
         'integer[]': ParameterType.PARAMETER_INTEGER_ARRAY,
         'string[]': ParameterType.PARAMETER_STRING_ARRAY}
KINDS = {'bool': 'bool', 'int': 'integer', 'double': 'double', 'string': 'string',
         'double_array': 'double[]', 'int_array': 'integer[]',
         'string_array': 'string[]'}   # schema type -> Param.kind
PER_JOINT = 'size_matches_joints<>'


class ConfigError(ValueError):
    """A parameter set the node cannot run with; the message is the reason."""


@dataclasses.dataclass(frozen=True)
class Param:
    """One declared parameter: ``kind`` is a key of TYPES; ``rules`` its validation.

    ``rules`` is a tuple of (rule, arguments) as in a schema's ``validation``; ``choices``,
    ``range`` and ``per_joint`` follow from them (or, without rules, give them).
    """

    name: str
    default: object
    kind: str
    description: str
    read_only: bool = False
    choices: tuple = ()
    range: tuple = None   # (min, max) for doubles and integers, also enforced by rclpy
    per_joint: bool = False  # one value per joint, in the order of the joints parameter
    rules: tuple = ()

    def __post_init__(self):
        if not self.rules:
            implied = ((('one_of<>', (self.choices,)),) if self.choices else ()) + \
                ((('bounds<>', tuple(self.range)),) if self.range else ()) + \
                (((PER_JOINT, (0,)),) if self.per_joint else ())
            object.__setattr__(self, 'rules', implied)
            return
        found = dict(self.rules)
        if 'one_of<>' in found:
            object.__setattr__(self, 'choices', tuple(found['one_of<>'][0]))
        if 'bounds<>' in found:
            object.__setattr__(self, 'range', tuple(found['bounds<>']))
        # per_joint: when given, one value per joint (not "one, or one per joint")
        object.__setattr__(self, 'per_joint', set(found.get(PER_JOINT, (1,))) <= {0})

    def descriptor(self):
        d = ParameterDescriptor(name=self.name, type=TYPES[self.kind],
                                description=self.description, read_only=self.read_only)
        d.additional_constraints = '; '.join(rule_text(*rule) for rule in self.rules)
        if self.range and self.kind == 'integer':
            d.integer_range = [IntegerRange(from_value=self.range[0], to_value=self.range[1])]
        elif self.range:
            d.floating_point_range = [FloatingPointRange(from_value=float(self.range[0]),
                                                         to_value=float(self.range[1]))]
        return d


def rule_text(rule, args):
    """A rule as a person reads it: 'must be >= 0', 'one value per joint (or 0 values)'."""
    return TEXTS[rule](*args)


def num(x):
    """A rule's number as a person writes it: 0, 0.5, 1e-09."""
    return f'{x:g}' if isinstance(x, float) else str(x)


TEXTS = {
    'gt<>': lambda x: f'must be > {num(x)}', 'gt_eq<>': lambda x: f'must be >= {num(x)}',
    'lt<>': lambda x: f'must be < {num(x)}', 'lt_eq<>': lambda x: f'must be <= {num(x)}',
    'bounds<>': lambda lo, hi: f'must be in [{num(lo)}, {num(hi)}]',
    'element_gt<>': lambda x: f'must be > {num(x)}',
    'lower_element_bounds<>': lambda x: f'must be >= {num(x)}',
    'upper_element_bounds<>': lambda x: f'must be <= {num(x)}',
    'element_bounds<>': lambda lo, hi: f'must be in [{num(lo)}, {num(hi)}]',
    'fixed_size<>': lambda n: f'needs {n} values',
    'not_empty<>': lambda: 'must not be empty',
    'one_of<>': lambda choices: f"must be one of {', '.join(map(str, choices))}",
    PER_JOINT: lambda *sizes: 'one value per joint' + ''.join(
        f' (or {n} values)' for n in sizes),
}


def _elements(value):
    return np.asarray(value, dtype=float).reshape(-1)


PASSES = {   # rule -> (value, *args) -> whether the value keeps the rule
    'gt<>': lambda v, x: v > x, 'gt_eq<>': lambda v, x: v >= x,
    'lt<>': lambda v, x: v < x, 'lt_eq<>': lambda v, x: v <= x,
    'bounds<>': lambda v, lo, hi: lo <= v <= hi,
    'element_gt<>': lambda v, x: bool((_elements(v) > x).all()),
    'lower_element_bounds<>': lambda v, x: bool((_elements(v) >= x).all()),
    'upper_element_bounds<>': lambda v, x: bool((_elements(v) <= x).all()),
    'element_bounds<>': lambda v, lo, hi: bool(((_elements(v) >= lo)
                                                & (_elements(v) <= hi)).all()),
    'fixed_size<>': lambda v, n: len(v) == n,
    'not_empty<>': lambda v: len(v) > 0,
    'one_of<>': lambda v, choices: v in choices,
}


def shown(value):
    """A value as a message shows it: rclpy's arrays as lists."""
    return value.tolist() if hasattr(value, 'tolist') else value


def violation(param, value, joints=None):
    """The reason ``value`` breaks one of the param's rules, or None.

    ``joints``: the number of joints, for size_matches_joints (None: not checked).
    """
    for rule, args in param.rules:
        if rule == PER_JOINT:
            if joints is not None and len(value) not in (joints, *args):
                sizes = ''.join(f' (or {n})' for n in args)
                return f'{param.name} needs {joints} values, one per joint{sizes}, got {len(value)}'
        elif rule == 'fixed_size<>':
            if not PASSES[rule](value, *args):
                return f'{param.name} needs {args[0]} values, got {len(value)}'
        elif rule == 'one_of<>':
            if not PASSES[rule](value, *args):
                return f"{param.name} {rule_text(rule, args)}; got '{value}'"
        elif not PASSES[rule](value, *args):
            return f'{param.name} {rule_text(rule, args)}, got {shown(value)}'
    return None


def check(params, values, joints=None):
    """ConfigError with the reason unless every value keeps its param's rules.

    ``values``: {name: value}; params without a value there are not checked. ``joints``: the
    number of joints, for size_matches_joints (None: before the model is known).
    """
    for p in params:
        if p.name in values:
            reason = violation(p, values[p.name], joints)
            if reason:
                raise ConfigError(reason)


def frozen(args):
    """A rule's arguments as tuples all the way down (a Param is immutable)."""
    return tuple(frozen(a) if isinstance(a, list) else a for a in args)


def parameters(tree, prefix=''):
    """The Params of a schema's (nested) mapping, in file order."""
    for key, entry in tree.items():
        name = prefix + key
        if 'type' not in entry:
            yield from parameters(entry, name + '.')
            continue
        unknown = set(entry) - {'type', 'default_value', 'description', 'read_only',
                                'validation'}
        if unknown or entry['type'] not in KINDS:
            raise ValueError(f'schema: {name} has unknown keys {sorted(unknown)} or type '
                             f"{entry['type']!r}")
        rules = tuple((rule, frozen(args or ())) for rule, args in
                      (entry.get('validation') or {}).items())
        unknown = [rule for rule, _ in rules if rule not in TEXTS]
        if unknown:
            raise ValueError(f'schema: {name} has unknown rules {unknown}')
        yield Param(name, entry['default_value'], KINDS[entry['type']], entry['description'],
                    read_only=bool(entry.get('read_only', False)), rules=rules)


class UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice (which would silently win)."""

    def construct_mapping(self, node, deep=False):
        keys = [self.construct_object(key, deep=deep) for key, _ in node.value]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise ValueError(f'schema: {twice} given twice ({node.start_mark})')
        return super().construct_mapping(node, deep=deep)


def read(path):
    """A schema file's tree (unique keys)."""
    with open(path, encoding='utf-8') as f:
        return yaml.load(f, Loader=UniqueKeyLoader)


@functools.lru_cache(maxsize=None)
def groups(nodes_dir):
    """{group: its mapping} of ``common/parameters.yaml``, the entries nodes share."""
    return read(nodes_dir / COMMON / 'parameters.yaml')


@functools.lru_cache(maxsize=None)
def load(node):
    """The Params of ``<node>/parameters.yaml``: its included groups' in order, then its own.

    A tool's node (record_joint_states) has its schema beside it, ``tools/<node>.parameters.yaml``.
    """
    path = NODES_DIR / node / 'parameters.yaml'
    tool = TOOLS_DIR / f'{node}.parameters.yaml'
    tree = read(tool if tool.exists() and not path.exists() else path)
    if set(tree) - {'include'} != {node}:
        raise ValueError(f'{node}/parameters.yaml: the top-level key must be {node!r} alone, '
                         "with an optional 'include'")
    included = tree.get('include') or []
    shared = groups(NODES_DIR) if included else {}
    unknown = [g for g in included if g not in shared]
    if unknown:
        raise ValueError(f'{node}/parameters.yaml includes {unknown}, not a group of '
                         f'{COMMON}/parameters.yaml ({", ".join(shared)})')
    params = [p for g in included for p in parameters(shared[g])]
    params += parameters(tree[node])
    names = [p.name for p in params]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f'{node}/parameters.yaml: {twice} given twice (in the node and an '
                         'included group, or in two groups)')
    return tuple(params)


def choices(node, name):
    """The values the ``one_of<>`` rule of the node's parameter ``name`` allows, in order."""
    (param,) = (p for p in load(node) if p.name == name)
    return param.choices


def section(node, *namespaces):
    """The node's Params whose name is, or lies under, one of ``namespaces``."""
    return tuple(p for p in load(node) if p.name.split('.')[0] in namespaces)
