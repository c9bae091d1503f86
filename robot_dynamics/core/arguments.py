"""Argument checks shared by the public functions: clear messages naming the expected shape."""
import numpy as np


def joint_vector(model, x, name):
    """x as a float (nv,) array, or a ValueError naming the expected shape."""
    x = np.asarray(x, dtype=float)
    if x.shape != (model.nv,):
        raise ValueError(f'{name} must have shape ({model.nv},) for this model '
                         f'(joints {", ".join(model.joint_names)}), got shape {x.shape}')
    return x


def body_wrenches(model, f_ext):
    """f_ext as a float (nb, 6) array of body-frame wrenches, or an empty (0, 6) array."""
    if f_ext is None:
        return np.zeros((0, 6))
    f_ext = np.asarray(f_ext, dtype=float)
    if f_ext.shape != (model.nb, 6):
        raise ValueError(f'f_ext must have shape ({model.nb}, 6): one (moment, force) wrench per '
                         f'body in its body frame, got shape {f_ext.shape}')
    return f_ext


def workspace(model, data):
    """The caller's workspace, or a fresh one."""
    from .model import Data
    return Data(model) if data is None else data
