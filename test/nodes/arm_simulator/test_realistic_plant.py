"""Day one on a realistic plant, over DDS: the nodes on the nominal URDF, the arm not.

arm_simulator (internal engine) with ``plant.profile: realistic`` (seed 0): link masses ±10 %,
centres of mass moved ≤ 5 mm, armature, viscous, Coulomb and Stribeck friction, quantised
positions, noisy velocities and efforts, a one-cycle command delay. The controller and the
estimator keep config/panda.yaml and the nominal URDF. In order:

1. the simulator alone, braked: its joint states carry the configured sensor effects (positions
   on the 1e-5 rad grid, velocity and effort noise of the configured deviations) around the
   plant's holding torque g(q0) of the perturbed URDF, not the nominal's;
2. released under gravity compensation: the drift over 5 s;
3. computed torque back to the start, then a 0.15 rad step on every joint: the steady error;
4. at rest under computed torque: the wrench estimator's bias; then a 15 N push.

Each figure must be bad in the way a plant unlike its model makes it (on the nominal plant the
same loops give drift < 1e-3 rad, tracking < 1e-3 rad, wrench within 0.01 N: the node tests).
About 40 s.
"""
import numpy as np
import pytest
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

import robot_dynamics as rd
from robot_dynamics import bringup
from robot_dynamics.simulation import plant
from robot_dynamics.nodes.common.joint_states import trajectory_message, wrench_message
from ros_harness import BEST_EFFORT, ArmView, stamp_of, window

CONFIG = bringup.load_config(bringup.config_file('panda.yaml'))
SIM = CONFIG['arm_simulator']['ros__parameters']
JOINTS, Q0 = SIM['joints'], np.array(SIM['initial_position'])
REALISTIC = plant.PROFILES['realistic']
STEP = 0.15     # rad, every joint
PUSH = 15.0     # N, along -z of the base at the tip


class Bringup(ArmView):
    """The simulated arm on the realistic plant, the nodes on the nominal model."""

    def __init__(self, ros):
        self.ros, self.probe = ros, ros.probe
        self.states = self.probe.record(JointState, 'joint_states', BEST_EFFORT)
        self.wrenches = self.probe.record(WrenchStamped, '/wrench_estimator/wrench', BEST_EFFORT)
        self.trajectory = self.probe.create_publisher(
            JointTrajectory, '/dynamics_controller/joint_trajectory', 10)
        self.wrench = self.probe.create_publisher(WrenchStamped,
                                                  '/arm_simulator/external_wrench', 10)
        specs = bringup.nodes('simulated_arm', robot='panda', overrides={'arm_simulator': {
            'plant.profile': 'realistic'}})
        self.simulator = ros.launch([s for s in specs if s.name == 'arm_simulator'])
        self.specs = [s for s in specs if s.name != 'arm_simulator']
        self.nodes = None

    def close(self):
        codes = self.simulator.processes.stop(timeout=20.0)
        if self.nodes:
            codes.update(self.nodes.processes.stop(timeout=20.0))
        self.probe.stop_recording(self.states, self.wrenches)
        self.probe.remove_publishers(self.trajectory, self.wrench)
        return codes

    def states_in(self, since, until):
        self.wait_until(until + 0.01)
        picked = window(self.states, since, until)
        index = [list(picked[0].name).index(j) for j in JOINTS]
        return (np.array([stamp_of(m) for m in picked]),
                *(np.array([np.asarray(getattr(m, f))[index] for m in picked])
                  for f in ('position', 'velocity', 'effort')))

    def send(self, points, start):
        """Positions at times (s from ``start``), each reached at rest."""
        times, positions = zip(*points)
        self.trajectory.publish(trajectory_message(JOINTS, start, times, positions,
                                                   np.zeros((len(times), 7))))

    def push(self, force_z):
        self.wrench.publish(wrench_message(SIM['base'], [0, 0, 0, 0, 0, force_z]))

    def mean_force(self, since, until):
        self.wrenches.wait_for_stamp(until, 30.0)
        picked = window(self.wrenches, since, until)
        assert len(picked) > 100, f'{len(picked)} wrench estimates in [{since}, {until}]'
        return np.mean([[m.wrench.force.x, m.wrench.force.y, m.wrench.force.z]
                        for m in picked], axis=0)


@pytest.fixture(scope='module')
def arm(ros):
    arm = Bringup(ros)
    try:
        arm.simulator.ready()
        yield arm
    finally:
        codes = arm.close()
    assert set(codes.values()) == {0}, codes


def test_the_braked_plant_reports_its_sensor_effects_around_its_own_gravity(arm):
    start = arm.now()
    t, q, v, effort = arm.states_in(start, start + 2.0)
    assert len(t) > 200, f'{len(t)} states'   # of 2000: the probe drops some on a loaded machine
    counts = q / REALISTIC['plant.position_resolution']
    assert np.abs(counts - np.round(counts)).max() < 1e-4
    assert np.abs(q - Q0).max() <= REALISTIC['plant.position_resolution'] / 2 + 1e-12
    for x, sigma in ((v, REALISTIC['plant.velocity_noise']),
                     (effort, REALISTIC['plant.effort_noise'])):
        assert np.abs(x.std(0) / sigma - 1).max() < 0.2, x.std(0)
    nominal_urdf = open(rd.robot_urdf('panda')).read()
    plant_urdf = plant.perturbed_urdf(nominal_urdf, REALISTIC['plant.mass_error'],
                                      REALISTIC['plant.com_error'], seed=0)[0]
    g_plant = rd.gravity(rd.load_urdf(plant_urdf, SIM['base'], SIM['tip']), Q0)
    g_nominal = rd.gravity(rd.load_urdf(nominal_urdf, SIM['base'], SIM['tip']), Q0)
    tolerance = 5 * REALISTIC['plant.effort_noise'] / np.sqrt(len(t))
    assert np.abs(effort.mean(0) - g_plant).max() < tolerance
    assert np.abs(g_plant - g_nominal).max() > 10 * tolerance


def test_day_one_figures_show_the_model_mismatch(arm):
    arm.nodes = arm.ros.launch(arm.specs)
    arm.nodes.ready()
    arm.probe.wait_for_subscribers(arm.trajectory)
    arm.probe.wait_for_subscribers(arm.wrench)
    released = arm.now() + 0.3
    _, q, _, _ = arm.states_in(released, released + 5.0)
    drift = np.abs(q - q[0]).max()

    result = arm.probe.set_parameters('dynamics_controller', {'mode': 'computed_torque'})[0]
    assert result.successful, result.reason
    # The probe's view of the arm's clock can lag it by seconds in a long test session (its
    # states queue in the socket): a start it thinks ahead may be past for the controller, which
    # then starts the trajectory on receipt. The steady window is therefore late enough for a
    # start up to 4 s later than asked.
    start = arm.now() + 0.5
    arm.send([(2.0, Q0), (3.0, Q0 + STEP)], start)
    _, q, _, _ = arm.states_in(start + 8.5, start + 9.5)
    error = q - (Q0 + STEP)
    steady_rms, steady_max = np.sqrt(np.mean(error ** 2)), np.abs(error).max()

    bias = np.linalg.norm(arm.mean_force(start + 8.5, start + 9.5))
    pushed = arm.now() + 0.2
    arm.push(-PUSH)
    push_error = np.linalg.norm(arm.mean_force(pushed + 1.0, pushed + 2.0) - [0, 0, -PUSH])
    arm.push(0.0)
    print(f'realistic plant, internal engine, nominal model: gravity compensation drift '
          f'{drift:.3g} rad in 5 s; computed torque {STEP} rad step steady error RMS '
          f'{steady_rms:.2e} max {steady_max:.2e} rad; wrench bias {bias:.3g} N, '
          f'{PUSH:.0f} N push error {push_error:.3g} N')
    # ten times the nominal plant's bound; how far it gets in 5 s depends on how long it moved
    # before the window (friction and the joint limits stop it): 0.04-0.1 rad in CI runs
    assert drift > 0.01
    # off by friction and model error, yet holding the step
    assert 3e-4 < steady_rms < 0.1, arm.simulator.log('arm_simulator') + arm.nodes.logs()
    assert bias > 0.3
