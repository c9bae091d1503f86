"""Batched calls: q, v, a, τ of shape (N, nv) give the stacked results of N one-state calls.

On the Panda and UR5e chains and on random branched trees with prismatic joints. The batched
loop and the one-state call run the same per-state kernel, so they agree to round-off (1e-12
relative); the threaded (numba parallel) kernels too. Also: the shape errors of batched
arguments, an empty batch, and a workspace from another model. About 10 s with a warm cache.
"""
import functools

import numpy as np
import pytest

import robot_dynamics as rd
from robot_dynamics.core.algorithms import threaded
from random_trees import make_case, random_state

CASES = ("panda/panda_link0/panda_hand", "ur5e/base_link/tool0", "tree-4-12", "subtree-5-9")
N = 5


def batch(model, seed, n=N):
    """(Q, V, A) of n random states and an (n, nb, 6) array of body wrenches."""
    rng = np.random.default_rng(seed)
    Q, V, A = (np.array(x) for x in zip(*(random_state(model.lower, model.upper, rng)
                                          for _ in range(n))))
    return Q, V, A, rng.normal(size=(n, model.nb, 6))


def frame_of(model):
    return model.tip or model.frame_names[-1]


def one_by_one(function, *batched, **fixed):
    return np.array([function(*state, **fixed) for state in zip(*batched)])


def same(batched, stacked):
    np.testing.assert_allclose(batched, stacked, rtol=1e-12, atol=1e-12)


@pytest.fixture(scope="module", params=CASES)
def case(request):
    model = make_case(request.param).load()
    return model, *batch(model, seed=len(request.param))


@pytest.mark.nojit
def test_inverse_dynamics(case):
    model, Q, V, A, F = case
    rnea = lambda q, v, a, f=None: rd.rnea(model, q, v, a, f_ext=f)   # noqa: E731
    same(rd.rnea(model, Q, V, A), one_by_one(rnea, Q, V, A))
    same(rd.rnea(model, Q, V, A, f_ext=F), one_by_one(rnea, Q, V, A, F))
    same(rd.rnea(model, Q, V, A, f_ext=F[0]), one_by_one(rnea, Q, V, A, f=F[0]))
    same(rd.gravity(model, Q), one_by_one(lambda q: rd.gravity(model, q), Q))
    same(rd.nonlinear_effects(model, Q, V),
         one_by_one(lambda q, v: rd.nonlinear_effects(model, q, v), Q, V))


@pytest.mark.nojit
def test_matrices(case):
    model, Q, V, _, _ = case
    same(rd.mass_matrix(model, Q), one_by_one(lambda q: rd.mass_matrix(model, q), Q))
    same(rd.coriolis_matrix(model, Q, V),
         one_by_one(lambda q, v: rd.coriolis_matrix(model, q, v), Q, V))


@pytest.mark.nojit
def test_forward_dynamics(case):
    model, Q, V, A, F = case
    tau = rd.rnea(model, Q, V, A)
    fd = lambda q, v, t, f=None: rd.forward_dynamics(model, q, v, t, f_ext=f)  # noqa: E731
    same(rd.forward_dynamics(model, Q, V, tau), one_by_one(fd, Q, V, tau))
    same(rd.forward_dynamics(model, Q, V, tau, f_ext=F), one_by_one(fd, Q, V, tau, F))


@pytest.mark.parametrize("reference", [rd.LOCAL, rd.LOCAL_WORLD_ALIGNED, rd.WORLD])
def test_frames(case, reference):
    model, Q, V, _, _ = case
    frame = frame_of(model)
    same(rd.frame_pose(model, Q, frame), one_by_one(lambda q: rd.frame_pose(model, q, frame), Q))
    damped = functools.partial(rd.task_space_inertia, damping=1e-3)   # trees: J may lack rank
    for function in (rd.frame_jacobian, damped, rd.inverse_task_space_inertia):
        same(function(model, Q, frame, reference),
             one_by_one(lambda q: function(model, q, frame, reference), Q))
    for function in (rd.frame_velocity, rd.frame_bias_acceleration):
        same(function(model, Q, V, frame, reference),
             one_by_one(lambda q, v: function(model, q, v, frame, reference), Q, V))


def test_translational_inertia_and_effective_mass(case):
    model, Q, _, _, _ = case
    frame = frame_of(model)
    same(rd.translational_inertia(model, Q, frame, damping=1e-3),
         one_by_one(lambda q: rd.translational_inertia(model, q, frame, damping=1e-3), Q))
    same(rd.effective_mass(model, Q, frame, [0, 0, 1]),
         one_by_one(lambda q: rd.effective_mass(model, q, frame, [0, 0, 1]), Q))


def test_threaded_kernels_agree():
    model = make_case(CASES[0]).load()
    Q, V, A, F = batch(model, seed=1, n=200)   # several chunks of states
    same(threaded.rnea(model, Q, V, A, f_ext=F), rd.rnea(model, Q, V, A, f_ext=F))
    same(threaded.gravity(model, Q), rd.gravity(model, Q))
    same(threaded.nonlinear_effects(model, Q, V), rd.nonlinear_effects(model, Q, V))
    same(threaded.mass_matrix(model, Q), rd.mass_matrix(model, Q))


@pytest.mark.nojit
def test_empty_batch():
    model = make_case(CASES[0]).load()
    empty = np.zeros((0, model.nv))
    assert rd.rnea(model, empty, empty, empty).shape == (0, model.nv)
    assert rd.mass_matrix(model, empty).shape == (0, model.nv, model.nv)
    assert rd.frame_jacobian(model, empty, model.tip).shape == (0, 6, model.nv)


@pytest.mark.nojit
def test_shape_errors_name_the_argument():
    model = make_case(CASES[0]).load()
    Q, V, A, F = batch(model, seed=2)
    with pytest.raises(ValueError, match=r"v must have the shape of q, \(5, 7\)"):
        rd.rnea(model, Q, V[0], A)
    with pytest.raises(ValueError, match=r"a must have the shape of q"):
        rd.rnea(model, Q, V, A[:3])
    with pytest.raises(ValueError, match=r"q must have shape \(7,\) .* or \(N, 7\)"):
        rd.gravity(model, Q[:, :6])
    with pytest.raises(ValueError, match=r"q must have shape"):
        rd.mass_matrix(model, Q[None])
    with pytest.raises(ValueError, match=r"f_ext must have shape \(7, 6\)"):
        rd.rnea(model, Q, V, A, f_ext=F[:2])
    with pytest.raises(ValueError, match=r"f_ext must have shape"):
        rd.rnea(model, Q[0], V[0], A[0], f_ext=F)   # per-state wrenches for one state
    with pytest.raises(ValueError, match=r"tau must have the shape of q"):
        rd.forward_dynamics(model, Q, V, A[0])
    with pytest.raises(ValueError, match=r"data is the workspace of another model"):
        rd.gravity(model, Q, data=rd.Data(make_case("tree-2-4").load()))
