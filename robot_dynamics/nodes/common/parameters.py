"""Node parameters: declaring them, the model's and the joint-state parameters, ``vector``.

A node declares the tuple of ``Param`` of its schema (nodes.schema, ``declare_parameters``) and
builds its whole configuration from the dict of their values; a value it cannot run with raises
``ConfigError`` with the reason.
"""
import numpy as np
from rclpy.parameter import Parameter

from .schema import TYPES, ConfigError, Param, check, section   # noqa: F401 (the nodes' API)

#: the model's parameters (every node's; nodes.arm builds the model from them)
MODEL_PARAMS = section('dynamics_controller', 'robot_description', 'base', 'tip', 'joints',
                       'gravity', 'payload', 'inertial_parameters', 'armature', 'friction')
ROBOT_DESCRIPTION = MODEL_PARAMS[0]


def declare_parameters(node, params):
    """Declare every Param on the node; returns {name: value} with the overrides applied.

    rclpy cannot type an empty list default, so such parameters are declared with their type
    and no value; "not set" then reads as the empty list.
    """
    for p in params:
        default = p.default if p.default != [] else Parameter.Type(TYPES[p.kind])
        node.declare_parameter(p.name, default, p.descriptor())
    # a typo in a parameter file would otherwise pass silently (rclpy keeps the overrides in a
    # private attribute; without it there is just no warning)
    unknown = sorted(set(getattr(node, '_parameter_overrides', {})) - {p.name for p in params}
                     - {'use_sim_time', 'start_type_description_service'})
    if unknown:
        node.get_logger().warning(f'ignoring parameters this node does not declare: {unknown}')
    return {p.name: parameter_value(node.get_parameter_or(p.name, None)) for p in params}


def parameter_value(parameter):
    """The value of an rclpy Parameter; [] for a declared parameter that has none."""
    if parameter is None or parameter.type_ == Parameter.Type.NOT_SET:
        return []
    return parameter.value


def vector(values, name, n, what='values'):
    """A parameter as a finite float array of length n, or a ConfigError naming it."""
    x = np.asarray(values[name], dtype=float)
    if x.shape != (n,):
        raise ConfigError(f'{name} needs {n} {what}, got {x.size}')
    if not np.isfinite(x).all():
        raise ConfigError(f'{name} must be finite, got {x.tolist()}')
    return x
