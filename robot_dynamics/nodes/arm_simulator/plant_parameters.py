"""The arm_simulator's ``plant.*`` parameters -> the plant's URDF and layers (simulation.plant).

A profile (``plant.profile``) fills the parameters left at their defaults with its values (a
number for a per-joint parameter applies to every joint; a list is in chain order); parameters
given at start (parameter file, -p), even at their default values, win. The plant's URDF is
``plant.robot_description``, else the file ``plant.urdf``, else the simulator's own
``robot_description``, perturbed by ``plant.mass_error`` and ``plant.com_error`` (seed
``plant.seed``).
"""
import functools
import pathlib

import numpy as np

import robot_dynamics as rd
from robot_dynamics.simulation import plant

from ..common.arm import joint_order
from ..common.parameters import MODEL_PARAMS, ConfigError, section, vector

PLANT_PARAMS = section('arm_simulator', 'plant')
DEFAULTS = {p.name: p.default for p in PLANT_PARAMS + MODEL_PARAMS}
PER_JOINT = {p.name for p in PLANT_PARAMS + MODEL_PARAMS if p.per_joint}
STABILITY = 1.0   # largest friction slope x dt / inertia: the held friction does not oscillate


def with_profile(values, model, given=()):
    """``values`` with the profile's for those not ``given`` and at their defaults."""
    profile, name = plant.PROFILES[values['plant.profile']], values['plant.profile']
    order = joint_order(model, values['joints'])[1]
    filled = dict(values)
    for key, value in profile.items():
        if key in given or not np.array_equal(values[key], DEFAULTS[key]):
            continue
        if key in PER_JOINT and np.ndim(value) == 0:
            value = [float(value)] * len(order)
        elif key in PER_JOINT:
            if len(value) != len(order):
                raise ConfigError(f'plant.profile {name} gives {key} for {len(value)} joints; '
                                  f'this arm has {len(order)}')
            value = [float(value[i]) for i in order]   # chain order -> joints order
        filled[key] = value
    return filled


def plant_urdf(values, urdf):
    """The plant's URDF XML (module docstring)."""
    source = values['plant.robot_description']
    if not source and values['plant.urdf']:
        try:
            source = pathlib.Path(values['plant.urdf']).read_text()
        except OSError as error:
            raise ConfigError(f'plant.urdf: {error}') from None
    try:
        return _perturbed(source or urdf, values['plant.mass_error'], values['plant.com_error'],
                          values['plant.seed'])
    except (ValueError, SyntaxError) as error:
        raise ConfigError(f"cannot perturb the plant's URDF: {error}") from None


@functools.lru_cache(maxsize=4)
def _perturbed(urdf, mass_error, com_error, seed):
    if not (mass_error or com_error):
        return urdf
    return plant.perturbed_urdf(urdf, mass_error, com_error, seed)[0]


def make_plant(values, arm, initial, dt):
    """The Plant of the (profile-filled) values; ConfigError for a bad or unstable one.

    The extra friction is held over a step: its slope times dt over the joint's inertia
    (M's diagonal at ``initial``, model order, armature included) must stay below STABILITY.
    """
    n = arm.model.nv
    sigmoid_keys = ('amplitude', 'slope', 'offset')
    names = ('plant.stiction', 'plant.effort_offset',
             *(f'plant.sigmoid_friction.{k}' for k in sigmoid_keys))
    per_joint = {name: vector(values, name, n, 'values, one per joint') if len(values[name])
                 else None for name in names}
    sigmoid = {k: per_joint[f'plant.sigmoid_friction.{k}'] for k in sigmoid_keys}
    if any(x is None for x in sigmoid.values()) and any(x is not None for x in sigmoid.values()):
        raise ConfigError('plant.sigmoid_friction needs amplitude, slope and offset together')
    coulomb = arm.to_joints(arm.model.coulomb)
    try:
        friction = plant.Friction(
            n, per_joint['plant.stiction'], coulomb, values['plant.stribeck_velocity'],
            arm.model.coulomb_velocity, None if sigmoid['amplitude'] is None else sigmoid)
        sensors = plant.Sensors(n, values['plant.position_resolution'],
                                values['plant.velocity_noise'], values['plant.effort_noise'],
                                per_joint['plant.effort_offset'], values['plant.seed'])
        result = plant.Plant(n, friction, values['plant.command_delay'], sensors)
    except ValueError as error:
        raise ConfigError(f'plant: {error}') from None
    inertia = arm.to_joints(np.diag(rd.mass_matrix(arm.model, initial)))
    ratio = result.max_friction_slope() * dt / inertia
    if (ratio >= STABILITY).any():
        j = int(np.argmax(ratio))
        raise ConfigError(f'plant friction too stiff for the step at {arm.joints[j]}: slope '
                          f'{result.max_friction_slope()[j]:.3g} N m s/rad x dt {dt:g} s over '
                          f'the inertia {inertia[j]:.3g} kg m^2 is {ratio[j]:.3g} >= {STABILITY}'
                          '; raise friction.coulomb_velocity, armature or rate')
    return result
