"""Simulation engines for the arm simulator: plain Python, no ROS.

Both engines integrate the same arm, M(q) q̈ + C(q, q̇) q̇ + g(q) + τ_f(q̇) = τ − D q̇ + Jᵀ F, M
with the joints' armature and τ_f their friction (rd.Model's joint terms, ``joint_dynamics``),
with the classical fourth-order Runge-Kutta method at a fixed step dt:

- ``internal``: robot_dynamics' own forward dynamics (:mod:`.internal`);
- ``mujoco``: MuJoCo loading the same URDF (:mod:`.mujoco_engine`), an independent physics
  engine, so a controller closed through it cannot share a mistake with our dynamics.

Over one step τ and F are held constant (zero-order hold, as on a torque-controlled arm).
F = (moment, force) acts at the origin of the tip frame; it is held in base axes, so a wrench
given in tip axes is rotated into base axes with the tip's orientation at the start of the step.
Joint end stops (``end_stops``, default on) hold each joint within its URDF position limits
(revolute and prismatic joints; a continuous joint has none): the internal engine by an
inelastic impact at the limit (:mod:`.internal`), MuJoCo by its own joint limit constraint
(:mod:`.mujoco_engine`). Contacts are not simulated. Vectors are in ``joint_names`` order.

Coulomb friction f_c tanh(q̇ / ε) is stiff near rest: its slope f_c / ε over the inertia I of the
joint (armature included) must stay below RK4's stability limit 2.8 / dt (at 1 kHz and
ε = 0.01 rad/s: f_c < 28 I N m, I in kg m²); a larger ε or armature relaxes it.

Usage (``simulate`` takes a built rd.Model, ``make_engine`` builds one from the URDF)::

    sim = make_engine('mujoco', urdf_xml, 'panda_link0', 'panda_hand', names, q0, dt=1e-3)
    sim.step(tau, wrench=(0, 0, 0, 0, 0, -10.0), wrench_frame='base')   # 10 N down
    sim.q, sim.v, sim.effort, sim.time
"""
import numpy as np

import robot_dynamics as rd

from .base import Engine, joint_order, joint_vector

ENGINES = ('internal', 'mujoco')
JOINT_DYNAMICS = ('armature', 'viscous', 'coulomb', 'coulomb_velocity', 'stiction',
                  'stribeck_velocity')


def simulate(engine, model, joint_names, q0, dt, damping=None, urdf_xml=None, payload=None,
             end_stops=True):
    """The engine 'internal' or 'mujoco' for the arm ``model``, used as given.

    ``model``: the simulated arm (rd.Model, payload and joint terms included). 'mujoco' builds
    its copy of the arm from ``urdf_xml`` (the URDF ``model`` was loaded from) and ``payload``,
    dict(mass, com, inertia), the payload at the tip that ``model`` carries (rd.with_payload).
    ``damping``: viscous joint damping D (N m s/rad), a number or one per joint (None: 0).
    ``end_stops``: the joints stop at ``model``'s position limits (False: they pass through).
    """
    return engine_class(engine)(model, joint_names, q0, dt, damping=damping, urdf_xml=urdf_xml,
                                payload=payload, end_stops=end_stops)


def engine_class(engine):
    """The Engine subclass of 'internal' or 'mujoco'."""
    if engine == 'internal':
        from .internal import InternalEngine
        return InternalEngine
    if engine == 'mujoco':
        from .mujoco_engine import MujocoEngine
        return MujocoEngine
    raise ValueError(f"unknown simulation engine '{engine}'; known: {', '.join(ENGINES)}")


def make_engine(engine, urdf_xml, base, tip, joint_names, q0, dt, damping=None,
                gravity=(0.0, 0.0, -9.81), payload=None, joint_dynamics=None, end_stops=True):
    """``simulate`` the arm base -> tip of a URDF, its model built here from the arguments.

    ``payload``: dict(mass, com, inertia) rigidly fixed to the tip, com and inertia (about the
    com) in tip axes: carried by the simulated arm, whatever model a controller uses.
    ``joint_dynamics``: dict(armature, viscous, coulomb, coulomb_velocity, stiction,
    stribeck_velocity), the simulated arm's own joint terms (rd.Model's fields; each but
    coulomb_velocity a number or one per joint, in ``joint_names`` order), viscous friction
    adding to D. None: none. The engine keeps both as given (``payload``, ``joint_dynamics``).
    """
    cls = engine_class(engine)
    model = rd.load_urdf(urdf_xml, base=base, tip=tip, gravity=gravity)
    model = with_joint_dynamics(model, joint_names, joint_dynamics)
    if payload and not set(payload) <= {'mass', 'com', 'inertia'}:
        raise ValueError(f'payload takes mass, com and inertia (at the tip), got {payload}')
    loaded = rd.with_payload(model, **payload) if payload else model
    sim = cls(loaded, joint_names, q0, dt, damping=damping, urdf_xml=urdf_xml, payload=payload,
              end_stops=end_stops)
    sim.joint_dynamics = dict(joint_dynamics) if joint_dynamics else None
    return sim


def with_joint_dynamics(model, joint_names, joint_dynamics):
    """The model with the joint terms of ``joint_dynamics`` (``joint_names`` order) in it."""
    if not joint_dynamics:
        return model
    if not set(joint_dynamics) <= set(JOINT_DYNAMICS):
        raise ValueError(f'joint_dynamics takes {", ".join(JOINT_DYNAMICS)}, got '
                         f'{joint_dynamics}')
    order, changes = joint_order(model, joint_names), dict(joint_dynamics)
    for name in set(changes) - {'coulomb_velocity'}:
        x = np.asarray(changes[name], dtype=float)
        x = joint_vector(np.full(model.nv, x) if x.ndim == 0 else x, name, joint_names)
        changes[name] = np.empty(model.nv)
        changes[name][order] = x
    return model.replace(**changes)


__all__ = ['ENGINES', 'Engine', 'make_engine', 'simulate']
