"""The demo's realistic scene: our control laws on a plant that is not their model, in one process.

    python -m robot_dynamics.demo --scene realistic [--robot panda] [--engine internal|mujoco]
        [--exact-links]
    python -m robot_dynamics.demo.realistic [--exact-links] [--fitted [--stiction] | --true-terms]
        [--ki 1000] [--deadband 0.01] [--cutoff 50] [--friction-compensation]   # one run's figures

The arm is ``plant.profile: realistic`` (robot_dynamics.simulation.plant.REALISTIC: links ±10 %)
closed with the control laws of robot_dynamics.core.control in one process
(simulation.closed_loop: the cycle arm_simulator and dynamics_controller run over DDS, without
DDS). The scene measures:

- **before** identification: the nominal URDF, no joint terms;
- **after**: the links, armature, viscous and Coulomb friction fitted in process
  (tools.fitting.fit_links, as ``fit_dynamics --links --friction --armature``) from 8 s of
  excitation tracked by computed torque on the nominal model; with ``--exact-links``
  (``plant.mass_error`` and ``com_error`` 0) the joint terms alone (fitting.fit_residual, as
  ``--friction --armature``);
- **after, stiction fitted**: the same fit with the Stribeck term's stiction (``--stiction``,
  v_s the plant's);
- **+ integral**, **+ friction**: with the controller's options for a real arm, the integral term
  ``ki`` and friction compensation with its ``friction_deadband`` (``velocity_filter_cutoff``
  is left out: on this plant it costs tracking more than it saves; README).

Figures (``figures``): gravity-compensation drift over 5 s and the torque chatter (``chatter``:
RMS of the command's change per cycle) there; computed torque's steady error 2–3 s after a
0.15 rad step of every joint (RMS, max) and its chatter there; the wrench estimate (momentum
observer, gain 50/s, on the controller's model) there, its bias, and its error 1–2 s into a
15 N push down at the tip; tracking RMS along a 3 s test excitation (seed 7).
"""
import argparse
import dataclasses
import pathlib
import time

import numpy as np
import yaml

import robot_dynamics as rd
from robot_dynamics.core.control import ComputedTorque, GravityCompensation, VelocityFilter
from robot_dynamics.core.observers import MomentumObserver
from robot_dynamics.core.trajectory import JointTrajectory
from robot_dynamics.simulation import plant
from robot_dynamics.simulation.closed_loop import realistic_plant

STEP, DRIFT, DT, PUSH = 0.15, 5.0, 1e-3, 15.0   # rad, s, s, N
EXACT_LINKS = {**plant.REALISTIC, 'plant.mass_error': 0.0, 'plant.com_error': 0.0}
INTEGRAL = dict(ki=500.0)
FRICTION = dict(friction_compensation=True, friction_deadband=0.01)
#: (name, model, controller options) of the scene's runs
SCENE = (('before', 'nominal', {}), ('before + integral', 'nominal', INTEGRAL),
         ('after', 'fitted', {}), ('after + friction compensation', 'fitted', FRICTION),
         ('after, stiction fitted', 'fitted with stiction', {}))


@dataclasses.dataclass
class Arm:
    """The scene's arm: URDF XML, chain, start pose and computed-torque gains."""

    urdf: str
    base: str
    tip: str
    q0: np.ndarray
    kp: np.ndarray
    kd: np.ndarray

    def model(self):
        return rd.load_urdf(self.urdf, self.base, self.tip)


def shipped_arm(robot):
    """The Arm of config/<robot>.yaml (chain order: the shipped configs list joints so)."""
    from robot_dynamics import bringup
    config = bringup.load_config(bringup.config_file(f'{robot}.yaml'))
    sim, ct = (config[n]['ros__parameters'] for n in ('arm_simulator', 'dynamics_controller'))
    urdf = pathlib.Path(rd.robot_urdf(robot)).read_text()
    model = rd.load_urdf(urdf, sim['base'], sim['tip'])
    if list(sim['joints']) != list(model.joint_names):
        raise ValueError(f'config/{robot}.yaml lists the joints in another order than the chain')
    return Arm(urdf, sim['base'], sim['tip'], np.array(sim['initial_position'], dtype=float),
               np.array(ct['kp'], dtype=float), np.array(ct['kd'], dtype=float))


def controller(model, arm, ki=0.0, friction_compensation=False, friction_deadband=0.0,
               cutoff=0.0):
    """(gravity compensation law, computed torque law, velocity filter or None) on ``model``."""
    gc = GravityCompensation(model, friction_compensation, friction_deadband)
    ct = ComputedTorque(model, arm.kp, arm.kd, ki, model.effort_limit)
    return gc, ct, VelocityFilter(cutoff) if cutoff > 0.0 else None


def filtered(laws, law):
    """law(t, q, q̇) with q̇ through the velocity filter of ``laws`` first (if any)."""
    velocity_filter = laws[2]
    if velocity_filter is None:
        return law
    return lambda t, q, v: law(t, q, velocity_filter(v, t))


def new_loop(arm, profile, engine, seed=0):
    return realistic_plant(engine, arm.urdf, arm.base, arm.tip, arm.q0, DT, profile, seed)


def drift(arm, model, profile, engine, options):
    """(max |q − q0| over DRIFT s, RMS per-cycle change of the command) under gravity comp."""
    gc, _, _ = laws = controller(model, arm, **options)
    _, q, _, _, tau = new_loop(arm, profile, engine).run(
        filtered(laws, lambda t, q, v: gc(q, v)), DRIFT)
    return float(np.abs(q - arm.q0).max()), chatter(tau)


def chatter(tau):
    """RMS of the command's change per cycle, N m: noise a law passes on to the motors."""
    return float(np.sqrt(np.mean(np.diff(tau, axis=0) ** 2)))


def step(arm, model, profile, engine, options):
    """Computed torque holding a 0.15 rad step of every joint (reached in 1 s), then pushed.

    Returns {step_steady_rms_rad, step_steady_max_rad, step_chatter_nm} 2–3 s after the step,
    and the wrench estimate (``estimated_forces`` on ``model``) there: |F| (wrench_bias_n) and,
    1–2 s into a PUSH N push down at the tip, |F − F_push| (push_error_n).
    """
    laws = controller(model, arm, **options)
    reference = JointTrajectory([0.0, 1.0], [arm.q0, arm.q0 + STEP])
    law = filtered(laws, lambda t, q, v: laws[1](q, v, *reference.sample(t), t=t))
    loop = new_loop(arm, profile, engine)
    held = loop.run(law, 4.0)
    pushed = loop.run(law, 2.0, wrench=(0.0, 0.0, 0.0, 0.0, 0.0, -PUSH))
    t, q, v, effort, tau = (np.concatenate(x) for x in zip(held, pushed))
    force = estimated_forces(model, arm.tip, t, q, v, effort)
    steady, push = (t >= 3.0) & (t < 4.0), t >= 5.0
    error = q[steady] - (arm.q0 + STEP)
    return dict(step_steady_rms_rad=float(np.sqrt(np.mean(error ** 2))),
                step_steady_max_rad=float(np.abs(error).max()),
                step_chatter_nm=chatter(tau[steady]),
                wrench_bias_n=float(np.linalg.norm(force[steady].mean(axis=0))),
                push_error_n=float(np.linalg.norm(force[push].mean(axis=0) - [0, 0, -PUSH])))


def estimated_forces(model, tip, t, q, v, effort, gain=50.0):
    """The wrench_estimator's force at the tip (base axes) per sample: momentum observer, Jᵀ⁻¹."""
    observer = MomentumObserver(model, gain)
    forces = np.empty((len(t), 3))
    for k in range(len(t)):
        tau_ext = observer.update(q[k], v[k], effort[k], t[k] - t[k - 1] if k else 0.0)
        forces[k] = observer.wrench(q[k], tau_ext, tip)[3:]
    return forces


def test_excitation(model, q0, period=3.0, seed=7):
    """The test excitation of tools.identification_loop (another seed than the fit's)."""
    return rd.excitation_trajectory(model, period=period, harmonics=3, q0=q0, evaluations=0,
                                    seed=seed, margin=0.5)


def track(arm, model, profile, engine, options, reference, seed=0):
    """PlantLoop.run's arrays with computed torque along ``reference`` (a JointTrajectory)."""
    laws = controller(model, arm, **options)
    return new_loop(arm, profile, engine, seed).run(
        filtered(laws, lambda t, q, v: laws[1](q, v, *reference.sample(t), t=t)),
        reference.duration)


def tracking(arm, model, profile, engine, options):
    """(t, error (N, nv)) along the test excitation; its RMS is the tracking figure."""
    reference = test_excitation(arm.model(), arm.q0)
    t, q = track(arm, model, profile, engine, options, reference)[:2]
    return t, q - reference.sample_many(t)[0]


def figures(arm, model, profile, engine, options):
    """The scene's figures for one model and option set (module docstring); the tracking error."""
    moved, gc_chatter = drift(arm, model, profile, engine, options)
    held = step(arm, model, profile, engine, options)
    t, error = tracking(arm, model, profile, engine, options)
    return dict(drift_rad=moved, drift_chatter_nm=gc_chatter, **held,
                tracking_rms_rad=float(np.sqrt(np.mean(error ** 2)))), (t, error)


def true_terms(model, profile):
    """``model`` with the plant's own armature, viscous and Coulomb friction (not stiction)."""
    return model.replace(**{field: np.full(model.nv, float(profile[key])) for field, key in (
        ('armature', 'armature'), ('viscous', 'friction.viscous'),
        ('coulomb', 'friction.coulomb'))})


def excite(arm, nominal, profile, engine, excitation, seed=0):
    """excite in process: track ``excitation``, and again compensated if a joint lagged.

    As ``excite`` over ROS (tools.excitation_check): computed torque on ``nominal``; if a joint
    lags, its second pass runs with the joint terms ``compensation`` fits from the first.
    Returns (Recording, JointMotions of the recording kept, the compensation or None).
    """
    from robot_dynamics.tools import excitation_check, fitting
    from robot_dynamics.tools.recording import Recording
    controller_model, terms = nominal, None
    for attempt in range(2):
        t, q, v, effort, _ = track(arm, controller_model, profile, engine, {}, excitation, seed)
        planned_q, planned_v, _ = excitation.sample_many(t)
        motions = excitation_check.assess(nominal, planned_v, planned_q, v, q)
        recording = Recording(t, q, v, effort, nominal.joint_names)
        if attempt or not excitation_check.lagging(motions):
            return recording, motions, terms
        terms = excitation_check.compensation(
            nominal, fitting.prepare(recording, nominal, cutoff=10.0), motions)
        controller_model = nominal.replace(**terms)


def fitted_model(arm, profile, engine, period=8.0, links=True, stiction=False):
    """The nominal model fitted from ``period`` s of excitation tracked by computed torque.

    ``links``: the links, armature and friction (``fit_dynamics --links --friction
    --armature``: fitting.fit_links); else armature and friction alone on the URDF's links
    (``--friction --armature``: fitting.fit_residual). ``stiction``: the Stribeck term's f_s
    too (``--stiction``), v_s the plant's ``plant.stribeck_velocity``.
    """
    from robot_dynamics.tools import fitting
    from robot_dynamics.tools.recording import Recording
    nominal = arm.model()
    if stiction:
        nominal = nominal.replace(stribeck_velocity=profile.get('plant.stribeck_velocity', 0.05))
    excitation = rd.excitation_trajectory(nominal, period=period, harmonics=4, q0=arm.q0,
                                          evaluations=0, seed=0, margin=0.8)
    t, q, v, effort, _ = track(arm, nominal, profile, engine, {}, excitation)   # the same arm
    recording = Recording(t, q, v, effort, nominal.joint_names)
    samples = fitting.prepare(recording, nominal, cutoff=10.0)
    fit = (fitting.fit_links if links else fitting.fit_residual)(
        nominal, samples, friction=True, armature=True, stiction=stiction)
    if fit.problems:
        raise RuntimeError(f'the fit is not physical: {fit.problems}')
    terms = dict(armature=fit.armature, viscous=fit.viscous, coulomb=fit.coulomb,
                 stiction=fit.stiction)
    return nominal.replace(**terms, **({} if fit.inertia is None else dict(inertia=fit.inertia)))


def run_scene(arm, engine, links=True):
    """{run name: (figures, tracking error)} for SCENE's runs, and the fitted model (stiction's).

    ``links``: the full profile, links fitted; else the links exact, joint terms fitted alone.
    """
    profile = plant.REALISTIC if links else EXACT_LINKS
    models = {'nominal': arm.model(), 'fitted': fitted_model(arm, profile, engine, links=links),
              'fitted with stiction': fitted_model(arm, profile, engine, links=links,
                                                   stiction=True)}
    runs = {}
    for name, model, options in SCENE:
        print(f'   {name}: gravity compensation 5 s, a step, a test excitation ...', flush=True)
        runs[name] = figures(arm, models[model], profile, engine, options)
    return runs, models['fitted with stiction']


def plot(axes, runs, title):
    """Tracking error norm over time for each run on one panel."""
    for name, (values, (t, error)) in runs.items():
        axes.semilogy(t, np.linalg.norm(error, axis=1), lw=0.8,
                      label=f"{name}: RMS {values['tracking_rms_rad']:.1e} rad")
    axes.set(xlabel='time along the test excitation, s', ylabel='|q_d − q|, rad', title=title,
             ylim=(1e-6, 1.0))
    axes.legend(fontsize=7)


def table(runs):
    """The scene's rows: one per run."""
    lines = [f"  {'':30s} {'drift 5 s':>9s} {'chatter':>8s} {'step RMS':>9s} {'step max':>9s}"
             f" {'chatter':>8s} {'tracking':>9s} {'bias':>6s} {'push':>6s}",
             f"  {'':30s} {'rad':>9s} {'N m':>8s} {'rad':>9s} {'rad':>9s} {'N m':>8s} "
             f"{'RMS, rad':>9s} {'N':>6s} {'error':>6s}"]
    for name, (v, _) in runs.items():
        lines.append(f"  {name:30s} {v['drift_rad']:9.1e} {v['drift_chatter_nm']:8.1e} "
                     f"{v['step_steady_rms_rad']:9.1e} {v['step_steady_max_rad']:9.1e} "
                     f"{v['step_chatter_nm']:8.1e} {v['tracking_rms_rad']:9.1e} "
                     f"{v['wrench_bias_n']:6.3f} {v['push_error_n']:6.3f}")
    return '\n'.join(lines)


def main(args, name):
    """The demo's --scene realistic: prints the table, writes the figure and YAML to --out."""
    began = time.monotonic()
    arm = shipped_arm(args.robot)
    links = not args.exact_links
    plant_name = 'links ±10 %' if links else 'links exact'
    print(f'{name} on plant.profile realistic, {plant_name} ({args.engine} engine, in one '
          'process): identification, then before / after / after + options', flush=True)
    runs, fitted = run_scene(arm, args.engine, links)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    figure = out / f'{name}_realistic.png'
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 1, figsize=(9, 4))
    plot(axes, runs, f'{name}: computed torque on the realistic plant ({args.engine})')
    fig.tight_layout()
    fig.savefig(figure, dpi=120)
    plt.close(fig)
    print(f'\n{name} on the realistic plant ({plant_name}), {args.engine}: measured\n'
          f'{table(runs)}\n  integral: {INTEGRAL}; friction: {FRICTION}')
    took = time.monotonic() - began
    document = dict(robot=name, engine=args.engine, links_fitted=links,
                    options=dict(integral=INTEGRAL, friction=FRICTION),
                    fitted=dict(link_masses=fitted.inertia[:, 0].tolist(),
                                armature=fitted.armature.tolist(),
                                viscous=fitted.viscous.tolist(),
                                coulomb=fitted.coulomb.tolist(),
                                stiction=fitted.stiction.tolist()),
                    **{k: v for k, (v, _) in runs.items()}, figure=str(figure.resolve()),
                    seconds=round(took, 1))
    (out / f'{name}_realistic.yaml').write_text(yaml.safe_dump(document, sort_keys=False))
    print(f'\nfigure: {figure.resolve()}\nscene took {took:.0f} s')
    return 0


def measure(argv=None):
    """One configuration's figures (module docstring's second usage), for the README tables."""
    parser = argparse.ArgumentParser(prog='python -m robot_dynamics.demo.realistic')
    parser.add_argument('--robot', default='panda')
    parser.add_argument('--engine', default='internal', choices=('internal', 'mujoco'))
    parser.add_argument('--exact-links', action='store_true', help='plant.mass_error and '
                        'com_error 0 (default: the full realistic profile)')
    parser.add_argument('--fitted', action='store_true', help='the model fitted in process: '
                        'links, friction and armature (with --exact-links: friction and armature '
                        'alone; default: the nominal URDF)')
    parser.add_argument('--stiction', action='store_true', help='with --fitted: fit the '
                        "Stribeck term's stiction too (fit_dynamics --stiction)")
    parser.add_argument('--true-terms', action='store_true', help="the model with the plant's "
                        'own armature and friction (what a perfect fit of them gives)')
    parser.add_argument('--ki', type=float, default=0.0)
    parser.add_argument('--friction-compensation', action='store_true')
    parser.add_argument('--deadband', type=float, default=0.0)
    parser.add_argument('--cutoff', type=float, default=0.0)
    args = parser.parse_args(argv)
    arm = shipped_arm(args.robot)
    profile = EXACT_LINKS if args.exact_links else plant.REALISTIC
    if args.fitted:
        model = fitted_model(arm, profile, args.engine, links=not args.exact_links,
                             stiction=args.stiction)
    else:
        model = true_terms(arm.model(), profile) if args.true_terms else arm.model()
    options = dict(ki=args.ki, friction_compensation=args.friction_compensation,
                   friction_deadband=args.deadband, cutoff=args.cutoff)
    values, _ = figures(arm, model, profile, args.engine, options)
    print(yaml.safe_dump({**vars(args), **values}, sort_keys=False), end='')
    return 0


if __name__ == '__main__':
    raise SystemExit(measure())
