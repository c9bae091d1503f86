"""fit_dynamics: fit payload, friction, armature or link inertias to a joint-state recording.

    fit_dynamics RECORDING (--robot panda|ur5e | --urdf FILE) [--base LINK] [--tip LINK]
        [--payload [--no-payload-inertia]] [--friction [--stiction]] [--armature] [--links]
        [--cutoff HZ] [--edge S] [--output params.yaml]
        [--topic /joint_states] [--stamps header|receive] [--torque-constants K ...]
    python -m robot_dynamics.tools.fit_dynamics ...

RECORDING is a file of ``record_joint_states`` (.npz or .csv, layout:
``robot_dynamics.tools.recording``) or a rosbag2 of sensor_msgs/JointState, ``ros2 bag record
/joint_states``: its directory, or one .mcap or .db3 file (``--topic``, ``--stamps``,
``--torque-constants`` for currents; read by the ``rosbags`` library: ``tools/bags.py``).
The model is the URDF of ``--urdf`` or ``--robot`` (with that robot's base and tip from
config/<robot>.yaml unless given), else the recording's ``robot_description`` (a bag's
robot_description topic, if recorded) or ``urdf``.
q is differentiated and τ filtered offline (zero-phase Butterworth, ``--cutoff``), the filter's
edges dropped; then (numerics in ``fitting.py``):

- ``--payload``: a rigid load at the tip, mass, centre of mass and inertia (tip frame), from
  τ - rnea(URDF); with ``--friction`` (viscous and Coulomb; ``--stiction`` adds the Stribeck
  term's f_s, v_s = ``--stribeck-velocity``) and ``--armature`` in the same fit;
- ``--links``: every link's inertial parameters, physically consistent by construction and
  regularised towards the URDF's (``--prior-std``), with the joint terms asked for (>= 0).
  Not with ``--payload``: a payload is then part of the tip link.

Prints a report (residual RMS per joint before and after, condition number, the fitted values,
physical consistency) and, with ``--output``, writes parameters the nodes load after their
config: ``--params-file config/panda.yaml --params-file params.yaml``. Layout::

    /**/dynamics_controller:        # and the same under /**/wrench_estimator:
      ros__parameters:
        base: panda_link0           # the chain fitted; the payload is in the tip's frame
        tip: panda_hand_tcp
        joints: [...]               # the recording's joint order, that of every list below
        payload: {mass: 1.5, com: [x, y, z], inertia: [ixx, ixy, ixz, iyy, iyz, izz]}
        friction: {viscous: [...], coulomb: [...], coulomb_velocity: 0.01,
                   stiction: [...], stribeck_velocity: [0.05]}   # the last two: --stiction
        armature: [...]
        inertial_parameters: [...]  # 10 per moving body, model order (rd.parameter_vector)

Exit status 1, with the reason, when the data cannot give what was asked: too few samples,
non-finite values, joints not in the model, a motion that does not excite the parameters
(named), or a non-physical result (unless ``--force``; the nodes refuse those values).
"""
import argparse
import copy
import datetime
import pathlib
import sys

import numpy as np
import yaml

import robot_dynamics as rd
from robot_dynamics import bringup
from robot_dynamics.tools import bags, fitting, recording
from robot_dynamics.core.identification import PRIOR_STD
from robot_dynamics.core.spatial import inertia_to_urdf
from robot_dynamics.tools.fitting import FitError

NODES = ('dynamics_controller', 'wrench_estimator')


def parse_arguments(argv):
    """The command line, checked (argparse exits with status 2 on a usage error)."""
    parser = argparse.ArgumentParser(prog='fit_dynamics', description=__doc__.split('\n\n')[0])
    parser.add_argument('recording', help='.npz or .csv file of record_joint_states, or a '
                        'rosbag2 (its directory, or a .mcap or .db3 file)')
    source = parser.add_mutually_exclusive_group()
    source.add_argument('--urdf', help='URDF file (default: the one in the recording)')
    source.add_argument('--robot', choices=bringup.ROBOTS, help='a shipped robot')
    parser.add_argument('--base', help='base link (default: --robot\'s config, else the root)')
    parser.add_argument('--tip', help='tip link (default: --robot\'s config, else none)')
    fit = parser.add_argument_group('what to fit')
    fit.add_argument('--payload', action='store_true', help='mass, com and inertia at the tip')
    fit.add_argument('--no-payload-inertia', action='store_true',
                     help='payload mass and com only (a motion that hardly turns the tip)')
    fit.add_argument('--friction', action='store_true', help='viscous and Coulomb friction')
    fit.add_argument('--stiction', action='store_true',
                     help='with --friction: the stiction f_s of a Stribeck term')
    fit.add_argument('--armature', action='store_true', help='reflected rotor inertia')
    fit.add_argument('--links', action='store_true', help='the links\' inertial parameters')
    tune = parser.add_argument_group('data and fit')
    tune.add_argument('--cutoff', type=float, default=10.0,
                      help='low-pass cutoff, Hz (default 10; above the motion\'s frequencies)')
    tune.add_argument('--edge', type=float, help='seconds dropped at each end (default 2/cutoff)')
    tune.add_argument('--coulomb-velocity', type=float, default=0.01,
                      help='ε of the smooth Coulomb sign tanh(q̇/ε), rad/s (default 0.01)')
    tune.add_argument('--stribeck-velocity', type=float, default=0.05,
                      help='v_s of the Stribeck term exp(-(q̇/v_s)²), rad/s (default 0.05)')
    tune.add_argument('--max-samples', type=int, default=4000,
                      help='decimate to at most this many samples (default 4000)')
    tune.add_argument('--min-samples', type=int, default=200,
                      help='refuse fewer samples (default 200)')
    tune.add_argument('--max-condition', type=float, default=1000.0,
                      help='refuse a larger condition number (unit-norm columns; default 1000)')
    tune.add_argument('--prior-std', type=float, default=PRIOR_STD,
                      help='--links: the standard deviation of the URDF\'s parameters as a '
                      'prior, in units of each link\'s size (default %(default)g)')
    tune.add_argument('--max-change', type=float, metavar='F',
                      help='--links: refuse when a link\'s mass changes by more than a factor F '
                      'from the URDF\'s (default: warn beyond 2)')
    tune.add_argument('--weighted', action='store_true',
                      help='weight joints by their residual RMS (two-step least squares)')
    bag = parser.add_argument_group('rosbag2 recordings')
    bag.add_argument('--topic', help=f'the JointState topic (default {bags.DEFAULT_TOPIC}, '
                     'or a namespaced one if it is the only one)')
    bag.add_argument('--stamps', choices=bags.STAMPS,
                     help='header: the messages\' header stamps (default); receive: the bag\'s '
                     'receive times')
    bag.add_argument('--torque-constants', type=float, nargs='+', metavar='K',
                     help='efforts are motor currents: N m/A per joint, in the chain\'s order '
                     '(base to tip)')
    parser.add_argument('--output', '-o', help='parameter YAML to write')
    parser.add_argument('--force', action='store_true', help='write non-physical results too')
    args = parser.parse_args(argv)
    if not (args.payload or args.friction or args.armature or args.links):
        parser.error('nothing to fit: give --payload, --friction, --armature and/or --links')
    if args.payload and args.links:
        parser.error('--payload with --links: a payload is part of the tip link; fit the links '
                     'with the payload on, or the payload alone')
    if args.stiction and not args.friction:
        parser.error('--stiction goes with --friction (the stiction is the excess over Coulomb)')
    if not (args.stribeck_velocity > 0 and np.isfinite(args.stribeck_velocity)):
        parser.error(f'--stribeck-velocity must be a positive number, got '
                     f'{args.stribeck_velocity}')
    if args.no_payload_inertia and not args.payload:
        parser.error('--no-payload-inertia goes with --payload')
    if args.max_change is not None and not (args.max_change > 1 and np.isfinite(
            args.max_change)):
        parser.error(f'--max-change must be a number > 1, got {args.max_change}')
    if not (args.prior_std > 0 and np.isfinite(args.prior_std)):
        parser.error(f'--prior-std must be a positive number, got {args.prior_std}')
    given = [f'--{k.replace("_", "-")}' for k in ('topic', 'stamps', 'torque_constants')
             if getattr(args, k) is not None]
    if given and pathlib.Path(args.recording).suffix.lower() in recording.EXTENSIONS:
        parser.error(f'{", ".join(given)}: for rosbag2 recordings; {args.recording} is not one '
                     '(record_joint_states files hold torques, stamped from the headers)')
    return args


def load_model(args, description='', urdf=''):
    """The Model from --urdf/--robot (base and tip from the robot's config) or the recording's."""
    base, tip = args.base, args.tip
    if args.robot:
        config = bringup.load_config(bringup.config_file(f'{args.robot}.yaml'))
        params = config['dynamics_controller']['ros__parameters']
        base, tip = base or params['base'], tip or params['tip']
        source = rd.robot_urdf(args.robot)
    elif args.urdf:
        source = args.urdf
    elif description:
        source = description
    elif urdf and pathlib.Path(urdf).is_file():
        source = urdf
    else:
        raise FitError('no model: give --urdf or --robot (the recording holds no '
                       'robot_description, nor the path of a URDF file that exists)')
    try:
        model = rd.load_urdf(source, base=base, tip=tip)
    except (ValueError, KeyError, OSError) as error:
        raise FitError(f'cannot load the model: {error}') from None
    return model.replace(coulomb_velocity=args.coulomb_velocity,
                         stribeck_velocity=args.stribeck_velocity)


def read(args):
    """The recording (a file of record_joint_states or a rosbag2) and the model: (data, model)."""
    if not pathlib.Path(args.recording).exists():
        raise FitError(f'cannot read {args.recording}: no such file or directory')
    try:
        if not bags.is_bag(args.recording):
            data = recording.load(args.recording)
            return data, load_model(args, data.robot_description, data.urdf)
        bag = bags.Bag(args.recording, args.topic or bags.DEFAULT_TOPIC)
        model = load_model(args, bag.description)
        data = bag.recording(model.joint_names, args.stamps or 'header', args.torque_constants)
    except (OSError, ValueError, KeyError) as error:
        if isinstance(error, FitError):
            raise
        known = bags.is_bag(args.recording) or pathlib.Path(
            args.recording).suffix.lower() in recording.EXTENSIONS
        suffix = '' if known else (' (fit_dynamics reads .npz and .csv files of '
                                   'record_joint_states, and rosbag2 directories, .mcap and .db3 '
                                   'files)')
        raise FitError(f'cannot read {args.recording}: {error}{suffix}') from None
    for note in bag.notes:
        print(f'{args.recording}: {note}')
    return data, model


def run(args):
    """Fit, print the report, write the YAML; returns the Fit."""
    data, model = read(args)
    samples = fitting.prepare(data, model, args.cutoff, args.edge, args.max_samples,
                              args.min_samples)
    options = dict(friction=args.friction, armature=args.armature, stiction=args.stiction,
                   max_condition=args.max_condition, weighted=args.weighted)
    if args.links:
        fit = fitting.fit_links(model, samples, **options, prior_std=args.prior_std)
    else:
        fit = fitting.fit_residual(model, samples, payload=args.payload,
                                   payload_inertia=not args.no_payload_inertia, **options)
    print(report(args, data, model, samples, fit))
    if fit.changes and args.max_change:
        beyond = [c.line() for c in fit.changes if c.implausible(args.max_change)]
        if beyond:
            raise FitError(f'link masses changed by more than --max-change {args.max_change:g} '
                           f'from the URDF ({"; ".join(beyond)}): the data do not support this '
                           f'(check excite\'s motion report, the URDF, or raise --max-change)')
    if args.output:
        if fit.problems and not args.force:
            raise FitError(f'not physical, {args.output} not written (--force writes it; the '
                           f'nodes refuse such values): ' + '; '.join(fit.problems))
        write_parameters(args, data, model, fit)
        print(f'wrote {args.output}: {", ".join(NODES)}')
    return fit


def report(args, data, model, samples, fit):
    """The human-readable report: data, conditioning, residuals and values per joint."""
    order = samples.order
    lines = [f'{args.recording}: {len(data.t)} samples of {len(data.joint_names)} joints over '
             f'{data.t[-1] - data.t[0]:.3f} s; fitted on {len(samples.q)} (every '
             f'{samples.dt:.4g} s, cutoff {args.cutoff:g} Hz)',
             f'model {model.base} -> {model.tip}: {len(fit.names)} parameters, condition number '
             f'{fit.condition_number:.3g} (unit-norm columns)']
    if samples.gaps:
        t, length = max(samples.gaps, key=lambda gap: gap[1])
        lines.insert(1, f'{len(samples.gaps)} gaps in the stamps (the longest {length:.3g} s at '
                        f't = {t:.3f} s): fitted on the stretches between them')
    terms = [(k, getattr(fit, k)) for k in ('viscous', 'coulomb', 'armature', 'stiction')
             if getattr(fit, k) is not None]
    width = max(len(j) for j in data.joint_names)
    lines.append(f'{"joint":{width}}  RMS before  RMS after' + ''.join(
        f'  {k:>10}' for k, _ in terms) + '   (N m or N; N m s/rad, N m, kg m^2, N m)')
    for i, j in enumerate(data.joint_names):
        m = order[i]
        lines.append(f'{j:{width}}  {fit.rms_before[m]:10.4g}  {fit.rms_after[m]:9.4g}' + ''.join(
            f'  {x[m]:10.4g}' for _, x in terms))
    if fit.payload:
        p = fit.payload
        lines.append(f'payload at {model.tip}: mass {p["mass"]:.4f} ± {p["mass_std"]:.2g} kg, '
                     f'com {np.round(p["com"], 4).tolist()} ± '
                     f'{np.round(p["com_std"], 4).tolist()} m')
        if p['inertia'] is not None:
            lines.append(f'  inertia about the com [ixx, ixy, ixz, iyy, iyz, izz] '
                         f'{np.round(inertia_to_urdf(p["inertia"]), 5).tolist()} kg m^2')
    if fit.changes:
        lines.append('links, URDF -> fitted:')
        lines += ['  ' + c.line() for c in fit.changes]
    lines += fit.notes
    lines.append('physically consistent' if not fit.problems else
                 'NOT PHYSICAL: ' + '; '.join(fit.problems))
    return '\n'.join(lines)


def parameters(model, joints, order, fit):
    """The ros__parameters of both nodes (values per joint in ``joints`` order)."""
    def floats(x):   # 7 significant digits: far below the fit's uncertainty
        return [float(f'{v:.7g}') for v in np.ravel(x)]

    params = dict(base=model.base, tip=model.tip or '', joints=list(joints))
    if fit.payload:
        inertia = fit.payload['inertia']
        params['payload'] = dict(mass=floats(fit.payload['mass'])[0],
                                 com=floats(fit.payload['com']),
                                 inertia=floats(np.zeros(6) if inertia is None else
                                                inertia_to_urdf(inertia)))
    if fit.viscous is not None:
        params['friction'] = dict(viscous=floats(fit.viscous[order]),
                                  coulomb=floats(fit.coulomb[order]),
                                  coulomb_velocity=float(model.coulomb_velocity))
    if fit.stiction is not None:
        params['friction'].update(stiction=floats(fit.stiction[order]),
                                  stribeck_velocity=floats(model.stribeck_velocity[order]))
    if fit.armature is not None:
        params['armature'] = floats(fit.armature[order])
    if fit.inertia is not None:
        params['inertial_parameters'] = floats(fit.inertia)
    return params


def write_parameters(args, data, model, fit):
    """The YAML of both nodes (module docstring), with the fit's summary in comments."""
    order = fitting.joint_order(model, data.joint_names)
    params = parameters(model, data.joint_names, order, fit)
    document = {f'/**/{node}': {'ros__parameters': copy.deepcopy(params)}   # any namespace
                for node in NODES}                                           # (copies: no aliases)
    fitted = [k for k in ('payload', 'friction', 'stiction', 'armature', 'links')
              if getattr(args, k)]
    header = (f'# fit_dynamics {args.recording} ({", ".join(fitted)}), '
              f'{datetime.datetime.now().isoformat(timespec="seconds")}\n'
              f'# residual RMS per joint {np.round(fit.rms_before[order], 4).tolist()} -> '
              f'{np.round(fit.rms_after[order], 4).tolist()}\n'
              f'# load after the robot\'s config: --params-file <config> --params-file '
              f'{pathlib.Path(args.output).name}\n')
    text = yaml.safe_dump(document, sort_keys=False, default_flow_style=None, width=100)
    pathlib.Path(args.output).write_text(header + text)


def main(argv=None):
    """Command-line entry point; exit status 0, 1 (refused, with the reason) or 2 (usage)."""
    args = parse_arguments(argv)
    try:
        run(args)
    except FitError as error:
        print(f'fit_dynamics: {error}', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
