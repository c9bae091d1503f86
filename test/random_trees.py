"""Seeded random URDF trees, and the reference engines built from the same XML.

`random_urdf(seed, n_joints)` writes a branched tree: each link hangs from a link chosen at
random among the earlier ones, through a revolute (random unit axis), continuous, prismatic
(random axis) or fixed joint, with random origins, masses, centres of mass and inertia tensors.
Pinocchio and MuJoCo load the very same string, so every algorithm has two independent
references on trees nobody hand-picked (the idea of Featherstone's spatial_v2 random trees).

`PinocchioReference` and `MujocoReference` answer in robot_dynamics' conventions: angular-first
spatial vectors, one coordinate per joint in the order of `joint_names`, quantities relative to
the `base` link, joints outside the model locked at 0 clamped into their limits.
"""
import xml.etree.ElementTree as ET

import numpy as np

MOVING_TYPES = ("revolute", "continuous", "prismatic")
ERRORS = {}  # label -> largest relative error seen, for the closing note's figures


# --- rotations (URDF rpy: R = Rz(yaw) Ry(pitch) Rx(roll)) -------------------------------------

def rpy_matrix(rpy):
    """Rotation matrix of URDF roll-pitch-yaw angles."""
    (cr, cp, cy), (sr, sp, sy) = np.cos(rpy), np.sin(rpy)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def matrix_rpy(R):
    """URDF roll-pitch-yaw angles of a rotation matrix (away from pitch = +-pi/2)."""
    return np.array([np.arctan2(R[2, 1], R[2, 2]),
                     np.arctan2(-R[2, 0], np.hypot(R[0, 0], R[1, 0])),
                     np.arctan2(R[1, 0], R[0, 0])])


def axis_angle_matrix(axis, angle):
    """Rodrigues' formula, R = I + sin(t) [a] + (1 - cos(t)) [a]^2 for a unit axis a."""
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    K = skew(a)
    return np.eye(3) + np.sin(angle) * K + (1.0 - np.cos(angle)) * K @ K


def skew(w):
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def random_rotation(rng):
    """Uniformly distributed rotation matrix (normalised Gaussian quaternion)."""
    w, x, y, z = (q := rng.normal(size=4)) / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


# --- the generator -----------------------------------------------------------------------------

def _fmt(values):
    return " ".join(repr(float(x)) for x in values)


def _origin(parent, xyz, rpy):
    ET.SubElement(parent, "origin", xyz=_fmt(xyz), rpy=_fmt(rpy))


def _inertial(link, rng):
    """Add a random <inertial>: mass, COM, and an inertia rotated by a random rotation.

    Its principal moments (s2+s3, s1+s3, s1+s2) with s_i > 0, the moments of a real mass
    distribution, satisfy the triangle inequality strictly.
    """
    mass = rng.uniform(0.2, 5.0)
    s = mass * rng.uniform(0.002, 0.05, 3)
    R = random_rotation(rng)
    inertia = R @ np.diag(s.sum() - s) @ R.T
    inertial = ET.SubElement(link, "inertial")
    _origin(inertial, rng.uniform(-0.2, 0.2, 3), rng.uniform(-np.pi, np.pi, 3))
    ET.SubElement(inertial, "mass", value=repr(mass))
    names = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
    values = inertia[np.triu_indices(3)]
    ET.SubElement(inertial, "inertia", {k: repr(float(x)) for k, x in zip(names, values)})


def _axis(rng):
    """None (URDF default 1 0 0), a signed coordinate axis, or a random unit vector."""
    pick = rng.random()
    if pick < 0.15:
        return None
    if pick < 0.4:
        axis = np.zeros(3)
        axis[rng.integers(3)] = rng.choice([-1.0, 1.0])
        return axis
    axis = rng.normal(size=3)
    return axis / np.linalg.norm(axis)


def _joint(robot, rng, name, kind, parent, child):
    joint = ET.SubElement(robot, "joint", name=name, type=kind)
    _origin(joint, rng.uniform(-0.4, 0.4, 3), rng.uniform(-np.pi, np.pi, 3))
    ET.SubElement(joint, "parent", link=parent)
    ET.SubElement(joint, "child", link=child)
    if kind == "fixed":
        return
    axis = _axis(rng)
    if axis is not None:
        ET.SubElement(joint, "axis", xyz=_fmt(axis))
    # lower sometimes > 0: a locked joint then sits at its lower limit, not at 0
    lower = rng.uniform(-3.0, 0.4) if kind == "revolute" else rng.uniform(-0.5, 0.1)
    limit = {"lower": repr(lower), "upper": repr(lower + rng.uniform(0.3, 3.0)),
             "effort": repr(rng.uniform(1, 100)), "velocity": repr(rng.uniform(0.5, 3))}
    if kind == "continuous":
        limit = {k: limit[k] for k in ("effort", "velocity")}
    if kind != "continuous" or rng.random() < 0.5:
        ET.SubElement(joint, "limit", limit)
    if rng.random() < 0.3:
        ET.SubElement(joint, "dynamics", damping="0.3", friction="0.1")


def random_urdf(seed, n_joints, n_fixed=2, frame=True):
    """URDF string of a random branched tree with `n_joints` moving joints.

    Each link's parent is the previous link or, half of the time, any earlier one. Of the
    `n_fixed` fixed joints (at least 2), one carries a link that gets the next link as a
    child (a fixed link in the middle), one carries a massive leaf (a tool) at the end; with
    `frame`, a massless leaf ("tcp") hangs from the tool by a fixed joint too.
    """
    rng = np.random.default_rng(seed)
    kinds = list(rng.choice(MOVING_TYPES, n_joints))
    middle = [int(rng.integers(len(kinds) + 1)) for _ in range(n_fixed - 1)]
    for k in sorted(middle, reverse=True):
        kinds.insert(k, "fixed")
    kinds.append("fixed")
    robot = ET.Element("robot", name=f"random_tree_{seed}")
    root = ET.SubElement(robot, "link", name="link0")
    if rng.random() < 0.5:  # a root link without <inertial> is common and harmless
        _inertial(root, rng)
    force_parent = None
    for i, kind in enumerate(kinds, start=1):
        name = "tool" if i == len(kinds) else f"link{i}"
        _inertial(ET.SubElement(robot, "link", name=name), rng)
        parent = force_parent if force_parent is not None else \
            i - 1 if rng.random() < 0.5 else int(rng.integers(i))  # deep, yet branched
        parent_name = "link0" if parent == 0 else f"link{parent}"
        _joint(robot, rng, f"joint{i}", kind, parent_name, name)
        force_parent = i if kind == "fixed" and i < len(kinds) else None
    if frame:
        ET.SubElement(robot, "link", name="tcp")
        _joint(robot, rng, "tcp_joint", "fixed", "tool", "tcp")
    elements = list(robot)
    rng.shuffle(elements)  # a URDF may list its links and joints in any order
    robot[:] = elements
    return ET.tostring(robot, encoding="unicode")


# --- reading a URDF back -------------------------------------------------------------------------

def _floats(element, attribute, default):
    if element is None or element.get(attribute) is None:
        return np.array(default, float)
    return np.array(element.get(attribute).split(), float)


def urdf_joints(xml):
    """{joint name: dict(type, parent, child, xyz, rpy, axis, lower, upper)} of a URDF string."""
    joints = {}
    for j in ET.fromstring(xml).iter("joint"):
        origin, limit = j.find("origin"), j.find("limit")
        joints[j.get("name")] = dict(
            type=j.get("type"), parent=j.find("parent").get("link"),
            child=j.find("child").get("link"),
            xyz=_floats(origin, "xyz", [0, 0, 0]), rpy=_floats(origin, "rpy", [0, 0, 0]),
            axis=_floats(j.find("axis"), "xyz", [1, 0, 0]),
            lower=float(limit.get("lower", 0)) if limit is not None else 0.0,
            upper=float(limit.get("upper", 0)) if limit is not None else 0.0)
    return joints


def urdf_inertials(xml):
    """{link name: (mass, com, inertia about com)} in link axes, links with an <inertial>."""
    inertials = {}
    for link in ET.fromstring(xml).iter("link"):
        inertial = link.find("inertial")
        if inertial is None:
            continue
        origin, i = inertial.find("origin"), inertial.find("inertia")
        R = rpy_matrix(_floats(origin, "rpy", [0, 0, 0]))
        ixx, ixy, ixz, iyy, iyz, izz = (float(i.get(k)) for k in
                                        ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"))
        inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
        inertials[link.get("name")] = (float(inertial.find("mass").get("value")),
                                       _floats(origin, "xyz", [0, 0, 0]), R @ inertia @ R.T)
    return inertials


def root_link(xml):
    joints = urdf_joints(xml).values()
    children = {j["child"] for j in joints}
    return next(link.get("name") for link in ET.fromstring(xml).iter("link")
                if link.get("name") not in children)


def leaf_links(xml):
    joints = urdf_joints(xml).values()
    parents = {j["parent"] for j in joints}
    return [j["child"] for j in joints if j["child"] not in parents]


def moving_joints(xml, base=None, tip=None):
    """Names of the non-fixed joints on the path base..tip, or in the whole tree below base."""
    joints = urdf_joints(xml)
    by_child = {j["child"]: name for name, j in joints.items()}
    base = base or root_link(xml)
    if tip is None:
        below = {base}
        changed = True  # a URDF may list joints in any order: iterate to a fixed point
        while changed:
            changed = False
            for name, j in joints.items():
                if j["parent"] in below and j["child"] not in below:
                    below.add(j["child"])
                    changed = True
        path = [by_child[link] for link in below if link != base]
    else:
        path, link = [], tip
        while link != base:
            path.append(by_child[link])  # KeyError: tip not below base
            link = joints[path[-1]]["parent"]
    return sorted((n for n in path if joints[n]["type"] in MOVING_TYPES), key=list(joints).index)


def locked_positions(xml, moving):
    """Return {joint: position} of every non-fixed joint not in `moving`.

    The position is 0 clamped into the joint limits (continuous joints have none).
    """
    locked = {}
    for name, j in urdf_joints(xml).items():
        if j["type"] in MOVING_TYPES and name not in moving:
            bounded = j["type"] != "continuous" and j["lower"] < j["upper"]
            locked[name] = float(np.clip(0.0, j["lower"], j["upper"])) if bounded else 0.0
    return locked


def lock_joints(xml, locked):
    """Make each locked joint a fixed joint at its position {joint: q}.

    The origin is composed with the joint motion: R_origin Rot(axis, q) for revolute and
    continuous joints, xyz + R_origin axis q for prismatic ones.
    """
    robot = ET.fromstring(xml)
    joints = urdf_joints(xml)
    for element in robot.iter("joint"):
        name = element.get("name")
        if name not in locked:
            continue
        j, q = joints[name], locked[name]
        R, xyz = rpy_matrix(j["rpy"]), j["xyz"]
        if j["type"] == "prismatic":
            xyz = xyz + R @ (j["axis"] / np.linalg.norm(j["axis"])) * q
        else:
            R = R @ axis_angle_matrix(j["axis"], q)
        for tag in ("origin", "axis", "limit", "mimic", "dynamics"):
            for child in element.findall(tag):
                element.remove(child)
        element.set("type", "fixed")
        element.insert(0, ET.Element("origin", xyz=_fmt(xyz), rpy=_fmt(matrix_rpy(R))))
    return ET.tostring(robot, encoding="unicode")


def add_fixed_link(xml, parent, name, mass, com, inertia, xyz=(0, 0, 0), rpy=(0, 0, 0)):
    """Fix a new link `name` to `parent` at origin (xyz, rpy).

    Its mass, com and 3x3 inertia about the com are given in its own axes.
    """
    robot = ET.fromstring(xml)
    link = ET.SubElement(robot, "link", name=name)
    inertial = ET.SubElement(link, "inertial")
    _origin(inertial, com, (0, 0, 0))
    ET.SubElement(inertial, "mass", value=repr(float(mass)))
    keys = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
    values = np.asarray(inertia)[np.triu_indices(3)]
    ET.SubElement(inertial, "inertia", {k: repr(float(x)) for k, x in zip(keys, values)})
    joint = ET.SubElement(robot, "joint", name=name + "_joint", type="fixed")
    _origin(joint, xyz, rpy)
    ET.SubElement(joint, "parent", link=parent)
    ET.SubElement(joint, "child", link=name)
    return ET.tostring(robot, encoding="unicode")


# --- the test cases: shipped arms and random trees, named by a string for pytest ids ----------

class Case:
    """A URDF string and the loader arguments: base, tip, gravity."""

    def __init__(self, name, xml, base=None, tip=None, gravity=(0.0, 0.0, -9.81)):
        self.name, self.xml, self.base, self.tip = name, xml, base, tip
        self.gravity = np.asarray(gravity, float)

    def load(self, **changes):
        import robot_dynamics as rd
        kwargs = dict(base=self.base, tip=self.tip, gravity=self.gravity) | changes
        return rd.load_urdf(self.xml, **kwargs)


ARMS = ("panda/panda_link0/panda_hand", "ur5e/base_link/tool0")
MORE_ARMS = ("panda/panda_link0/panda_leftfinger",  # finger_joint2 locked, its mimic ignored
             "panda/panda_link2/panda_hand_tcp")    # base not the root: joints 1-2 locked
TREES = ("tree-1-1", "tree-2-4", "chain-3-7", "tree-4-12", "subtree-5-9", "tilted-6-6",
         "chain-7-12")


def make_case(name):
    """Build the case of a name: 'arm/base/tip' or 'mode-seed-n_joints'.

    'arm/base/tip' is a shipped URDF; 'mode-seed-n_joints' a random tree with mode tree
    (base = root, no tip), chain (tip = the leaf with the longest chain), subtree (base = the
    link with the largest subtree) or tilted (a random gravity vector). Deterministic.
    """
    if "/" in name:
        import robot_dynamics as rd
        arm, base, tip = name.split("/")
        with open(rd.robot_urdf(arm)) as f:
            return Case(name, f.read(), base, tip)
    mode, seed, n = name.split("-")
    xml = random_urdf(int(seed), int(n))
    rng = np.random.default_rng(int(seed))
    if mode == "chain":
        return Case(name, xml, tip=max(leaf_links(xml), key=lambda leaf: len(moving_joints(
            xml, tip=leaf))))  # the longest chain
    if mode == "subtree":
        inner = [j["child"] for j in urdf_joints(xml).values()]
        return Case(name, xml, base=max(inner, key=lambda link: len(moving_joints(
            xml, base=link))))  # the largest subtree
    if mode == "tilted":
        g = rng.normal(size=3)
        return Case(name, xml, gravity=9.81 * g / np.linalg.norm(g))
    return Case(name, xml)


# --- comparison ---------------------------------------------------------------------------------

def assert_close(actual, expected, rtol=1e-9, atol=1e-12, label=None):
    """Assert ||actual - expected|| <= rtol ||expected|| + atol (Frobenius norms).

    The relative error is recorded under `label` in ERRORS (unless expected is ~0, where it
    means nothing).
    """
    actual, expected = np.asarray(actual, float), np.asarray(expected, float)
    assert actual.shape == expected.shape, f"{label}: shape {actual.shape} != {expected.shape}"
    error = np.linalg.norm(actual - expected)
    scale = np.linalg.norm(expected)
    if label is not None and scale > 1e3 * atol:
        ERRORS[label] = max(ERRORS.get(label, 0.0), error / scale)
    assert error <= rtol * scale + atol, (
        f"{label}: |error| {error:.3e}, relative {error / max(scale, 1e-300):.3e} > {rtol:.0e}"
        f"\nactual:\n{actual}\nexpected:\n{expected}")


def random_state(lower, upper, rng):
    """Draw q inside finite limits (else in [-pi, pi]), v and a in [-1, 1]."""
    lo = np.where(np.isfinite(lower), lower, -np.pi)
    hi = np.where(np.isfinite(upper), upper, np.pi)
    n = len(lo)
    return rng.uniform(lo, hi), rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)


def joint_terms(nv, rng):
    """Random joint terms of nv joints: Model.replace keywords (armature, friction, ε, v_s)."""
    return dict(armature=rng.uniform(0.05, 0.5, nv), viscous=rng.uniform(0.1, 2.0, nv),
                coulomb=rng.uniform(0.1, 1.0, nv), coulomb_velocity=rng.uniform(0.02, 0.1),
                stiction=rng.uniform(0.05, 0.5, nv), stribeck_velocity=rng.uniform(0.1, 1.0, nv))


# --- finite differences (4th-order central stencil, error O(h^4)) -----------------------------

def derivative(f, h=1e-3):
    """d/dt f(t) at t = 0: (f(-2h) - 8 f(-h) + 8 f(h) - f(2h)) / 12h."""
    return (f(-2 * h) - 8 * f(-h) + 8 * f(h) - f(2 * h)) / (12 * h)


def fd_twist(pose, q, v, reference):
    """Differentiate the frame pose T(q) along q(t) = q + t v into a twist (omega, v).

    LOCAL: T^-1 Tdot (body twist); WORLD: Tdot T^-1 (spatial twist) (Lynch & Park 3.70,
    3.76); LOCAL_WORLD_ALIGNED: (omega in base axes, d/dt of the origin).
    """
    T = pose(q)
    Tdot = derivative(lambda t: pose(q + t * v))
    if reference == "LOCAL":
        X = np.linalg.solve(T, Tdot)
    elif reference == "WORLD":
        X = Tdot @ np.linalg.inv(T)
    else:
        X = Tdot @ np.linalg.inv(T)
        X[:3, 3] = Tdot[:3, 3]
    return np.array([X[2, 1], X[0, 2], X[1, 0], *X[:3, 3]])


def christoffel_coriolis(mass_matrix, q, v):
    """Coriolis matrix of Christoffel symbols, by finite differences of M.

    C_ij = sum_k Gamma_ijk v_k, Gamma_ijk = (dM_ij/dq_k + dM_ik/dq_j - dM_jk/dq_i) / 2
    (Spong 6.63), i.e. C = (Mdot + B - B^T) / 2 with B[:, j] = (dM/dq_j) v.
    """
    n = len(q)
    E = np.eye(n)
    dM = [derivative(lambda t: mass_matrix(q + t * E[k])) for k in range(n)]
    B = np.column_stack([dM[j] @ v for j in range(n)])
    Mdot = sum(dM[k] * v[k] for k in range(n))
    return (Mdot + B - B.T) / 2


# --- reference engines ------------------------------------------------------------------------

def _swap(J):
    """Linear-first <-> angular-first rows of a 6 x n matrix (or a 6-vector)."""
    return np.concatenate([J[3:], J[:3]])


def adjoint(T):
    """Ad_T for angular-first twists: [[R, 0], [[p] R, R]] (Lynch & Park 3.83)."""
    R, p = T[:3, :3], T[:3, 3]
    Ad = np.zeros((6, 6))
    Ad[:3, :3] = Ad[3:, 3:] = R
    Ad[3:, :3] = skew(p) @ R
    return Ad


class PinocchioReference:
    """Pinocchio on the same URDF, reduced to `joint_names` (the others locked)."""

    def __init__(self, xml, joint_names, base=None, gravity=(0, 0, -9.81)):
        import pinocchio as pin
        self.pin = pin
        # Pinocchio 2 (the newest beside numpy 1.26) has no armature: the reference then holds
        # model.armature itself and adds its terms in closed form (I_a q̈, diag(I_a)).
        self.adds_armature = int(pin.__version__.split('.')[0]) < 3
        full = pin.buildModelFromXML(xml)
        locked = locked_positions(xml, set(joint_names))
        q_ref = pin.neutral(full)
        for name, q in locked.items():
            joint = full.joints[full.getJointId(name)]
            q_ref[joint.idx_q:joint.idx_q + joint.nq] = [np.cos(q), np.sin(q)] \
                if joint.nq == 2 else q
        ids = [full.getJointId(name) for name in locked]
        self.model = pin.buildReducedModel(full, ids, q_ref) if ids else full
        self.data = self.model.createData()
        if self.adds_armature:
            self.model.armature = np.zeros(self.model.nv)
        self.joints = [self.model.joints[self.model.getJointId(n)] for n in joint_names]
        assert self.model.nv == len(joint_names), "reduced model and joint_names disagree"
        self.iv = np.array([j.idx_v for j in self.joints], int)
        self.nv = len(joint_names)
        # the base link: static in the reduced model, its pose from the root link is constant
        base = base or root_link(xml)
        self.data_q = pin.neutral(self.model)
        pin.framesForwardKinematics(self.model, self.data, self.data_q)
        self.T_rb = self.data.oMf[self._frame(base)].homogeneous.copy()
        self.model.gravity.linear = self.T_rb[:3, :3] @ np.asarray(gravity, float)

    def _frame(self, name):
        return self.model.getFrameId(name, self.pin.FrameType.BODY)

    def q(self, q):
        """Map our q to Pinocchio's configuration ((cos, sin) for continuous joints)."""
        qp = self.pin.neutral(self.model)
        for j, x in zip(self.joints, q):
            qp[j.idx_q:j.idx_q + j.nq] = [np.cos(x), np.sin(x)] if j.nq == 2 else x
        return qp

    def v(self, v):
        vp = np.zeros(self.nv)
        vp[self.iv] = v
        return vp

    def rnea(self, q, v, a, f_ext=None, body_joints=None):
        """tau; f_ext[i] (moment, force) in the frame of joint body_joints[i]."""
        pin = self.pin
        args = [self.model, self.data, self.q(q), self.v(v), self.v(a)]
        if f_ext is not None:
            forces = [pin.Force.Zero() for _ in range(self.model.njoints)]
            for name, f in zip(body_joints, f_ext):
                forces[self.model.getJointId(name)] = pin.Force(f[3:], f[:3])
            args.append(forces)
        return pin.rnea(*args)[self.iv] + self._armature() * a

    def _armature(self):
        """The armature Pinocchio's algorithms leave out (zero on Pinocchio >= 3)."""
        return self.model.armature[self.iv] if self.adds_armature else np.zeros(self.nv)

    def gravity(self, q):
        return self.pin.computeGeneralizedGravity(self.model, self.data, self.q(q))[self.iv]

    def nonlinear_effects(self, q, v):
        return self.pin.nonLinearEffects(self.model, self.data, self.q(q), self.v(v))[self.iv]

    def mass_matrix(self, q):
        M = self.pin.crba(self.model, self.data, self.q(q)).reshape(self.nv, self.nv)
        M = np.triu(M) + np.triu(M, 1).T
        return M[np.ix_(self.iv, self.iv)] + np.diag(self._armature())

    def coriolis_matrix(self, q, v):
        C = self.pin.computeCoriolisMatrix(self.model, self.data, self.q(q), self.v(v))
        return C.reshape(self.nv, self.nv)[np.ix_(self.iv, self.iv)]

    def forward_dynamics(self, q, v, tau):
        if self._armature().any():   # M(q) q̈ = τ − h(q, q̇), M with the armature added
            return np.linalg.solve(self.mass_matrix(q), tau - self.nonlinear_effects(q, v))
        return self.pin.aba(self.model, self.data, self.q(q), self.v(v), self.v(tau))[self.iv]

    def frame_pose(self, q, frame):
        self.pin.framesForwardKinematics(self.model, self.data, self.q(q))
        return np.linalg.solve(self.T_rb, self.data.oMf[self._frame(frame)].homogeneous)

    def frame_jacobian(self, q, frame, reference):
        """Jacobian in reference LOCAL, WORLD or LOCAL_WORLD_ALIGNED, angular rows first."""
        pin = self.pin
        rf = getattr(pin.ReferenceFrame, reference)
        J = pin.computeFrameJacobian(self.model, self.data, self.q(q), self._frame(frame), rf)
        J = _swap(J.reshape(6, self.nv))[:, self.iv]
        return self._to_base(J, reference)

    def frame_bias_acceleration(self, q, v, frame, reference):
        """Jdot v: spatial acceleration at zero qdd (classical for LOCAL_WORLD_ALIGNED)."""
        pin = self.pin
        pin.forwardKinematics(self.model, self.data, self.q(q), self.v(v), np.zeros(self.nv))
        pin.updateFramePlacements(self.model, self.data)
        rf = getattr(pin.ReferenceFrame, reference)
        get = pin.getFrameClassicalAcceleration if reference == "LOCAL_WORLD_ALIGNED" \
            else pin.getFrameAcceleration
        a = get(self.model, self.data, self._frame(frame), rf)
        return self._to_base(np.concatenate([a.angular, a.linear]), reference)

    def _to_base(self, x, reference):
        """Root-frame quantities re-expressed relative to the base link."""
        if reference == "WORLD":
            return adjoint(np.linalg.inv(self.T_rb)) @ x
        if reference == "LOCAL_WORLD_ALIGNED":
            Rt = self.T_rb[:3, :3].T
            return np.concatenate([Rt @ x[:3], Rt @ x[3:]])
        return x

    def task_space_inertia(self, q, frame, reference):
        J = self.frame_jacobian(q, frame, reference)
        return np.linalg.inv(J @ np.linalg.solve(self.mass_matrix(q), J.T))


def mujoco_urdf(xml, locked):
    """Make a MuJoCo-loadable copy: locked joints fixed, geometry stripped, compiler options."""
    robot = ET.fromstring(lock_joints(xml, locked))
    for link in robot.iter("link"):
        for tag in ("visual", "collision"):
            for child in link.findall(tag):
                link.remove(child)
    for mujoco in robot.findall("mujoco"):
        robot.remove(mujoco)
    mujoco = ET.SubElement(robot, "mujoco")
    ET.SubElement(mujoco, "compiler", fusestatic="false", discardvisual="true",
                  inertiafromgeom="false")
    return ET.tostring(robot, encoding="unicode")


class MujocoReference:
    """MuJoCo on the same URDF; the base must be the root link (MuJoCo's world)."""

    def __init__(self, xml, joint_names, gravity=(0, 0, -9.81)):
        import mujoco
        self.mj = mujoco
        locked = locked_positions(xml, set(joint_names))
        m = self.model = mujoco.MjModel.from_xml_string(mujoco_urdf(xml, locked))
        assert m.nv == len(joint_names), "MuJoCo model and joint_names disagree"
        m.dof_damping[:] = m.dof_frictionloss[:] = m.dof_armature[:] = 0.0
        m.opt.gravity[:] = gravity
        m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
        self.data = mujoco.MjData(m)
        ids = [m.joint(name).id for name in joint_names]
        self.iq, self.iv = m.jnt_qposadr[ids], m.jnt_dofadr[ids]

    def _set(self, q, v=None, a=None):
        d = self.data
        d.qpos[self.iq] = q
        d.qvel[:] = d.qacc[:] = 0.0
        if v is not None:
            d.qvel[self.iv] = v
        if a is not None:
            d.qacc[self.iv] = a

    def rnea(self, q, v, a):
        self._set(q, v, a)
        self.mj.mj_inverse(self.model, self.data)
        return self.data.qfrc_inverse[self.iv].copy()

    def mass_matrix(self, q):
        self._set(q)
        self.mj.mj_inverse(self.model, self.data)
        M = np.zeros((self.model.nv, self.model.nv))
        self.mj.mj_fullM(self.model, self.data, M)
        return M[np.ix_(self.iv, self.iv)]

    def forward_dynamics(self, q, v, tau):
        self._set(q, v)
        self.data.qfrc_applied[:] = 0.0
        self.data.qfrc_applied[self.iv] = tau
        self.mj.mj_forward(self.model, self.data)
        self.data.qfrc_applied[:] = 0.0
        return self.data.qacc[self.iv].copy()

    def frame_pose(self, q, link):
        self._set(q)
        self.mj.mj_kinematics(self.model, self.data)
        body = self.model.body(link).id
        T = np.eye(4)
        T[:3, :3] = self.data.xmat[body].reshape(3, 3)
        T[:3, 3] = self.data.xpos[body]
        return T
