"""Node parameters and their schema: ``Param``, the model's and the joint-state parameters.

A node declares a tuple of ``Param`` (``declare_parameters``) and builds its whole configuration
from the dict of their values; a value it cannot run with raises ``ConfigError`` with the reason.
"""
import dataclasses

import numpy as np
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType
from rclpy.parameter import Parameter

TYPES = {'bool': ParameterType.PARAMETER_BOOL, 'double': ParameterType.PARAMETER_DOUBLE,
         'integer': ParameterType.PARAMETER_INTEGER,
         'string': ParameterType.PARAMETER_STRING,
         'double[]': ParameterType.PARAMETER_DOUBLE_ARRAY,
         'string[]': ParameterType.PARAMETER_STRING_ARRAY}


class ConfigError(ValueError):
    """A parameter set the node cannot run with; the message is the reason."""


@dataclasses.dataclass(frozen=True)
class Param:
    """One declared parameter: ``kind`` is a key of TYPES; ``choices`` and ``range`` are checked."""

    name: str
    default: object
    kind: str
    description: str
    read_only: bool = False
    choices: tuple = ()
    range: tuple = None   # (min, max) for doubles and integers, enforced by rclpy
    per_joint: bool = False  # one value per joint, in the order of the joints parameter

    def descriptor(self):
        d = ParameterDescriptor(name=self.name, type=TYPES[self.kind],
                                description=self.description, read_only=self.read_only)
        if self.choices:
            d.additional_constraints = 'one of: ' + ', '.join(self.choices)
        if self.per_joint:
            d.additional_constraints = 'one value per joint, in the order of joints (or none)'
        if self.range and self.kind == 'integer':
            d.integer_range = [IntegerRange(from_value=self.range[0], to_value=self.range[1])]
        elif self.range:
            d.floating_point_range = [FloatingPointRange(from_value=float(self.range[0]),
                                                         to_value=float(self.range[1]))]
        return d


ROBOT_DESCRIPTION = Param(
    'robot_description', '', 'string', 'URDF XML; empty: read the robot_description topic '
    '(std_msgs/String, transient local) as robot_state_publisher publishes it', read_only=True)
MODEL_PARAMS = (
    ROBOT_DESCRIPTION,
    Param('base', '', 'string', 'base link of the chain (empty: the URDF root)', read_only=True),
    Param('tip', '', 'string', 'tip link of the chain (empty: the whole tree below base)',
          read_only=True),
    Param('joints', [], 'string[]', 'joint names in the order of command and state vectors and '
          'of every per-joint parameter (empty: the chain joints, parents first)', read_only=True),
    Param('gravity', [0.0, 0.0, -9.81], 'double[]',
          'acceleration of gravity in the base frame, m/s^2', read_only=True),
    Param('payload.mass', 0.0, 'double', 'payload rigidly attached at the tip, kg',
          range=(0.0, 1000.0)),
    Param('payload.com', [0.0, 0.0, 0.0], 'double[]', 'payload centre of mass in the tip frame, m'),
    Param('payload.inertia', [0.0] * 6, 'double[]', 'payload inertia about its centre of mass in '
          'tip axes, [ixx, ixy, ixz, iyy, iyz, izz] (URDF order), kg m^2'),
    Param('inertial_parameters', [], 'double[]', 'inertial parameters replacing the URDF\'s '
          '(an identified model): 10 per moving body in model order, the layout of '
          'rd.parameter_vector (m, m c, Ixx, Iyy, Izz, Ixy, Ixz, Iyz about the body origin); the '
          'payload comes on top (empty: the URDF\'s)'),
    Param('armature', [], 'double[]', 'reflected rotor inertia added to M\'s diagonal, kg m^2 '
          '(kg) (empty: none)', per_joint=True),
    Param('friction.viscous', [], 'double[]', 'viscous joint friction f_v, tau_f += f_v qdot, '
          'N m s/rad (N s/m) (empty: none)', per_joint=True),
    Param('friction.coulomb', [], 'double[]', 'Coulomb joint friction f_c, tau_f += f_c '
          'tanh(qdot / coulomb_velocity), N m (N) (empty: none)', per_joint=True),
    Param('friction.coulomb_velocity', 0.01, 'double', 'velocity scale epsilon of the smooth '
          'Coulomb sign tanh(qdot / epsilon), rad/s (m/s)', range=(1e-9, 1e3)),
    Param('friction.stiction', [], 'double[]', 'Stribeck stiction f_s >= 0, the breakaway '
          'torque\'s excess over f_c: tau_f += f_s exp(-(qdot / stribeck_velocity)^2) '
          'tanh(qdot / coulomb_velocity), N m (N) (empty: none)', per_joint=True),
    Param('friction.stribeck_velocity', [0.05], 'double[]', 'Stribeck velocity v_s > 0 over '
          'which the stiction decays, rad/s (m/s): one value for every joint or one per joint'),
)
JOINT_STATES_RELIABILITY = Param(
    'joint_states_reliability', 'best_effort', 'string', 'QoS reliability of the joint_states '
    'subscription (best_effort matches every publisher)', read_only=True,
    choices=('best_effort', 'reliable'))
STATE_PARAMS = (
    JOINT_STATES_RELIABILITY,
    Param('state_timeout', 0.1, 'double', 'no joint state for this long (s): the controller '
          'stops commanding, the estimator restarts its observer', range=(0.001, 60.0)),
)


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


def check_choices(params, values):
    """Model-independent checks: every ``choices`` parameter has one of its values."""
    for p in params:
        if p.choices and values[p.name] not in p.choices:
            raise ConfigError(f"{p.name} must be one of {', '.join(p.choices)}; "
                              f"got '{values[p.name]}'")


def vector(values, name, n, what='values'):
    """A parameter as a finite float array of length n, or a ConfigError naming it."""
    x = np.asarray(values[name], dtype=float)
    if x.shape != (n,):
        raise ConfigError(f'{name} needs {n} {what}, got {x.size}')
    if not np.isfinite(x).all():
        raise ConfigError(f'{name} must be finite, got {x.tolist()}')
    return x
