"""Did every joint move as the excitation planned? And what to compensate when one did not.

``excite`` tracks its plan with computed torque on the nominal model. A light joint with
friction and armature the model lacks may hardly move: the controller's torque, scaled by the
nominal inertia, stays below the joint's friction. The fit then refuses the recording (its
threshold: ``fitting.MIN_SPEED`` RMS velocity, shared here). This module, ROS-free:

- ``assess``: per joint, the planned and achieved RMS velocity and range of motion; a joint
  *lags* when its RMS velocity is below MIN_SPEED (the fit would refuse it) or below
  LAG_FRACTION of the plan's;
- ``compensation``: the joint terms for a second pass, from the first pass's recording: viscous
  and Coulomb friction and armature fitted (least squares on τ − rnea(URDF)) for the joints
  that moved, and for those that lagged the median of the moved joints' values (the motors of
  one arm are of a kind; too much armature in computed torque's model raises the joint's
  effective gain, too little leaves it as stuck as before). The median, not the largest:
  some joints' values absorb what the nominal model lacks (the first joints' armature merges
  with their links' inertia, their Coulomb term with gravity errors): on the UR10 the elbow's
  armature came out 2.4 kg m², 47 times the motor's, and given to the light wrist_3 it made
  computed torque's gain 47 times too high there and the joint chatter.

``excite`` runs the plan once; if a joint lags, it sets these terms on the controller and runs
it again; if a joint still lags, it refuses, naming the joints and what they achieved. A
joint that *shakes* (RMS velocity above SHAKE_FACTOR times the plan's: an oscillation on the
motion, e.g. computed torque's gain raised too far by the compensation's armature) is
reported (SHAKES); the fit can still use it, but its friction is then poorly determined.
"""
import dataclasses

import numpy as np

import robot_dynamics as rd
from robot_dynamics.tools.fitting import MIN_SPEED, rms, rows_kept, without

LAG_FRACTION = 0.5   # a joint lags below this fraction of its planned RMS velocity
#: a joint shakes above this multiple of its planned RMS velocity: tracking a plan cannot add
#: that much speed, an oscillation can (too high a gain, e.g. too much armature in the model)
SHAKE_FACTOR = 1.25


class Refused(RuntimeError):
    """The experiment cannot run (excite, offline or on the arm); the message says why."""


@dataclasses.dataclass
class JointMotion:
    """One joint's planned and achieved motion: RMS velocity, rad/s (m/s), and range, rad (m)."""

    name: str
    planned_speed: float
    speed: float
    planned_range: float
    range: float

    @property
    def lags(self):
        """Below the fit's MIN_SPEED, or below LAG_FRACTION of the plan's RMS velocity."""
        return self.speed < MIN_SPEED or self.speed < LAG_FRACTION * self.planned_speed

    @property
    def shakes(self):
        """Above SHAKE_FACTOR times the plan's RMS velocity: an oscillation on the motion."""
        return self.speed > SHAKE_FACTOR * self.planned_speed

    def line(self):
        status = 'LAGS' if self.lags else 'SHAKES' if self.shakes else 'ok'
        return (f'{self.name}: RMS velocity {self.speed:.3g} of {self.planned_speed:.3g} planned, '
                f'range {self.range:.3g} of {self.planned_range:.3g} ({status})')


def assess(model, planned_v, planned_q, v, q):
    """JointMotion per joint of planned and recorded (N, nv) velocities and positions."""
    return [JointMotion(j, float(pv), float(av), float(pr), float(ar)) for j, pv, av, pr, ar in
            zip(model.joint_names, rms(np.asarray(planned_v)), rms(np.asarray(v)),
                np.ptp(planned_q, axis=0), np.ptp(q, axis=0))]


def report(motions):
    """A few lines: per joint, what it achieved of the plan."""
    lines = ['motion per joint (the fit needs an RMS velocity of at least '
             f'{MIN_SPEED} rad/s):'] + ['  ' + m.line() for m in motions]
    if shaking(motions):
        lines.append(f'WARNING: {", ".join(shaking(motions))} moved more than {SHAKE_FACTOR:g} '
                     'times faster than planned: an oscillation, not the plan; its friction '
                     'will be poorly fitted (lower its kp/kd, or the armature set on the '
                     'controller)')
    return '\n'.join(lines)


def lagging(motions):
    return [m.name for m in motions if m.lags]


def shaking(motions):
    """The joints that moved much faster than planned (JointMotion.shakes)."""
    return [m.name for m in motions if m.shakes]


def compensation(model, samples, motions):
    """{viscous, coulomb, armature} (nv,) for the controller's second pass (module docstring).

    ``samples``: ``fitting.prepare``'s of the first pass. Fitted values below 0 count as 0.
    """
    moved = np.array([not m.lags for m in motions])
    if not moved.any():
        raise ValueError('no joint moved: check that the controller runs computed_torque on '
                         'this arm and that the arm is powered')
    flags = dict(viscous=True, coulomb=True, armature=True)
    bare = without(model, flags)
    Y = rd.regressor(bare, samples.q, samples.v, samples.a, **flags, sign=samples.sign)
    Y = Y[..., 10 * model.nb:]
    keep = np.tile(moved, 3)
    residual = samples.tau - rd.rnea(bare, samples.q, samples.v, samples.a)
    rows = rows_kept(samples, flags)   # as the fit: friction near rest is no law of q̇
    A = (Y[..., keep] * rows[..., None]).reshape(-1, int(keep.sum()))
    theta = np.linalg.lstsq(A, (residual * rows).ravel(), rcond=None)[0]
    values = np.zeros(3 * model.nv)
    values[keep] = np.maximum(theta, 0.0)
    terms = {}
    for k, kind in enumerate(('viscous', 'coulomb', 'armature')):
        x = values[k * model.nv:(k + 1) * model.nv]
        x[~moved] = np.median(x[moved])
        terms[kind] = x
    return terms


def refusal(motions):
    """None when every joint moved enough for the fit, else the message naming the joints."""
    behind = [m for m in motions if m.speed < MIN_SPEED]
    if not behind:
        return None
    return (f'the fit would refuse this recording: {", ".join(m.name for m in behind)} moved '
            f'too little (RMS velocity {", ".join(f"{m.speed:.3g}" for m in behind)} rad/s, '
            f'at least {MIN_SPEED} needed) even with their friction and armature compensated: '
            'raise the controller\'s kp and kd for them, or a larger --margin')
