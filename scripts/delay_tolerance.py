"""The largest state delay each mode tolerates with the default gains, per arm.

    .venv/bin/python scripts/delay_tolerance.py [--robots panda ur5e] [--delays 0 2 5 ...]

Each mode's law (the controller's defaults: computed torque K_p = 400, K_d = 40; Cartesian
impedance K = 1000 N/m, 10 N m/rad, ζ = 1; operational space K = 400 1/s², ζ = 1; null space
10 N m/rad and 2 N m s/rad; ``cartesian.max_frequency`` 50 rad/s, or as given) closed in one
process around the nominal plant (internal engine, simulation.closed_loop) whose commands act
``d`` steps late: the loop the simulated arm runs in lock step with ``faults.delay`` d ms, one
1 kHz step of the loop's own on top. Started 0.02 rad off the pose it holds on every joint; a
delay is tolerated when the swing of the last 0.5 s of 3 s is below 1 % of the start's and no
command reached an effort limit. Gravity compensation has no feedback to destabilise: it is not
swept. The critically damped loop's closed form for comparison: unstable once the total delay
(d + 1.5 steps: the step and the zero-order hold) exceeds 0.65 / ω_n.
"""
import argparse

import numpy as np

import robot_dynamics as rd
from robot_dynamics import bringup
from robot_dynamics.core.control import ComputedTorque
from robot_dynamics.core.task_control import CartesianImpedance, OperationalSpace
from robot_dynamics.simulation.closed_loop import realistic_plant

OFFSET, SECONDS, TAIL = 0.02, 3.0, 0.5


def arm(robot):
    sim = bringup.load_config(bringup.config_file(f'{robot}.yaml'))['arm_simulator'][
        'ros__parameters']
    urdf = rd.robot_urdf(robot)
    model = rd.load_urdf(urdf, sim['base'], sim['tip'])
    q0 = np.array(sim['initial_position'])[[sim['joints'].index(j) for j in model.joint_names]]
    return urdf, sim, model, q0


def law(mode, model, q0, max_frequency):
    """τ(q, q̇) of the mode, holding q0 (or the tip's pose at q0)."""
    target = rd.frame_pose(model, q0, model.tip)
    null = dict(nullspace_stiffness=10.0, nullspace_damping=2.0, posture=q0,
                max_frequency=max_frequency)
    zero = np.zeros(model.nv)
    if mode == 'computed_torque':
        control = ComputedTorque(model, np.full(model.nv, 400.0), np.full(model.nv, 40.0))
        return lambda q, v: control(q, v, q0, zero, zero)
    if mode == 'cartesian_impedance':
        control = CartesianImpedance(model, [10, 10, 10, 1000, 1000, 1000], **null)
    else:
        control = OperationalSpace(model, np.full(6, 400.0), **null)
    return lambda q, v: control(q, v, target)


def tolerated(robot, mode, delay, max_frequency):
    """(stable, swing at the end / at the start, largest |τ| / limit)."""
    urdf, sim, model, q0 = arm(robot)
    loop = realistic_plant('internal', urdf, sim['base'], sim['tip'], q0 + OFFSET,
                           profile={'plant.command_delay': delay})
    control = law(mode, model, q0, max_frequency)
    t, q, _, _, tau = loop.run(lambda t, q, v: control(q, v), SECONDS)
    last = q[t >= SECONDS - TAIL]
    swing = (last.max(0) - last.min(0)).max() / OFFSET
    load = np.abs(tau / model.effort_limit).max()
    return swing < 0.01 and load < 1.0, swing, load


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--robots', nargs='+', default=['panda', 'ur5e'])
    parser.add_argument('--modes', nargs='+',
                        default=['computed_torque', 'cartesian_impedance', 'operational_space'])
    parser.add_argument('--delays', nargs='+', type=int,
                        default=[0, 2, 5, 8, 11, 14, 20, 25, 30, 40])
    parser.add_argument('--max-frequency', type=float, default=50.0)
    args = parser.parse_args()
    print(f'cartesian.max_frequency {args.max_frequency} rad/s; delay in ms (1 kHz steps)')
    print('| arm | mode | ' + ' | '.join(f'{d} ms' for d in args.delays) + ' | tolerated |')
    print('|---|---|' + '---|' * (len(args.delays) + 1))
    for robot in args.robots:
        for mode in args.modes:
            cells, best = [], None
            for delay in args.delays:
                stable, swing, load = tolerated(robot, mode, delay, args.max_frequency)
                cells.append(f"{'ok' if stable else 'no'} {swing:.0e}")
                if not stable:
                    break
                best = delay   # the delays rise: the last stable one before the first not
            cells += ['–'] * (len(args.delays) - len(cells))
            print(f'| {robot} | {mode} | ' + ' | '.join(cells) + f' | {best} ms |', flush=True)


if __name__ == '__main__':
    main()
