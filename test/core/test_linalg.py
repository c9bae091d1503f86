"""The dense kernels of ``core/algorithms/linalg.py`` against numpy's LAPACK."""
import numpy as np
import pytest

from robot_dynamics.core.algorithms.linalg import (
    active_set_solve, cholesky, cholesky_inverse, cholesky_solve)


def spd(n, seed):
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(n, n))
    return B @ B.T + n * np.eye(n)


@pytest.mark.parametrize('n', [1, 2, 7])
def test_cholesky_solve_and_inverse_agree_with_lapack(n):
    A = spd(n, n)
    L = A.copy()
    assert cholesky(L)
    np.testing.assert_allclose(np.tril(L), np.linalg.cholesky(A), rtol=0, atol=1e-13)
    b = np.arange(1.0, n + 1)
    x = b.copy()
    cholesky_solve(L, x)
    np.testing.assert_allclose(x, np.linalg.solve(A, b), rtol=1e-12, atol=0)
    cholesky_inverse(L)
    np.testing.assert_allclose(L, np.linalg.inv(A), rtol=0, atol=1e-12)


def test_cholesky_refuses_a_matrix_that_is_not_positive_definite():
    assert not cholesky(np.diag([1.0, -1.0]))
    assert not cholesky(np.diag([1.0, np.nan]))


def test_active_set_solve_solves_the_signed_principal_block_and_zeroes_the_rest():
    n = 7
    W = spd(n, 3)
    active = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0])
    side = np.array([1.0, 5.0, -1.0, 1.0, 0.0, 2.0, -1.0])   # read on the active set only
    b = np.random.default_rng(4).normal(size=n)
    y, rhs, A = np.full(n, np.nan), np.zeros(n), np.zeros((n, n))
    assert active_set_solve(W, active, side, b, y, rhs, A)
    on = active == 1.0
    S = np.diag(side[on])
    np.testing.assert_allclose(y[on], -np.linalg.solve(S @ W[np.ix_(on, on)] @ S, b[on]),
                               rtol=1e-12, atol=0)
    assert (y[~on] == 0.0).all()


def test_active_set_solve_with_nothing_active_is_zero_and_with_a_singular_block_false():
    n = 3
    y, rhs, A = np.full(n, np.nan), np.zeros(n), np.zeros((n, n))
    assert active_set_solve(np.eye(n), np.zeros(n), np.ones(n), np.ones(n), y, rhs, A)
    assert (y == 0.0).all()
    singular = np.ones((n, n))
    assert not active_set_solve(singular, np.ones(n), np.ones(n), np.ones(n), y, rhs, A)
