"""fit_dynamics and the recording layout, on synthetic recordings made with the core.

The 'real' Panda is the URDF plus hidden friction, armature and payload (rd.Model's joint terms,
rd.with_payload), driven along rd.excitation_trajectory; the recording has encoder and torque
noise and its joints in a shuffled order. The fit must find the hidden values, write a YAML the
nodes' own configuration code accepts, and refuse bad data with a reason.
"""
import dataclasses
import subprocess
import sys

import numpy as np
import pytest

import robot_dynamics as rd
from robot_dynamics import bringup
from robot_dynamics.nodes.common.arm import ArmBuilder
from robot_dynamics.nodes.common.parameters import MODEL_PARAMS, ConfigError
from robot_dynamics.tools import fit_dynamics, recording

BASE, TIP = 'panda_link0', 'panda_hand_tcp'
SHUFFLE = [3, 0, 1, 2, 6, 5, 4]   # recording column i is model joint SHUFFLE[i]
SHUFFLE_NAMES = [f'panda_joint{i + 1}' for i in SHUFFLE]
PAYLOAD = dict(mass=1.5, com=np.array([0.03, -0.02, 0.08]),
               inertia=np.array([[0.004, 0.0005, 0.0], [0.0005, 0.006, 0.0], [0.0, 0.0, 0.003]]))
FIGURES = {}


@pytest.fixture(scope='module')
def panda():
    return rd.load_urdf(rd.robot_urdf('panda'), BASE, TIP)


@pytest.fixture(scope='module')
def motion(panda):
    """q, q̇, q̈ (N, 7) of an 8 s excitation sampled at 500 Hz, and the stamps."""
    trajectory = rd.excitation_trajectory(panda, period=8.0, harmonics=4, evaluations=0)
    t = np.arange(0.0, trajectory.duration, 0.002)
    return (t, *trajectory.sample_many(t))


@pytest.fixture(scope='module')
def hidden(panda):
    rng = np.random.default_rng(7)
    return dict(viscous=rng.uniform(0.1, 0.5, 7), coulomb=rng.uniform(0.3, 1.0, 7),
                armature=rng.uniform(0.05, 0.3, 7))


def record(true, motion, noise=(1e-5, 0.02), seed=0, **metadata):
    """The Recording of the 'real' arm ``true`` along ``motion``, columns in SHUFFLE order."""
    t, q, v, a = motion
    rng = np.random.default_rng(seed)
    tau = rd.rnea(true, q, v, a) + rng.normal(scale=noise[1], size=q.shape)
    q = q + rng.normal(scale=noise[0], size=q.shape)
    return recording.Recording(t.copy(), q[:, SHUFFLE], v[:, SHUFFLE], tau[:, SHUFFLE],
                               [true.joint_names[i] for i in SHUFFLE], **metadata)


def run_fit(tmp_path, data, *options, name='log.npz'):
    """fit_dynamics on ``data`` saved as ``name``: (exit status, parameters of both nodes)."""
    path, output = tmp_path / name, tmp_path / 'fitted.yaml'
    recording.save(data, path)
    status = fit_dynamics.main([str(path), *options, '--output', str(output)])
    document = bringup.load_config(output) if output.exists() else None
    return status, document


def node_parameters(document, node):
    """The YAML's parameters of one node, flattened as rcl does ('payload.mass')."""
    flat = {}
    for key, value in document[node]['ros__parameters'].items():
        if isinstance(value, dict):
            flat.update({f'{key}.{k}': v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


def accepted_by_the_nodes(document, urdf):
    """The nodes' configuration code (nodes.arm.ArmBuilder) builds its Arm from the parameters."""
    for node in fit_dynamics.NODES:
        given = node_parameters(document, node)
        values = {p.name: p.default for p in MODEL_PARAMS}
        assert set(given) <= set(values), f'{node} does not declare {set(given) - set(values)}'
        values.update(given)
        arm = ArmBuilder()(values, urdf)
        assert list(arm.joints) == given['joints']
    return arm


# ---- the file layout ----

@pytest.mark.parametrize('name', ['log.npz', 'log.csv'])
@pytest.mark.parametrize('velocities', [True, False])
def test_recording_round_trip_is_exact(tmp_path, name, velocities):
    rng = np.random.default_rng(1)
    data = recording.Recording(np.cumsum(rng.uniform(0.001, 0.002, 5)), rng.normal(size=(5, 2)),
                               rng.normal(size=(5, 2)) if velocities else None,
                               rng.normal(size=(5, 2)), ['j.b', 'ja'],
                               start_time=1.7e9 + 0.123456789, robot_description='<robot "x"/>\n#',
                               urdf='/tmp/arm.urdf')
    recording.save(data, tmp_path / name)
    back = recording.load(tmp_path / name)
    for field in dataclasses.fields(recording.Recording):
        expected, found = getattr(data, field.name), getattr(back, field.name)
        if isinstance(expected, np.ndarray):
            assert np.array_equal(found, expected)
        else:
            assert found == expected, field.name


def test_file_layouts_as_documented(tmp_path):
    data = recording.Recording([0.0, 0.5], [[1.0, 2.0], [3.0, 4.0]], [[0.1, 0.2], [0.3, 0.4]],
                               [[5.0, 6.0], [7.0, 8.0]], ['a', 'b'], start_time=12.5)
    recording.save(data, tmp_path / 'x.npz')
    with np.load(tmp_path / 'x.npz', allow_pickle=False) as f:
        assert sorted(f.files) == sorted(['t', 'q', 'v', 'tau', 'joint_names', 'start_time',
                                          'robot_description', 'urdf', 'format'])
        assert f['joint_names'].tolist() == ['a', 'b'] and f['tau'][1, 0] == 7.0
    recording.save(data, tmp_path / 'x.csv')
    assert (tmp_path / 'x.csv').read_text().splitlines() == [
        '# format: "robot_dynamics.recording 1"', '# start_time: 12.5',
        '# robot_description: ""', '# urdf: ""', 't,q.a,q.b,v.a,v.b,tau.a,tau.b',
        '0,1,2,0.10000000000000001,0.20000000000000001,5,6',
        '0.5,3,4,0.29999999999999999,0.40000000000000002,7,8']
    with pytest.raises(ValueError, match='.npz or .csv'):
        recording.save(data, tmp_path / 'x.txt')


# ---- fits ----

def test_fit_recovers_payload_friction_and_armature(tmp_path, capsys, panda, motion, hidden):
    true = rd.with_payload(panda.replace(**hidden), **PAYLOAD)
    status, document = run_fit(tmp_path, record(true, motion), '--robot', 'panda', '--payload',
                               '--friction', '--armature')
    assert status == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert 'RMS before' in out and 'physically consistent' in out
    assert set(document) == {'dynamics_controller', 'wrench_estimator'}
    p = node_parameters(document, 'dynamics_controller')
    assert p == node_parameters(document, 'wrench_estimator')
    assert set(p) == {'base', 'tip', 'joints', 'payload.mass', 'payload.com', 'payload.inertia',
                      'friction.viscous', 'friction.coulomb', 'friction.coulomb_velocity',
                      'armature'}
    assert (p['base'], p['tip']) == (BASE, TIP)
    assert p['joints'] == [panda.joint_names[i] for i in SHUFFLE]   # the recording's order
    errors = dict(mass=abs(p['payload.mass'] / PAYLOAD['mass'] - 1),
                  com=np.linalg.norm(np.array(p['payload.com']) - PAYLOAD['com']))
    inertia = PAYLOAD['inertia']
    errors['inertia'] = np.abs(np.array(p['payload.inertia']) - inertia[
        [0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]]).max() / np.abs(inertia).max()
    for kind, key in (('viscous', 'friction.viscous'), ('coulomb', 'friction.coulomb'),
                      ('armature', 'armature')):
        assert len(p[key]) == 7
        errors[kind] = np.abs(np.array(p[key]) / hidden[kind][SHUFFLE] - 1).max()
    FIGURES['payload, friction, armature'] = errors
    print(errors)
    assert errors['mass'] < 0.02 and errors['com'] < 0.005 and errors['inertia'] < 0.1
    assert max(errors[k] for k in ('viscous', 'coulomb', 'armature')) < 0.02
    assert p['friction.coulomb_velocity'] == panda.coulomb_velocity
    arm = accepted_by_the_nodes(document, rd.robot_urdf('panda'))
    assert abs(arm.model.inertia[-1, 0] - true.inertia[-1, 0]) < 0.02 * PAYLOAD['mass']


def test_fit_recovers_stiction_with_friction(tmp_path, capsys, panda, motion, hidden):
    """--friction --stiction: f_v, f_c and the Stribeck term's f_s (v_s given) of the arm."""
    stiction = np.random.default_rng(8).uniform(0.1, 0.4, 7)
    true = panda.replace(**hidden, stiction=stiction, stribeck_velocity=0.1)
    status, document = run_fit(tmp_path, record(true.replace(armature=None), motion), '--robot',
                               'panda', '--friction', '--stiction', '--stribeck-velocity', '0.1')
    assert status == 0, capsys.readouterr().err
    p = node_parameters(document, 'dynamics_controller')
    assert p['friction.stribeck_velocity'] == [0.1] * 7
    errors = {kind: np.abs(np.array(p[f'friction.{kind}']) / x[SHUFFLE] - 1).max() for kind, x in
              (('viscous', hidden['viscous']), ('coulomb', hidden['coulomb']),
               ('stiction', stiction))}
    FIGURES['friction with stiction'] = errors
    print(errors)
    assert max(errors.values()) < 0.05
    arm = accepted_by_the_nodes(document, rd.robot_urdf('panda'))
    assert np.allclose(arm.model.stiction, true.stiction, rtol=0.05)
    assert np.array_equal(arm.model.stribeck_velocity, [0.1] * 7)


def test_the_nodes_stribeck_parameters():
    """friction.stribeck_velocity: one value or one per joint (joints order), each > 0."""
    values = {p.name: p.default for p in MODEL_PARAMS} | dict(
        base=BASE, tip=TIP, joints=list(SHUFFLE_NAMES), **{'friction.stiction': [0.1] * 7})
    arm = ArmBuilder()(values, rd.robot_urdf('panda'))
    assert np.array_equal(arm.model.stribeck_velocity, [0.05] * 7)   # the default
    per_joint = [0.01 * (k + 1) for k in range(7)]
    arm = ArmBuilder()(values | {'friction.stribeck_velocity': per_joint}, rd.robot_urdf('panda'))
    assert np.array_equal(arm.to_joints(arm.model.stribeck_velocity), per_joint)
    for bad, message in (([0.0], 'must be > 0'), ([0.1, 0.2], 'needs 7 values'),
                         ([float('nan')], 'must be'), ([], 'needs 7 values')):
        with pytest.raises(ConfigError, match=message):
            ArmBuilder()(values | {'friction.stribeck_velocity': bad}, rd.robot_urdf('panda'))
    with pytest.raises(ConfigError, match='friction.stiction must be >= 0'):
        ArmBuilder()(values | {'friction.stiction': [-0.1] * 7}, rd.robot_urdf('panda'))


def test_fit_links_from_the_recorded_description(tmp_path, capsys, panda, motion, hidden):
    """URDF masses off by ±20 %: --links finds inertias that predict the torques of the arm.

    The model comes from the robot_description stored in the (CSV) recording.
    """
    rng = np.random.default_rng(3)
    true = panda.replace(inertia=panda.inertia * (1 + 0.2 * rng.choice([-1, 1], (7, 1))),
                         **hidden)
    urdf = open(rd.robot_urdf('panda')).read()
    data = record(true, motion, noise=(0.0, 0.0), robot_description=urdf)
    status, document = run_fit(tmp_path, data, '--base', BASE, '--tip', TIP, '--links',
                               '--friction', '--armature', '--weighted', name='log.csv')
    assert status == 0, capsys.readouterr().err
    out = capsys.readouterr().out   # armature 1 and 2 merge with the links' inertias
    assert 'not determined by the data' in out and 'panda_joint2.armature' in out
    p = node_parameters(document, 'wrench_estimator')
    assert len(p['inertial_parameters']) == 70 and len(p['armature']) == 7
    arm = accepted_by_the_nodes(document, urdf)
    _, q, v, a = motion
    states = q[::97], v[::97], a[::97]
    tau = rd.rnea(true, *states)
    error = np.abs(rd.rnea(arm.model, *states) - tau).max() / np.abs(tau).max()
    before = np.abs(rd.rnea(panda, *states) - tau).max() / np.abs(tau).max()
    FIGURES['links: torque error before, after'] = (before, error)
    assert error < 1e-3 < 0.1 * before


def test_a_gap_in_the_stamps_splits_the_recording(tmp_path, capsys, panda, motion, hidden):
    """0.1 s of lost messages: each stretch is filtered alone, the fit is as without the gap."""
    data = record(panda.replace(**hidden), motion)
    kept = np.r_[0:2000, 2050:len(data.t)]
    data.t, data.q, data.v, data.tau = (x[kept] for x in (data.t, data.q, data.v, data.tau))
    status, document = run_fit(tmp_path, data, '--robot', 'panda', '--friction', '--armature')
    assert status == 0, capsys.readouterr().err
    assert '1 gaps in the stamps (the longest 0.102 s at t = 3.998 s)' in capsys.readouterr().out
    p = node_parameters(document, 'dynamics_controller')
    for kind, key in (('viscous', 'friction.viscous'), ('coulomb', 'friction.coulomb'),
                      ('armature', 'armature')):
        assert np.abs(np.array(p[key]) / hidden[kind][SHUFFLE] - 1).max() < 0.02


# ---- refusals ----

def still(motion, joint):
    """The motion with one model joint held at its start."""
    t, q, v, a = (x.copy() for x in motion)
    q[:, joint], v[:, joint], a[:, joint] = q[0, joint], 0.0, 0.0
    return t, q, v, a


def refusal(tmp_path, capsys, data, *options):
    status, document = run_fit(tmp_path, data, *options)
    assert status == 1 and document is None
    return capsys.readouterr().err


def test_refuses_bad_recordings(tmp_path, capsys, panda, motion):
    t, q, v, a = motion
    short = (t[:150], q[:150], v[:150], a[:150])
    assert 'too few samples: 150' in refusal(tmp_path, capsys, record(panda, short), '--robot',
                                             'panda', '--friction')
    data = record(panda, motion)
    data.tau[100, 2] = np.nan
    assert 'tau has 1 non-finite values' in refusal(tmp_path, capsys, data, '--robot', 'panda',
                                                    '--payload')
    data = record(panda, motion)
    data.joint_names = ('elbow',) + data.joint_names[1:]
    err = refusal(tmp_path, capsys, data, '--robot', 'panda', '--payload')
    assert "recorded joints ['elbow'] are not in the model" in err
    data = record(panda, motion)
    lost = (np.arange(len(data.t)) % 60) >= 45   # 15 of every 60 messages: stretches too short
    data.t, data.q, data.v, data.tau = (x[~lost] for x in (data.t, data.q, data.v, data.tau))
    err = refusal(tmp_path, capsys, data, '--robot', 'panda', '--payload')
    assert 'too few samples: 0 left' in err and 'of each stretch between the' in err
    assert 'no model' in refusal(tmp_path, capsys, record(panda, motion), '--payload')


def test_refuses_what_the_motion_does_not_excite(tmp_path, capsys, panda, motion):
    err = refusal(tmp_path, capsys, record(panda, still(motion, 6)), '--robot', 'panda',
                  '--friction')
    assert 'need every joint to move' in err and 'panda_joint7 (' in err
    t, q, v, a = motion
    pose = (t, np.repeat(q[:1], len(t), 0), np.zeros_like(v), np.zeros_like(a))
    err = refusal(tmp_path, capsys, record(panda, pose, noise=(0, 0.02)), '--robot', 'panda',
                  '--payload')
    assert 'payload.Ixx' in err


def test_refuses_to_write_non_physical_values_unless_forced(tmp_path, capsys, panda, motion):
    data = record(panda, motion, noise=(0.0, 0.0))
    data.tau -= 0.2 * data.v   # a negative viscous friction
    err = refusal(tmp_path, capsys, data, '--robot', 'panda', '--friction')
    assert 'not physical' in err and 'viscous of panda_joint1 is negative (-0.2 ± ' in err
    status, document = run_fit(tmp_path, data, '--robot', 'panda', '--friction', '--force')
    assert status == 0
    assert np.allclose(node_parameters(document, 'dynamics_controller')['friction.viscous'],
                       -0.2, atol=1e-3)


def test_usage_errors_and_the_module_entry_point(tmp_path):
    with pytest.raises(SystemExit) as exit:
        fit_dynamics.main(['x.npz', '--robot', 'panda', '--payload', '--links'])
    assert exit.value.code == 2
    with pytest.raises(SystemExit) as exit:
        fit_dynamics.main(['x.npz', '--robot', 'panda', '--payload', '--stiction'])
    assert exit.value.code == 2
    done = subprocess.run([sys.executable, '-m', 'robot_dynamics.tools.fit_dynamics', 'missing.npz',
                           '--robot', 'panda', '--friction'], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 1 and 'cannot read missing.npz' in done.stderr
