"""The URDF loader: what it keeps (limits, frames, merged links) and how it refuses bad input.

Every malformed file gives rd.URDFError (a ValueError) whose message names the offending
link or joint. The arm below: base -> j1 (revolute) -> link1 -> j2 (prismatic) -> link2
-> hand_joint (fixed) -> hand -> tcp_joint (fixed) -> tcp (no inertial), with a finger on a
prismatic joint from the hand (off the base..hand chain) and a continuous wrist from link1.
"""
import numpy as np
import pytest

import robot_dynamics as rd
from random_trees import assert_close, lock_joints, random_state

INERTIA = '<inertia ixx="0.02" ixy="0.001" ixz="0" iyy="0.03" iyz="0" izz="0.04"/>'


def link(name, mass="1.0", com="0.1 0 0.05", inertia=INERTIA):
    return (f'<link name="{name}"><inertial><origin xyz="{com}" rpy="0.1 0.2 0.3"/>'
            f'<mass value="{mass}"/>{inertia}</inertial></link>')


LIMITS = {"revolute": '<limit lower="-2" upper="2.5" effort="80" velocity="2"/>',
          "prismatic": '<limit lower="0.01" upper="0.2" effort="200" velocity="0.5"/>',
          "continuous": '<limit effort="10" velocity="3"/>'}


def joint(name, kind, parent, child, xyz="0 0 0.3", rpy="0 0 0", axis="0 0 1", extra="",
          limit=None):
    if limit is None:
        limit = LIMITS.get(kind, "")
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}" rpy="{rpy}"/><axis xyz="{axis}"/>{limit}{extra}</joint>')


PARTS = {
    "base": '<link name="base"/>',
    "link1": link("link1"),
    "j1": joint("j1", "revolute", "base", "link1", axis="0 1 0"),
    "link2": link("link2", mass="2.0"),
    "j2": joint("j2", "prismatic", "link1", "link2", axis="1 0 0"),
    "hand": link("hand", mass="0.7", com="0 0 0.04"),
    "hand_joint": joint("hand_joint", "fixed", "link2", "hand", rpy="0 0 -0.785"),
    "tcp": '<link name="tcp"/>',
    "tcp_joint": joint("tcp_joint", "fixed", "hand", "tcp", xyz="0 0 0.1"),
    "finger": link("finger", mass="0.02", inertia=INERTIA.replace("0.0", "0.0000")),
    "finger_joint": joint("finger_joint", "prismatic", "hand", "finger", axis="0 1 0"),
    "wrist": link("wrist", mass="0.5"),
    "wrist_joint": joint("wrist_joint", "continuous", "link1", "wrist", xyz="0.1 0 0",
                         axis="1 0 0"),
}


def urdf(head="", **parts):
    """Write the arm with some parts replaced (a string) or removed (None)."""
    chosen = PARTS | parts
    body = "".join(p for p in chosen.values() if p is not None)
    return f'<?xml version="1.0"?>\n<robot name="arm"{head}>{body}</robot>'


def load(xml, **kwargs):
    return rd.load_urdf(xml, **kwargs)


# --- what the loader keeps -----------------------------------------------------------------------

def test_whole_tree_and_chain():
    model = load(urdf())
    assert model.base == "base" and model.nv == model.nb == 4
    assert set(model.joint_names) == {"j1", "j2", "finger_joint", "wrist_joint"}
    assert all(model.parent[i] < i for i in range(model.nb))
    names = list(model.joint_names)
    parent = {n: (names[p] if p >= 0 else None) for n, p in zip(names, model.parent)}
    assert parent == {"j1": None, "j2": "j1", "finger_joint": "j2", "wrist_joint": "j1"}
    chain = load(urdf(), base="base", tip="tcp")
    assert chain.joint_names == ("j1", "j2") and chain.tip == "tcp"
    assert set(chain.frame_names) >= {"base", "link1", "link2", "hand", "tcp", "finger", "wrist"}


def test_load_from_path(tmp_path):
    path = tmp_path / "arm.urdf"
    path.write_text(urdf())
    q = np.array([0.3, 0.1, 0.02, -1.0])
    assert_close(rd.mass_matrix(load(str(path)), q), rd.mass_matrix(load(urdf()), q), 0.0)
    assert_close(load(urdf()).gravity, [0, 0, -9.81], 0.0)


def test_limits_kept():
    model = load(urdf())
    by_name = {n: i for i, n in enumerate(model.joint_names)}
    expected = {"j1": (-2, 2.5, 2, 80), "j2": (0.01, 0.2, 0.5, 200),
                "finger_joint": (0.01, 0.2, 0.5, 200), "wrist_joint": (-np.inf, np.inf, 3, 10)}
    for name, (lower, upper, velocity, effort) in expected.items():
        i = by_name[name]
        assert (model.lower[i], model.upper[i]) == (lower, upper), name
        assert (model.velocity_limit[i], model.effort_limit[i]) == (velocity, effort), name


def test_missing_limits_are_infinite():
    model = load(urdf(wrist_joint=joint("wrist_joint", "continuous", "link1", "wrist", limit="")))
    i = model.joint_names.index("wrist_joint")
    assert np.isinf([model.lower[i], model.upper[i], model.velocity_limit[i],
                     model.effort_limit[i]]).all()


def test_continuous_joint_is_one_angle():
    """One coordinate per continuous joint, periodic in 2 pi."""
    model = load(urdf())
    i = model.joint_names.index("wrist_joint")
    q = np.array([0.3, 0.1, 0.02, -1.0])
    q2 = q.copy()
    q2[i] += 2 * np.pi
    assert_close(rd.frame_pose(model, q2, "wrist"), rd.frame_pose(model, q, "wrist"), 1e-14)
    assert_close(rd.mass_matrix(model, q2), rd.mass_matrix(model, q), 1e-13)


def test_axis_is_normalised():
    """URDF axes are directions: (0, 2, 0) moves like (0, 1, 0), (-3, 0, 0) like -(1, 0, 0)."""
    unit = load(urdf())
    scaled = load(urdf(j1=joint("j1", "revolute", "base", "link1", axis="0 2 0"),
                       j2=joint("j2", "prismatic", "link1", "link2", axis="-3 0 0")))
    assert scaled.joint_names == unit.joint_names
    sign = np.where(np.array(unit.joint_names) == "j2", -1.0, 1.0)  # j2 runs the other way
    q, v, a = np.array([0.3, 0.1, 0.02, -1.0]), np.array([0.2, -0.4, 0.1, 1.0]), np.ones(4)
    assert_close(sign * rd.rnea(scaled, sign * q, sign * v, sign * a), rd.rnea(unit, q, v, a),
                 1e-12)


def test_fixed_hand_counts_exactly_its_mass():
    """Merging the hand changes g(q) by -J_com^T m g, J_com its COM's Jacobian."""
    with_hand = load(urdf(), tip="hand")
    without = load(urdf(hand='<link name="hand"/>'), tip="hand")
    m, com = 0.7, np.array([0.0, 0.0, 0.04])
    rng = np.random.default_rng(0)
    for _ in range(3):
        q = random_state(with_hand.lower, with_hand.upper, rng)[0]
        r = rd.frame_pose(with_hand, q, "hand")[:3, :3] @ com
        J = rd.frame_jacobian(with_hand, q, "hand", reference=rd.LOCAL_WORLD_ALIGNED)
        J_com = J[3:] - np.cross(r, J[:3].T).T
        assert_close(rd.gravity(with_hand, q) - rd.gravity(without, q),
                     -m * J_com.T @ with_hand.gravity, 1e-12)


def test_off_chain_joint_locked_at_zero_clamped_into_limits():
    """Check tip = tcp locks the finger at 0.01 (limits 0.01..0.2) and the wrist at 0.

    The dynamics are those of a URDF with those joints made fixed there.
    """
    locked = load(lock_joints(urdf(), {"finger_joint": 0.01, "wrist_joint": 0.0}))
    chain = load(urdf(), tip="tcp")
    assert locked.joint_names == chain.joint_names
    q, v, a = np.array([0.4, 0.05]), np.array([0.3, -0.2]), np.array([1.0, 2.0])
    assert_close(rd.rnea(chain, q, v, a), rd.rnea(locked, q, v, a), 1e-12)
    assert_close(rd.mass_matrix(chain, q), rd.mass_matrix(locked, q), 1e-12)


def test_xacro_namespace_and_comments_are_harmless():
    head = ' xmlns:xacro="http://www.ros.org/wiki/xacro"'
    model = load(urdf(head=head, tcp='<!-- xacro:macro left a comment --><link name="tcp"/>'))
    assert model.nv == 4


def test_mimic_on_fixed_or_locked_joint_is_fine():
    mimic = '<mimic joint="finger_joint"/>'
    on_fixed = load(urdf(tcp_joint=joint("tcp_joint", "fixed", "hand", "tcp", extra=mimic)))
    assert on_fixed.nv == 4
    finger2 = {"finger2": link("finger2", mass="0.02"),
               "finger2_joint": joint("finger2_joint", "prismatic", "hand", "finger2",
                                      axis="0 -1 0", extra=mimic)}
    assert load(urdf(**finger2), tip="tcp").joint_names == ("j1", "j2")
    assert "finger_joint" in load(urdf(**finger2), tip="finger").joint_names


def test_moving_link_may_leave_its_mass_to_a_fixed_child():
    """link2 without <inertial> still moves the hand merged into it: a valid body."""
    model = load(urdf(link2='<link name="link2"/>'), tip="hand")
    assert model.joint_names == ("j1", "j2")
    assert np.linalg.eigvalsh(rd.mass_matrix(model, np.array([0.3, 0.1])))[0] > 0


def test_urdf_error_is_a_value_error():
    assert issubclass(rd.URDFError, ValueError)


# --- what it refuses ------------------------------------------------------------------------------

MIMIC_CYCLE = dict(
    finger2=link("finger2", mass="0.02"),
    finger2_joint=joint("finger2_joint", "prismatic", "hand", "finger2",
                        extra='<mimic joint="finger_joint"/>'),
    finger_joint=joint("finger_joint", "prismatic", "hand", "finger", axis="0 1 0",
                       extra='<mimic joint="finger2_joint"/>'))
BAD = {
    "not xml": (dict(), "<robot name='arm'><link name='a'></robot", r"(?i)xml"),
    "no robot": (dict(), "<model><link name='a'/></model>", r"robot"),
    "no inertial": (dict(wrist='<link name="wrist"/>'), None, r"wrist"),
    "negative mass": (dict(link2=link("link2", mass="-1.5")), None, r"link2"),
    "inertia not PD": (dict(link2=link("link2", inertia=INERTIA.replace(
        'ixx="0.02"', 'ixx="-0.02"'))), None, r"link2"),
    "inertia not PD off-diagonal": (dict(link2=link("link2", inertia=INERTIA.replace(
        'ixy="0.001"', 'ixy="0.5"'))), None, r"link2"),
    "floating joint": (dict(j2=joint("j2", "floating", "link1", "link2")), None,
                       r"j2.*floating.*supported"),
    "planar joint": (dict(j2=joint("j2", "planar", "link1", "link2")), None,
                     r"j2.*planar.*supported"),
    "unknown joint type": (dict(j2=joint("j2", "hinge", "link1", "link2")), None, r"j2"),
    "missing child link": (dict(j2=joint("j2", "prismatic", "link1", "nolink")), None,
                           r"nolink"),
    "missing parent link": (dict(j2=joint("j2", "prismatic", "nolink", "link2")), None,
                            r"nolink"),
    "two parents": (dict(extra=joint("j3", "revolute", "hand", "link1")), None, r"link1"),
    "cycle": (dict(loop_a=link("loop_a"), loop_b=link("loop_b"),
                   ja=joint("ja", "revolute", "loop_b", "loop_a"),
                   jb=joint("jb", "revolute", "loop_a", "loop_b")), None, r"loop_[ab]"),
    "duplicate link": (dict(extra=link("link1")), None, r"link1"),
    "duplicate joint": (dict(extra_link=link("extra"),
                             extra=joint("j2", "revolute", "hand", "extra")), None, r"j2"),
    "mimic cycle": (MIMIC_CYCLE, None, r"cycle: finger_joint -> finger2_joint -> finger_joint"),
    "mimic naming no joint": (dict(finger_joint=joint(
        "finger_joint", "prismatic", "hand", "finger", extra='<mimic multiplier="2"/>')), None,
        r"'finger_joint' <mimic> names no joint"),
    "xacro attribute": (dict(j1=joint("j1", "revolute", "base", "link1",
                                      extra='<xacro:insert_block name="b"/>')), "xacro",
                        r"(?i)xacro.*insert_block"),
    "limit out of range": (dict(j1=joint("j1", "revolute", "base", "link1", limit=(
        '<limit lower="2e9" upper="3e9" effort="1" velocity="1"/>'))), None,
        r"'j1' limit.*out of range"),
    "xacro element": (dict(extra='<xacro:macro name="m" params=""/>'), "xacro",
                      r"(?i)xacro"),
    "xacro expression": (dict(j1=joint("j1", "revolute", "base", "link1", xyz="0 0 ${h}")),
                         None, r"(?i)xacro"),
    "zero axis": (dict(j1=joint("j1", "revolute", "base", "link1", axis="0 0 0")), None, r"j1"),
    "nan origin": (dict(j1=joint("j1", "revolute", "base", "link1", xyz="0 nan 0.3")), None,
                   r"j1"),
}


@pytest.mark.parametrize("name", BAD)
def test_malformed_urdf_named_in_error(name):
    parts, text, pattern = BAD[name]
    if text == "xacro":
        xml = urdf(head=' xmlns:xacro="http://www.ros.org/wiki/xacro"', **parts)
    else:
        xml = text or urdf(**parts)
    with pytest.raises(rd.URDFError, match=pattern):
        load(xml)


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(base="nowhere"), r"nowhere"),
    (dict(tip="nowhere"), r"nowhere"),
    (dict(base="link2", tip="link1"), r"link1"),  # tip above the base
    (dict(base="wrist", tip="tcp"), r"tcp"),       # tip on another branch
])
def test_bad_base_or_tip_named_in_error(kwargs, pattern):
    with pytest.raises(rd.URDFError, match=pattern):
        load(urdf(), **kwargs)


# --- what real vendors' files need (each case taken from a published URDF) ---------------------

MIMIC = '<mimic joint="finger_joint" multiplier="-0.5" offset="0.01"/>'
FINGER2 = {"finger2": link("finger2", mass="0.03", com="0 -0.02 0.01"),
           "finger2_joint": joint("finger2_joint", "prismatic", "hand", "finger2",
                                  axis="0 -1 0", extra=MIMIC)}


def test_mimic_joint_is_a_dependent_coordinate():
    """q_finger2 = -0.5 q_finger + 0.01: the same dynamics as the model without <mimic>, mapped."""
    model = load(urdf(**FINGER2))
    free = load(urdf(**FINGER2).replace(MIMIC, ""))
    assert model.nv == 4 and model.nb == 5 and "finger2_joint" not in model.joint_names
    assert model.mimic == (("finger2_joint", "finger_joint", -0.5, 0.01),)
    G = np.zeros((5, 4))
    for i, name in enumerate(model.joint_names):
        G[free.joint_names.index(name), i] = 1.0
    G[free.joint_names.index("finger2_joint"), model.joint_names.index("finger_joint")] = -0.5
    offset = 0.01 * (np.array(free.joint_names) == "finger2_joint")
    q, v, a = np.random.default_rng(1).uniform(-1, 1, (3, model.nv))
    assert_close(rd.rnea(model, q, v, a), G.T @ rd.rnea(free, G @ q + offset, G @ v, G @ a),
                 1e-12)
    assert_close(rd.mass_matrix(model, q), G.T @ rd.mass_matrix(free, G @ q + offset) @ G,
                 1e-12)
    assert_close(rd.frame_pose(model, q, "finger2"),
                 rd.frame_pose(free, G @ q + offset, "finger2"), 1e-12)


def test_mimic_of_a_mimic_follows_the_root_leader():
    third = {"finger3": link("finger3", mass="0.01"),
             "finger3_joint": joint("finger3_joint", "prismatic", "hand", "finger3",
                                    axis="1 0 0",
                                    extra='<mimic joint="finger2_joint" multiplier="3"/>')}
    model = load(urdf(**FINGER2, **third))
    assert ("finger3_joint", "finger_joint", -1.5, 0.03) in model.mimic


def test_mimic_of_a_locked_leader_is_locked_at_its_value():
    """With tip=tcp the finger is locked at 0.01 (its lower limit): finger2 at -0.5·0.01 + 0.01."""
    model = load(urdf(**FINGER2), tip="tcp")
    assert model.joint_names == ("j1", "j2") and model.mimic == ()
    p = rd.frame_pose(model, np.zeros(2), "finger2")[:3, 3] - rd.frame_pose(
        model, np.zeros(2), "hand")[:3, 3]
    hand = rd.frame_pose(model, np.zeros(2), "hand")[:3, :3]
    assert_close(hand.T @ p, [0.0, -0.005, 0.3], 1e-12)


def test_mimic_following_a_missing_joint_is_independent_with_a_warning():
    lone = MIMIC.replace("finger_joint", "gone_joint")
    with pytest.warns(UserWarning, match=r"'finger2_joint' follows joint 'gone_joint'.*"
                                         r"independent"):
        model = load(urdf(**FINGER2).replace(MIMIC, lone))
    assert "finger2_joint" in model.joint_names and model.mimic == ()


def test_massless_frame_keeps_its_rotational_inertia():
    """UR's ee_link, Kinova's end effector: <mass value="0"/>. Pinocchio keeps the inertia."""
    model = load(urdf(wrist=link("wrist", mass="0")))
    body = model.joint_names.index("wrist_joint")
    assert model.inertia[body, 0] == 0.0 and model.inertia[body, 4:7].min() > 0.0


def test_comments_with_xacro_text_are_ignored():
    """Every xacro output starts with a banner; many keep commented-out ${...} and <xacro:...>."""
    banner = '<!-- generated by xacro from ${file}: <xacro:include filename="x"/> -->'
    assert load(urdf(tcp=banner + '<link name="tcp"/>')).nv == 4


def test_inertias_off_a_rigid_body_load_with_one_warning_naming_each_link():
    triangle = '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.03"/>'
    slightly = '<inertia ixx="-1e-10" ixy="0" ixz="0" iyy="3e-5" iyz="0" izz="3e-5"/>'
    xml = urdf(link2=link("link2", inertia=triangle), finger=link("finger", inertia=slightly))
    with pytest.warns(UserWarning) as record:
        load(xml)
    assert len(record) == 1
    message = str(record[0].message)
    assert "link 'link2' fails I1 + I2 >= I3 by 0.01 kg m^2 (33.3% of I3)" in message
    assert "link 'finger' has a negative principal moment -1e-10 kg m^2" in message
    with pytest.raises(rd.URDFError, match=r"link 'link2'.*link 'finger'.*strict=True"):
        load(xml, strict=True)


def test_clearly_negative_moment_is_refused():
    bad = '<inertia ixx="-0.002" ixy="0" ixz="0" iyy="0.03" iyz="0" izz="0.04"/>'
    with pytest.raises(rd.URDFError, match=r"link 'link2' inertia is not positive semi-definite"
                                           r".*0.05 times the largest"):
        load(urdf(link2=link("link2", inertia=bad)))


def test_joint_limit_beyond_the_cap_is_unlimited():
    wide = '<limit lower="-1e16" upper="1e16" effort="80" velocity="2"/>'
    model = load(urdf(j1=joint("j1", "revolute", "base", "link1", axis="0 1 0", limit=wide)))
    i = model.joint_names.index("j1")
    assert model.lower[i] == -np.inf and model.upper[i] == np.inf and model.continuous[i]


def test_the_two_inertia_orders_give_one_matrix():
    """URDF order ixx, ixy, ixz, iyy, iyz, izz; the core's Ixx, Iyy, Izz, Ixy, Ixz, Iyz."""
    from robot_dynamics.core.spatial import (inertia_from_standard, inertia_from_urdf,
                                             inertia_to_standard, inertia_to_urdf)
    expected = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 5.0], [3.0, 5.0, 6.0]])
    np.testing.assert_array_equal(inertia_from_urdf([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), expected)
    np.testing.assert_array_equal(inertia_from_standard([1.0, 4.0, 6.0, 2.0, 3.0, 5.0]), expected)
    np.testing.assert_array_equal(inertia_to_standard(expected), [1.0, 4.0, 6.0, 2.0, 3.0, 5.0])
    np.testing.assert_array_equal(inertia_to_urdf(expected), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
