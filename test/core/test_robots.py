"""The shipped reference robots checked against their published sources.

Independent references: the published DH tables of Franka (modified DH) and Universal
Robots (standard DH), implemented here from the tables; Gaz et al. 2019 (Panda links 1-7);
Franka's documented hand load; the datasheets' limits and weights. Pinocchio and MuJoCo
read the URDFs (not our own loader).
"""
import pathlib
import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pinocchio as pin
import pytest

ROBOTS = pathlib.Path(__file__).resolve().parents[2] / "robot_dynamics" / "robots"
PI = np.pi

# --- Franka Emika Panda: modified (Craig) DH table, FCI docs; flange row last. ---
PANDA_A = [0, 0, 0, 0.0825, -0.0825, 0, 0.088, 0]
PANDA_D = [0.333, 0, 0.316, 0, 0.384, 0, 0, 0.107]
PANDA_ALPHA = [0, -PI / 2, PI / 2, PI / 2, -PI / 2, PI / 2, PI / 2, 0]
PANDA_ARM = [f"panda_joint{i}" for i in range(1, 8)]
PANDA_FINGERS = ["panda_finger_joint1", "panda_finger_joint2"]
# Gaz et al., IEEE RA-L 2019, suppl. tables VIII-IX: mass [kg], COM in link frame i [m].
GAZ_MASS = [4.970684, 0.646926, 3.228604, 3.587895, 1.225946, 1.666555, 0.735522]
GAZ_COM = [(3.875e-3, 2.081e-3, 0), (-3.141e-3, -2.872e-2, 3.495e-3),
           (2.7518e-2, 3.9252e-2, -6.6502e-2), (-5.317e-2, 1.04419e-1, 2.7454e-2),
           (-1.1953e-2, 4.1065e-2, -3.8437e-2), (6.0149e-2, -1.4117e-2, -1.0517e-2),
           (1.0517e-2, -4.252e-3, 6.1597e-2)]
# ... and inertia about the COM in link-i axes: Ixx, Ixy, Ixz, Iyy, Iyz, Izz [kg m^2].
GAZ_INERTIA = [(7.0337e-1, -1.39e-4, 6.772e-3, 7.0661e-1, 1.9169e-2, 9.117e-3),
               (7.962e-3, -3.925e-3, 1.0254e-2, 2.811e-2, 7.04e-4, 2.5995e-2),
               (3.7242e-2, -4.761e-3, -1.1396e-2, 3.6155e-2, -1.2805e-2, 1.083e-2),
               (2.5853e-2, 7.796e-3, -1.332e-3, 1.9552e-2, 8.641e-3, 2.8323e-2),
               (3.5549e-2, -2.117e-3, -4.037e-3, 2.9474e-2, 2.29e-4, 8.627e-3),
               (1.964e-3, 1.09e-4, -1.158e-3, 4.354e-3, 3.41e-4, 5.433e-3),
               (1.2516e-2, -4.28e-4, -1.196e-3, 1.0027e-2, -7.41e-4, 4.815e-3)]
# Franka datasheet / FCI "Robot and interface specifications".
PANDA_LOWER = [-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973]
PANDA_UPPER = [2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973]
PANDA_VELOCITY = [2.175] * 4 + [2.61] * 3
PANDA_EFFORT = [87] * 4 + [12] * 3
# Panda product manual, "Mechanical data of Hand": load in the flange frame.
HAND_MASS, HAND_COM, HAND_INERTIA = 0.73, (-0.01, 0, 0.03), np.diag([0.001, 0.0025, 0.0017])
S = np.sqrt(0.5)
F_T_TCP = np.array([[S, S, 0, 0], [-S, S, 0, 0], [0, 0, 1, 0.1034], [0, 0, 0, 1]])

# --- Universal Robots UR5e: "DH parameters for calculations of kinematics and dynamics". ---
UR_A = [0, -0.425, -0.3922, 0, 0, 0]
UR_D = [0.1625, 0, 0, 0.1333, 0.0997, 0.0996]
UR_ALPHA = [PI / 2, 0, 0, PI / 2, -PI / 2, 0]
UR_MASS = [3.761, 8.058, 2.846, 1.37, 1.3, 0.365]
UR_COM = [(0, -0.02561, 0.00193), (0.2125, 0, 0.11336), (0.15, 0, 0.0265),
          (0, -0.0018, 0.01634), (0, 0.0018, 0.01634), (0, 0, -0.001159)]
UR_JOINTS = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint",
             "wrist_1_joint", "wrist_2_joint", "wrist_3_joint"]
UR_LINKS = ["shoulder_link", "upper_arm_link", "forearm_link",
            "wrist_1_link", "wrist_2_link", "wrist_3_link"]
UR_WEIGHT = 20.6  # datasheet


def rot_x(t):
    c, s = np.cos(t), np.sin(t)
    return np.array([[1, 0, 0, 0], [0, c, -s, 0], [0, s, c, 0], [0, 0, 0, 1.0]])


def rot_z(t):
    c, s = np.cos(t), np.sin(t)
    return np.array([[c, -s, 0, 0], [s, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])


def trans(x=0.0, y=0.0, z=0.0):
    T = np.eye(4)
    T[:3, 3] = x, y, z
    return T


def craig_frames(q):
    """Franka's frames 1..8 (8 = flange): T_i = Rx(alpha) Tx(a) Rz(q_i) Tz(d) (Craig)."""
    T, frames = np.eye(4), []
    for a, d, alpha, qi in zip(PANDA_A, PANDA_D, PANDA_ALPHA, list(q) + [0.0]):
        T = T @ rot_x(alpha) @ trans(x=a) @ rot_z(qi) @ trans(z=d)
        frames.append(T)
    return frames


def dh_frames(q):
    """UR's DH frames 1..6 in base_link: Rz(pi) A_1..A_i, A_i = Rz(q_i) Tz(d) Tx(a) Rx(alpha)."""
    T, frames = rot_z(PI), []
    for a, d, alpha, qi in zip(UR_A, UR_D, UR_ALPHA, q):
        T = T @ rot_z(qi) @ trans(z=d) @ trans(x=a) @ rot_x(alpha)
        frames.append(T)
    return frames


def rot_y(t):
    c, s = np.cos(t), np.sin(t)
    return np.array([[c, 0, s, 0], [0, 1, 0, 0], [-s, 0, c, 0], [0, 0, 0, 1.0]])


def rpy_matrix(r, p, y):
    """URDF fixed-axis roll-pitch-yaw: R = Rz(y) Ry(p) Rx(r)."""
    return (rot_z(y) @ rot_y(p) @ rot_x(r))[:3, :3]


def urdf_text(name):
    return (ROBOTS / f"{name}.urdf").read_text()


def inertials(name):
    """{link: (mass, com, inertia about com)} from the URDF, in link axes."""
    out = {}
    for link in ET.fromstring(urdf_text(name)).iter("link"):
        node = link.find("inertial")
        if node is None:
            continue
        origin = node.find("origin")
        xyz = np.array(origin.get("xyz", "0 0 0").split(), float)
        R = rpy_matrix(*map(float, origin.get("rpy", "0 0 0").split()))
        i = {k: float(v) for k, v in node.find("inertia").attrib.items()}
        inertia = np.array([[i["ixx"], i["ixy"], i["ixz"]],
                            [i["ixy"], i["iyy"], i["iyz"]],
                            [i["ixz"], i["iyz"], i["izz"]]])
        out[link.get("name")] = (float(node.find("mass").get("value")), xyz, R @ inertia @ R.T)
    return out


@pytest.fixture(scope="module")
def models():
    return {name: pin.buildModelFromXML(urdf_text(name)) for name in ("panda", "ur5e")}


def frame_poses(model, q, names):
    data = model.createData()
    pin.framesForwardKinematics(model, data, np.asarray(q, float))
    return {n: data.oMf[model.getFrameId(n)].homogeneous for n in names}


def random_q(model, rng):
    return rng.uniform(model.lowerPositionLimit, model.upperPositionLimit)


def point(T, p):
    return T[:3, :3] @ p + T[:3, 3]


def mujoco_model(name):
    xml = urdf_text(name).replace("</robot>", '<mujoco><compiler fusestatic="false" '
                                  'discardvisual="true" inertiafromgeom="false"/></mujoco></robot>')
    return mujoco.MjModel.from_xml_string(xml)


# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize("name, joints", [("panda", PANDA_ARM + PANDA_FINGERS),
                                          ("ur5e", UR_JOINTS)])
def test_pinocchio_and_mujoco_read_the_expected_joints(models, name, joints):
    model = models[name]
    assert list(model.names)[1:] == joints
    assert model.nq == model.nv == len(joints)
    mj = mujoco_model(name)
    assert [mj.joint(i).name for i in range(mj.njnt)] == joints


def test_panda_finger_joint2_mimics_finger_joint1():
    joints = {j.get("name"): j for j in ET.fromstring(urdf_text("panda")).iter("joint")}
    assert joints["panda_finger_joint2"].find("mimic").get("joint") == "panda_finger_joint1"
    for finger in PANDA_FINGERS:
        limit = joints[finger].find("limit")
        assert (float(limit.get("lower")), float(limit.get("upper"))) == (0.0, 0.04)


@pytest.mark.parametrize("name", ["panda", "ur5e"])
def test_mujoco_and_pinocchio_agree_on_the_mass_matrix(models, name):
    """Both parsers read the same inertias from the file (orientation, COM, lumping)."""
    model, mj = models[name], mujoco_model(name)
    data, mj_data = model.createData(), mujoco.MjData(mj)
    rng = np.random.default_rng(7)
    for _ in range(3):
        q = random_q(model, rng)
        mj_data.qpos[:] = q
        mujoco.mj_forward(mj, mj_data)
        M_mj = np.zeros((mj.nv, mj.nv))
        mujoco.mj_fullM(mj, mj_data, M_mj)
        np.testing.assert_allclose(pin.crba(model, data, q), M_mj, atol=1e-12)


# ---------------------------------------------------------------- UR5e


def test_ur5e_forward_kinematics_equals_dh(models):
    model = models["ur5e"]
    rng = np.random.default_rng(1)
    for q in [np.zeros(6)] + [random_q(model, rng) for _ in range(5)]:
        poses = frame_poses(model, q, ["base", "tool0", "flange"])
        D6 = dh_frames(q)[-1]
        np.testing.assert_allclose(poses["base"], rot_z(PI), atol=1e-12)
        np.testing.assert_allclose(poses["tool0"], D6, atol=1e-12)
        # flange: same origin, x axis along the tool's z axis (ROS-Industrial convention).
        np.testing.assert_allclose(poses["flange"][:3, 3], D6[:3, 3], atol=1e-12)
        np.testing.assert_allclose(poses["flange"][:3, 0], D6[:3, 2], atol=1e-12)


def test_ur5e_zero_pose_by_hand(models):
    """q = 0: tool0 at (-(a2 + a3), d4 + d6, d1 - d5) in base_link, tool z along +y."""
    tool0 = frame_poses(models["ur5e"], np.zeros(6), ["tool0"])["tool0"]
    np.testing.assert_allclose(tool0[:3, 3], [0.8172, 0.2329, 0.0628], atol=1e-12)
    np.testing.assert_allclose(tool0[:3, 2], [0, 1, 0], atol=1e-12)


def test_ur5e_centres_of_mass_equal_dh(models):
    model, links = models["ur5e"], inertials("ur5e")
    rng = np.random.default_rng(2)
    for _ in range(5):
        q = random_q(model, rng)
        poses = frame_poses(model, q, UR_LINKS)
        for link, D, mass, com in zip(UR_LINKS, dh_frames(q), UR_MASS, UR_COM):
            assert links[link][0] == mass
            np.testing.assert_allclose(point(poses[link], links[link][1]), point(D, com),
                                       atol=1e-12, err_msg=link)


# ---------------------------------------------------------------- Panda


def test_panda_forward_kinematics_equals_modified_dh(models):
    model = models["panda"]
    rng = np.random.default_rng(3)
    names = [f"panda_link{i}" for i in range(1, 9)] + ["panda_hand", "panda_hand_tcp"]
    for _ in range(5):
        q = random_q(model, rng)
        poses = frame_poses(model, q, names)
        frames = craig_frames(q[:7])
        for i, T in enumerate(frames, start=1):
            np.testing.assert_allclose(poses[f"panda_link{i}"], T, atol=1e-12)
        np.testing.assert_allclose(poses["panda_hand"], frames[-1] @ rot_z(-PI / 4), atol=1e-12)
        np.testing.assert_allclose(poses["panda_hand_tcp"], frames[-1] @ F_T_TCP, atol=1e-12)


def test_panda_zero_pose_by_hand(models):
    """q = 0: flange at (a4 + a5 + a7, 0, d1 + d3 + d5 - d_F), pointing down."""
    poses = frame_poses(models["panda"], np.zeros(9), ["panda_link8", "panda_hand_tcp"])
    np.testing.assert_allclose(poses["panda_link8"][:3, 3], [0.088, 0, 0.926], atol=1e-12)
    np.testing.assert_allclose(poses["panda_link8"][:3, 2], [0, 0, -1], atol=1e-12)
    np.testing.assert_allclose(poses["panda_hand_tcp"][:3, 3], [0.088, 0, 0.8226], atol=1e-12)


def test_panda_links_carry_gaz_parameters(models):
    """Masses and inertias as published; each COM where the Craig chain puts Gaz's COM."""
    model, links = models["panda"], inertials("panda")
    names = [f"panda_link{i}" for i in range(1, 8)]
    for link, (xx, xy, xz, yy, yz, zz) in zip(names, GAZ_INERTIA):
        published = [[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]]
        np.testing.assert_allclose(links[link][2], published, rtol=0, atol=1e-15, err_msg=link)
    rng = np.random.default_rng(4)
    for _ in range(5):
        q = random_q(model, rng)
        poses = frame_poses(model, q, names)
        for link, T, mass, com in zip(names, craig_frames(q[:7]), GAZ_MASS, GAZ_COM):
            assert links[link][0] == mass
            np.testing.assert_allclose(point(poses[link], links[link][1]), point(T, com),
                                       atol=1e-12, err_msg=link)


def test_panda_hand_and_closed_fingers_are_frankas_hand_load(models):
    """panda_hand + fingers at q = 0, in the flange frame: Franka's documented hand data."""
    links = inertials("panda")
    parts = ["panda_hand", "panda_leftfinger", "panda_rightfinger"]
    poses = frame_poses(models["panda"], np.zeros(9), parts + ["panda_link8"])
    F_inv = np.linalg.inv(poses["panda_link8"])
    bodies = []
    for part in parts:
        mass, com, inertia = links[part]
        X = F_inv @ poses[part]
        bodies.append((mass, point(X, com), X[:3, :3] @ inertia @ X[:3, :3].T))
    mass = sum(m for m, _, _ in bodies)
    com = sum(m * c for m, c, _ in bodies) / mass
    inertia = sum(I + m * ((c - com) @ (c - com) * np.eye(3) - np.outer(c - com, c - com))
                  for m, c, I in bodies)  # parallel-axis (Steiner) theorem
    assert mass == pytest.approx(HAND_MASS, abs=1e-12)
    np.testing.assert_allclose(com, HAND_COM, atol=1e-9)
    np.testing.assert_allclose(inertia, HAND_INERTIA, atol=1e-9)


# ---------------------------------------------------------------- physics and datasheets


@pytest.mark.parametrize("name", ["panda", "ur5e"])
def test_every_moving_link_has_a_physical_inertia(name):
    links = inertials(name)
    root = ET.fromstring(urdf_text(name))
    moving = [j.find("child").get("link") for j in root.iter("joint") if j.get("type") != "fixed"]
    assert set(moving) <= set(links)
    for link, (mass, _, inertia) in links.items():
        assert mass > 0, link
        np.testing.assert_allclose(inertia, inertia.T, err_msg=link)
        lam = np.linalg.eigvalsh(inertia)  # ascending principal moments
        assert lam[0] > 0, link
        assert lam[0] + lam[1] >= lam[2], link  # triangle inequality


def test_masses_match_the_datasheets():
    panda, ur5e = inertials("panda"), inertials("ur5e")
    arm = sum(panda[f"panda_link{i}"][0] for i in range(1, 8))
    assert arm == pytest.approx(sum(GAZ_MASS)) and 15.0 < arm < 18.0  # 16.06 kg identified
    assert sum(panda[f"panda_link{i}"][0] for i in range(8)) == pytest.approx(18.0, abs=0.01)
    hand = sum(panda[n][0] for n in ["panda_hand", "panda_leftfinger", "panda_rightfinger"])
    assert hand == pytest.approx(HAND_MASS)
    assert sum(ur5e[n][0] for n in UR_LINKS) == pytest.approx(sum(UR_MASS))  # 17.7 kg moving
    assert sum(m for m, _, _ in ur5e.values()) == pytest.approx(UR_WEIGHT)


def test_joint_limits_match_the_datasheets(models):
    panda, ur5e = models["panda"], models["ur5e"]
    np.testing.assert_array_equal(panda.lowerPositionLimit, PANDA_LOWER + [0, 0])
    np.testing.assert_array_equal(panda.upperPositionLimit, PANDA_UPPER + [0.04, 0.04])
    np.testing.assert_array_equal(panda.velocityLimit[:7], PANDA_VELOCITY)
    np.testing.assert_array_equal(panda.effortLimit[:7], PANDA_EFFORT)
    two_pi = [2 * PI] * 6
    two_pi[2] = PI  # elbow
    np.testing.assert_allclose(ur5e.upperPositionLimit, two_pi, rtol=1e-15)
    np.testing.assert_allclose(ur5e.lowerPositionLimit, -np.array(two_pi), rtol=1e-15)
    np.testing.assert_array_equal(ur5e.velocityLimit, [3.14] * 6)
    np.testing.assert_array_equal(ur5e.effortLimit, [150] * 3 + [28] * 3)
