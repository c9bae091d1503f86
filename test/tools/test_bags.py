"""fit_dynamics on rosbag2 recordings (tools/bags.py), written here by the rosbags library.

One simulated run (the internal engine: a Panda with hidden friction, armature and a payload,
tracking an excitation under computed torque on the URDF's model) is recorded both ways: in
record_joint_states' .npz layout, and as the sensor_msgs/JointState messages a joint state
broadcaster publishes, in a rosbag2 written by rosbags' Writer (MCAP and sqlite3). The bag's
messages carry the gripper's joints too, in an order of their own per message, and a gripper
publisher's messages are interleaved: the fit of each bag must equal the .npz's. Then the
bags fit_dynamics must refuse, each with its reason, and the topic and stamp options.
"""
import pathlib
import sys
import types

import numpy as np
import pytest
from rosbags import rosbag2, typesys   # the bags' writer (requirements: rosbags)

import robot_dynamics as rd
from robot_dynamics import bringup
from robot_dynamics.core.control import ComputedTorque
from robot_dynamics.simulation import make_engine
from robot_dynamics.tools import bags, fit_dynamics, recording

BASE, TIP = 'panda_link0', 'panda_hand_tcp'
FINGERS = ['panda_finger_joint1', 'panda_finger_joint2']
DT = 0.002                         # s: engine step and sample period (500 Hz joint states)
START = 1_760_000_000_123_456_789  # ns: the first header stamp (ROS wall time)
LATENCY = 300_000                  # ns: the bag receives each message this late
PAYLOAD = dict(mass=1.2, com=[0.02, -0.01, 0.06], inertia=np.diag([0.003, 0.004, 0.002]))
FIT = ['--robot', 'panda', '--payload', '--friction', '--armature']
STORE = typesys.get_typestore(typesys.Stores.ROS2_JAZZY)
TYPES = {name: STORE.types[name] for name in (
    'sensor_msgs/msg/JointState', 'std_msgs/msg/Header', 'std_msgs/msg/String',
    'builtin_interfaces/msg/Time')}


@pytest.fixture(scope='module')
def run():
    """The simulated run: stamps (int ns), q, v, applied tau (N, 7) in model order, joints."""
    urdf = rd.robot_urdf('panda')
    model = rd.load_urdf(urdf, BASE, TIP)
    rng = np.random.default_rng(11)
    hidden = dict(viscous=rng.uniform(0.1, 0.5, 7), coulomb=rng.uniform(0.2, 0.5, 7),
                  armature=rng.uniform(0.1, 0.3, 7))
    # margin 0.8: room for the tracking error of the hidden friction (0.27 rad on joint 6), so
    # the simulated arm never reaches its end stops, whose impacts no rigid-body fit explains
    trajectory = rd.excitation_trajectory(model, period=4.0, harmonics=3, evaluations=0,
                                          margin=0.8)
    reference = trajectory.sample_many(np.arange(0.0, trajectory.duration, DT))
    sim = make_engine('internal', urdf, BASE, TIP, model.joint_names, reference[0][0], DT,
                      payload=PAYLOAD, joint_dynamics=hidden)
    controller = ComputedTorque(model, 400.0, 40.0)
    rows = []
    for q_d, v_d, a_d in zip(*reference):
        q, v = sim.q, sim.v
        tau = controller(q, v, q_d, v_d, a_d)
        rows.append((q, v, tau))
        sim.step(tau)
    stamps = START + np.arange(len(rows), dtype=np.int64) * int(DT * 1e9)
    q, v, tau = (np.array(x) for x in zip(*rows))
    assert np.all((q > model.lower) & (q < model.upper)), 'the run reached an end stop'
    return types.SimpleNamespace(stamps=stamps, q=q, v=v, tau=tau, joints=model.joint_names)


def joint_state(stamp, names, q, v, effort):
    """A sensor_msgs/JointState of rosbags' typestore."""
    t = TYPES['builtin_interfaces/msg/Time'](sec=int(stamp // 10**9), nanosec=int(stamp % 10**9))
    return TYPES['sensor_msgs/msg/JointState'](
        header=TYPES['std_msgs/msg/Header'](stamp=t, frame_id=''), name=list(names),
        position=np.array(q, dtype=float), velocity=np.array(v, dtype=float),
        effort=np.array(effort, dtype=float))


def broadcast(run, scale=None, edit=None):
    """The run as a broadcaster publishes it: (receive ns, message) with the fingers' joints.

    Each message lists the joints in an order of its own; every 50th sample a gripper message
    (fingers only) follows. ``scale``: efforts divided by it (currents); ``edit(k, fields)``
    may change sample k's (stamp, names, q, v, effort) before it is built.
    """
    stamps, q, v, tau, joints = run.stamps, run.q, run.v, run.tau, run.joints
    rng = np.random.default_rng(5)
    messages = []
    for k, stamp in enumerate(stamps):
        names = list(joints) + FINGERS
        order = rng.permutation(len(names))
        effort = tau[k] / scale if scale is not None else tau[k]
        values = [np.append(x, [0.04, 0.04]) for x in (q[k], v[k], effort)]
        fields = [stamp, [names[i] for i in order], *(x[order] for x in values)]
        if edit:
            fields = edit(k, fields)
        messages.append((int(stamp) + LATENCY, joint_state(*fields)))
        if k % 50 == 0:
            messages.append((int(stamp) + LATENCY + 1000,
                             joint_state(stamp, FINGERS, [0.04, 0.04], [0.0, 0.0], [0.0, 0.0])))
    return messages


def write_bag(path, topics, plugin='MCAP'):
    """A rosbag2 at ``path`` (a directory) of {topic: [(receive ns, message)]}."""
    with rosbag2.Writer(path, version=9,
                        storage_plugin=getattr(rosbag2.StoragePlugin, plugin)) as writer:
        for topic, messages in topics.items():
            msgtype = messages[0][1].__msgtype__
            connection = writer.add_connection(topic, msgtype, typestore=STORE)
            for time, msg in messages:
                writer.write(connection, time, STORE.serialize_cdr(msg, msgtype))
    return path


def save_npz(path, run):
    """The run in record_joint_states' layout: t from the header stamps, columns shuffled."""
    stamps, q, v, tau, joints = run.stamps, run.q, run.v, run.tau, run.joints
    columns = [4, 0, 6, 2, 1, 5, 3]
    recording.save(recording.Recording(
        (stamps - stamps[0]) * 1e-9, q[:, columns], v[:, columns], tau[:, columns],
        [joints[i] for i in columns], start_time=stamps[0] * 1e-9), path)
    return path


def fitted(path, *options):
    """The Fit of fit_dynamics on ``path`` (the same options every time)."""
    return fit_dynamics.run(fit_dynamics.parse_arguments([str(path), *FIT, *options]))


def assert_same_fit(found, expected):
    assert found.names == expected.names
    np.testing.assert_allclose(found.theta, expected.theta, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(found.rms_after, expected.rms_after, rtol=1e-9, atol=1e-12)


@pytest.fixture(scope='module')
def npz_fit(run, tmp_path_factory):
    return fitted(save_npz(tmp_path_factory.mktemp('npz') / 'run.npz', run))


# ---- the same run recorded both ways fits to the same parameters ----

def test_the_npz_fit_finds_the_simulated_arm(npz_fit):
    """The reference the bags are compared with is itself right: the payload, and τ explained.

    (A 4 s excitation separates viscous from Coulomb friction only roughly: not checked.)
    """
    assert abs(npz_fit.payload['mass'] / PAYLOAD['mass'] - 1.0) < 0.02
    assert np.linalg.norm(npz_fit.payload['com'] - PAYLOAD['com']) < 0.005
    assert np.all(npz_fit.rms_after < npz_fit.rms_before / 30)


@pytest.mark.parametrize('plugin, file', [('MCAP', False), ('SQLITE3', False), ('MCAP', True),
                                          ('SQLITE3', True)])
def test_a_bag_fits_as_the_npz(tmp_path, capsys, run, npz_fit, plugin, file):
    bag = write_bag(tmp_path / 'bag', {'/joint_states': broadcast(run)}, plugin)
    if file:   # the storage file alone, without metadata.yaml
        (path,) = [p for p in bag.iterdir() if p.suffix in ('.mcap', '.db3')]
    found = fitted(path if file else bag)
    assert_same_fit(found, npz_fit)
    out = capsys.readouterr().out
    stamps = run.stamps
    assert f'{len(stamps)} messages on /joint_states, stamped by their headers' in out
    assert f'skipped {len(range(0, len(stamps), 50))} messages on /joint_states' in out


def test_currents_times_the_torque_constants_fit_as_the_torques(tmp_path, run, npz_fit):
    k = np.array([64.0, 32.0, 64.0, 16.0, 8.0, 4.0, 2.0])   # powers of 2: exact both ways
    bag = write_bag(tmp_path / 'bag', {'/joint_states': broadcast(run, scale=k)})
    assert_same_fit(fitted(bag, '--torque-constants', *map(str, k)), npz_fit)
    with pytest.raises(fit_dynamics.FitError, match='one constant > 0 .* per joint'):
        fitted(bag, '--torque-constants', '1.0', '2.0')


def test_command_line_on_a_bag_directory(tmp_path, capsys, run):
    bag = write_bag(tmp_path / 'my_bag', {'/joint_states': broadcast(run)})
    output = tmp_path / 'fitted.yaml'
    assert fit_dynamics.main([f'{bag}/', *FIT, '-o', str(output)]) == 0, capsys.readouterr().err
    assert 'wrote' in capsys.readouterr().out
    document = bringup.load_config(output)
    params = document['dynamics_controller']['ros__parameters']
    assert params['joints'] == list(run.joints) and params['tip'] == TIP
    assert abs(params['payload']['mass'] - PAYLOAD['mass']) < 0.1 * PAYLOAD['mass']


# ---- topics ----

def test_the_model_from_the_robot_description_topic(tmp_path, run, npz_fit):
    """Without --robot/--urdf, the URDF robot_state_publisher published, if it was recorded."""
    text = pathlib.Path(rd.robot_urdf('panda')).read_text()
    description = TYPES['std_msgs/msg/String'](data=text)
    bag = write_bag(tmp_path / 'bag', {'/joint_states': broadcast(run),
                                       '/robot_description': [(START, description)]})
    options = [o for o in FIT if o not in ('--robot', 'panda')]
    arguments = fit_dynamics.parse_arguments([str(bag), '--base', BASE, '--tip', TIP, *options])
    found = fit_dynamics.run(arguments)
    assert_same_fit(found, npz_fit)


def test_a_namespaced_topic_is_taken_when_it_is_the_only_one(tmp_path, capsys, run, npz_fit):
    bag = write_bag(tmp_path / 'bag', {'/arm/joint_states': broadcast(run)})
    assert_same_fit(fitted(bag), npz_fit)
    assert 'reading /arm/joint_states: the only JointState topic ending in /joint_states' in \
        capsys.readouterr().out


def test_several_candidate_topics_need_topic(tmp_path, capsys, run, npz_fit):
    messages = broadcast(run)
    bag = write_bag(tmp_path / 'bag', {'/left/joint_states': messages[:20],
                                       '/right/joint_states': messages})
    assert fit_dynamics.main([str(bag), *FIT]) == 1
    error = capsys.readouterr().err
    assert 'several JointState topics end in /joint_states' in error
    assert "['/left/joint_states', '/right/joint_states']" in error and '--topic' in error
    assert_same_fit(fitted(bag, '--topic', '/right/joint_states'), npz_fit)


def test_a_bag_without_joint_states(tmp_path, capsys, run):
    description = TYPES['std_msgs/msg/String'](data='<robot name="x"/>')
    bag = write_bag(tmp_path / 'bag', {'/robot_description': [(START, description)]})
    assert fit_dynamics.main([str(bag), *FIT]) == 1
    error = capsys.readouterr().err
    assert 'no topic /joint_states in the bag' in error
    assert "JointState topics: none (all: ['/robot_description'])" in error
    assert 'choose one with --topic' in error
    assert fit_dynamics.main([str(bag), *FIT, '--topic', '/robot_description']) == 1
    assert 'is std_msgs/msg/String, not sensor_msgs/msg/JointState' in capsys.readouterr().err


# ---- refused messages ----

@pytest.mark.parametrize('case', ['non-finite effort', 'unordered stamps', 'missing joint',
                                  'no efforts'])
def test_refused_bags_name_the_message_and_the_reason(tmp_path, capsys, run, case):
    messages, k = broadcast(run), 100
    index = k + len(range(0, k, 50))   # sample k's message, after the gripper's of 0, 50
    msg = messages[index][1]
    where = f'message {index} on /joint_states (received {k * DT:.3f} s into the bag)'
    names = list(msg.name)
    if case == 'non-finite effort':
        msg.effort[names.index('panda_joint4')] = np.inf
        expected = f"{where} has non-finite effort for ['panda_joint4']"
    elif case == 'unordered stamps':
        msg.header.stamp.sec -= 1
        expected = f'header stamps must increase: {where} is stamped'
    elif case == 'missing joint':
        keep = [i for i, n in enumerate(names) if n != 'panda_joint3']
        msg.name = [names[i] for i in keep]
        msg.position, msg.velocity, msg.effort = (x[keep] for x in (
            msg.position, msg.velocity, msg.effort))
        expected = f"{where} lacks the joints ['panda_joint3']"
    else:
        msg.effort = np.array([])
        expected = f'{where} has 0 effort values for 9 names (the fit needs efforts'
    bag = write_bag(tmp_path / 'bag', {'/joint_states': messages})
    assert fit_dynamics.main([str(bag), *FIT]) == 1
    error = capsys.readouterr().err
    assert expected in error, error
    if case == 'unordered stamps':   # the receive times still increase
        assert '(--stamps receive uses the bag\'s receive times)' in error
        assert fit_dynamics.main([str(bag), *FIT, '--stamps', 'receive']) == 0


def test_nan_velocities_drop_the_velocities_only(tmp_path, run):
    def edit(k, fields):
        if k == 7:
            fields[3] = np.full(len(fields[3]), np.nan)
        return fields
    bag = write_bag(tmp_path / 'bag', {'/joint_states': broadcast(run, edit=edit)})
    data = bags.Bag(bag).recording(run.joints)
    assert data.v is None
    np.testing.assert_array_equal(data.q, run.q)
    np.testing.assert_array_equal(data.t, (run.stamps - run.stamps[0]) * 1e-9)
    assert data.start_time == run.stamps[0] * 1e-9


# ---- usage ----

def test_usage_errors_and_a_missing_rosbags(tmp_path, capsys, run, monkeypatch):
    with pytest.raises(SystemExit) as exit_:
        fit_dynamics.main(['run.npz', *FIT, '--topic', '/joint_states'])
    assert exit_.value.code == 2
    assert '--topic: for rosbag2 recordings; run.npz is not one' in capsys.readouterr().err
    assert fit_dynamics.main([str(tmp_path / 'run.txt'), *FIT]) == 1
    assert 'run.txt: no such file or directory' in capsys.readouterr().err
    (tmp_path / 'run.txt').write_text('t,q.a,tau.a\n')
    assert fit_dynamics.main([str(tmp_path / 'run.txt'), *FIT]) == 1
    assert 'rosbag2 directories, .mcap and .db3 files' in capsys.readouterr().err
    (tmp_path / 'not_a_bag').mkdir()
    assert fit_dynamics.main([str(tmp_path / 'not_a_bag'), *FIT]) == 1
    assert 'a directory without metadata.yaml is no rosbag2' in capsys.readouterr().err
    bag = write_bag(tmp_path / 'bag', {'/joint_states': broadcast(run)[:5]})
    monkeypatch.setitem(sys.modules, 'rosbags.rosbag2', None)   # as if not installed
    assert fit_dynamics.main([str(bag), *FIT]) == 1
    assert 'reading a rosbag2 needs the rosbags library: pip install rosbags' in \
        capsys.readouterr().err
