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
Joint limits and contacts are not simulated. Vectors are in ``joint_names`` order.

Coulomb friction f_c tanh(q̇ / ε) is stiff near rest: its slope f_c / ε over the inertia I of the
joint (armature included) must stay below RK4's stability limit 2.8 / dt (at 1 kHz and
ε = 0.01 rad/s: f_c < 28 I N m, I in kg m²); a larger ε or armature relaxes it.

Usage::

    sim = make_engine('mujoco', urdf_xml, 'panda_link0', 'panda_hand', names, q0, dt=1e-3)
    sim.step(tau, wrench=(0, 0, 0, 0, 0, -10.0), wrench_frame='base')   # 10 N down
    sim.q, sim.v, sim.effort, sim.time
"""
from .base import Engine

ENGINES = ('internal', 'mujoco')


def make_engine(engine, urdf_xml, base, tip, joint_names, q0, dt, damping=None,
                gravity=(0.0, 0.0, -9.81), payload=None, joint_dynamics=None):
    """Make a simulation engine, 'internal' or 'mujoco', for the arm base -> tip of a URDF.

    ``damping``: viscous joint damping D (N m s/rad), a number or one per joint (None: 0).
    ``payload``: dict(mass, com, inertia) rigidly fixed to the tip, com and inertia (about the
    com) in tip axes: carried by the simulated arm, whatever model a controller uses.
    ``joint_dynamics``: dict(armature, viscous, coulomb, coulomb_velocity), the simulated arm's
    own joint terms (rd.Model's fields; each of the first three a number or one per joint),
    viscous friction adding to D. None: none.
    """
    if engine == 'internal':
        from .internal import InternalEngine as cls
    elif engine == 'mujoco':
        from .mujoco_engine import MujocoEngine as cls
    else:
        raise ValueError(f"unknown simulation engine '{engine}'; known: {', '.join(ENGINES)}")
    return cls(urdf_xml, base, tip, joint_names, q0, dt, damping=damping, gravity=gravity,
               payload=payload, joint_dynamics=joint_dynamics)


__all__ = ['ENGINES', 'Engine', 'make_engine']
