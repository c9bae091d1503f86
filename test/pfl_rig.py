"""A MuJoCo rig for power and force limiting: an arm swinging into ISO/TS 15066's body model.

The body region is the standard's two masses and a spring (A.3): a body of the region's
effective mass m_H on a free slide joint along the tool's direction of motion, carrying a light
skin plate on a slide joint of the region's spring constant k (the skin's mass counted in m_H);
the tool (a sphere at the tip) hits the plate, the contact itself much stiffer than k. The force
on the body is the spring's, k times the skin's deflection: MuJoCo's dynamics, independent of
ours. ``free_mass`` is the rig's calibration: a free mass, or one pulled by a spring and damper
towards a reference moving on, hitting the body at a given speed.

``swing`` runs an arm in a closed loop with core's computed torque at 1 kHz on MuJoCo at
50 kHz: the swing's reference, slowed by core's SpeedScaling on a ScaledClock (what the
controller's speed limiter runs) or not, and optionally the controller's contact reaction
(core's momentum observer on the commanded torque, CollisionDetector with its default
thresholds, then the stop reaction: hold the position at detection).
"""
import dataclasses
import math

import numpy as np
from scipy.spatial.transform import Rotation

import robot_dynamics as rd
from robot_dynamics.core import power_force_limiting as pfl
from robot_dynamics.core.collision import CollisionDetector, stop_reference
from robot_dynamics.core.algorithms.jacobians import LOCAL_WORLD_ALIGNED
from robot_dynamics.core.control import ComputedTorque
from robot_dynamics.core.observers import MomentumObserver
from robot_dynamics.core.task_control import OperationalSpace
from robot_dynamics.core.trajectory import JointTrajectory

import mujoco  # noqa: I100 (the test modules skip without it before importing this one)
from robot_dynamics.simulation.mujoco_engine import mujoco_urdf  # noqa: I100,I202

DT, SUBSTEPS = 1e-3, 50     # control period; MuJoCo steps per control period
RADIUS, SKIN = 0.01, 0.005  # m: the tool sphere; half the plate's thickness
SKIN_MASS = 0.005           # kg per kg of min(m_H, 1 kg): the plate, light beside μ
KP, KD = 400.0, 40.0        # the controller's default computed-torque gains (1/s², 1/s)
OBSERVER_GAIN = 50.0        # 1/s: the controller's default
CONTACT = [2.0 * DT / SUBSTEPS, 1.0]   # both geoms' solref (mixed): stiff beside k
AFTER = 0.6                 # s of the run after the swing's end


@dataclasses.dataclass(frozen=True)
class Arm:
    """A shipped arm, its swing (the tip's fastest point is where the body stands), payload."""

    name: str
    base: str
    tip: str
    times: tuple
    waypoints: tuple
    payload: float = 0.0

    def load(self):
        urdf = open(rd.robot_urdf(self.name)).read()
        unloaded = rd.load_urdf(urdf, self.base, self.tip)
        if not self.payload:
            return urdf, unloaded, unloaded
        return urdf, unloaded, rd.with_payload(unloaded, **self.payload_dict())

    def payload_dict(self):
        return {'mass': self.payload, 'com': [0.0, 0.0, 0.05]} if self.payload else None

    def trajectory(self):
        return JointTrajectory(list(self.times), np.array(self.waypoints))


UR5E_Q0 = np.array([0.0, -1.2, 1.5, -1.9, -1.57, 0.0])
UR5E = Arm('ur5e', 'base_link', 'tool0', (0.0, 0.8, 1.6), tuple(map(tuple, UR5E_Q0 + np.array(
    [[0.0] * 6, [0.8, 0.3, -0.4, 0.2, 0.3, 0.0], [1.6, 0.0, 0.0, 0.0, 0.0, 0.0]]))))
PANDA = Arm('panda', 'panda_link0', 'panda_hand_tcp', (0.0, 1.4), (
    (-1.2, -0.3, 0.0, -2.0, 0.0, 1.8, 0.8), (1.2, 0.3, 0.0, -1.6, 0.0, 2.0, 0.8)))


@dataclasses.dataclass
class Contact:
    """What a run saw: the first contact's peak force, the largest force after it (N)."""

    speed: float            # m/s, the tip's at first contact
    reflected_mass: float   # kg, m_R there along the motion
    first: float            # N, the peak over the first contact (2 T_0 at most)
    later: float            # N, the largest force after it
    detected: float = None  # s after first contact the reaction started (None: none)


def body(spec, region, position, direction):
    """The region's two masses and spring, the plate's face at ``position``, normal ``direction``.

    Returns the name of the skin's joint.
    """
    u = np.asarray(direction, float) / np.linalg.norm(direction)
    axes = np.linalg.qr(np.column_stack([u, np.eye(3)]))[0][:, :3]
    axes *= np.sign(axes[:, 0] @ u)
    axes[:, 2] = np.cross(axes[:, 0], axes[:, 1])
    x, y, z, w = Rotation.from_matrix(axes).as_quat()
    skin_mass = SKIN_MASS * min(region.effective_mass, 1.0)
    trunk = spec.worldbody.add_body()
    trunk.name, trunk.pos, trunk.quat = 'body', position + SKIN * u, [w, x, y, z]
    trunk.mass, trunk.inertia, trunk.gravcomp = region.effective_mass - skin_mass, [1.0] * 3, 1.0
    slide(trunk, 'body', 0.0)
    skin = trunk.add_body()
    skin.name, skin.mass, skin.inertia, skin.gravcomp = 'skin', skin_mass, [1e-4] * 3, 1.0
    slide(skin, 'skin', region.spring_constant)
    plate = skin.add_geom()
    plate.type, plate.size = mujoco.mjtGeom.mjGEOM_BOX, [SKIN, 0.1, 0.1]
    plate.solref = CONTACT
    return 'skin'


def tool_sphere(body):
    sphere = body.add_geom()
    sphere.type, sphere.size, sphere.solref = mujoco.mjtGeom.mjGEOM_SPHERE, [RADIUS, 0, 0], CONTACT


def slide(body, name, stiffness):
    joint = body.add_joint()
    joint.name, joint.type, joint.axis = name, mujoco.mjtJoint.mjJNT_SLIDE, [1.0, 0.0, 0.0]
    joint.stiffness = [stiffness, 0.0, 0.0]


def compile_scene(spec):
    m = spec.compile()
    m.opt.timestep = DT / SUBSTEPS
    m.dof_armature[:] = m.dof_damping[:] = m.dof_frictionloss[:] = 0.0
    return m


def free_contact_duration(robot_mass, region):
    """T_0 = π sqrt(μ / k): the half period of the free two-mass contact."""
    return math.pi * math.sqrt(pfl.reduced_mass(robot_mass, region.effective_mass)
                               / region.spring_constant)


def free_mass(region, mass, speed, kp=0.0, kd=0.0):
    """Peak body force of a mass hitting the body at ``speed``, over the first contact.

    The mass is pulled (kp, kd per unit mass) towards a reference moving on at ``speed``; the
    first contact ends when the force returns to 0, at most 4 T_0 after it began.
    """
    spec = mujoco.MjSpec()
    spec.compiler.inertiafromgeom = mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_FALSE
    robot = spec.worldbody.add_body()
    robot.name, robot.mass, robot.inertia = 'robot', mass, [1e-3] * 3
    slide(robot, 'robot', 0.0)
    tool_sphere(robot)
    skin = body(spec, region, np.array([RADIUS, 0.0, 0.0]), [1.0, 0.0, 0.0])
    spec.option.gravity = [0.0, 0.0, 0.0]
    m = compile_scene(spec)
    d = mujoco.MjData(m)
    d.qvel[m.joint('robot').dofadr[0]] = speed
    x_s, t_end, peak, touched = m.joint(skin).qposadr[0], 4.0 * free_contact_duration(
        mass, region), 0.0, None
    while touched is None or d.time < touched + t_end:
        x, v = d.qpos[0], d.qvel[0]
        d.qfrc_applied[0] = mass * (kp * (speed * d.time - x) + kd * (speed - v))
        mujoco.mj_step(m, d)
        force = region.spring_constant * d.qpos[x_s]
        if touched is None and d.ncon:
            touched = d.time
        if touched is not None and force <= 0.0 < peak:   # the first contact ended
            break
        peak = max(peak, force)
    return peak


def scene(arm, region, position, direction):
    urdf, unloaded, _ = arm.load()
    spec = mujoco.MjSpec.from_string(mujoco_urdf(urdf, unloaded, arm.payload_dict()))
    tool_sphere(spec.body(arm.tip))
    skin = body(spec, region, position + RADIUS * direction, direction)
    return compile_scene(spec), skin


def contact_site(model, arm):
    """The tip's position and unit velocity where the nominal swing is fastest (base axes)."""
    swing = arm.trajectory()
    times = np.linspace(0.0, arm.times[-1], 401)
    speeds = [np.linalg.norm(pfl.point_velocity(model, *swing.sample(t)[:2], arm.tip))
              for t in times]
    q, v, _ = swing.sample(times[int(np.argmax(speeds))])
    velocity = pfl.point_velocity(model, q, v, arm.tip)
    return rd.frame_pose(model, q, arm.tip)[:3, 3], velocity / np.linalg.norm(velocity)


class TaskTracking:
    """operational_space (inertia shaping) at the controller's defaults, on the swing's tip pose.

    K = 400/s² and ζ = 1 on every axis, |e| clipped at 0.05 m and 0.25 rad, a redundant arm's
    posture held at 10 N m/rad and 2 N m s/rad. The target: the tip's pose, twist J q̇ and
    acceleration (the twist's difference over a period) along the scaled swing, as a stream
    played back on the scaled clock would give them; the scale from the nominal twist through
    the joint velocity of least kinetic energy at the measured q, as the controller does.
    """

    def __init__(self, model, tip):
        self.model, self.tip, self.twist = model, tip, None
        self.law = OperationalSpace(model, np.full(6, KP), 1.0, inertia_shaping=True,
                                    nullspace_stiffness=10.0, nullspace_damping=2.0,
                                    max_error=(0.05, 0.25))

    def nominal(self, q, q_d, v_nominal):
        """The joint velocity the scale is computed on: J̄ ẋ_n at the measured q."""
        J = rd.frame_jacobian(self.model, q_d, self.tip, reference=LOCAL_WORLD_ALIGNED)
        return pfl.twist_joint_velocity(self.model, q, self.tip, J @ v_nominal)

    def __call__(self, q, v, q_d, v_d, a_d):
        J = rd.frame_jacobian(self.model, q_d, self.tip, reference=LOCAL_WORLD_ALIGNED)
        twist = J @ v_d
        accel = np.zeros(6) if self.twist is None else (twist - self.twist) / DT
        self.twist = twist
        return self.law(q, v, rd.frame_pose(self.model, q_d, self.tip), twist, accel)


def swing(arm, region, scaling=None, react=False, task=False):
    """Swing ``arm`` into ``region``'s body; ``scaling``: a SpeedScaling (None: unscaled).

    ``react``: the contact reaction (observer, default thresholds, stop: computed torque holds
    the position at detection, in every mode). ``task``: track the swing in operational space
    (TaskTracking) instead of computed torque. Returns a Contact.
    """
    _, _, model = arm.load()
    m, skin = scene(arm, region, *contact_site(model, arm))
    d = mujoco.MjData(m)
    joints = [m.joint(n) for n in model.joint_names]
    iq, iv = [j.qposadr[0] for j in joints], [j.dofadr[0] for j in joints]
    x_s, trajectory = m.joint(skin).qposadr[0], arm.trajectory()
    d.qpos[iq] = trajectory.sample(0.0)[0]
    mujoco.mj_forward(m, d)
    control = ComputedTorque(model, np.full(model.nv, KP), np.full(model.nv, KD))
    tracking = TaskTracking(model, arm.tip) if task else control
    observer = MomentumObserver(model, np.full(model.nv, OBSERVER_GAIN))
    detector, held = CollisionDetector(model), None
    clock, forces, touched, tau, contact, still = pfl.ScaledClock(), [], None, None, None, None
    while touched is None or still is None or d.time < max(touched, still) + AFTER:
        assert d.time < 8.0, 'the tool never touched the body'
        if still is None and (held is not None or clock.tau >= arm.times[-1]):
            still = d.time   # the reference stands: the swing's end, or the reaction's hold
        q, v = d.qpos[iq].copy(), d.qvel[iv].copy()
        if react and tau is not None and held is None:
            residual = observer.update(q, v, tau, DT)
            if detector.update(d.time, residual, q) is not None:
                held = stop_reference(q)
        elif react and tau is None:
            observer.update(q, v, np.zeros(model.nv), 0.0)
        if held is None:
            q_d, v_nominal, _ = trajectory.sample(clock.tau)
            if task:
                v_nominal = tracking.nominal(q, q_d, v_nominal)
            clock.advance(scaling.update(q_d, v_nominal, DT) if scaling else 1.0, DT)
            tau = tracking(q, v, *clock.sample(trajectory))
        else:
            tau = control(q, v, *held)
        d.qfrc_applied[iv] = tau
        for _ in range(SUBSTEPS):
            mujoco.mj_step(m, d)
            forces.append((d.time, region.spring_constant * d.qpos[x_s]))
        if touched is None and d.ncon:
            velocity = pfl.point_velocity(model, q, v, arm.tip)
            touched = d.time
            contact = (np.linalg.norm(velocity), pfl.reflected_mass(model, q, arm.tip, velocity))
            assert held is None, 'the reaction stopped the arm before it touched the body'
    return split(forces, touched, contact, region, held, detector)


def split(forces, touched, contact, region, held, detector):
    """The first contact's peak (until the force first returns to 0, at most 2 T_0) and later."""
    t, f = np.array(forces).T
    start = np.searchsorted(t, touched - DT)
    end_by = touched + 2.0 * free_contact_duration(contact[1], region)
    first_end = start + 1
    while first_end < len(t) and t[first_end] < end_by and not (
            f[first_end] <= 0.0 and f[start:first_end].max() > 0.0):
        first_end += 1
    later = f[first_end:].max() if first_end < len(t) else 0.0
    detected = None if held is None else detector.event.time - touched
    return Contact(contact[0], contact[1], float(f[start:first_end].max()), float(later),
                   detected)
