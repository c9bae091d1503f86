"""robot_dynamics against MuJoCo loading the same URDF (a stripped copy): relative error <= 1e-9.

MuJoCo cannot lock joints, so joints outside our model become fixed joints at the locked
position in the copy (random_trees.lock_joints); damping, friction loss, armature and
constraints are switched off. MuJoCo's world is the URDF root, so every case here has
base = root. The largest relative errors go to <pytest basetemp>/mujoco_errors.json.
"""
import json
import zlib

import numpy as np
import pytest

import robot_dynamics as rd
from random_trees import (ARMS, ERRORS, MORE_ARMS, TREES, MujocoReference, PinocchioReference,
                          assert_close, leaf_links, make_case, moving_joints, random_state,
                          random_urdf, urdf_joints)

CASES = ARMS + MORE_ARMS[:1] + tuple(t for t in TREES if not t.startswith("subtree"))


@pytest.fixture(scope="module", autouse=True)
def figures(tmp_path_factory):
    yield
    found = {k.split("/", 1)[1]: float(v) for k, v in ERRORS.items() if k.startswith("mujoco/")}
    path = tmp_path_factory.getbasetemp() / "mujoco_errors.json"
    path.write_text(json.dumps(found, indent=1, sort_keys=True))
    print(f"\nmax relative error against MuJoCo ({path}):")
    for k, v in sorted(found.items()):
        print(f"  {k:28s} {v:.1e}")


@pytest.fixture(scope="module", params=CASES)
def case(request):
    case = make_case(request.param)
    model = case.load()
    ref = MujocoReference(case.xml, model.joint_names, case.gravity)
    rng = np.random.default_rng(zlib.crc32(request.param.encode()))
    states = [random_state(model.lower, model.upper, rng) for _ in range(3)]
    return case, model, ref, states


def close(actual, expected, quantity):
    assert_close(actual, expected, rtol=1e-9, atol=1e-12, label=f"mujoco/{quantity}")


def test_inverse_dynamics(case):
    """mj_inverse: tau = M qacc + qfrc_bias."""
    _, model, ref, states = case
    zero = np.zeros(model.nv)
    for q, v, a in states:
        close(rd.rnea(model, q, v, a), ref.rnea(q, v, a), "rnea (mj_inverse)")
        close(rd.gravity(model, q), ref.rnea(q, zero, zero), "gravity")
        close(rd.nonlinear_effects(model, q, v), ref.rnea(q, v, zero), "nonlinear_effects")


def test_mass_matrix(case):
    _, model, ref, states = case
    for q, _, _ in states:
        close(rd.mass_matrix(model, q), ref.mass_matrix(q), "mass_matrix (mj_fullM)")


def test_forward_dynamics(case):
    _, model, ref, states = case
    rng = np.random.default_rng(5)
    for q, v, _ in states:
        tau = rng.normal(size=model.nv)
        close(rd.forward_dynamics(model, q, v, tau), ref.forward_dynamics(q, v, tau),
              "forward_dynamics (mj_forward)")


def test_link_poses(case):
    case, model, ref, states = case
    links = {j["child"] for j in urdf_joints(case.xml).values()}
    for q, _, _ in states:
        for frame in (f for f in model.frame_names if f in links):
            close(rd.frame_pose(model, q, frame), ref.frame_pose(q, frame), "frame_pose")


@pytest.mark.parametrize("seed", range(4))
def test_references_agree(seed):
    """Check MuJoCo == Pinocchio on random trees, whole and chains.

    This checks the generator and both adapters (locking by a fixed joint vs Pinocchio's
    reduced model) without our code.
    """
    xml = random_urdf(100 + seed, 3 * seed + 2)
    rng = np.random.default_rng(seed)
    for tip in (None, leaf_links(xml)[0]):
        names = moving_joints(xml, tip=tip)
        pin_ref, mj_ref = PinocchioReference(xml, names), MujocoReference(xml, names)
        q, v, a = rng.uniform(-1, 1, (3, len(names)))
        assert_close(mj_ref.rnea(q, v, a), pin_ref.rnea(q, v, a), rtol=1e-12)
        assert_close(mj_ref.mass_matrix(q), pin_ref.mass_matrix(q), rtol=1e-12)
        assert_close(mj_ref.forward_dynamics(q, v, a), pin_ref.forward_dynamics(q, v, a),
                     rtol=1e-10)
        for link in leaf_links(xml):
            assert_close(mj_ref.frame_pose(q, link), pin_ref.frame_pose(q, link), rtol=1e-12)


@pytest.fixture
def joint_terms(case):
    """Our model and MuJoCo's with the same armature and viscous friction (MuJoCo's reset after)."""
    case, model, ref, states = case
    rng = np.random.default_rng(8)
    armature, viscous = rng.uniform(0.05, 0.5, model.nv), rng.uniform(0.1, 2.0, model.nv)
    ref.model.dof_armature[ref.iv] = armature
    ref.model.dof_damping[ref.iv] = viscous
    yield case, model.replace(armature=armature, viscous=viscous), ref, states
    ref.model.dof_armature[:] = ref.model.dof_damping[:] = 0.0


def test_armature_and_viscous_friction(joint_terms):
    """MuJoCo's M has dof_armature; qfrc_passive = −dof_damping q̇ enters mj_inverse, mj_forward."""
    _, model, ref, states = joint_terms
    rng = np.random.default_rng(6)
    for q, v, a in states:
        close(rd.rnea(model, q, v, a), ref.rnea(q, v, a), "rnea with armature, viscous")
        close(rd.mass_matrix(model, q), ref.mass_matrix(q), "mass_matrix with armature")
        tau = rng.normal(size=model.nv)
        close(rd.forward_dynamics(model, q, v, tau), ref.forward_dynamics(q, v, tau),
              "forward_dynamics with armature, viscous")
