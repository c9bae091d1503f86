"""pfl_map: permissible-speed map of an arm's contact point for ISO/TS 15066 body regions.

    pfl_map (--robot panda|ur5e | --urdf FILE) [--base LINK] [--tip LINK] [--offset X Y Z]
        --region hand [--region chest ...] [--regions-file YAML] [--payload KG]
        [--poses N] [--seed S] --out map.png
    python -m robot_dynamics.tools.pfl_map ...

Samples N poses uniformly within the joint limits (continuous joints over [-pi, pi)) and, at
each, the reflected mass m_R(q, u) = 1 / (u^T J_v M^-1 J_v^T u) of the point at ``--offset``
(tip axes) along 26 directions u (the faces, edges and corners of a cube), with a payload of
``--payload`` kg at the tip. Prints m_R's range beside the standard's single number
M/2 + m_L and, per region, the permissible speed v_max = F_T / sqrt(mu k) over the map beside
the one from M/2 + m_L; writes a PNG (per region: the point's positions coloured by the
worst direction's v_max, and the distribution of v_max over all poses and directions).

An engineering aid for a risk assessment, not a certified safety function.
"""
import argparse
import itertools
import sys

import numpy as np

import robot_dynamics as rd
from robot_dynamics import bringup
from robot_dynamics.core import power_force_limiting as pfl

DIRECTIONS = np.array([d for d in itertools.product((-1, 0, 1), repeat=3) if any(d)], float)
DIRECTIONS /= np.linalg.norm(DIRECTIONS, axis=1, keepdims=True)


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(prog='pfl_map', description=__doc__.split('\n\n')[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument('--robot', help='a shipped robot: panda or ur5e')
    source.add_argument('--urdf', help='a URDF file')
    parser.add_argument('--base', help="base link (default: --robot's config, else the root)")
    parser.add_argument('--tip', help="tip link (default: --robot's config)")
    parser.add_argument('--offset', type=float, nargs=3, default=(0.0, 0.0, 0.0),
                        metavar=('X', 'Y', 'Z'), help='contact point in the tip frame (m)')
    parser.add_argument('--region', action='append', required=True,
                        help='body region (repeatable): ' + ', '.join(pfl.BODY_REGIONS))
    parser.add_argument('--regions-file', help='YAML overriding or adding body regions (SI)')
    parser.add_argument('--payload', type=float, default=0.0, help='payload at the tip (kg)')
    parser.add_argument('--poses', type=int, default=300, help='number of sampled poses')
    parser.add_argument('--seed', type=int, default=0, help='seed of the pose sampling')
    parser.add_argument('--out', required=True, help='the PNG to write')
    return parser.parse_args(argv)


def load_model(args):
    """The model of --robot (base and tip from its config unless given) or --urdf."""
    base, tip, source = args.base, args.tip, args.urdf
    if args.robot:
        params = bringup.config_section(bringup.config_file(f'{args.robot}.yaml'),
                                        'dynamics_controller')
        base, tip = base or params['base'], tip or params['tip']
        source = rd.robot_urdf(args.robot)
    model = rd.load_urdf(source, base, tip)
    if model.tip is None:
        raise ValueError('pfl_map needs a chain: give --tip')
    return model


def sample_poses(model, count, seed):
    """``count`` configurations uniform within the joint limits (unlimited: [-pi, pi))."""
    lower = np.where(np.isfinite(model.lower), model.lower, -np.pi)
    upper = np.where(np.isfinite(model.upper), model.upper, np.pi)
    return np.random.default_rng(seed).uniform(lower, upper, (count, model.nv))


def reflected_mass_map(model, poses, offset):
    """(positions (N, 3) of the point in base axes, m_R (N, 26) along DIRECTIONS)."""
    positions, masses = [], []
    for q in poses:
        T = rd.frame_pose(model, q, model.tip)
        positions.append(T[:3, :3] @ offset + T[:3, 3])
        Phi = pfl.point_mobility(model, q, model.tip, offset)
        phi = np.einsum('di,ij,dj->d', DIRECTIONS, Phi, DIRECTIONS)
        masses.append(np.where(phi > 0.0, 1.0 / np.maximum(phi, 1e-300), np.inf))
    return np.array(positions), np.array(masses)


def summary(arm, payload, masses, regions):
    """The printed report: m_R's range, each region's v_max over the map and from M/2 + m_L.

    ``arm`` is the model without the payload.
    """
    M, m_std = pfl.moving_mass(arm), pfl.standard_robot_mass(arm, payload)
    finite = masses[np.isfinite(masses)]
    lines = [f'moving mass M = {M:.4f} kg, payload m_L = {payload:.4f} kg, '
             f'M/2 + m_L = {m_std:.4f} kg',
             f'reflected mass m_R over {masses.shape[0]} poses x {masses.shape[1]} directions: '
             f'min {finite.min():.4f} kg, median {np.median(finite):.4f} kg, '
             f'max {finite.max():.4f} kg']
    for region in regions:
        v, v_std = speeds(masses, region), pfl.permissible_speed(m_std, region)
        lines.append(f'{region.name}: v_max with M/2 + m_L = {v_std:.4f} m/s; over the map '
                     f'min {v.min():.4f}, median {np.median(v):.4f}, max {v.max():.4f} m/s')
    return m_std, lines


def speeds(masses, region):
    """v_max for every entry of ``masses``."""
    return np.vectorize(lambda m: pfl.permissible_speed(m, region))(masses)


def plot(path, title, positions, masses, regions, m_std):
    """Per region: point positions coloured by the worst direction's v_max, and a histogram."""
    try:
        import matplotlib
    except ImportError:
        raise ValueError('pfl_map draws with matplotlib: pip install matplotlib') from None
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(regions), 2, figsize=(10, 3.6 * len(regions)), squeeze=False)
    radius = np.hypot(positions[:, 0], positions[:, 1])
    for (ax_map, ax_hist), region in zip(axes, regions):
        v = speeds(masses, region)
        v_std = pfl.permissible_speed(m_std, region)
        dots = ax_map.scatter(radius, positions[:, 2], c=v.min(axis=1), s=10, cmap='viridis')
        fig.colorbar(dots, ax=ax_map, label='v_max, worst direction (m/s)')
        ax_map.set(xlabel='distance from the base z axis (m)', ylabel='height (m)',
                   title=f'{region.name}: v_max at the contact point')
        ax_map.set_aspect('equal', adjustable='datalim')
        ax_hist.hist(v.ravel(), bins=40, color='tab:blue')
        ax_hist.axvline(v_std, color='tab:red', label=f'M/2 + m_L = {m_std:.2f} kg: '
                                                      f'{v_std:.2f} m/s')
        ax_hist.set(xlabel='v_max over poses x directions (m/s)', ylabel='count',
                    title=f'{region.name}: F_T {region.transient_force:.0f} N, '
                          f'k {region.spring_constant / 1e3:.0f} N/mm, '
                          f'm_H {region.effective_mass:g} kg')
        ax_hist.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def run(args):
    regions = pfl.body_regions(args.regions_file)
    unknown = [r for r in args.region if r not in regions]
    if unknown:
        raise ValueError(f'unknown body region {", ".join(unknown)}; known: {", ".join(regions)}')
    regions = [regions[r] for r in args.region]
    if args.poses < 1 or args.payload < 0.0:
        raise ValueError('--poses must be >= 1 and --payload >= 0')
    arm = load_model(args)
    model = rd.with_payload(arm, args.payload) if args.payload else arm
    offset = np.asarray(args.offset, float)
    positions, masses = reflected_mass_map(model, sample_poses(model, args.poses, args.seed),
                                           offset)
    m_std, lines = summary(arm, args.payload, masses, regions)
    print('\n'.join(lines))
    name = args.robot or args.urdf
    plot(args.out, f'{name} ({model.base} -> {model.tip}, offset {tuple(args.offset)}): '
         'ISO/TS 15066 transient contact', positions, masses, regions, m_std)
    print(f'wrote {args.out}')


def main(argv=None):
    """Command-line entry point; exit status 0, 1 (bad input, with the reason) or 2 (usage)."""
    args = parse_arguments(argv)
    try:
        run(args)
    except (ValueError, KeyError, OSError) as error:
        print(f'pfl_map: {error}', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
