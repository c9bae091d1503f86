"""Dense Cholesky factorisation, solves and inverse, in place, for M(q) and task-space blocks.

Also the solve on an active set, the simulation's held joints and end stops share it.
"""
import numpy as np

from .._jit import exact, jit


@jit
def cholesky(A):
    """Overwrite the lower triangle of symmetric A with L, A = L L^T; False if A is not PD."""
    n = A.shape[0]
    for j in range(n):
        d = A[j, j]
        for k in range(j):
            d -= A[j, k] * A[j, k]
        if not d > 0.0:
            return False
        d = np.sqrt(d)
        A[j, j] = d
        for i in range(j + 1, n):
            s = A[i, j]
            for k in range(j):
                s -= A[i, k] * A[j, k]
            A[i, j] = s / d
    return True


@jit
def solve_lower(L, b):
    """b <- L^{-1} b (forward substitution), b a vector."""
    for i in range(L.shape[0]):
        s = b[i]
        for k in range(i):
            s -= L[i, k] * b[k]
        b[i] = s / L[i, i]


@jit
def solve_lower_transpose(L, b):
    """b <- L^{-T} b (back substitution), b a vector."""
    for i in range(L.shape[0] - 1, -1, -1):
        s = b[i]
        for k in range(i + 1, L.shape[0]):
            s -= L[k, i] * b[k]
        b[i] = s / L[i, i]


@jit
def cholesky_solve(L, b):
    """b <- A^{-1} b for A = L L^T."""
    solve_lower(L, b)
    solve_lower_transpose(L, b)


@jit
def cholesky_inverse(A):
    """A <- A^{-1} from its factor L in the lower triangle (LAPACK's potri, both triangles out).

    First L <- L^{-1} in place, then A^{-1}_ij = Σ_{k >= i} L^{-1}_ki L^{-1}_kj row by row: row i
    reads only rows k >= i, which are still L^{-1}.
    """
    n = A.shape[0]
    for j in range(n):   # column j of L^{-1}: L^{-1}_jj = 1 / L_jj, then forward substitution
        A[j, j] = 1.0 / A[j, j]
        for i in range(j + 1, n):
            s = 0.0
            for k in range(j, i):
                s -= A[i, k] * A[k, j]
            A[i, j] = s / A[i, i]
    for i in range(n):
        for j in range(i + 1):
            s = 0.0
            for k in range(i, n):
                s += A[k, i] * A[k, j]
            A[i, j] = s
            A[j, i] = s


@exact
def active_set_solve(W, active, side, b, y, rhs, A):
    """y_A = −((S W S)_AA)⁻¹ b_A on the set A of i with active[i] == 1, y = 0 elsewhere.

    S = diag(side) (read on A only). rhs (n) and A (n, n) are workspace. ``exact``: the same
    bits wherever it is called. False if (S W S)_AA is not positive definite.
    """
    n, m = W.shape[0], 0
    for i in range(n):
        y[i] = 0.0
        if active[i] == 1.0:
            rhs[m], c = -b[i], 0
            for j in range(n):
                if active[j] == 1.0:
                    A[m, c] = side[i] * W[i, j] * side[j]
                    c += 1
            m += 1
    if m == 0:
        return True
    if not cholesky(A[:m, :m]):
        return False
    cholesky_solve(A[:m, :m], rhs[:m])
    m = 0
    for i in range(n):
        if active[i] == 1.0:
            y[i] = rhs[m]
            m += 1
    return True
