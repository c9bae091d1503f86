"""The numerics of ``fit_dynamics``: a recording's samples in, fitted parameters out.

``prepare`` maps the recorded joints onto the model by name, resamples on a uniform grid,
differentiates q and filters τ with the same zero-phase low-pass (core ``differentiate`` and
``lowpass``), drops the filter's edges and decimates. Then, τ = Y θ in the core's parameter
order (``robot_dynamics.core.regressor``):

- ``fit_residual`` keeps the URDF's links and explains τ - rnea(model) by a payload's standard
  parameters at the tip body (expressed in the tip frame) and the joint terms: viscous and
  Coulomb friction, armature, and the stiction of a Stribeck term (v_s the model's);
- ``fit_links`` identifies the links with the joint terms by ``rd.identify``: physically
  consistent by construction, regularised towards the URDF's parameters.

Both refuse (``FitError``) an ill-conditioned problem: columns scaled to unit norm, a condition
number above ``max_condition`` names the parameters in the weak directions; friction and
armature also need each joint to move.
"""
import dataclasses

import numpy as np

import robot_dynamics as rd
from robot_dynamics.core.algorithms.friction import smooth_sign, stribeck_sign
from robot_dynamics.core.identification import (PRIOR_STD, conditioning, differentiate,
                                                inertia_about_com, known_joint_torques, lowpass,
                                                noise_weights, payload_regressor, weighted_fit)
from robot_dynamics.core.model import JOINT_TERMS
from robot_dynamics.core.regressor import INERTIAL_NAMES, parameter_names

MIN_SPEED = 0.05     # rad/s (m/s): RMS velocity below which a joint counts as not moving
#: a joint slower than REST_SPEED × ε (the model's coulomb_velocity) is at or near rest: its
#: friction there is not a function of q̇ (dry friction holds anything up to breakaway), so
#: friction fits leave out its rows within REST_REACH / cutoff s of such a sample (``sliding``;
#: about the half-width of the zero-phase filter's response, which spreads a stuck stretch)
REST_SPEED, REST_REACH = 1.0, 0.5
MAX_GAP = 0.2        # largest gap in the stamps, in units of 1 / cutoff
SMALL = 0.005        # m: a payload's inertia below mass x SMALL² counts as a point mass's


class FitError(ValueError):
    """The data cannot give the asked parameters; the message says why."""


@dataclasses.dataclass
class Samples:
    """Filtered states and torques (N, nv) in model order; ``dt`` the resampled period, s.

    ``sign``: tanh(q̇ / ε) through the torques' low-pass, the Coulomb columns of the regressor
    (the filter smooths the torque's jumps at velocity reversals; filtering the columns alike
    keeps τ = Y θ exact: Gautier's parallel filtering); ``stribeck``: the stiction columns
    exp(−(q̇ / v_s)²) tanh(q̇ / ε), filtered alike.
    """

    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    tau: np.ndarray
    sign: np.ndarray
    stribeck: np.ndarray
    dt: float
    order: np.ndarray   # order[i]: model index of the recording's joint i
    gaps: list = dataclasses.field(default_factory=list)   # (t, length) s of each gap
    cutoff: float = np.inf   # Hz of the low-pass: errors 1 / (2 cutoff) s apart are independent
    sliding: np.ndarray = None   # (N, nv) bool: joint sliding, away from rest (REST_SPEED)

    @property
    def independent(self):
        """The fraction of the samples with independent errors, 2 cutoff dt (at most 1)."""
        return min(1.0, 2.0 * self.cutoff * self.dt)


def joint_order(model, joint_names):
    """order[i] = model index of joint_names[i]; FitError unless a permutation of the chain."""
    unknown = [j for j in joint_names if j not in model.joint_names]
    chain = f'the chain {model.base} -> {model.tip} has {list(model.joint_names)}'
    if unknown:
        raise FitError(f'recorded joints {unknown} are not in the model ({chain}); '
                       f'choose --base/--tip, or record only the chain\'s joints')
    missing = [j for j in model.joint_names if j not in joint_names]
    if missing or len(set(joint_names)) != len(joint_names):
        raise FitError(f'the recording must have each joint of the model once ({chain}); '
                       f'it has {list(joint_names)}')
    return np.array([model.joint_names.index(j) for j in joint_names])


def prepare(recording, model, cutoff, edge=None, max_samples=4000, min_samples=200):
    """Samples for fitting: resampled, differentiated, filtered, edges of ``edge`` s dropped.

    ``edge`` defaults to 2 / cutoff; at most ``max_samples`` are kept (evenly decimated). A gap
    in the stamps (lost messages: longer than 2 periods and MAX_GAP / cutoff) splits the
    recording into stretches, each processed alone (``stretch``): the regressor's rows need no
    continuity, only the filter does.
    """
    order = joint_order(model, recording.joint_names)
    t, q, tau = recording.t, recording.q, recording.tau
    for name, x in (('t', t), ('q', q), ('tau', tau)):
        bad = np.argwhere(~np.isfinite(x))
        if len(bad):
            raise FitError(f'{name} has {len(bad)} non-finite values (first at sample '
                           f'{bad[0][0]})')
    min_samples = max(min_samples, 50)   # the zero-phase filter's padding needs a few dozen
    if len(t) < min_samples:
        raise FitError(f'too few samples: {len(t)} recorded, at least {min_samples} needed')
    step = np.diff(t)
    if np.any(step <= 0):
        raise FitError(f'stamps must increase; sample {np.argmax(step <= 0) + 1} does not')
    dt = float(np.median(step))
    if cutoff >= 0.5 / dt:
        raise FitError(f'--cutoff {cutoff} Hz must be below half the sample rate '
                       f'({0.5 / dt:.4g} Hz)')
    gaps = np.flatnonzero(step > max(2 * dt, MAX_GAP / cutoff))
    drop = int(np.ceil((2.0 / cutoff if edge is None else edge) / dt))
    pieces = [p for p in (stretch(model, t[k], q[k], tau[k], dt, cutoff, drop)
                          for k in np.split(np.arange(len(t)), gaps + 1)) if p is not None]
    total = sum(len(p[0]) for p in pieces)
    if total < min_samples:
        between = f' of each stretch between the {len(gaps)} gaps in the stamps' if len(
            gaps) else ''
        raise FitError(f'too few samples: {total} left after dropping {drop * dt:.3g} s at '
                       f'each end{between}, at least {min_samples} needed')
    every = max(1, -(-total // max_samples))
    x_model = [np.empty_like(np.concatenate(x)[::every]) for x in zip(*pieces)]
    for x, y in zip(x_model, zip(*pieces)):
        x[:, order] = np.concatenate(y)[::every]
    *x_model, moving = x_model
    return Samples(*x_model, dt * every, order, [(float(t[k]), float(step[k])) for k in gaps],
                   cutoff, moving.astype(bool))


def stretch(model, t, q, tau, dt, cutoff, drop):
    """(q, q̇, q̈, τ, sign, stribeck) of one stretch without gaps, on a grid of dt, edges dropped.

    None if nothing is left after dropping ``drop`` samples at each end (or too short to filter).
    """
    grid = t[0] + dt * np.arange(int(round((t[-1] - t[0]) / dt)) + 1)
    if len(grid) - 2 * drop < 1 or len(grid) < 50:   # the zero-phase filter's padding
        return None
    q = np.column_stack([np.interp(grid, t, x) for x in q.T])
    tau = np.column_stack([np.interp(grid, t, x) for x in tau.T])
    q, v, a = differentiate(q, dt, cutoff)
    tau = lowpass(tau, dt, cutoff)
    sign = lowpass(smooth_sign(v, model.coulomb_velocity), dt, cutoff)   # parallel filtering
    stribeck = lowpass(stribeck_sign(v, model.stribeck_velocity, model.coulomb_velocity), dt,
                       cutoff)
    keep = slice(drop, len(grid) - drop)
    moving = sliding(v, REST_SPEED * model.coulomb_velocity, int(np.ceil(REST_REACH / cutoff / dt)))
    return q[keep], v[keep], a[keep], tau[keep], sign[keep], stribeck[keep], moving[keep]


def sliding(v, rest_speed, reach):
    """(N, nv) bool: |q̇| >= rest_speed at every sample within ``reach`` samples either side.

    Near rest, the friction of a real joint is not the law the fit knows: dry friction holds
    any torque up to its breakaway torque (set-valued at q̇ = 0), and the filter spreads a
    stuck stretch over ``reach`` samples each way.
    """
    still = (np.abs(v) < rest_speed).astype(float)
    width = 2 * reach + 1
    near = np.apply_along_axis(lambda x: np.convolve(x, np.ones(width), 'same'), 0, still)
    return near < 0.5


@dataclasses.dataclass
class Fit:
    """What was fitted, in model order; None for what was not asked.

    ``payload``: dict(mass, com (3,), inertia (3, 3) about the com or None, mass_std, com_std
    (3,), the std of m and of (m c) / m), tip axes;
    ``inertia`` (nb, 10): the links' full parameters (``fit_links``); ``rms_before``/``rms_after``
    (nv,): residual RMS of τ - rnea(URDF) and of τ - the fitted model; ``names``, ``theta``,
    ``std``: the estimated parameters (base parameters for ``fit_links``) and their std;
    ``problems``: physical inconsistencies found; ``notes``: what else the report should say.
    """

    names: list
    theta: np.ndarray
    std: np.ndarray
    condition_number: float
    rms_before: np.ndarray
    rms_after: np.ndarray
    payload: dict = None
    viscous: np.ndarray = None
    coulomb: np.ndarray = None
    armature: np.ndarray = None
    stiction: np.ndarray = None
    inertia: np.ndarray = None
    problems: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)
    changes: list = None   # fit_links: a LinkChange per link


def rms(x):
    return np.sqrt(np.mean(x ** 2, axis=0))


def check_motion(model, s, what):
    """FitError naming the joints that do not move enough for ``what``."""
    still = [f'{j} ({r:.3g})' for j, r in zip(model.joint_names, rms(s.v)) if r < MIN_SPEED]
    if still:
        raise FitError(f'{what} need every joint to move; RMS velocity below {MIN_SPEED} '
                       f'rad/s (m/s): {", ".join(still)}')


def check_conditioning(Y, names, max_condition, sigma=None):
    """The condition number of Y with unit-norm columns; FitError naming what is not excited.

    For fits without a prior (``fit_residual``): nothing else can fix what the data do not.
    """
    c = conditioning(Y, names, max_condition, sigma)
    if c.unexcited:
        raise FitError(f'not excited at all: {", ".join(c.unexcited)}; {EXCITE_MORE}')
    if not c.well_conditioned:
        raise FitError(f'ill-conditioned fit (condition number {c.condition_number:.3g} > '
                       f'{max_condition:g}); the motion does not determine: '
                       f'{", ".join(c.weak)}; {EXCITE_MORE}, or fit with --links (its prior, '
                       f'the URDF, splits what the data cannot)')
    return c.condition_number


EXCITE_MORE = ('excite the joints of these parameters more (a larger excite --margin, more '
               '--harmonics, another --seed)')


def solve(Y, tau, names, max_condition, weighted=False):
    """θ, its std, residual RMS (nv,) and the condition number of min |τ - Y θ|.

    Y (N, nv, p), τ (N, nv). ``weighted``: Gautier's two steps (core ``noise_weights``
    'estimate'). FitError for an ill-conditioned Y (``check_conditioning``, at each step).
    """
    condition = check_conditioning(Y, names, max_condition)
    sigma = noise_weights(Y, tau, 'estimate' if weighted else None, Y.shape[-1])
    if weighted:
        condition = check_conditioning(Y, names, max_condition, sigma)
    theta, std, residual_rms, _ = weighted_fit(Y, tau, sigma)
    return theta, std, residual_rms, condition


def settle_joint_terms(fit, model, s):
    """Negative friction or armature: 0 if within 3 std of 0 or negligible (noted), else a problem.

    Negligible: its torque is below 1e-3 of the joint's torque (RMS over the samples).
    """
    std, zeroed = dict(zip(fit.names, fit.std)), []
    for kind, column in zip(JOINT_TERMS, (s.v, s.sign, s.a, s.stribeck)):
        values = getattr(fit, kind)
        negligible = 1e-3 * rms(s.tau) / np.maximum(rms(column), 1e-300)
        for i, joint in enumerate(model.joint_names if values is not None else ()):
            x, sd = values[i], std.get(f'{joint}.{kind}', 0.0)
            if -max(3.0 * sd, negligible[i]) < x < 0.0:
                zeroed.append(f'{kind} of {joint} ({x:.2g} ± {sd:.2g})')
                values[i] = 0.0
            elif x < 0.0:
                fit.problems.append(f'{kind} of {joint} is negative ({x:.3g} ± {sd:.2g})')
    if zeroed:
        fit.notes.append(f'negative within 3 std of 0 or negligibly, written as 0: '
                         f'{", ".join(zeroed)}')


def regressor(model, s, flags):
    """Y (N, nv, 10 nb + joint columns) at the samples; its sign columns the filtered ones."""
    return rd.regressor(model, s.q, s.v, s.a, **flags, sign=s.sign, stribeck=s.stribeck)


def fit_residual(model, s, payload=False, payload_inertia=True, friction=False,
                 armature=False, max_condition=1e3, weighted=False, stiction=False):
    """Payload at the tip and joint terms from τ - rnea(model) (module docstring)."""
    if not (payload or friction or armature or stiction):
        raise FitError('nothing to fit: ask for --payload, --friction, --armature or --links')
    if friction or armature or stiction:
        check_motion(model, s, 'friction and armature')
    flags = dict(viscous=friction, coulomb=friction, armature=armature, stiction=stiction)
    model = without(model, flags)
    Y = regressor(model, s, flags)
    columns, names = [Y[..., 10 * model.nb:]], parameter_names(model, **flags)[10 * model.nb:]
    if payload:
        if model.tip is None:
            raise FitError('--payload needs a chain with a tip: pass --tip')
        k = 10 if payload_inertia else 4
        columns.insert(0, payload_regressor(model, Y, model.tip, payload_inertia))
        names = [f'payload.{n}' for n in INERTIAL_NAMES[:k]] + names
    before = s.tau - rd.rnea(model, s.q, s.v, s.a)
    keep = rows_kept(s, flags)
    theta, std, after, condition = solve(np.concatenate(columns, axis=2) * keep[..., None],
                                         before * keep, names, max_condition, weighted)
    fit = Fit(names, theta, std, condition, rms(before), after)
    note_rest(fit, model, keep)
    rest = theta
    if payload:
        fit.payload, rest = payload_of(theta[:k]), theta[k:]
        fit.payload.update(mass_std=std[0], com_std=std[1:4] / max(abs(theta[0]), 1e-300))
        if theta[0] <= 0.0:
            fit.problems.append(f'payload mass is not positive ({theta[0]:.3g} kg)')
        elif payload_inertia:
            settle_payload_inertia(fit, max(3.0 * std[4:10].max(), theta[0] * SMALL ** 2))
    for kind, flag in flags.items():
        if flag:
            setattr(fit, kind, rest[:model.nv])
            rest = rest[model.nv:]
    settle_joint_terms(fit, model, s)
    return fit


def settle_payload_inertia(fit, tolerance):
    """Negative principal moments down to -tolerance become 0 (noted); below, a problem."""
    moments, axes = np.linalg.eigh(fit.payload['inertia'])
    text = f'payload principal moments {np.round(moments, 6).tolist()} kg m^2'
    if moments[0] < -tolerance:
        fit.problems.append(f'{text}: not positive')
    elif moments[0] < 0.0:
        fit.notes.append(f'{text}: the negative ones, within {tolerance:.2g} of 0, written as 0')
        fit.payload['inertia'] = axes @ np.diag(np.maximum(moments, 0.0)) @ axes.T
    if moments[2] > moments[0] + moments[1] + tolerance:
        fit.notes.append(f'{text}: the triangle inequality does not hold (the data do not fix '
                         f'the inertia well: try --no-payload-inertia)')


def rows_kept(s, flags):
    """(N, nv) float: 1 for the rows a fit uses, 0 for those of joints near rest (``sliding``).

    Only fits of friction leave those out (the friction law is not defined at rest); the rows
    of the other joints at the same sample stay.
    """
    if not (flags['coulomb'] or flags['stiction']) or s.sliding is None:
        return np.ones(s.tau.shape)
    return s.sliding.astype(float)


def note_rest(fit, model, keep):
    """Say in the report which share of each joint's samples was left out near rest."""
    left_out = 1.0 - keep.mean(axis=0)
    if left_out.any():
        fit.notes.append('samples near rest left out of the fit (friction there is not a '
                         'function of the velocity): ' + ', '.join(
                             f'{j} {100 * x:.0f} %' for j, x in zip(model.joint_names, left_out)))


def without(model, flags):
    """The model with the joint terms to be fitted set to zero."""
    return model.replace(**{kind: None for kind, flag in flags.items() if flag})


def payload_of(theta):
    """dict(mass, com, inertia about the com or None) of (m, m c[, I about the tip origin])."""
    mass = float(theta[0])
    com = theta[1:4] / mass if mass else np.zeros(3)
    inertia = inertia_about_com(theta) if len(theta) == 10 and mass else None
    return dict(mass=mass, com=com, inertia=inertia)


def fit_links(model, s, friction=False, armature=False, max_condition=1e3, weighted=False,
              prior_std=PRIOR_STD, stiction=False):
    """The links' inertial parameters (and joint terms) by ``rd.identify`` (module docstring).

    Y with the filtered Coulomb columns goes to ``rd.identify(..., Y=)``; the full parameters
    are its consistent fit (physical bodies, joint terms >= 0), regularised towards the URDF's
    with the prior's standard deviation ``prior_std`` (in units of each body's size).
    """
    if friction or armature or stiction:
        check_motion(model, s, 'friction and armature')
    flags = dict(viscous=friction, coulomb=friction, armature=armature, stiction=stiction)
    model = without(model, flags)
    base, Y = rd.base_parameters(model, **flags), regressor(model, s, flags)
    keep = rows_kept(s, flags)
    Y = Y * keep[..., None]
    tau = np.where(keep, s.tau, known_joint_torques(model, s.v, s.a, flags))
    weak = conditioning(Y[..., base.independent], base.names, max_condition)
    unexcited_terms = [n for n in weak.unexcited if n.split('.')[-1] in JOINT_TERMS]
    if unexcited_terms:   # the prior knows no joint terms: 0 is no estimate
        raise FitError(f'not excited at all: {", ".join(unexcited_terms)}; {EXCITE_MORE}')
    result = rd.identify(model, s.q, s.v, s.a, tau, **flags, base=base, Y=Y,
                         noise_std='estimate' if weighted else None, prior_std=prior_std,
                         independent=s.independent * keep.mean())
    fit = Fit(base.names, result.theta_base, result.std_base, weak.condition_number,
              rms(s.tau - rd.rnea(model, s.q, s.v, s.a)), result.residual_rms,
              inertia=result.model.inertia.copy(),
              **{kind: getattr(result, kind) for kind, flag in flags.items() if flag})
    fit.notes.append(f'residual RMS of the unconstrained least squares (not physical in '
                     f'general): {np.array2string(result.least_squares_rms, precision=4)}')
    note_rest(fit, model, keep)
    for joint, c in zip(model.joint_names, result.consistency):
        if not (c['positive_definite'] and c['triangle']):
            moments = c['principal_moments']
            fit.problems.append(f'the link moved by {joint} is not physical (mass '
                                f'{c["mass"]:.3g}, principal moments about its centre of mass '
                                f'{"-" if moments is None else np.round(moments, 6).tolist()})')
    n = 10 * model.nb
    free = np.abs(np.diag(np.linalg.pinv(base.P) @ base.P)[n:] - 1.0) > 1e-8
    merged = [name for name, f in zip(parameter_names(model, **flags)[n:], free) if f]
    undetermined = merged + [name for name in weak.unexcited + weak.weak
                             if name not in merged]
    if undetermined:   # one rule: what the data cannot separate, the prior splits
        fit.notes.append(f'not determined by the data (condition number '
                         f'{weak.condition_number:.3g}; limit {max_condition:g}): the prior, the '
                         f'URDF, splits {", ".join(undetermined)}; to determine them, '
                         f'{EXCITE_MORE}')
    settle_joint_terms(fit, model, s)
    fit.changes = link_changes(model, fit.inertia)
    implausible = [c.line() for c in fit.changes if c.implausible(MASS_FLAG)]
    if implausible:
        fit.notes.append(f'WARNING: link masses changed beyond a factor {MASS_FLAG:g} from the '
                         f'URDF (more than the data usually support: check the excitation '
                         f'report, or refuse with --max-change): {"; ".join(implausible)}')
    return fit


MASS_FLAG = 2.0   # a link mass halved or doubled from the URDF's is flagged


@dataclasses.dataclass
class LinkChange:
    """One link's fitted inertial parameters against the URDF's."""

    link: str
    mass: float
    fitted_mass: float
    com_shift: float      # m
    inertia_change: float  # |ΔI_c| / |I_c| (Frobenius, about each centre of mass)

    @property
    def factor(self):
        return self.fitted_mass / self.mass if self.mass > 0 else np.inf

    def implausible(self, limit):
        """Mass more than ``limit`` times, or less than 1 / ``limit`` of, the URDF's."""
        return not 1.0 / limit <= self.factor <= limit

    def line(self):
        return (f'{self.link} mass {self.mass:.4g} -> {self.fitted_mass:.4g} kg (x'
                f'{self.factor:.3g}), centre of mass moved {1e3 * self.com_shift:.3g} mm, '
                f'inertia changed {100 * self.inertia_change:.3g} %')


def link_changes(model, inertia):
    """A LinkChange per moving body of ``model`` against fitted (nb, 10) ``inertia``."""
    changes = []
    for link, before, after in zip(model.body_names, model.inertia, inertia):
        if not (before[0] > 0 and after[0] > 0):
            changes.append(LinkChange(link, before[0], after[0], np.inf, np.inf))
            continue
        shift = np.linalg.norm(after[1:4] / after[0] - before[1:4] / before[0])
        I0, I1 = inertia_about_com(before), inertia_about_com(after)
        change = np.linalg.norm(I1 - I0) / max(np.linalg.norm(I0), 1e-300)
        changes.append(LinkChange(link, float(before[0]), float(after[0]), float(shift),
                                  float(change)))
    return changes
