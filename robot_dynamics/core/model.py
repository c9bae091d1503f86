"""Model: the constant description of a kinematic tree; Data: the reusable per-call workspace.

Bodies are numbered so that ``parent[i] < i`` (``-1`` is the fixed base). Body ``i`` moves with one
joint, revolute or prismatic, whose frame is the body frame: at configuration ``q_i`` the body frame
sits at ``X_tree[i] @ exp([A_i] q_i)`` in its parent's frame, with ``A_i = (axis, 0)`` for a revolute
and ``(0, axis)`` for a prismatic joint (L&P eq. 8.43 with the screw axis expressed in frame ``i``).
"""
import dataclasses

import numpy as np

from .spatial import transformed_inertia, standard_parameters

REVOLUTE, PRISMATIC = 0, 1

# Column layout of the kernel body table and of the workspace (one row per body).
BODY_AXIS, BODY_ROT, BODY_POS, BODY_INERTIA, BODY_WIDTH = 0, 3, 12, 15, 25
WS_R, WS_P = 0, 9             # world pose of the body frame (rotation row-major, origin)
WS_RREL, WS_PREL = 12, 21     # pose of the body frame in its parent's frame at q
WS_S = 24                     # joint screw in world coordinates
WS_V, WS_VD, WS_F = 30, 36, 42  # body twist, acceleration and wrench in body frame (RNEA)
WS_IC = 48                    # composite inertia of the subtree in world coordinates
WS_VW, WS_SD = 58, 64         # world twist of the body and time derivative of its world screw
WS_BC = 70                    # composite Coriolis term B of the subtree, 6x6 (coriolis_matrix)
WS_TMP = 106                  # scratch
WS_WIDTH = 130


@dataclasses.dataclass(frozen=True, eq=False)
class Model:
    """Constant description of a tree of rigid bodies, one degree of freedom per body."""

    joint_names: tuple
    joint_type: np.ndarray       # (nb,) REVOLUTE or PRISMATIC
    parent: np.ndarray           # (nb,) parent body, -1 for the base
    joint_axis: np.ndarray       # (nb, 3) unit axis in the body frame
    joint_placement: np.ndarray  # (nb, 4, 4) body frame at q = 0 in the parent's frame
    inertia: np.ndarray          # (nb, 10) standard parameters about the body origin, body axes
    lower: np.ndarray            # (nv,) position limits, -inf / inf where absent
    upper: np.ndarray
    velocity_limit: np.ndarray
    effort_limit: np.ndarray
    frame_names: tuple           # named frames: URDF links (merged ones too) and the base
    frame_body: np.ndarray       # (nf,) body carrying the frame, -1 for the base
    frame_placement: np.ndarray  # (nf, 4, 4) frame in its body's frame
    base: str
    tip: str                     # the chain's tip link, None for a whole tree
    gravity: np.ndarray = dataclasses.field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, np.ndarray):
                value = np.array(value, dtype=int if value.dtype.kind in 'iu' else float)
                value.flags.writeable = False
                object.__setattr__(self, field.name, value)
        topology = np.stack([self.parent, self.joint_type], axis=1).astype(np.int64)
        body = np.empty((self.nb, BODY_WIDTH))
        body[:, BODY_AXIS:BODY_AXIS + 3] = self.joint_axis
        body[:, BODY_ROT:BODY_ROT + 9] = self.joint_placement[:, :3, :3].reshape(self.nb, 9)
        body[:, BODY_POS:BODY_POS + 3] = self.joint_placement[:, :3, 3]
        body[:, BODY_INERTIA:BODY_WIDTH] = self.inertia
        frame_table = np.concatenate([self.frame_placement[:, :3, :3].reshape(-1, 9),
                                      self.frame_placement[:, :3, 3]], axis=1)
        object.__setattr__(self, 'frame_table', frame_table)
        object.__setattr__(self, 'topology', topology)
        object.__setattr__(self, 'body', body)
        object.__setattr__(self, '_frame_index', {n: i for i, n in enumerate(self.frame_names)})

    @property
    def nb(self):
        """Number of moving bodies."""
        return len(self.joint_names)

    @property
    def nv(self):
        """Number of degrees of freedom (one per body)."""
        return len(self.joint_names)

    def frame_index(self, frame):
        """Index of a named frame, with the known names in the error."""
        try:
            return self._frame_index[frame]
        except KeyError:
            raise KeyError(f"unknown frame '{frame}'; known frames: "
                           f"{', '.join(self.frame_names)}") from None

    def replace(self, **changes):
        """A new Model with some fields changed (the Model itself is immutable)."""
        return dataclasses.replace(self, **changes)


class Data:
    """Workspace of one model: pass it to the algorithms to avoid allocating on every call."""

    def __init__(self, model):
        self.ws = np.zeros((model.nb, WS_WIDTH))
        self.M = np.zeros((model.nv, model.nv))
        self.J = np.zeros((6, model.nv))


def with_payload(model, mass, com=(0.0, 0.0, 0.0), inertia=None, frame=None):
    """A new Model carrying a rigid payload at ``frame`` (default: the tip).

    ``com`` is the payload's centre of mass and ``inertia`` (3x3, default zero) its inertia about
    the centre of mass, both in the frame's axes. A payload at a base frame changes nothing.
    """
    frame = model.tip if frame is None else frame
    if frame is None:
        raise ValueError('with_payload needs a frame: the model has no tip')
    mass = float(mass)
    com = np.asarray(com, dtype=float).reshape(3)
    inertia = np.zeros((3, 3)) if inertia is None else np.asarray(inertia, dtype=float)
    if not (np.isfinite(mass) and mass >= 0.0):
        raise ValueError(f'payload mass must be finite and >= 0, got {mass}')
    if inertia.shape != (3, 3) or not np.all(np.isfinite(inertia)) or not np.all(np.isfinite(com)):
        raise ValueError('payload com must be 3 finite numbers and inertia a finite 3x3 matrix')
    if not np.allclose(inertia, inertia.T) or np.linalg.eigvalsh(inertia).min() < -1e-12:
        raise ValueError('payload inertia must be symmetric positive semi-definite')
    f = model.frame_index(frame)
    b = model.frame_body[f]
    if b < 0:
        return model
    payload = transformed_inertia(standard_parameters(mass, com, inertia), model.frame_placement[f])
    new_inertia = model.inertia.copy()
    new_inertia[b] += payload
    return model.replace(inertia=new_inertia)
