"""The controller's configuration: its parameters' values and the arm made into control laws.

``configure(values, arm)`` is a pure function: the validated parameter values (the schema,
parameters.yaml) and the loaded arm (nodes.common.arm) in, a frozen ``Config`` out, or a
ConfigError naming what to fix. The node applies a Config whole (controller.py).
"""
import dataclasses
import math

import numpy as np

import robot_dynamics as rd
from robot_dynamics.core.control import ComputedTorque, GravityCompensation
from robot_dynamics.core.limits import limit_command

from ..common import cdr, contact_safety, profiles
from ..common.cdr import Float64MultiArrayWriter
from ..common.diagnostics import inertia_health
from ..common.parameters import ConfigError
from ..common.schema import choices
from . import command_cycle, speed_limiter, cartesian_modes

GRAVITY_COMPENSATION, COMPUTED_TORQUE = 'gravity_compensation', 'computed_torque'
MODES = choices('dynamics_controller', 'mode')   # the schema's, in its order


@dataclasses.dataclass(frozen=True)
class Config:
    mode: str
    gravity_compensation: GravityCompensation
    computed_torque: ComputedTorque
    effort_limits: np.ndarray         # model order, inf where unlimited
    max_effort_rate: float            # N m/s
    profile: profiles.Profile         # what the command and the efforts mean on this arm
    safety: contact_safety.Safety
    task: object = None               # the task-space law of a task-space mode (cartesian_modes)
    pfl: speed_limiter.LimiterConfig = None   # power and force limiting (speed_limiter.py)
    velocity_filter_cutoff: float = 0.0       # Hz, 0: the control laws get the measured q̇


def configure(values, arm):
    """The Config of these parameter values on this arm (ConfigError if it cannot be built)."""
    check_model(arm.model)
    limits = arm.model.effort_limit
    if len(values['effort_limits']):
        limits = arm.per_joint(values, 'effort_limits')
    kp, kd = joint_gains(values, arm)
    ct = ComputedTorque(arm.model, kp, kd, *integral_gains(values, arm, limits))
    gravity = GravityCompensation(arm.model, values['friction_compensation'],
                                  values['friction_deadband'])
    safety = contact_safety.configure(values, arm, limits)
    return Config(values['mode'], gravity, ct, np.array(limits),
                  float(values['max_effort_rate']), profiles.profile(values, arm),
                  safety, cartesian_modes.configure(values, arm),
                  speed_limiter.configure(values, arm.model,
                                          speed_limiter.contact_drive(values, kp, kd)),
                  float(values['velocity_filter_cutoff']))


def joint_gains(values, arm):
    """Computed torque's (kp, kd) in model order (the schema refuses negative ones).

    They are accelerations per error (1/s², 1/s), so one default fits every arm (the schema's
    kp); empty kd is 2 √kp, critically damped.
    """
    kp = arm.per_joint(values, 'kp')
    kd = arm.per_joint(values, 'kd') if len(values['kd']) else 2.0 * np.sqrt(kp)
    return kp, kd


def integral_gains(values, arm, limits):
    """(ki, integral_limit) in model order (the schema refuses negative ones)."""
    ki = arm.per_joint(values, 'ki')
    limit = arm.per_joint(values, 'integral_limit') if len(values['integral_limit']) else limits
    return ki, limit


def check_model(model):
    """ConfigError unless g(q) and M(q) are finite and M(q) positive definite at a mid pose."""
    q = model.neutral_position
    ok, smallest = inertia_health(rd.mass_matrix(model, q))
    if not ok or not np.isfinite(rd.gravity(model, q)).all():
        raise ConfigError(f'the model (with its payload) is not physical: smallest eigenvalue of '
                          f'M(q) {smallest:.3g} at q = {q.tolist()}')


def warm_up_steps(config, arm, compiled, every_mode=False):
    """The warm-up steps (core.warm_up) of the kernels this Config calls, as (name, function).

    Those of its mode and of the components it has on (collision detection, PFL): each mode
    has its own laws and compiled cycle, and a cold start compiles only what it runs.
    ``every_mode``: every mode's and component's (``python -m robot_dynamics.compile``).
    """
    model = arm.model
    q = model.neutral_position
    zero = np.zeros_like(q)
    modes = MODES if every_mode else (config.mode,)
    laws = [mode for mode in modes if mode in command_cycle.LAWS and
            (mode not in cartesian_modes.MODES or model.tip is not None)]
    steps = [('gravity compensation', lambda: config.gravity_compensation(q, zero)),
             ('command limits', lambda: (config.profile.command(q, zero), limit_command(
                 zero, zero.copy(), math.inf, config.effort_limits, arm.order,
                 Float64MultiArrayWriter(len(q)).data, np.zeros(len(q), bool))))]
    if COMPUTED_TORQUE in modes:
        steps += [('computed torque', lambda: config.computed_torque(q, zero, q, zero, zero)),
                  ('trajectory check', lambda: contact_safety.warm_up_trajectories(
                      config.safety))]
    if every_mode or config.mode in cartesian_modes.MODES:
        steps.append(('task space', lambda: cartesian_modes.warm_up(model)))
    if every_mode or config.safety.detection is not None:
        steps.append(('collision detection', lambda: contact_safety.warm_up_observer(
            config.safety)))
    if every_mode or config.pfl.enabled:
        steps.append(('power and force limiting', lambda: speed_limiter.warm_up(config.pfl,
                                                                                model)))
    if (compiled or every_mode) and not model.mimic:   # command_cycle.choose's first test
        steps.append(('joint state reader', lambda: cdr.warm_up(model.joint_names)))
        steps += [(f'compiled cycle ({mode})', lambda mode=mode: command_cycle.warm_up(
            model, model.joint_names, config.effort_limits, arm.order, [mode])) for mode in laws]
    return steps
