"""Batched rnea, gravity, nonlinear_effects and mass_matrix on all of numba's threads.

The same kernels as ``robot_dynamics.rnea`` etc., compiled again with ``parallel=True``: the
chunks of a (N, nv) batch run on ``numba.get_num_threads()`` threads (set them with
``numba.set_num_threads`` or ``NUMBA_NUM_THREADS``). Worth it for large N only. With numba's
fallback threading layer (workqueue, when neither TBB nor OpenMP is installed) do not call these
from two Python threads at once.
"""
import numpy as np

from ..arguments import NO_WRENCHES, argument_error, joint_arrays, wrenches
from .crba import mass_matrix_parallel
from .rnea import gravity_parallel, nonlinear_effects_parallel, rnea_parallel


def rnea(model, q, v, a, f_ext=None):
    """robot_dynamics.rnea on numba's threads."""
    q, v, a = joint_arrays(model, q=q, v=v, a=a)
    f = NO_WRENCHES if f_ext is None else wrenches(model, f_ext)
    tau = np.empty(q.shape)
    status = rnea_parallel(model.table, q, v, a, f, model.workspaces.ws, tau)
    if status:
        raise argument_error(model, status, q=q, v=v, a=a, f_ext=f)
    return tau


def gravity(model, q):
    """robot_dynamics.gravity on numba's threads."""
    q, = joint_arrays(model, q=q)
    tau = np.empty(q.shape)
    status = gravity_parallel(model.table, q, model.workspaces.ws, tau)
    if status:
        raise argument_error(model, status, q=q)
    return tau


def nonlinear_effects(model, q, v):
    """robot_dynamics.nonlinear_effects on numba's threads."""
    q, v = joint_arrays(model, q=q, v=v)
    tau = np.empty(q.shape)
    status = nonlinear_effects_parallel(model.table, q, v, model.workspaces.ws, tau)
    if status:
        raise argument_error(model, status, q=q, v=v)
    return tau


def mass_matrix(model, q):
    """robot_dynamics.mass_matrix on numba's threads."""
    q, = joint_arrays(model, q=q)
    M = np.empty(q.shape + q.shape[-1:])
    status = mass_matrix_parallel(model.table, q, model.workspaces.ws, M)
    if status:
        raise argument_error(model, status, q=q)
    return M
