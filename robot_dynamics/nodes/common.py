"""Glue shared by the three nodes: parameters, the model, joint-name mapping, JointState checks.

A node is parameters -> core objects -> publishers. Every node builds its whole configuration
from a dict of parameter values in one function; the on-set callback runs that same function on
the proposed values, so a bad value is rejected with the function's reason and the node keeps
the configuration it had (see ``ArmNode``).
"""
import array
import dataclasses
import faulthandler
import math
import signal
import sys
import time

import numpy as np
import rclpy
from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor,
                                ParameterType, SetParametersResult)
from rclpy.exceptions import ParameterException
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.signals import SignalHandlerOptions
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

import robot_dynamics as rd
from robot_dynamics.core.identification import physical_consistency

TYPES = {'bool': ParameterType.PARAMETER_BOOL, 'double': ParameterType.PARAMETER_DOUBLE,
         'integer': ParameterType.PARAMETER_INTEGER,
         'string': ParameterType.PARAMETER_STRING,
         'double[]': ParameterType.PARAMETER_DOUBLE_ARRAY,
         'string[]': ParameterType.PARAMETER_STRING_ARRAY}

# Commands: reliable, so ros2_control's JointGroupEffortController (SystemDefaultsQoS) matches.
COMMAND_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                         reliability=ReliabilityPolicy.RELIABLE)
# The /robot_description topic as robot_state_publisher latches it.
DESCRIPTION_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                             reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)


def state_qos(reliability, depth):
    """QoS of a joint_states subscription.

    A best-effort subscriber matches reliable and best-effort publishers alike, hence the
    default reliability.
    """
    policy = {'best_effort': ReliabilityPolicy.BEST_EFFORT,
              'reliable': ReliabilityPolicy.RELIABLE}[reliability]
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=policy)


class ConfigError(ValueError):
    """A parameter set the node cannot run with; the message is the reason."""


class BadInput(ValueError):
    """A message the node must ignore; the message names the problem."""


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


MODEL_PARAMS = (
    Param('robot_description', '', 'string', 'URDF XML; empty: read the robot_description topic '
          '(std_msgs/String, transient local) as robot_state_publisher publishes it',
          read_only=True),
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
)
STATE_PARAMS = (
    Param('joint_states_reliability', 'best_effort', 'string', 'QoS reliability of the '
          'joint_states subscription (best_effort matches every publisher)', read_only=True,
          choices=('best_effort', 'reliable')),
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


@dataclasses.dataclass(frozen=True)
class Arm:
    """The model in use (payload included) and the mapping of the ``joints`` order onto it.

    ``order[i]`` is the model index of ``joints[i]``: x_joints = x_model[order]. ``unloaded``
    is the same model without the payload (what payload identification starts from).
    """

    model: rd.Model
    joints: tuple
    order: np.ndarray
    unloaded: rd.Model = None

    def to_model(self, x_joints):
        x = np.empty(len(self.order))
        x[self.order] = x_joints
        return x

    def to_joints(self, x_model):
        return np.asarray(x_model)[self.order]

    def per_joint(self, values, name, what='values, one per joint'):
        """A per-joint parameter (given in ``joints`` order) in model order."""
        return self.to_model(vector(values, name, len(self.order), what))


class ArmBuilder:
    """Builds Arm objects from parameter values; caches the URDF parse (read-only inputs).

    The model: the URDF's, its inertias replaced by ``inertial_parameters`` if given, the joint
    terms (``armature``, ``friction.*``) added, then the payload at the tip.
    """

    def __init__(self):
        self._key = self._base = None

    def base_model(self, values, urdf):
        key = (urdf, values['base'], values['tip'], tuple(values['gravity']))
        if key != self._key:
            gravity = vector(values, 'gravity', 3)
            try:
                self._base = rd.load_urdf(urdf, base=values['base'] or None,
                                          tip=values['tip'] or None, gravity=gravity)
            except (ValueError, KeyError) as error:
                raise ConfigError(f'cannot build the model: {error}') from None
            self._key = key
        return self._base

    def __call__(self, values, urdf):
        model = self.base_model(values, urdf)
        arm = Arm(model, *joint_order(model, values['joints']))
        model = with_joint_terms(with_inertial_parameters(model, values), values, arm)
        return dataclasses.replace(arm, model=with_payload(model, values), unloaded=model)


def with_inertial_parameters(model, values):
    """The model with ``inertial_parameters`` as its inertias (unchanged when empty).

    10 per body in model order (rd.parameter_vector's layout); every body needs a mass > 0 and
    an inertia about its centre of mass that is positive definite.
    """
    if not len(values.get('inertial_parameters', [])):
        return model
    theta = vector(values, 'inertial_parameters', 10 * model.nb,
                   f'values (10 per moving body, {model.nb} bodies)').reshape(model.nb, 10)
    for i, body in enumerate(theta):
        try:
            with np.errstate(all='ignore'):
                check = physical_consistency(body)
        except np.linalg.LinAlgError:   # overflow to Inf inside
            check = dict(positive_mass=True, positive_definite=False, principal_moments='Inf')
        if not (check['positive_mass'] and check['positive_definite']):
            what = (f'mass {body[0]:.6g} kg' if not check['positive_mass'] else
                    f"principal moments about the centre of mass {check['principal_moments']}")
            raise ConfigError(f'inertial_parameters: body {i} (moved by {model.body_names[i]}) '
                              f'is not physical: {what}; needs mass > 0 and a positive definite '
                              'inertia about the centre of mass')
    return model.replace(inertia=theta)


JOINT_TERMS = {'armature': 'armature', 'friction.viscous': 'viscous',
               'friction.coulomb': 'coulomb'}   # parameter -> rd.Model field


def with_joint_terms(model, values, arm):
    """The model with the ``armature`` and ``friction.*`` parameters (joints order -> model)."""
    eps = float(values['friction.coulomb_velocity'])
    if not 0.0 < eps < math.inf:
        raise ConfigError(f'friction.coulomb_velocity must be > 0, got {eps}')
    terms = {}
    for name, field in JOINT_TERMS.items():
        if len(values[name]):
            x = arm.per_joint(values, name)
            if (x < 0).any():
                raise ConfigError(f'{name} must be >= 0, got {values[name]}')
            terms[field] = x
    if not terms and eps == model.coulomb_velocity:
        return model
    return model.replace(**terms, coulomb_velocity=eps)


def with_payload(model, values):
    """The model carrying the payload.* parameters at its tip (unchanged for a zero payload)."""
    mass = float(values['payload.mass'])
    com = vector(values, 'payload.com', 3)
    ixx, ixy, ixz, iyy, iyz, izz = vector(values, 'payload.inertia', 6)
    inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    if mass == 0.0 and not inertia.any():
        return model
    try:
        return rd.with_payload(model, mass, com, inertia)
    except ValueError as error:
        raise ConfigError(str(error)) from None


def joint_order(model, joints):
    """(joints, order) for the ``joints`` parameter: a permutation of the chain's joints."""
    if not joints:
        return tuple(model.joint_names), np.arange(model.nv)
    chain = f"chain {model.base} -> {model.tip or '(whole tree)'} has {list(model.joint_names)}"
    mimic = [f"'{m.name}' (it follows '{m.leader}')" for m in model.mimic if m.name in joints]
    if mimic:
        raise ConfigError(f'joints lists mimic joints {", ".join(mimic)}: a mimic joint is no '
                          f'degree of freedom, list its leader instead; the {chain}')
    unknown = [j for j in joints if j not in model.joint_names]
    if unknown:
        raise ConfigError(f'unknown joints {unknown} in joints; the {chain}')
    if len(set(joints)) != len(joints):
        raise ConfigError(f'joints lists a joint twice: {list(joints)}')
    missing = [j for j in model.joint_names if j not in joints]
    if missing:
        raise ConfigError(f'joints must list every joint of the chain; missing {missing}')
    return tuple(joints), np.array([model.joint_names.index(j) for j in joints])


class JointStateReader:
    """sensor_msgs/JointState -> (q, v, effort) in model order, mapped by name.

    Extra joints are ignored; a message carrying none of our joints (e.g. a gripper's) gives
    None; one carrying only some of them is rejected. Every array must be empty or have one value
    per name; ``fields`` are converted (None when empty) and must be finite.
    """

    FIELDS = ('position', 'velocity', 'effort')

    def __init__(self, joint_names, fields=FIELDS):
        self.joint_names, self.fields = tuple(joint_names), fields
        self._names, self._index = None, None

    def read(self, msg):
        names = msg.name
        if not names:
            raise BadInput('empty JointState (no joint names)')
        if names != self._names:
            self._index, self._names = self._map(names), list(names)
        if self._index is None:
            return None
        for field in self.FIELDS:
            if len(getattr(msg, field)) not in (0, len(names)):
                raise BadInput(f'{field} has {len(getattr(msg, field))} values for '
                               f'{len(names)} joint names')
        if not msg.position:
            raise BadInput('no positions')
        return tuple(self._field(msg, f) if f in self.fields else None for f in self.FIELDS)

    def _map(self, names):
        where = {}
        for i, name in enumerate(names):
            if name in where:
                raise BadInput(f"joint '{name}' appears twice")
            where[name] = i
        found = [where.get(n) for n in self.joint_names]
        if not any(i is not None for i in found):
            return None
        missing = [n for n, i in zip(self.joint_names, found) if i is None]
        if missing:
            raise BadInput(f'missing joints {missing}')
        return np.array(found)

    def _field(self, msg, field):
        values = getattr(msg, field)
        if not values:
            return None
        x = np.frombuffer(values) if isinstance(values, array.array) else np.asarray(values, float)
        x = x[self._index]
        if not all_finite(x):
            bad = [self.joint_names[i] for i in np.flatnonzero(~np.isfinite(x))]
            raise BadInput(f'non-finite {field} for {bad}')
        return x


def all_finite(x):
    """No NaN or Inf in a short vector (a Python sum is cheaper than numpy for a few values)."""
    return math.isfinite(sum(x.tolist()))


class Percentiles:
    """The last ``size`` samples of a few named quantities; median and p99 of each."""

    def __init__(self, names, size=10000):
        self.names, self.samples, self.count = names, np.full((len(names), size), np.nan), 0

    def add(self, *values):
        self.samples[:, self.count % self.samples.shape[1]] = values
        self.count += 1

    def stats(self, scale=1e6, unit='us'):
        """{name_median_<unit>: ..., name_p99_<unit>: ...} (empty before the first sample)."""
        x = self.samples[:, :min(self.count, self.samples.shape[1])]
        if x.shape[1] == 0:
            return {}
        median, p99 = np.percentile(x, [50, 99], axis=1) * scale
        return {f'{n}_{k}_{unit}': round(float(v), 1) for n, m, p in zip(self.names, median, p99)
                for k, v in (('median', m), ('p99', p))}


def to_array(x):
    """numpy vector -> the array.array('d') a float64[] message field stores (fastest path)."""
    return array.array('d', np.ascontiguousarray(x, dtype=float).tobytes())


def seconds(stamp):
    """Seconds of a builtin_interfaces/Time (0.0 for an unset stamp)."""
    return stamp.sec + 1e-9 * stamp.nanosec


class Throttled:
    """log(text) at most once per ``period`` seconds for each distinct text."""

    def __init__(self, log, period=1.0):
        self.log, self.period, self.last = log, period, {}

    def __call__(self, text):
        now = time.monotonic()
        if now - self.last.get(text, -math.inf) >= self.period:
            self.last[text] = now
            self.log(text)


class ArmNode(Node):
    """A node on one arm model: parameters, the model (parameter or topic), validated updates.

    Subclasses set PARAMS, implement ``configure(values, arm) -> config`` (raise ConfigError
    with a reason) and ``apply(config)``, and call ``load_model()`` at the end of __init__.
    configure and apply run when the model arrives and on every accepted parameter change.
    """

    PARAMS = MODEL_PARAMS

    def __init__(self, name, **options):
        super().__init__(name, **options)   # options: rclpy Node keywords (namespace, overrides)
        self.values = declare_parameters(self, self.PARAMS)
        check_choices(self.PARAMS, self.values)
        self.arm = self.urdf = None
        self._build_arm = ArmBuilder()
        self.warn = Throttled(self.get_logger().warning)
        self.add_on_set_parameters_callback(self._on_set_parameters)

    def load_model(self):
        """Call last in the subclass constructor: the model from the parameter or the topic."""
        if self.values['robot_description']:
            self._configure(self.values['robot_description'])
        else:
            self.get_logger().info('waiting for the robot_description topic')
            self.create_subscription(String, 'robot_description', self._on_description,
                                     DESCRIPTION_QOS)

    def warm_up(self):
        """Run the per-state computations once, before 'ready'.

        numba compiles a kernel (or loads it from its cache) at its first call: here, not at the
        first joint state, which would otherwise wait seconds on a fresh install.
        """

    def _build(self, values, urdf):
        arm = self._build_arm(values, urdf)
        return arm, self.configure(values, arm)

    def _configure(self, urdf):
        self.arm, config = self._build(self.values, urdf)
        self.urdf = urdf
        self.apply(config)
        self.warm_up()
        self.get_logger().info(f'ready: {self.arm.model.nv} joints {list(self.arm.joints)}, '
                               f'{self.arm.model.base} -> {self.arm.model.tip}')

    def _on_description(self, msg):
        if self.urdf is not None:
            if msg.data != self.urdf:
                self.get_logger().warning('robot_description changed: restart to use it')
            return
        try:
            self._configure(msg.data)
        except ConfigError as error:
            self.get_logger().error(f'cannot use robot_description: {error}')

    def _on_set_parameters(self, params):
        values = {**self.values, **{p.name: parameter_value(p) for p in params}}
        try:
            check_choices(self.PARAMS, values)
            if self.urdf is not None:
                arm, config = self._build(values, self.urdf)
        except ConfigError as error:
            return SetParametersResult(successful=False, reason=str(error))
        self.values = values
        if self.urdf is not None:
            self.arm = arm
            self.apply(config)
        return SetParametersResult(successful=True)

    def configure(self, values, arm):
        raise NotImplementedError

    def apply(self, config):
        raise NotImplementedError

    def spin(self, executor, stopped):
        """Process callbacks until stopped() (checked at least every 0.1 s)."""
        while not stopped():
            executor.spin_once(timeout_sec=0.1)


def executor():
    """rclpy's C++ events executor where available (Kilted), else the SingleThreadedExecutor.

    The events executor takes about half the CPU per message of the other (measured here at
    1 kHz); Jazzy has only the SingleThreadedExecutor.
    """
    try:
        from rclpy.experimental import EventsExecutor
        return EventsExecutor()
    except ImportError:
        return SingleThreadedExecutor()


def main(node_class, args=None):
    """Run one node until SIGINT/SIGTERM; a configuration error at start exits with status 1."""
    rclpy.init(args=sys.argv if args is None else args,
               signal_handler_options=SignalHandlerOptions.NO)
    stop = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.append(sig))
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 <pid>: print where every thread is
    try:
        node = node_class()
    except (ConfigError, ParameterException) as error:
        rclpy.logging.get_logger(node_class.NAME).fatal(str(error))
        rclpy.try_shutdown()
        return 1
    spinner = executor()
    spinner.add_node(node)
    try:
        node.spin(spinner, lambda: bool(stop))
    finally:
        spinner.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0
