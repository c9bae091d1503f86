"""Identification as a user runs it: record, fit, load, on MuJoCo over DDS.

The arm is MuJoCo's Panda (arm_simulator engine=mujoco) with the URDF's inertias and joint
friction and armature the nodes don't know. The controller and the estimator have a wrong URDF:
every link's mass and inertia scaled by 1 ± 20 % (seeded signs). In order:

1. a test trajectory under computed torque: tracking error and the estimator's bias (nothing
   touches the arm, so every τ_ext it reports is model error) with the wrong model;
2. an excitation trajectory (rd.excitation_trajectory), recorded by `record_joint_states`;
3. `fit_dynamics --urdf wrong.urdf --links --friction --armature -o fitted.yaml`;
4. fitted.yaml's parameters set on both nodes; the same test trajectory again.

Both figures must drop at least tenfold. About a minute (simulated time: ~20 s).
"""
import signal
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

import robot_dynamics as rd
from robot_dynamics import bringup
from robot_dynamics.tools import fit_dynamics
from robot_dynamics.nodes.common.joint_states import trajectory_message
from ros_harness import BEST_EFFORT, ArmView, stamp_of, trajectory_answer, window
from test_tools_ros import Recorder

CONFIG = bringup.load_config(bringup.config_file('panda.yaml'))
SIM = CONFIG['arm_simulator']['ros__parameters']
JOINTS, Q0 = SIM['joints'], np.array(SIM['initial_position'])
HIDDEN = {'armature': [0.2, 0.2, 0.2, 0.2, 0.05, 0.05, 0.05],
          'friction.viscous': [0.8, 0.8, 0.6, 0.6, 0.2, 0.2, 0.1],
          'friction.coulomb': [1.0, 1.0, 0.8, 0.8, 0.4, 0.4, 0.3]}
KNOT = 0.02   # s between the trajectories' knots (position, velocity, acceleration each)


def wrong_urdf(seed=3):
    """The Panda URDF with each link's mass and inertia scaled by 1 ± 0.2 (com unchanged)."""
    root = ET.parse(rd.robot_urdf('panda')).getroot()
    signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=len(root.findall('link')))
    for sign, inertial in zip(signs, (link.find('inertial') for link in root.findall('link'))):
        if inertial is None:
            continue
        mass, inertia = inertial.find('mass'), inertial.find('inertia')
        mass.set('value', str(float(mass.get('value')) * (1 + 0.2 * sign)))
        for key, value in inertia.attrib.items():
            inertia.set(key, str(float(value) * (1 + 0.2 * sign)))
    return ET.tostring(root, encoding='unicode')


class Arm(ArmView):
    """The bring-up with the wrong model in the nodes, and the probe's recordings."""

    def __init__(self, ros, wrong):
        self.ros, self.probe = ros, ros.probe
        self.states = self.probe.record(JointState, 'joint_states', BEST_EFFORT)
        self.torques = self.probe.record(JointState, '/wrench_estimator/external_joint_torques',
                                         BEST_EFFORT)
        self.wrenches = self.probe.record(WrenchStamped, '/wrench_estimator/wrench', BEST_EFFORT)
        self.commands = self.probe.record(Float64MultiArray, 'effort_controller/commands')
        self.trajectory = self.probe.create_publisher(
            JointTrajectory, '/dynamics_controller/joint_trajectory', 10)
        nodes = {'robot_description': wrong}
        self.launch = ros.launch(bringup.nodes(
            'simulated_arm', robot='panda', mode='computed_torque', overrides={
                'arm_simulator': {'engine': 'mujoco', **HIDDEN},
                'dynamics_controller': nodes, 'wrench_estimator': nodes}))

    def wait_until(self, t, timeout=120.0):
        self.states.wait_for_stamp(t, timeout)

    def follow(self, trajectory):
        """Send a FourierTrajectory (knots every KNOT s) from now + 0.5 s; returns its start."""
        times = np.arange(0.0, trajectory.duration + KNOT / 2, KNOT)
        q, v, a = trajectory.sample_many(times)
        stamp = self.now() + 0.5   # the start the controller took: trajectory_answer
        msg = trajectory_message(JOINTS, stamp, times, q, v, a)
        return trajectory_answer(self.launch, lambda: self.trajectory.publish(msg), stamp)[0]

    def run(self, trajectory):
        """(RMS tracking error rad, RMS τ_ext N m, RMS estimated force N) along the trajectory."""
        start = self.follow(trajectory)
        end = start + trajectory.duration
        self.wait_until(end + 0.1)
        states = window(self.states, start, end)
        assert len(states) > 100 * trajectory.duration, f'{len(states)} states received'
        index = [list(states[0].name).index(j) for j in JOINTS]
        t = np.array([stamp_of(m) for m in states])
        q = np.array([np.asarray(m.position)[index] for m in states])
        error = q - trajectory.sample_many(t - start)[0]
        for estimates in (self.torques, self.wrenches):   # they trail the states by a lag
            estimates.wait_for_stamp(end, 30.0)
        tau = np.array([m.effort for m in window(self.torques, start, end)])
        force = np.array([[m.wrench.force.x, m.wrench.force.y, m.wrench.force.z]
                          for m in window(self.wrenches, start, end)])
        return tuple(np.sqrt(np.mean(np.sum(x ** 2, axis=1))) for x in (error, tau, force))


@pytest.fixture(scope='module')
def arm(ros, tmp_path_factory):
    wrong = wrong_urdf()
    arm = Arm(ros, wrong)
    arm.urdf = tmp_path_factory.mktemp('pipeline') / 'wrong.urdf'
    arm.urdf.write_text(wrong)
    try:
        arm.launch.ready()
        assert arm.commands.wait(1, timeout=60), arm.launch.logs()
        arm.probe.stop_recording(arm.commands)
        arm.probe.wait_for_subscribers(arm.trajectory)
        yield arm
    finally:
        codes = arm.launch.processes.stop(timeout=20.0)   # a loaded machine stops slowly
        arm.probe.stop_recording(arm.states, arm.torques, arm.wrenches)
        arm.probe.remove_publishers(arm.trajectory)
    assert set(codes.values()) == {0}, arm.launch.logs()


def test_record_fit_load_cuts_tracking_error_and_estimator_bias_tenfold(arm, tmp_path):
    nominal = rd.load_urdf(arm.urdf.read_text(), SIM['base'], SIM['tip'])
    order = [nominal.joint_names.index(j) for j in JOINTS]
    assert order == list(range(7))   # the config lists the joints in model order
    test = rd.excitation_trajectory(nominal, period=3.0, harmonics=3, q0=Q0, evaluations=0,
                                    seed=7, margin=0.6)
    before = arm.run(test)

    recording = tmp_path / 'excitation.npz'
    recorder = Recorder(arm.ros, recording, 'joint_states_reliability:=best_effort')
    recorder.ready()
    excitation = rd.excitation_trajectory(nominal, period=8.0, harmonics=4, q0=Q0,
                                          evaluations=0, margin=0.8)
    start = arm.follow(excitation)
    arm.wait_until(start + excitation.duration + 0.5)
    recorder.process.send_signal(signal.SIGINT)
    assert recorder.wait() == 0, recorder.log()

    fitted = tmp_path / 'fitted.yaml'
    assert fit_dynamics.main([str(recording), '--urdf', str(arm.urdf), '--base', SIM['base'],
                              '--tip', SIM['tip'], '--links', '--friction', '--armature',
                              '--output', str(fitted)]) == 0
    for node in ('dynamics_controller', 'wrench_estimator'):
        values = bringup.flatten(bringup.load_config(fitted)[node]['ros__parameters'])
        assert values.pop('joints') == JOINTS
        changes = {k: v for k, v in values.items()
                   if k in ('inertial_parameters', 'armature') or k.startswith('friction.')}
        results = arm.probe.set_parameters(node, changes)
        assert all(r.successful for r in results), [r.reason for r in results]
    arm.wait_until(arm.now() + 0.5)
    after = arm.run(test)
    print(f'wrong model (masses ±20 %, friction and armature unknown) -> fitted: tracking RMS '
          f'{before[0]:.2e} -> {after[0]:.2e} rad ({before[0] / after[0]:.0f}x); estimator '
          f'RMS tau_ext {before[1]:.3g} -> {after[1]:.3g} N m ({before[1] / after[1]:.0f}x), '
          f'force {before[2]:.3g} -> {after[2]:.3g} N ({before[2] / after[2]:.0f}x)')
    for wrong_figure, fitted_figure in zip(before, after):
        assert fitted_figure < wrong_figure / 10
