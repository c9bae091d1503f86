"""The simulated arm when its controller dies: joint end stops and the command watchdog.

Engine level (both engines, no ROS): a joint driven into its end stop stays at its URDF limit
(read here from the URDF file itself) and comes to rest there; impacts never add kinetic energy;
a continuous joint has no stop. Over DDS (arm_simulator as a process): a strong torque stream
that stops, as from a killed controller, and a real SIGKILL of a computed-torque controller while
the arm moves: the arm comes to rest within its limits. Deadlines are generous; the assertions
are on the arm's state (stamps are simulated time), not on wall-clock speed. About 40 s.
"""
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

import robot_dynamics as rd
from robot_dynamics import bringup
from robot_dynamics.nodes.common.joint_states import trajectory_message
from robot_dynamics.simulation import make_engine
from ros_harness import BEST_EFFORT, stamp_of

ENGINES = ('internal', 'mujoco')
DT = 1e-3
PANDA_Q0 = np.array([0.1, -0.6, 0.2, -2.0, 0.1, 1.6, 0.7])


def urdf_text(arm):
    with open(rd.robot_urdf(arm)) as f:
        return f.read()


def urdf_limits(xml, joints):
    """(lower, upper) of each joint as its URDF element gives them (±inf: continuous)."""
    elements = {j.get('name'): j for j in ET.fromstring(xml).findall('joint')}
    lower, upper = [], []
    for name in joints:
        joint = elements[name]
        if joint.get('type') == 'continuous':
            lower.append(-np.inf), upper.append(np.inf)
        else:
            limit = joint.find('limit')
            lower.append(float(limit.get('lower'))), upper.append(float(limit.get('upper')))
    return np.array(lower), np.array(upper)


def panda(engine, **kwargs):
    """The Panda without gravity (only the commanded torques move it), joints in chain order."""
    xml = urdf_text('panda')
    names = rd.load_urdf(xml, 'panda_link0', 'panda_hand').joint_names
    sim = make_engine(engine, xml, 'panda_link0', 'panda_hand', names, PANDA_Q0, DT,
                      gravity=(0.0, 0.0, 0.0), **kwargs)
    return sim, urdf_limits(xml, names)


def penetration_bound(engine, speed):
    """How far a joint hitting its stop at ``speed`` may pass its limit.

    None for the internal engine's inelastic impact; MuJoCo's soft limit (time constant 2 dt)
    stops it within about q̇ 2 dt.
    """
    return 0.0 if engine == 'internal' else 2 * DT * speed + 1e-4


@pytest.mark.parametrize('engine', ENGINES)
def test_joints_driven_into_their_stops_stay_at_the_limits_and_come_to_rest(engine):
    """Joints 2, 4 and 7 at their effort limits towards a stop for 3 s, with damping."""
    sim, (lower, upper) = panda(engine, damping=[20.0, 20.0, 10.0, 10.0, 2.0, 2.0, 2.0])
    effort = np.zeros(7)
    effort[[1, 3, 6]] = [-87.0, 87.0, 12.0]   # joint 2 down, joints 4 and 7 up
    q, v = [], []
    for _ in range(3000):
        sim.step(effort)
        q.append(sim.q), v.append(sim.v)
    q, v = np.array(q), np.array(v)
    tolerance = penetration_bound(engine, np.abs(v).max())
    assert (q >= lower - tolerance).all() and (q <= upper + tolerance).all()
    np.testing.assert_allclose(q[-1, [1, 3, 6]], [lower[1], upper[3], upper[6]], atol=1e-3)
    assert np.abs(v[-100:]).max() < 1e-4     # at rest: the stops hold, damping settles the rest
    assert np.abs(v).max() > 5.0              # and they hit their stops fast


@pytest.mark.parametrize('engine', ENGINES)
def test_end_stops_never_add_kinetic_energy(engine):
    """No gravity, damping or torque: the stops (hit by several joints) only take energy away.

    ½ q̇ᵀ M q̇ is constant in free flight; it never grows at a step with the internal engine's
    rigid stops, nor overall with MuJoCo's soft ones, which give back what their springs held.
    """
    sim, (lower, upper) = panda(engine)
    model = sim.model
    v0 = np.array([1.5, -2.0, 1.0, 3.0, -2.5, 2.0, 3.0])
    sim.set_state(sim.q, v0)
    kinetic, hits = [], np.zeros(7, bool)
    for _ in range(3000):
        sim.step(np.zeros(7))
        kinetic.append(0.5 * sim.v @ rd.mass_matrix(model, sim.q) @ sim.v)
        hits |= (sim.q <= lower + 1e-3) | (sim.q >= upper - 1e-3)
    kinetic = np.array(kinetic)
    initial = 0.5 * v0 @ rd.mass_matrix(model, PANDA_Q0) @ v0
    assert hits.sum() >= 2
    if engine == 'internal':   # RK4's own drift in free flight only
        assert (np.diff(kinetic) <= 1e-6 * initial).all()
    assert kinetic.max() <= initial * (1 + 1e-6)
    assert kinetic[-1] < 0.9 * initial


@pytest.mark.parametrize('engine', ENGINES)
def test_a_continuous_joint_has_no_end_stop(engine, tmp_path):
    """UR5e wrist 3 (limits ±2π) stops at 2π; made continuous, the same torque spins it past."""
    xml = urdf_text('ur5e')
    continuous = xml.replace('<joint name="wrist_3_joint" type="revolute">',
                             '<joint name="wrist_3_joint" type="continuous">')
    assert continuous != xml
    travelled = {}
    for name, text in (('revolute', xml), ('continuous', continuous)):
        names = rd.load_urdf(text, 'base_link', 'tool0').joint_names
        wrist = names.index('wrist_3_joint')
        sim = make_engine(engine, text, 'base_link', 'tool0', names,
                          [0.0, -1.2, 1.5, -1.9, -1.57, 5.5], DT, damping=0.5,
                          gravity=(0.0, 0.0, 0.0))
        tau = np.zeros(6)
        tau[wrist] = 2.0
        for _ in range(3000):
            sim.step(tau)
        travelled[name] = sim.q[wrist]
        upper = urdf_limits(text, names)[1][wrist]
    assert travelled['revolute'] == pytest.approx(2 * np.pi, abs=penetration_bound(engine, 5.0))
    assert upper == np.inf and travelled['continuous'] > 2 * np.pi + 1.0


# -- over DDS ---------------------------------------------------------------------------------
SIM = bringup.load_config(bringup.config_file('panda.yaml'))['arm_simulator']['ros__parameters']
JOINTS = SIM['joints']
LOWER, UPPER = urdf_limits(urdf_text('panda'), JOINTS)
TIMEOUT = 0.1   # command_timeout, s


def arrays(messages, field):
    index = [list(messages[0].name).index(j) for j in JOINTS]
    return np.array([np.asarray(getattr(m, field))[index] for m in messages])


def assert_stopped_within_limits(states, last_command_stamp, launch, engine='internal'):
    """From the states stamped 2.5 s after the last command: at rest; always within limits.

    MuJoCo's soft stops: within penetration_bound.
    """
    final = [m for m in list(states.messages) if stamp_of(m) >= last_command_stamp + 2.5]
    assert final, launch.logs()
    q, v = arrays(final, 'position'), arrays(final, 'velocity')
    moving = [m for m in list(states.messages) if stamp_of(m) <= last_command_stamp]
    top = np.abs(arrays(moving, 'velocity')).max()
    print(f'fastest joint while commanded {top:.2f} rad/s; after the stop |q̇| '
          f'{np.abs(v).max():.1e} rad/s, q - upper {np.max(q - UPPER):.2e}, lower - q '
          f'{np.max(LOWER - q):.2e} rad')
    assert top > 0.3, 'the arm never moved: nothing was stopped'
    assert np.abs(v).max() < 1e-3, launch.logs()
    everything = arrays(list(states.messages), 'position')
    fastest = np.abs(arrays(list(states.messages), 'velocity')).max()
    tolerance = penetration_bound(engine, fastest) + 1e-9
    assert (everything >= LOWER - tolerance).all() and (everything <= UPPER + tolerance).all()
    assert launch.count('arm_simulator', 'no effort command on /effort_controller/commands '
                        f'for command_timeout {TIMEOUT} s') >= 1, launch.logs()
    assert launch.count('arm_simulator', 'arm stopped at') >= 1, launch.logs()


@pytest.mark.parametrize('engine', ENGINES)
def test_a_torque_stream_that_stops_is_followed_by_the_drives_stop(ros, engine):
    """A strong torque for 0.4 s (simulated), then no more commands; then one more resumes."""
    states = ros.probe.record(JointState, 'joint_states', BEST_EFFORT)
    commands = ros.probe.create_publisher(Float64MultiArray, 'effort_controller/commands', 10)
    specs = bringup.nodes('simulated_arm', robot='panda', overrides={'arm_simulator': {
        'engine': engine, 'command_timeout': TIMEOUT}})
    try:
        with ros.launch([s for s in specs if s.name == 'arm_simulator']) as launch:
            launch.ready()
            ros.probe.wait_for_subscribers(commands)
            model = rd.load_urdf(urdf_text('panda'), 'panda_link0', 'panda_hand_tcp')
            push = np.array([20.0, -30.0, 15.0, 25.0, 4.0, 4.0, 4.0])
            # matched on both sides first: commands sent before the simulator's subscription
            # has matched the publisher are lost (seconds on a loaded machine)
            deadline = time.monotonic() + 30.0
            while launch.count('arm_simulator', 'first effort command') < 1:
                assert time.monotonic() < deadline, launch.logs()
                q = arrays([states.last()], 'position')[0]
                commands.publish(Float64MultiArray(data=list(rd.gravity(model, q))))
                time.sleep(0.01)
            start = stamp_of(states.last())
            while stamp_of(states.last()) < start + 0.4:   # simulated time
                q = arrays([states.last()], 'position')[0]
                commands.publish(Float64MultiArray(data=list(rd.gravity(model, q) + push)))
                time.sleep(0.002)
            last = stamp_of(states.last())
            states.wait_for_stamp(last + 3.0, timeout=60)
            assert_stopped_within_limits(states, last, launch, engine)
            q = arrays([states.last()], 'position')[0]
            commands.publish(Float64MultiArray(data=list(rd.gravity(model, q))))
            deadline = time.monotonic() + 20.0
            while launch.count('arm_simulator', 'effort commands resumed') < 1:
                assert time.monotonic() < deadline, launch.logs()
                time.sleep(0.05)
    finally:
        ros.probe.stop_recording(states)
        ros.probe.remove_publishers(commands)


def test_sigkill_of_a_computed_torque_controller_mid_move(ros):
    """The issue's case: kill -9 the controller while a trajectory moves the arm fast."""
    states = ros.probe.record(JointState, 'joint_states', BEST_EFFORT)
    specs = bringup.nodes('simulated_arm', robot='panda', mode='computed_torque',
                          overrides={'arm_simulator': {'command_timeout': TIMEOUT}})
    simulator = [s for s in specs if s.name == 'arm_simulator']
    controller = [s for s in specs if s.name == 'dynamics_controller']
    publisher = ros.probe.create_publisher(JointTrajectory,
                                           '/dynamics_controller/joint_trajectory', 10)
    try:
        with ros.launch(simulator) as sim, ros.launch(controller) as control:
            sim.ready(), control.ready()
            # the first command: the controller has states and, on the simulator's /clock, a time
            assert sim.wait_for_log('arm_simulator', 'brakes released', 60.0), control.logs()
            ros.probe.wait_for_subscribers(publisher)
            q0 = arrays([states.last()], 'position')[0]
            start = stamp_of(states.last()) + 0.5
            goal = q0 + np.array([1.2, 0.6, -1.0, 1.0, 1.5, -1.0, 1.5])
            publisher.publish(trajectory_message(JOINTS, start, np.array([0.0, 1.5]),
                                                 np.array([q0, goal])))
            deadline = time.monotonic() + 60.0
            while np.abs(states.last().velocity).max() < 0.5:   # mid-move
                assert time.monotonic() < deadline, control.logs()
                time.sleep(0.01)
            control.processes.procs['dynamics_controller'].kill()   # SIGKILL
            killed = stamp_of(states.last())
            states.wait_for_stamp(killed + 3.5, timeout=60)
            assert control.processes.procs['dynamics_controller'].wait(10) == -9
            assert_stopped_within_limits(states, killed, sim)
    finally:
        ros.probe.stop_recording(states)
        ros.probe.remove_publishers(publisher)
