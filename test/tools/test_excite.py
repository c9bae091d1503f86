"""excite: the planned excitation (dry run), and a short live run over DDS on the internal engine.

The live part: the simulated Panda (arm_simulator, internal engine) with joint friction and
armature that the nodes do not know (HIDDEN). excite refuses while the controller is in
gravity compensation; in computed torque it moves to q0, sends a 3 s excitation, records it
and fits (``--fit --fit-args --friction --armature``): the recording follows the plan and the
fit finds the hidden terms. About 60 s.
"""
import importlib.metadata
import subprocess
import sys

import numpy as np
import pytest

from robot_dynamics import bringup
from robot_dynamics.tools import excite, recording

CONFIG = bringup.load_config(bringup.config_file('panda.yaml'))
Q0 = np.array(CONFIG['arm_simulator']['ros__parameters']['initial_position'])
HIDDEN = {'friction.viscous': 0.5, 'friction.coulomb': 0.3, 'armature': 0.1}
SHORT = ['--robot', 'panda', '--period', '3', '--harmonics', '3', '--time-budget', '0']


def test_dry_run_plots_the_plan_and_sends_nothing(tmp_path, capsys):
    png = tmp_path / 'plan.png'
    assert excite.main([*SHORT, '--dry-run', str(png)]) == 0
    out = capsys.readouterr().out
    assert png.stat().st_size > 10000 and png.read_bytes()[:4] == b'\x89PNG'
    assert 'excitation: 3.00 s from q0' in out and 'nothing sent' in out


def test_an_infeasible_plan_is_refused_naming_the_limit(capsys):
    q0 = Q0.copy()
    q0[0] = 3.0   # panda_joint1 stops at 2.8973 rad: the plan starts beyond it
    assert excite.main([*SHORT, '--q0', *map(str, q0), '--dry-run', 'unused.png']) == 1
    err = capsys.readouterr().err
    assert 'infeasible' in err and 'panda_joint1: position' in err and 'beyond its limit' in err


def example_robot(name):
    """The path of one URDF of the installed example-robot-data (as test_urdf_corpus finds it)."""
    files = importlib.metadata.distribution('example-robot-data').files
    return str(next(f for f in files if f.name == name).locate())


@pytest.mark.parametrize('margin', [0.3, 0.7, 1.0])
@pytest.mark.parametrize('source', [['--robot', 'panda'], ['--robot', 'ur5e'],
                                    ['--urdf', 'kinova.urdf'], ['--urdf', 'xarm7.urdf']])
def test_every_accepted_margin_gives_a_plan_excite_accepts(source, margin):
    # margin 1 once refused its own plan by 1e-4 rad/s: the series' peaks between the grid's
    # points and the interpolation between knots overshot the limits
    if source[0] == '--urdf':
        source = ['--urdf', example_robot(source[1])]
    args = excite.parse_arguments([*source, '--period', '4', '--harmonics', '3',
                                   '--time-budget', '0', '--margin', str(margin)])
    model = excite.load_model(args)
    plan, knots = excite.plan(model, args, excite.default_q0(args, model))   # not Refused
    t = np.linspace(0.0, plan.duration, 4001)
    q, v, a = plan.sample_many(t)
    # each joint is scaled onto its tightest limit: position range, velocity or acceleration
    reach = np.maximum((q.max(0) - plan.q0) / (model.upper - plan.q0),
                       (q.min(0) - plan.q0) / (model.lower - plan.q0))
    used = np.maximum.reduce([np.nan_to_num(reach), np.abs(v).max(0) / model.velocity_limit,
                              np.abs(a).max(0) / (5.0 * model.velocity_limit)])
    assert np.all(used <= margin) and np.all(used > 0.97 * margin), used


def run_excite(ros, cwd, *arguments):
    result = subprocess.run([sys.executable, '-m', 'robot_dynamics.tools.excite', *SHORT,
                             '--timeout', '30', *arguments], env=ros.env, cwd=cwd,
                            capture_output=True, text=True, timeout=300)
    return result.returncode, result.stdout + result.stderr


@pytest.fixture(scope='module')
def arm(ros):
    launch = ros.launch(bringup.nodes('simulated_arm', robot='panda', overrides={
        'arm_simulator': {**{k: [v] * 7 for k, v in HIDDEN.items()}}}))
    try:
        launch.ready()
        yield ros, launch
    finally:
        codes = launch.processes.stop(timeout=20.0)   # a loaded machine stops slowly
    assert set(codes.values()) == {0}, launch.logs()


def test_excite_refuses_outside_computed_torque_then_runs_records_and_fits(arm, tmp_path):
    ros, launch = arm
    code, output = run_excite(ros, tmp_path)
    assert code == 1 and "mode 'gravity_compensation', not computed_torque" in output, output

    result = ros.probe.set_parameters('dynamics_controller', {'mode': 'computed_torque'})[0]
    assert result.successful, result.reason
    q0 = Q0 + [0.1, 0, 0, 0, 0, 0, 0]   # the arm is elsewhere: excite approaches first
    code, output = run_excite(ros, tmp_path, '--q0', *map(str, q0), '--output', 'run.npz',
                              '--fit', '--fit-args', '--friction', '--armature', '-o',
                              'fitted.yaml')
    assert code == 0, output + launch.logs()
    assert 'moving to q0' in output and 'wrote fitted.yaml' in output, output
    data = recording.load(str(tmp_path / 'run.npz'))
    assert data.t[-1] > 3.5 and len(data.t) > 0.8 * 1000 * data.t[-1], (data.t[-1], len(data.t))
    plan = excite.plan(excite.load_model(excite.parse_arguments(SHORT)),
                       excite.parse_arguments(SHORT), q0)[1]
    # the excitation starts LEAD after the recording does: find the offset that fits best
    offsets = np.arange(0.0, 1.5, 0.005)
    t, q = data.t[::20], data.q[::20]
    errors = [np.sqrt(np.mean((q - np.array([plan.sample(x)[0] for x in t - offset])) ** 2))
              for offset in offsets]
    rms, amplitude = min(errors), np.sqrt(np.mean((plan.positions - q0) ** 2))
    # computed torque without the hidden terms lags the plan a little, never by the motion
    assert rms < 0.25 * amplitude, f'recorded motion {rms:.3g} rad RMS off the plan'
    fitted = bringup.load_config(tmp_path / 'fitted.yaml')['dynamics_controller']
    values = {k: np.array(v) for k, v in fitted['ros__parameters']['friction'].items()
              if k != 'coulomb_velocity'}
    values['armature'] = np.array(fitted['ros__parameters']['armature'])
    fitted = ', '.join(f'{k} {np.round(v, 3).tolist()}' for k, v in values.items())
    print(f'excite: recorded {len(data.t)} samples over {data.t[-1]:.2f} s, {rms:.2e} rad RMS '
          f'from the plan (amplitude {amplitude:.2f} rad); fitted {fitted} (simulated {HIDDEN})')
    assert np.abs(values['viscous'] - HIDDEN['friction.viscous']).max() < 0.15
    assert np.abs(values['coulomb'] - HIDDEN['friction.coulomb']).max() < 0.1
