"""Collision detection from the momentum observer's residual r ≈ τ_ext, and the reactions to it.

Without contact the residual is not zero: it holds what the model gets wrong (inertial
parameters, payload) and the friction it does not model. Default per-joint thresholds
(``default_thresholds``) therefore scale with the torque the joint can exert,
τ_th,i = (ρ + φ_i) τ_max,i with τ_max,i = model.effort_limit[i]: ρ (default 5 %) is the relative
error of the model's torque prediction, φ_i (default 10 %) the friction left out of the model,
counted only on joints whose Model has no friction terms (an identified friction's error is
within ρ). φ covers the worst joint of a published identification, the Panda's Coulomb friction
0.30-1.28 N m (Gaz, Cognetti, Oliva, Robuffo Giordano and De Luca, "Dynamic identification of
the Franka Emika Panda robot with retrieval of feasible parameters using penalty-based
optimization", IEEE RA-L 4(4), 2019: 7 % of the limit on joint 5, 0.84 of 12 N m), and the
friction of the realistic simulated plant (simulation.plant.REALISTIC) up to the velocity limit:
0.3 N m s/rad × 2.61 rad/s + 0.3 N m breakaway = 1.08 N m, 9 % of 12 N m on the Panda's wrist.
φ = 7 % tripped on that plant's wrist over fast trajectories (92 % of the velocity limits), where
its friction and its armature unknown to the model (0.05 kg m² × 18 rad/s²) made residuals of
1.3-1.8 N m (scripts/soak.py --plant realistic). Panda: 13.05 N m (joints 1-4), 1.8 N m (joints
5-7).

Contact the task intends is not a collision: a payload rides in the Model (rd.with_payload), so
the observer does not see it; a target wrench F_d that the arm is commanded to exert on its
environment at ``frame`` comes back as the reaction −F_d, so r + Jᵀ F_d is what is tested.

Filter: a sample is *over* when |r_i + (Jᵀ F_d)_i| > τ_th,i for some joint, or, with a
``force_threshold``, when the force of the wrench behind it at ``frame`` (damped least squares,
observers.wrench_from_torques) exceeds it. A collision is declared after ``samples`` N
consecutive over samples: the delay after the residual first crosses is N − 1 cycles. The
observer adds its own first-order lag: a step τ_ext crosses τ_th after −ln(1 − τ_th / |τ_ext|) / K
(De Luca et al., IROS 2006). The event is latched until ``reset``.
"""
import dataclasses
import enum

import numpy as np

from .algorithms.jacobians import LOCAL_WORLD_ALIGNED, frame_jacobian
from .control import GravityCompensation, finite_joint_vector, joint_gains
from .model import Data
from .observers import wrench_from_torques

RELATIVE_UNCERTAINTY = 0.05   # ρ: model torque error / effort limit
UNMODELLED_FRICTION = 0.10    # φ: friction not in the model / effort limit
SAMPLES = 3                   # N consecutive samples over the threshold
COMPLY_DAMPING = 0.1          # D_i = 0.1 τ_max,i / q̇_max,i


class Reaction(enum.Enum):
    """What the controller does on a collision (applied by the node's cycle)."""

    NONE = 'none'       # report only
    STOP = 'stop'       # hold the position at detection with computed torque; trajectory aborted
    COMPLY = 'comply'   # gravity compensation plus joint damping: the arm yields to the push


def default_thresholds(model, relative_uncertainty=RELATIVE_UNCERTAINTY,
                       unmodelled_friction=UNMODELLED_FRICTION):
    """τ_th,i = (ρ + φ_i) · effort_limit_i, φ_i = `unmodelled_friction` where the Model has none.

    Raises ValueError for a joint without an effort limit (give its threshold explicitly).
    """
    limit = model.effort_limit
    if not np.isfinite(limit).all():
        names = [n for n, x in zip(model.joint_names, limit) if not np.isfinite(x)]
        raise ValueError(f'no effort limit for joints {names}: give collision thresholds')
    if not (relative_uncertainty >= 0 and unmodelled_friction >= 0):
        raise ValueError('relative_uncertainty and unmodelled_friction must be >= 0')
    no_friction = (model.coulomb == 0) & (model.viscous == 0)
    return (relative_uncertainty + unmodelled_friction * no_friction) * limit


@dataclasses.dataclass(frozen=True)
class CollisionEvent:
    """A detected collision: when, which joints, how large (at the detecting sample)."""

    time: float              # s, the caller's clock (the sample that completed the N)
    onset: float             # s, the first of the N consecutive over samples
    joints: tuple            # names of the joints over their threshold
    torques: tuple           # their unintended external torque r + Jᵀ F_d, N m (or N)
    thresholds: tuple        # their thresholds
    force: float = None      # |force| at the frame, N, when a force threshold is set

    def __str__(self):
        parts = [f'{j} {t:+.3g} (threshold {h:.3g})'
                 for j, t, h in zip(self.joints, self.torques, self.thresholds)]
        if self.force is not None:
            parts.append(f'force {self.force:.3g} N')
        return f'collision at t = {self.time:.4f} s: ' + ', '.join(parts)


class CollisionDetector:
    """Latched collision flag from the residual r (τ_ext estimate, nv) of MomentumObserver.

    thresholds: scalar or (nv,) N m (N), default ``default_thresholds(model)``; samples: N;
    force_threshold: N at `frame` (default model.tip), None: joint thresholds only.
    """

    def __init__(self, model, thresholds=None, samples=SAMPLES, force_threshold=None,
                 frame=None, damping=1e-3):
        self.model, self._data = model, Data(model)
        self.thresholds = joint_gains(
            model, default_thresholds(model) if thresholds is None else thresholds, 'thresholds')
        if not (self.thresholds > 0).all():
            raise ValueError(f'thresholds must be > 0, got {self.thresholds}')
        if int(samples) != samples or samples < 1:
            raise ValueError(f'samples must be an integer >= 1, got {samples}')
        if force_threshold is not None and not force_threshold > 0:
            raise ValueError(f'force_threshold must be > 0 N (or None), got {force_threshold}')
        self.samples, self.force_threshold = int(samples), force_threshold
        self.frame = model.tip if frame is None else frame
        if self.frame is None and force_threshold is not None:
            raise ValueError('force_threshold needs a frame (the model has no tip)')
        self.damping = damping
        self.reset()

    def reset(self):
        """Clear the latched event and the count of consecutive samples over the threshold."""
        self.event, self._count, self._onset = None, 0, None

    def unintended(self, residual, q=None, target_wrench=None):
        """r + Jᵀ F_d: the external torque the task does not explain (F_d at frame, base axes)."""
        r = finite_joint_vector(self.model, residual, 'residual')
        if target_wrench is None:
            return r
        if q is None:
            raise ValueError('target_wrench needs q (for the Jacobian)')
        F = np.asarray(target_wrench, dtype=float)
        if F.shape != (6,) or not np.isfinite(F).all():
            raise ValueError(f'target_wrench: expected 6 finite values (moment, force), got {F}')
        J = frame_jacobian(self.model, finite_joint_vector(self.model, q, 'q'), self.frame,
                           LOCAL_WORLD_ALIGNED, self._data)
        return r + J.T @ F

    def update(self, time, residual, q=None, target_wrench=None):
        """One sample; returns the latched CollisionEvent (None while there is none).

        q is needed with a force threshold or a target wrench.
        """
        if self.event is not None:
            return self.event
        tau = self.unintended(residual, q, target_wrench)
        over = np.abs(tau) > self.thresholds
        force = None
        if self.force_threshold is not None:
            if q is None:
                raise ValueError('a force threshold needs q (for the Jacobian)')
            wrench = wrench_from_torques(self.model, q, tau, self.frame, LOCAL_WORLD_ALIGNED,
                                         self.damping, self._data)
            force = float(np.linalg.norm(wrench[3:]))
        if over.any() or (force is not None and force > self.force_threshold):
            self._count += 1
            self._onset = time if self._count == 1 else self._onset
        else:
            self._count = 0
        if self._count >= self.samples:
            joints = np.flatnonzero(over)
            self.event = CollisionEvent(
                float(time), float(self._onset), tuple(self.model.joint_names[j] for j in joints),
                tuple(float(tau[j]) for j in joints),
                tuple(float(self.thresholds[j]) for j in joints), force)
        return self.event


def stop_reference(q):
    """Reaction ``stop``: the computed-torque reference (q_d, q̇_d, q̈_d) = (q, 0, 0)."""
    q = np.array(q, dtype=float)
    return q, np.zeros_like(q), np.zeros_like(q)


class Comply:
    """Reaction ``comply``: τ = g(q) − D q̇, gravity compensation plus joint damping.

    The arm floats and yields to the push while the damping takes its energy out.
    damping D: scalar or (nv,) N m s/rad, default 0.1 · effort_limit / velocity_limit per
    joint (the damping torque reaches 10 % of the effort limit at the velocity limit).
    """

    def __init__(self, model, damping=None):
        if damping is None:
            damping = COMPLY_DAMPING * model.effort_limit / model.velocity_limit
            if not np.isfinite(damping).all():
                raise ValueError('comply damping: the model lacks effort or velocity limits; '
                                 'give damping explicitly')
        self.damping = joint_gains(model, damping, 'damping')
        self._gravity = GravityCompensation(model)

    def __call__(self, q, v):
        return self._gravity(q) - self.damping * finite_joint_vector(self._gravity.model, v, 'v')
