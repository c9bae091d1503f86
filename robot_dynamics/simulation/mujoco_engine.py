"""The MuJoCo engine: MuJoCo's RK4 on a stripped copy of the same URDF (an independent engine)."""
import contextlib
import math
import threading
import weakref
import xml.etree.ElementTree as ET

import numpy as np

import robot_dynamics as rd

from .base import Engine

COMPILER = {'fusestatic': 'false', 'discardvisual': 'true', 'inertiafromgeom': 'false'}
MOVING = ('revolute', 'continuous', 'prismatic')
JOINT_CHILDREN = ('axis', 'limit', 'mimic', 'dynamics', 'calibration', 'safety_controller')
WRENCH_LINK = '{}__wrench'    # massless link at the tip origin: its COM is the tip origin
PAYLOAD_LINK = '{}__payload'
FAR = 1e10   # MuJoCo's range of a joint limited on one side only: the other side this far


def import_mujoco():
    """Import mujoco, or raise an ImportError that says how to install it."""
    try:
        import mujoco
    except ImportError as error:
        raise ImportError("simulation engine 'mujoco' needs the optional dependency mujoco: "
                          "pip install mujoco (or robot_dynamics[mujoco])") from error
    return mujoco


class MujocoEngine(Engine):
    """mj_step with opt.integrator RK4 at opt.timestep dt on ``mujoco_urdf``'s copy.

    τ goes to qfrc_applied (by joint name); the wrench to xfrc_applied, a force and torque at a
    body's COM in world axes, of a massless link fixed at the tip origin: its COM is the tip origin
    at every RK4 stage, so the moment needs no r x f shift. Both are held over the step, as MuJoCo's
    RK4 does. The joint terms: armature is dof_armature, viscous damping D plus viscous friction
    f_v is dof_damping, and Coulomb friction and stiction the same smooth law as the model's,
    [f_c + f_s exp(−(q̇ / v_s)²)] tanh(q̇ / ε), added to qfrc_passive at every RK4 stage by
    the mjcb_passive callback (not dof_frictionloss: a hard constraint, another law). The callback
    is global in MuJoCo: it is installed only while such an engine computes (MuJoCo then calls it
    for every model, and fails to compile one in another thread meanwhile).

    End stops: MuJoCo's joint limits, jnt_range = the model's position limits, limited where
    either is finite, as stiff as MuJoCo lets a constraint be at this step: solref (2 dt, 1),
    time constant twice the step (MuJoCo's floor) and critically damped, solimp (0.99, 0.999,
    0.001): a soft stop. A joint hitting it at q̇ sinks in by about q̇ dt before it is stopped
    (the Panda's joint 4 at 22 rad/s and 1 kHz: 17 mrad), then settles back to within 10⁻⁴ rad
    of the limit, pushed at its effort limit, without a bounce. Every other constraint
    (contacts, equalities, dry friction) stays disabled; with ``end_stops`` off all of them are.
    """

    def __init__(self, model, joint_names, q0, dt, damping=None, urdf_xml=None, payload=None,
                 end_stops=True):
        super().__init__(model, joint_names, q0, dt, damping, urdf_xml, payload, end_stops)
        self.mj = mujoco = import_mujoco()
        if urdf_xml is None:
            raise ValueError("simulation engine 'mujoco' needs the arm's URDF (urdf_xml)")
        m = self.mj_model = mujoco.MjModel.from_xml_string(
            mujoco_urdf(urdf_xml, self.model, self.payload))
        m.opt.timestep = self.dt
        m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
        m.opt.gravity[:] = self.model.gravity
        ids = [m.joint(name).id for name in self.joint_names]
        assert m.nv == len(ids), f'MuJoCo copy has {m.nv} dofs, expected {len(ids)}'
        self._set_end_stops(ids)
        self.iq, self.iv = m.jnt_qposadr[ids], m.jnt_dofadr[ids]
        m.dof_armature[:] = m.dof_frictionloss[:] = m.dof_damping[:] = 0.0
        model = self.model
        m.dof_armature[self.iv] = model.armature[self.order]
        m.dof_damping[self.iv] = self.damping + model.viscous[self.order]
        self.body = m.body(WRENCH_LINK.format(self.model.tip)).id if self.model.tip else -1
        assert self.body < 0 or (m.body_mass[self.body] == 0 and not m.body_ipos[self.body].any())
        d = self.mj_data = mujoco.MjData(m)
        self._coulomb_model = None
        if model.coulomb.any() or model.stiction.any():
            self._coulomb_model = model.replace(viscous=np.zeros(model.nv))
            self._iv_model = self._to_model(self.iv).astype(int)   # the dof of each model joint
            _COULOMB[id(d)] = self
        d.qpos[self.iq] = self.q0
        self._run(mujoco.mj_forward)

    def _set_end_stops(self, ids):
        """Joint limits from the model's (module docstring); no constraint at all without."""
        m, flags = self.mj_model, self.mj.mjtDisableBit
        limited = np.isfinite(self.lower) | np.isfinite(self.upper)
        if not limited.any():
            m.opt.disableflags |= flags.mjDSBL_CONSTRAINT
            return
        m.opt.disableflags |= flags.mjDSBL_CONTACT | flags.mjDSBL_EQUALITY | \
            flags.mjDSBL_FRICTIONLOSS
        m.jnt_limited[:] = 0
        m.jnt_limited[ids] = limited
        m.jnt_range[ids, 0] = np.maximum(self.lower, -FAR)
        m.jnt_range[ids, 1] = np.minimum(self.upper, FAR)
        m.jnt_solref[ids] = (2.0 * self.dt, 1.0)
        m.jnt_solimp[ids, :3] = (0.99, 0.999, 0.001)

    @property
    def q(self):
        """Joint positions."""
        return self.mj_data.qpos[self.iq]

    @property
    def v(self):
        """Joint velocities."""
        return self.mj_data.qvel[self.iv]

    def _apply(self, tau, F):
        d = self.mj_data
        d.qfrc_applied[self.iv] = tau
        d.xfrc_applied[:] = 0.0
        if F is not None:   # xfrc_applied is (force, torque) at the body's COM, world axes
            d.xfrc_applied[self.body, :3] = F[3:]
            d.xfrc_applied[self.body, 3:] = F[:3]   # the COM is the tip origin: no r x f

    def _advance(self, tau, F):
        self._apply(tau, F)
        d, warning = self.mj_data, self.mj.mjtWarning
        bad = {'position': warning.mjWARN_BADQPOS, 'velocity': warning.mjWARN_BADQVEL,
               'acceleration': warning.mjWARN_BADQACC}
        before = {name: d.warning[w].number for name, w in bad.items()}
        self._run(self.mj.mj_step)
        diverged = [name for name, w in bad.items() if d.warning[w].number != before[name]]
        if diverged:   # MuJoCo has reset the state to qpos0: the arm's motion is lost
            raise ValueError(f"MuJoCo: non-finite or huge {', '.join(diverged)} at "
                             f't = {d.time:.4f} s: the simulation diverged')

    def _set_state(self, q, v):
        d = self.mj_data
        d.qpos[self.iq], d.qvel[self.iv] = q, v
        self._run(self.mj.mj_forward)

    def _holding_torque(self, F):
        """qfrc_bias at q̇ = 0 (MuJoCo's g(q)) minus the joint torques of F (mj_applyFT)."""
        m, d = self.mj_model, self.mj_data
        v = d.qvel.copy()
        d.qvel[:] = 0.0
        self._run(self.mj.mj_forward)
        tau = d.qfrc_bias.copy()
        if F is not None:
            qfrc = np.zeros(m.nv)
            self.mj.mj_applyFT(m, d, F[3:], F[:3], d.xipos[self.body], self.body, qfrc)
            tau -= qfrc
        d.qvel[:] = v
        self._run(self.mj.mj_forward)
        return tau[self.iv]

    def _acceleration(self, tau, F):
        self._apply(tau, F)
        self._run(self.mj.mj_forward)
        return self.mj_data.qacc[self.iv]

    def _tip_rotation(self):
        self.mj.mj_kinematics(self.mj_model, self.mj_data)
        return self.mj_data.xmat[self.body].reshape(3, 3).copy()

    def _run(self, function):
        """function(m, d) (mj_step, mj_forward), with _passive installed if there is Coulomb."""
        if self._coulomb_model is None:
            return function(self.mj_model, self.mj_data)
        with _passive_installed(self.mj):
            return function(self.mj_model, self.mj_data)

    def _add_coulomb(self, d):
        """qfrc_passive -= the sign part of τ_f (rd.joint_friction of the model without f_v)."""
        d.qfrc_passive[self._iv_model] -= rd.joint_friction(self._coulomb_model,
                                                            d.qvel[self._iv_model])


_COULOMB = weakref.WeakValueDictionary()   # id(MjData) -> the MujocoEngine with Coulomb friction
_PASSIVE_LOCK = threading.Lock()
_passive_users = 0                         # calls that need _passive installed now


def _passive(m, d):
    """mjcb_passive, called by mj_passive at every stage: the Coulomb friction of our engines."""
    engine = _COULOMB.get(id(d))
    if engine is not None and engine.mj_data is d:
        engine._add_coulomb(d)


@contextlib.contextmanager
def _passive_installed(mujoco):
    """_passive as MuJoCo's mjcb_passive while any engine with Coulomb friction computes."""
    global _passive_users
    with _PASSIVE_LOCK:
        if _passive_users == 0:
            installed = mujoco.get_mjcb_passive()
            if installed is not None and installed is not _passive:
                raise RuntimeError('Coulomb friction in the MuJoCo engine needs the mjcb_passive '
                                   f'callback, and another one is installed: {installed!r}')
            mujoco.set_mjcb_passive(_passive)
        _passive_users += 1
    try:
        yield
    finally:
        with _PASSIVE_LOCK:
            _passive_users -= 1
            if _passive_users == 0:
                mujoco.set_mjcb_passive(None)


def mujoco_urdf(urdf_xml, model, payload=None):
    """Return a copy of the URDF that MuJoCo loads as the arm ``model`` (a rd.Model of it).

    Kept: the links below model.base (the base becomes MuJoCo's world) with their inertials, and
    the model's joints. Joints below the base that are not the model's degrees of freedom become
    fixed, placed where the model locked them (MuJoCo cannot lock a joint; a mimic joint would
    become an equality constraint). Dropped: visuals, collisions, every other element. Added: the
    MuJoCo compiler options, a massless link at the tip origin and the payload on the tip.
    """
    robot = ET.fromstring(urdf_xml)
    below = _subtree(robot, model.base)
    for element in list(robot):
        if element.tag == 'link' and element.get('name') in below:
            for child in element.findall('visual') + element.findall('collision'):
                element.remove(child)
        elif element.tag == 'joint' and element.find('parent').get('link') in below:
            if element.get('type') in MOVING and element.get('name') not in model.joint_names:
                _lock(element, model)
        else:
            robot.remove(element)
    if model.tip is not None:
        _add_fixed_link(robot, model.tip, WRENCH_LINK.format(model.tip))
        if payload and payload.get('mass', 0.0) > 0.0:
            _add_fixed_link(robot, model.tip, PAYLOAD_LINK.format(model.tip), **payload)
    robot.insert(0, ET.Element('mujoco'))
    ET.SubElement(robot[0], 'compiler', COMPILER)
    return ET.tostring(robot, encoding='unicode')


def _subtree(robot, base):
    """Names of the links at and below ``base``."""
    children = {}
    for joint in robot.findall('joint'):
        children.setdefault(joint.find('parent').get('link'), []).append(
            joint.find('child').get('link'))
    below, stack = {base}, [base]
    while stack:
        for child in children.get(stack.pop(), []):
            below.add(child)
            stack.append(child)
    return below


def _lock(joint, model):
    """Turn a joint into a fixed one at the child's pose in the model: X = X_parent⁻¹ X_child."""
    def placement(link):
        f = model.frame_index(link)
        return model.frame_body[f], model.frame_placement[f]

    (b_parent, X_parent), (b_child, X_child) = (placement(joint.find(tag).get('link'))
                                                for tag in ('parent', 'child'))
    assert b_parent == b_child, f"locked joint '{joint.get('name')}' between two bodies"
    X = np.linalg.solve(X_parent, X_child)
    for child in [c for c in joint if c.tag in JOINT_CHILDREN or c.tag == 'origin']:
        joint.remove(child)
    joint.set('type', 'fixed')
    ET.SubElement(joint, 'origin', xyz=_numbers(X[:3, 3]), rpy=_numbers(matrix_rpy(X[:3, :3])))


def matrix_rpy(R):
    """URDF roll, pitch, yaw of R = Rz(yaw) Ry(pitch) Rx(roll)."""
    cos_pitch = math.hypot(R[0, 0], R[1, 0])
    pitch = math.atan2(-R[2, 0], cos_pitch)
    if cos_pitch < 1e-12:   # pitch ±π/2: only roll ∓ yaw is defined; take yaw = 0
        return math.atan2(-R[1, 2], R[1, 1]), pitch, 0.0
    return math.atan2(R[2, 1], R[2, 2]), pitch, math.atan2(R[1, 0], R[0, 0])


def _add_fixed_link(robot, parent, name, mass=0.0, com=(0.0, 0.0, 0.0), inertia=None):
    """Fix a new link to ``parent`` at its origin; an inertial if mass > 0 (com, inertia at com)."""
    if any(e.get('name') in (name, name + '_joint') for e in robot):
        raise ValueError(f"the URDF already has a link or joint named '{name}'")
    link = ET.SubElement(robot, 'link', name=name)
    if mass > 0.0:
        inertial = ET.SubElement(link, 'inertial')
        ET.SubElement(inertial, 'origin', xyz=_numbers(com), rpy='0 0 0')
        ET.SubElement(inertial, 'mass', value=repr(float(mass)))
        tensor = np.zeros((3, 3)) if inertia is None else np.asarray(inertia, dtype=float)
        axes = {'x': 0, 'y': 1, 'z': 2}
        ET.SubElement(inertial, 'inertia', {f'i{a}{b}': repr(float(tensor[axes[a], axes[b]]))
                                            for a, b in ('xx', 'xy', 'xz', 'yy', 'yz', 'zz')})
    joint = ET.SubElement(robot, 'joint', name=name + '_joint', type='fixed')
    ET.SubElement(joint, 'parent', link=parent)
    ET.SubElement(joint, 'child', link=name)


def _numbers(values):
    return ' '.join(repr(float(x)) for x in values)
