"""A control law closed around a plant in one process, no ROS: one arm_simulator cycle per step.

Each step: the sensors report (q, q̇, τ) (``Plant.sense``), the law computes τ from them, τ is
clamped to the URDF's effort limits, delayed (``Plant.command``), and the engine steps with it
less the plant's held friction, as ``arm_simulator`` does when a controller answers every state
in time. For tests, the demo's realistic scene and measurements of controller options; the
same loop over DDS is ``tools.identification_loop``.

    loop = realistic_plant('internal', rd.robot_urdf('panda'), 'panda_link0', 'panda_hand_tcp',
                           q0, profile=plant.REALISTIC)
    t, q, v, effort, tau = loop.run(lambda t, q, v: law(q, v), 2.0)
"""
import numpy as np

import robot_dynamics as rd

from . import make_engine
from . import plant as plant_layers


class PlantLoop:
    """An engine and the plant's layers around it (``plant.Plant``), stepped with a law."""

    def __init__(self, sim, plant):
        self.sim, self.plant = sim, plant
        self.effort = np.zeros(len(sim.joint_names))   # the applied command, as reported
        self.limits = sim.model.effort_limit[sim.order]

    @property
    def time(self):
        return self.sim.time

    def sense(self):
        """(q, q̇, τ) as the sensors report them now."""
        return self.plant.sense(self.sim.q, self.sim.v, self.effort)

    def step(self, tau, wrench=None):
        """One step with the command τ (joint_names order): clamped, delayed, less friction."""
        command = self.plant.command(np.clip(tau, -self.limits, self.limits))
        self.effort = command
        self.sim.step(command - self.plant.friction(self.sim.v), wrench)

    def run(self, law, duration, wrench=None):
        """Close ``law(t, q, q̇) -> τ`` for ``duration`` s.

        Returns per step (t, q, q̇, reported effort, command τ), the first three as measured.
        """
        rows = []
        for _ in range(int(round(duration / self.sim.dt))):
            t = self.sim.time
            q, v, effort = self.sense()
            tau = law(t, q, v)
            rows.append((t, q, v, effort, tau))
            self.step(tau, wrench)
        return tuple(np.array(x) for x in zip(*rows))


def per_joint(profile, key, n):
    """A profile's per-joint value as (n,) (a number applies to every joint), None if absent."""
    value = profile.get(key)
    return None if value is None else np.broadcast_to(np.asarray(value, dtype=float), (n,)).copy()


def realistic_plant(engine, urdf, base, tip, q0, dt=1e-3, profile=plant_layers.REALISTIC,
                    seed=0):
    """A PlantLoop on ``profile`` (keys as ``plant.PROFILES``; chain order), joints in chain order.

    The plant's URDF is ``urdf`` perturbed by ``plant.mass_error`` and ``plant.com_error``;
    armature, viscous and Coulomb friction go into the engine, stiction and the sigmoid law into
    ``plant.Friction``, delay and sensors into ``plant.Plant``; ``seed`` seeds both. With
    ``plant.dry_friction`` (plant.REALISTIC_STICTION) the Coulomb friction and stiction are the
    internal engine's dry friction that holds (simulation.dry_friction).
    """
    holds = bool(profile.get('plant.dry_friction', False))
    if holds and engine != 'internal':
        raise ValueError(f"plant.dry_friction needs the internal engine, got '{engine}'")
    names = rd.load_urdf(urdf, base=base, tip=tip).joint_names
    n = len(names)
    mass_error = profile.get('plant.mass_error', 0.0)
    com_error = profile.get('plant.com_error', 0.0)
    if mass_error or com_error:
        urdf = plant_layers.perturbed_urdf(urdf, mass_error, com_error, seed)[0]
    terms = {field: per_joint(profile, key, n) for field, key in (
        ('armature', 'armature'), ('viscous', 'friction.viscous'),
        ('coulomb', 'friction.coulomb'))}
    terms = {k: x for k, x in terms.items() if x is not None}
    sim = make_engine(engine, urdf, base, tip, names, q0, dt, joint_dynamics=terms or None)
    sigmoid = {k: per_joint(profile, f'plant.sigmoid_friction.{k}', n)
               for k in ('amplitude', 'slope', 'offset')}
    friction = plant_layers.Friction(
        n, per_joint(profile, 'plant.stiction', n), terms.get('coulomb'),
        profile.get('plant.stribeck_velocity', 0.05), sim.model.coulomb_velocity,
        sigmoid if sigmoid['amplitude'] is not None else None, holds)
    if holds:
        sim.hold_dry_friction(friction.breakaway, friction.stribeck)
    sensors = plant_layers.Sensors(
        n, profile.get('plant.position_resolution', 0.0), profile.get('plant.velocity_noise', 0.0),
        profile.get('plant.effort_noise', 0.0), per_joint(profile, 'plant.effort_offset', n), seed)
    return PlantLoop(sim, plant_layers.Plant(n, friction, profile.get('plant.command_delay', 0),
                                             sensors))
