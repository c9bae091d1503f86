"""Building the arm: parameter values -> the Model in use and the ``joints`` order (one place).

The model: the URDF's, its inertias replaced by ``inertial_parameters`` if given, the joint
terms (``armature``, ``friction.*``) added, then the payload (``payload.*``) at the tip.
"""
import dataclasses

import numpy as np

import robot_dynamics as rd
from robot_dynamics.core.identification import physical_consistency
from robot_dynamics.core.spatial import inertia_from_urdf

from .parameters import MODEL_PARAMS, ConfigError, check, vector


@dataclasses.dataclass(frozen=True)
class Arm:
    """The model in use (payload included) and the mapping of the ``joints`` order onto it.

    ``order[i]`` is the model index of ``joints[i]``: x_joints = x_model[order]. ``unloaded``
    is the same model without the payload (what payload identification starts from), and
    ``payload`` the payload it carries (``payload(values)``, None for none).
    """

    model: rd.Model
    joints: tuple
    order: np.ndarray
    unloaded: rd.Model = None
    payload: dict = None

    def to_model(self, x_joints):
        x = np.empty(len(self.order))
        x[self.order] = x_joints
        return x

    def to_joints(self, x_model):
        return np.asarray(x_model)[self.order]

    def per_joint(self, values, name, what='values, one per joint'):
        """A per-joint parameter (given in ``joints`` order) in model order.

        A single value, where the parameter's schema allows one (``size_matches_joints<>:
        [1]``), is every joint's.
        """
        n = len(self.order)
        if len(values[name]) == 1:
            return np.full(n, vector(values, name, 1, what)[0])
        return self.to_model(vector(values, name, n, what))


class ArmBuilder:
    """Builds Arm objects from parameter values; caches the URDF parse (read-only inputs)."""

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
        check(MODEL_PARAMS, values, len(arm.joints))   # the schema's rules (nodes.schema)
        model = with_joint_terms(with_inertial_parameters(model, values), values, arm)
        load = payload(values)
        if load and model.tip is None:
            raise ConfigError(f"payload.*: the payload sits at the tip: it needs the tip parameter "
                              f"(read-only: set it at start); the model is the whole tree below "
                              f"'{model.base}'")
        try:
            loaded = rd.with_payload(model, **load) if load else model
        except ValueError as error:
            raise ConfigError(str(error)) from None
        return dataclasses.replace(arm, model=loaded, unloaded=model, payload=load)


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


JOINT_TERM_PARAMETERS = {'armature': 'armature', 'friction.viscous': 'viscous',
                         'friction.coulomb': 'coulomb',
                         'friction.stiction': 'stiction'}   # parameter -> rd.Model field


def with_joint_terms(model, values, arm):
    """The model with the ``armature`` and ``friction.*`` parameters (joints order -> model)."""
    eps = float(values['friction.coulomb_velocity'])
    v_s = np.asarray(values['friction.stribeck_velocity'], dtype=float)
    if len(v_s) != 1:
        v_s = arm.per_joint(values, 'friction.stribeck_velocity', 'values: one, or one per joint')
    terms = {name: arm.per_joint(values, parameter)
             for parameter, name in JOINT_TERM_PARAMETERS.items() if len(values[parameter])}
    v_s = np.broadcast_to(v_s, (model.nv,))
    if not terms and eps == model.coulomb_velocity and np.array_equal(v_s,
                                                                      model.stribeck_velocity):
        return model
    return model.replace(**terms, coulomb_velocity=eps, stribeck_velocity=v_s)


def payload(values):
    """The ``payload.*`` parameters as rd.with_payload's keywords (None for a zero payload)."""
    mass = float(values['payload.mass'])
    com = vector(values, 'payload.com', 3)
    inertia = inertia_from_urdf(vector(values, 'payload.inertia', 6))
    if mass == 0.0 and not inertia.any():
        return None
    return dict(mass=mass, com=com, inertia=inertia)


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
