"""Task-space (operational-space) inertia and effective mass (L&P §8.6, Khatib 1987).

Λ(q) = (J M^{-1} J^T)^{-1} (L&P eq. 8.90), computed as Φ = Y^T Y with Y = L^{-1} J^T, M = L L^T.
The inverse Φ = J M^{-1} J^T (the mobility matrix) is always defined; near a singularity Λ is not,
and ``damping`` > 0 returns the singularity-robust (Φ + damping·1)^{-1}.
"""
import numpy as np

from .._jit import jit
from ..arguments import joint_vector, workspace
from .crba import crba_kernel
from .jacobians import LOCAL_WORLD_ALIGNED, Reference, _frame, frame_jacobian_kernel
from .linalg import cholesky, cholesky_inverse, solve_lower


@jit
def mobility_kernel(topology, body, q, b, frame, reference, first_row, ws, M, J, Phi):
    """Φ = J_r M^{-1} J_r^T for the rows first_row.. of J; False if M is not PD."""
    crba_kernel(topology, body, q, ws, M)
    if not cholesky(M):
        return False
    frame_jacobian_kernel(topology, body, q, b, frame, reference, ws, J)
    rows = Phi.shape[0]
    for r in range(rows):
        solve_lower(M, J[first_row + r, :])   # row r of Y^T
    for r in range(rows):
        for c in range(r, rows):
            s = 0.0
            for k in range(J.shape[1]):
                s += J[first_row + r, k] * J[first_row + c, k]
            Phi[r, c] = s
            Phi[c, r] = s
    return True


@jit
def inverse_kernel(Phi, damping, out):
    """out = (Φ + damping·1)^{-1}; False if not positive definite. Φ is overwritten."""
    for r in range(Phi.shape[0]):
        Phi[r, r] += damping
    if not cholesky(Phi):
        return False
    cholesky_inverse(Phi, out)
    return True


def _mobility(model, q, frame, reference, first_row, data):
    b, placement = _frame(model, frame)
    data = workspace(model, data)
    Phi = np.empty((6 - first_row, 6 - first_row))
    if not mobility_kernel(model.topology, model.body, joint_vector(model, q, 'q'), b, placement,
                           int(Reference(reference)), first_row, data.ws, data.M, data.J, Phi):
        raise ValueError('mass matrix is not positive definite at this configuration')
    return Phi


def _inverse(Phi, damping, what):
    out = np.empty_like(Phi)
    if not inverse_kernel(Phi, float(damping), out):
        raise ValueError(f'{what} is singular here (fewer than {len(out)} independent task '
                         'directions: a singular pose, or too few joints); pass damping > 0 for '
                         'the singularity-robust inverse')
    return out


def inverse_task_space_inertia(model, q, frame, reference=LOCAL_WORLD_ALIGNED, data=None):
    """Φ = J M^{-1} J^T (6x6), defined at every configuration; its condition number flags singularity."""
    return _mobility(model, q, frame, reference, 0, data)


def task_space_inertia(model, q, frame, reference=LOCAL_WORLD_ALIGNED, damping=0.0, data=None):
    """Λ = (J M^{-1} J^T + damping·1)^{-1} (6x6), the frame's inertia to wrenches in ``reference``."""
    return _inverse(_mobility(model, q, frame, reference, 0, data), damping,
                    'J M^-1 J^T (6x6 task-space mobility)')


def translational_inertia(model, q, frame, damping=0.0, data=None):
    """Λ_v = (J_v M^{-1} J_v^T + damping·1)^{-1} (3x3, base axes): inertia to a force at the origin.

    Not the lower-right block of the 6x6 Λ: that one holds the frame's rotation fixed.
    """
    return _inverse(_mobility(model, q, frame, LOCAL_WORLD_ALIGNED, 3, data), damping,
                    'J_v M^-1 J_v^T (3x3 translational mobility)')


def effective_mass(model, q, frame, direction, data=None):
    """m_u = 1 / (u^T J_v M^{-1} J_v^T u) along the unit direction u (base axes) at the origin."""
    u = np.asarray(direction, dtype=float).reshape(3)
    norm = np.linalg.norm(u)
    if not norm > 0.0:
        raise ValueError(f'direction must be a non-zero 3-vector, got {direction}')
    u = u / norm
    return 1.0 / (u @ _mobility(model, q, frame, LOCAL_WORLD_ALIGNED, 3, data) @ u)
