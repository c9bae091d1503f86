"""Argument checks of the public functions: cheap on the hot path, with messages that name names.

A float64 ndarray goes to the kernel as it is; anything else (lists, integers) is converted by
``joint_arrays``, which refuses strings, complex numbers and objects. The kernel validates the
shapes (``state_status``) and returns a status: 0, or the 1-based position of the offending
argument among (q, v, a or τ, f_ext), or one of the codes below; only then does the Python
function build the message (``argument_error``).

A one-state call first tries the kernel compiled for the types below only (``_jit.strict``):
numba's dispatch checks them, the kernel the shapes (also of the caller's ``out=`` array). Any
other types (TypeError) or a bad status take the general path, which converts or refuses them
with its message; ``out`` is checked there by ``output``.
"""
import numpy as np
from numba import types

from ._jit import jit
from .layout import WS_M
from .model import Data

F64 = np.dtype(float)
BAD_DATA = 8                # the workspace belongs to a model of another size
NOT_POSITIVE_DEFINITE = 9   # M(q) is not positive definite (not a valid rigid-body model)
SINGULAR = 10               # the task-space mobility J M^-1 J^T is singular
BAD_OUT = 11                # the result array has the wrong shape
NO_WRENCHES = np.zeros((0, 6))

# the argument types of the one-state kernels (``_jit.strict``)
TABLE_TYPE = types.Array(types.float64, 2, 'C')   # model.table, model.frames: writable (model.py)
WORKSPACE_TYPE = types.Array(types.float64, 2, 'C')              # model.workspaces.ws
VECTOR_TYPE = types.Array(types.float64, 1, 'C')                 # q, v, a, τ
MATRIX_TYPE = types.Array(types.float64, 2, 'C')                 # f_ext (nb, 6), M, J
INDEX_TYPE = types.int64                                         # frame, reference


@jit
def _bad_joint_array(q, x):
    return x is not None and x.shape != q.shape


@jit
def state_status(table, ws, q, v, a, f_ext):
    """0 if the shapes fit, else the position of the first bad argument, or BAD_DATA for ws.

    q is (nv,) or (N, nv), v and a (or None) have its shape, f_ext (or None) is (nb, 6),
    (N, nb, 6) or empty.
    """
    nb = table.shape[0]
    if q.ndim == 0:
        return 1
    if q.ndim > 2 or q.shape[q.ndim - 1] != nb:
        return 1
    if _bad_joint_array(q, v):
        return 2
    if _bad_joint_array(q, a):
        return 3
    if f_ext is not None:   # (0, 6) stands for no wrenches
        rows = f_ext.shape[f_ext.ndim - 2]
        if f_ext.shape[f_ext.ndim - 1] != 6 or (rows != nb and rows != 0) or (f_ext.ndim == 3 and (
                q.ndim == 1 or f_ext.shape[0] != q.shape[0] or rows == 0)):
            return 4
    if ws.shape[0] != nb or ws.shape[1] != WS_M + nb:
        return BAD_DATA
    return 0


@jit
def vector_status(status, q, out):
    """status, or BAD_OUT where it is 0 and out (τ) has not the shape of q."""
    return BAD_OUT if status == 0 and out.shape != q.shape else status


@jit
def matrix_status(status, q, out, rows):
    """status, or BAD_OUT where it is 0 and out is not q's batch shape followed by (rows, nv)."""
    if status == 0 and (out.shape[:-2] != q.shape[:-1]
                        or out.shape[-2:] != (rows, q.shape[q.ndim - 1])):
        return BAD_OUT
    return status


def joint_shapes(model, name):
    """The expected shape of the argument ``name``, in words."""
    if name == 'f_ext':
        return (f'shape ({model.nb}, 6): one (moment, force) wrench per body in its body frame '
                f'(or (N, {model.nb}, 6) for N states)')
    return (f'shape ({model.nv},) for this model (joints {", ".join(model.joint_names)}), '
            f'or (N, {model.nv}) for N states')


def argument_error(model, status, **arguments):
    """The exception for a kernel's status; ``arguments`` in the kernel's order (q, v, a, f_ext)."""
    if status == NOT_POSITIVE_DEFINITE:
        return ValueError('mass matrix is not positive definite at this configuration')
    if status == BAD_OUT:
        return ValueError('out has the wrong shape for this result')
    if status == BAD_DATA:
        return ValueError(f'data is the workspace of another model: make it with Data(model) for '
                          f'this one ({model.nb} bodies)')
    name, x = list(arguments.items())[status - 1]
    if name in ('q', 'f_ext'):
        return ValueError(f'{name} must have {joint_shapes(model, name)}, got shape {x.shape}')
    return ValueError(f'{name} must have the shape of q, {arguments["q"].shape} (q: '
                      f'{joint_shapes(model, "q")}), got shape {x.shape}')


def joint_arrays(model, **arrays):
    """The arrays as C-contiguous float64 arrays of 1 to 3 dimensions (integers converted).

    Strings, complex numbers, objects and scalars get a ValueError naming the argument and the
    expected shape.
    """
    converted = []
    for name, x in arrays.items():
        try:
            array = np.asarray(x)
        except ValueError:   # ragged nested sequences
            array = np.asarray(None)
        if array.dtype.kind not in 'fiu' or not 1 <= array.ndim <= 3:
            got = f'shape {array.shape}' if array.dtype.kind in 'fiu' else repr(x)[:60]
            raise ValueError(f'{name} must be real numbers of {joint_shapes(model, name)}, '
                             f'got {got}')
        converted.append(np.ascontiguousarray(array, dtype=float))
    return converted


def output(out, shape):
    """The caller's ``out``, once checked: a writeable float64 ndarray of the result's shape."""
    if not (type(out) is np.ndarray and out.dtype is F64 and out.shape == shape
            and out.flags.writeable):
        got = (f'{"" if out.flags.writeable else "read-only "}{out.dtype} array of shape '
               f'{out.shape}' if isinstance(out, np.ndarray) else type(out).__name__)
        raise ValueError(f'out must be a writeable float64 array of shape {shape}, got {got}')
    return out


def copy_into(out, result):
    """``result``, or (with the caller's ``out``) ``out`` holding a copy of it."""
    if out is None:
        return result
    output(out, result.shape)[...] = result
    return out


def wrenches(model, f_ext):
    """f_ext as a float64 array for the kernels (NO_WRENCHES for None)."""
    if f_ext is None:
        return NO_WRENCHES
    if type(f_ext) is np.ndarray and f_ext.dtype is F64 and 2 <= f_ext.ndim <= 3:
        return f_ext
    f_ext, = joint_arrays(model, f_ext=f_ext)
    if f_ext.ndim == 1:
        raise ValueError(f'f_ext must have {joint_shapes(model, "f_ext")}, got shape '
                         f'{f_ext.shape}')
    return f_ext


def workspace(model, data):
    """The scratch array of the caller's Data."""
    if type(data) is not Data:
        raise TypeError(f'data must be a Data(model), got {type(data).__name__}')
    return data.ws


def damping_value(damping, name='damping'):
    """damping as a finite float >= 0, else a ValueError naming ``name``."""
    try:
        value = float(damping)
    except (TypeError, ValueError):
        value = np.nan
    if not 0.0 <= value < np.inf:
        raise ValueError(f'{name} must be a finite number >= 0, got {damping!r}')
    return value


@jit
def all_finite(x):
    """Whether every element of the 1-D float array x is finite, in one compiled loop."""
    for i in range(x.size):
        if not x[i] - x[i] == 0.0:
            return False
    return True


def joint_vector(model, x, name):
    """x as a float (nv,) array, or a ValueError naming the expected shape."""
    x = np.asarray(x, dtype=float)
    if x.shape != (model.nv,):
        raise ValueError(f'{name} must have shape ({model.nv},) for this model '
                         f'(joints {", ".join(model.joint_names)}), got shape {x.shape}')
    return x
