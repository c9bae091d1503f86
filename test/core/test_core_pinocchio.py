"""robot_dynamics against Pinocchio loading the same URDF string: relative error <= 1e-9.

Pinocchio is reduced to our joints (the others locked where our loader locks them), its
continuous joints are mapped to (cos, sin) and its linear-first rows swapped; see
random_trees.PinocchioReference. The largest relative error per quantity is written to
<pytest basetemp>/pinocchio_errors.json and printed (pytest -s) for the closing note.
"""
import json
import zlib

import numpy as np
import pytest

import robot_dynamics as rd
from random_trees import (ARMS, ERRORS, MORE_ARMS, TREES, PinocchioReference, assert_close,
                          make_case, moving_joints, random_state, urdf_joints)

REFERENCES = {"LOCAL": rd.LOCAL, "WORLD": rd.WORLD, "LOCAL_WORLD_ALIGNED": rd.LOCAL_WORLD_ALIGNED}


@pytest.fixture(scope="module", autouse=True)
def figures(tmp_path_factory):
    yield
    found = {k.split("/", 1)[1]: float(v) for k, v in ERRORS.items()
             if k.startswith("pinocchio/")}
    path = tmp_path_factory.getbasetemp() / "pinocchio_errors.json"
    path.write_text(json.dumps(found, indent=1, sort_keys=True))
    print(f"\nmax relative error against Pinocchio ({path}):")
    for k, v in sorted(found.items()):
        print(f"  {k:28s} {v:.1e}")


@pytest.fixture(scope="module", params=ARMS + MORE_ARMS + TREES)
def case(request):
    case = make_case(request.param)
    model = case.load()
    ref = PinocchioReference(case.xml, model.joint_names, case.base, case.gravity)
    rng = np.random.default_rng(zlib.crc32(request.param.encode()))
    states = [random_state(model.lower, model.upper, rng) for _ in range(3)]
    return case, model, ref, states


def close(actual, expected, quantity):
    assert_close(actual, expected, rtol=1e-9, atol=1e-12, label=f"pinocchio/{quantity}")


def test_same_joints(case):
    case, model, ref, _ = case
    assert sorted(model.joint_names) == sorted(moving_joints(case.xml, case.base, case.tip))
    assert model.nv == model.nb == len(model.joint_names)


def test_inverse_dynamics(case):
    _, model, ref, states = case
    for q, v, a in states:
        close(rd.rnea(model, q, v, a), ref.rnea(q, v, a), "rnea")
        close(rd.gravity(model, q), ref.gravity(q), "gravity")
        close(rd.nonlinear_effects(model, q, v), ref.nonlinear_effects(q, v), "nonlinear_effects")


def test_external_forces(case):
    """Wrenches (moment, force) on every body, in the body (child link) frame."""
    case, model, ref, states = case
    rng = np.random.default_rng(7)
    for q, v, a in states:
        f_ext = rng.normal(size=(model.nb, 6))
        close(rd.rnea(model, q, v, a, f_ext), ref.rnea(q, v, a, f_ext, model.joint_names),
              "rnea with f_ext")


def views(x):
    """x as a strided view (a column of a 2-D array) and as a read-only array."""
    column = np.zeros((len(x), 3))
    column[:, 1] = x
    read_only = np.array(x)
    read_only.flags.writeable = False
    return column[:, 1], read_only


def test_strided_and_read_only_states(case):
    """The one-state calls (the kernels' entry points) read q, v, a with any strides."""
    case, model, ref, states = case
    q, v, a = states[0]
    frame = frames(case, model)[-1]
    for q_, v_, a_ in zip(views(q), views(v), views(a)):
        close(rd.rnea(model, q_, v_, a_), ref.rnea(q, v, a), "rnea")
        close(rd.gravity(model, q_), ref.gravity(q), "gravity")
        close(rd.nonlinear_effects(model, q_, v_), ref.nonlinear_effects(q, v),
              "nonlinear_effects")
        close(rd.mass_matrix(model, q_), ref.mass_matrix(q), "mass_matrix")
        close(rd.frame_jacobian(model, q_, frame),
              ref.frame_jacobian(q, frame, "LOCAL_WORLD_ALIGNED"), "frame_jacobian")


def test_results_into_out(case):
    """out= (contiguous, or strided: a column or rows of a larger array) receives the result."""
    case, model, ref, states = case
    q, v, a = states[1]
    frame, n = frames(case, model)[-1], model.nv
    for kind in ("contiguous", "strided"):
        def out(*shape):
            return np.zeros(shape) if kind == "contiguous" else np.zeros((*shape, 2))[..., 1]
        results = [(rd.rnea, (q, v, a), out(n), ref.rnea(q, v, a)),
                   (rd.gravity, (q,), out(n), ref.gravity(q)),
                   (rd.nonlinear_effects, (q, v), out(n), ref.nonlinear_effects(q, v)),
                   (rd.mass_matrix, (q,), out(n, n), ref.mass_matrix(q)),
                   (rd.frame_jacobian, (q, frame), out(6, n),
                    ref.frame_jacobian(q, frame, "LOCAL_WORLD_ALIGNED"))]
        for function, arguments, array, expected in results:
            assert function(model, *arguments, out=array) is array
            close(array, expected, f"{function.__name__} into out")


def test_mass_matrix(case):
    _, model, ref, states = case
    for q, _, _ in states:
        close(rd.mass_matrix(model, q), ref.mass_matrix(q), "mass_matrix")


def test_coriolis_matrix(case):
    _, model, ref, states = case
    for q, v, _ in states:
        close(rd.coriolis_matrix(model, q, v), ref.coriolis_matrix(q, v), "coriolis_matrix")


def test_forward_dynamics(case):
    _, model, ref, states = case
    rng = np.random.default_rng(3)
    for q, v, _ in states:
        tau = rng.normal(size=model.nv)
        close(rd.forward_dynamics(model, q, v, tau), ref.forward_dynamics(q, v, tau),
              "forward_dynamics (aba)")


def frames(case, model):
    """Every URDF link our model keeps a frame for; Pinocchio has them all."""
    links = {j["child"] for j in urdf_joints(case.xml).values()} | {model.base}
    return [f for f in model.frame_names if f in links]


def test_frame_poses(case):
    case, model, ref, states = case
    assert model.base in model.frame_names and model.tip in model.frame_names + (None,)
    for q, _, _ in states:
        for frame in frames(case, model):
            close(rd.frame_pose(model, q, frame), ref.frame_pose(q, frame), "frame_pose")


def test_frame_jacobians(case):
    case, model, ref, states = case
    for q, v, _ in states[:2]:
        for frame in frames(case, model):
            for name, reference in REFERENCES.items():
                J = ref.frame_jacobian(q, frame, name)
                close(rd.frame_jacobian(model, q, frame, reference=reference), J,
                      f"frame_jacobian {name}")
                close(rd.frame_velocity(model, q, v, frame, reference=reference), J @ v,
                      f"frame_velocity {name}")


def test_frame_bias_acceleration(case):
    case, model, ref, states = case
    for q, v, _ in states[:2]:
        for frame in frames(case, model):
            for name, reference in REFERENCES.items():
                close(rd.frame_bias_acceleration(model, q, v, frame, reference=reference),
                      ref.frame_bias_acceleration(q, v, frame, name),
                      f"frame_bias_acceleration {name}")


def test_task_space_inertia(case):
    """Lambda = (J M^-1 J^T)^-1 where the tip Jacobian has full row rank 6."""
    case, model, ref, states = case
    frame = model.tip or "tool"  # every random tree has a tool
    for q, _, _ in states:
        J = ref.frame_jacobian(q, frame, "LOCAL")
        if model.nv < 6 or np.linalg.svd(J, compute_uv=False)[-1] < 1e-2:
            continue
        for name, reference in REFERENCES.items():
            close(rd.task_space_inertia(model, q, frame, reference=reference),
                  ref.task_space_inertia(q, frame, name), f"task_space_inertia {name}")


@pytest.fixture
def with_armature(case):
    """Our model and Pinocchio's with the same random armature (Pinocchio's reset after)."""
    case, model, ref, states = case
    armature = np.random.default_rng(9).uniform(0.05, 0.5, model.nv)
    pin_armature = np.zeros(ref.nv)
    pin_armature[ref.iv] = armature
    ref.model.armature = pin_armature
    yield case, model.replace(armature=armature), ref, states
    ref.model.armature = np.zeros(ref.nv)


def test_armature(with_armature):
    """Pinocchio's model.armature: rnea adds I_a q̈, crba I_a to M's diagonal; aba and Λ follow."""
    case, model, ref, states = with_armature
    assert np.array_equal(ref.model.armature[ref.iv], model.armature)
    rng = np.random.default_rng(4)
    frame = model.tip or "tool"
    for q, v, a in states:
        close(rd.rnea(model, q, v, a), ref.rnea(q, v, a), "rnea with armature")
        close(rd.mass_matrix(model, q), ref.mass_matrix(q), "mass_matrix with armature")
        tau = rng.normal(size=model.nv)
        close(rd.forward_dynamics(model, q, v, tau), ref.forward_dynamics(q, v, tau),
              "aba with armature")
        J = ref.frame_jacobian(q, frame, "LOCAL")
        if model.nv >= 6 and np.linalg.svd(J, compute_uv=False)[-1] > 1e-2:
            close(rd.task_space_inertia(model, q, frame, reference=rd.LOCAL),
                  ref.task_space_inertia(q, frame, "LOCAL"), "task_space_inertia with armature")
