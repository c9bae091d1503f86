"""Power and force limiting in the dynamics_controller, closed around the simulated arm.

A UR5e carrying 2 kg (known to simulator and controller) swings its tool through three
waypoints, forth with PFL on, back with PFL switched off at run time, for two body regions:

- chest, in 1.6 s: at s = 1 the tool point would peak at ~1.14 m/s where v_max for the chest
  (ISO/TS 15066: F_T = 280 N, k = 25 N/mm, m_H = 40 kg) is ~0.87 m/s, the arm reflecting
  ~4.7 kg. Its m_H is large, so μ ≈ m_R and the arm's reflected mass decides v_max;
- hand (the issue's case), in 1.2 s: the tool point would pass at 1.52 m/s where v_max for the
  hand (F_T = 280 N, k = 75 N/mm, m_H = 0.6 kg) is 1.40 m/s (joint speeds up to 2.0 rad/s, of
  the UR5e's 3.14).

Real processes over loopback DDS (arm_simulator and dynamics_controller), one bring-up per
engine (both, see the fixture). With PFL the measured speed of the
tool point stays <= v_max (+2 %) and the transferred energy ½ μ v² (μ the reduced mass of m_R
and m_H: the standard's energy, E = F_T² / (2k) at v_max) stays <= F_T² / (2k) (+2 % of speed,
4 % of energy); s dips once, smoothly, and returns to 1; the motion follows the swing's path
(scipy's clamped spline through the waypoints) with velocities along its tangent. Without PFL
the speed exceeds v_max (the test can fail). v_max here is the standard's, for a free robot
mass; the controller's own, which counts its pull during a contact
(doc/guides/power_force_limiting.md), is lower (the chest: 0.89 of it, checked against scipy's
ODE solver in the diagnostics). Then diagnostics and markers, and the contact reaction PFL
implies: a push on the tool is detected and stops the arm, a reaction of none is refused.

References independent of the controller: the standard's formula with m_R from core (checked
against Pinocchio in test_power_force_limiting), scipy's spline, the measured joint states.
About 40 s per engine on an idle machine.
"""
import bisect
import math
import time

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import WrenchStamped
from rclpy.executors import SingleThreadedExecutor
from scipy.interpolate import CubicSpline
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from visualization_msgs.msg import Marker, MarkerArray

import robot_dynamics as rd
from references import two_mass_peak
from robot_dynamics import bringup
from robot_dynamics.core import power_force_limiting as pfl
from robot_dynamics.nodes.dynamics_controller import speed_limiter
from robot_dynamics.nodes.common.contact_safety import EVENT_QOS
from robot_dynamics.nodes.common.joint_states import wrench_message
from ros_harness import (BEST_EFFORT, ArmView, session, stamp_of, to_duration, to_time,
                         trajectory_answer)
from test_fuzz import Harness

PAYLOAD = {'payload.mass': 2.0, 'payload.com': [0.0, 0.0, 0.05]}
Q0 = np.array([0.0, -1.2, 1.5, -1.9, -1.57, 0.0])   # config/ur5e.yaml's initial position
SWING = Q0 + np.array([[0.0] * 6, [0.8, 0.3, -0.4, 0.2, 0.3, 0.0], [1.6, 0.0, 0.0, 0.0, 0.0, 0.0]])
CHEST = pfl.BODY_REGIONS['chest']
# region: (swing times, least speed / v_max without PFL, largest s with PFL)
CASES = {'chest': ([0.0, 0.8, 1.6], 1.1, 0.9), 'hand': ([0.0, 0.6, 1.2], 1.05, 1 / 1.05)}
JOINTS = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint',
          'wrist_2_joint', 'wrist_3_joint']
# state_timeout: on a loaded machine the simulator may stall for more than the bring-up's 0.5 s;
# the controller would then give up the swing and hold where it is
# PFL off at configure: the run-time switches on and off stay under the configure's ceiling
# (dynamics_controller.limits), which PFL on at configure would fix on
CONTROLLER = {**PAYLOAD, 'pfl.enable': False, 'pfl.body_regions': ['chest'], 'state_timeout': 3.0}


class Arm(ArmView):
    """The UR5e bring-up without the estimator on one engine, and the probe's view of it."""

    def __init__(self, ros, engine):
        self.probe, self.engine = ros.probe, engine
        specs = bringup.nodes('simulated_arm', robot='ur5e', mode='computed_torque', overrides={
            'arm_simulator': {**PAYLOAD, 'engine': engine},
            'dynamics_controller': CONTROLLER})
        self.specs = [s for s in specs if s.name != 'wrench_estimator']
        self.model = rd.with_payload(rd.load_urdf(rd.robot_urdf('ur5e'), 'base_link', 'tool0'),
                                     2.0, [0.0, 0.0, 0.05])
        self.states = self.probe.record(JointState, 'joint_states', BEST_EFFORT)
        self.scales = self.probe.record(Float64, '/dynamics_controller/speed_scaling')
        self.diagnostics = self.probe.record(DiagnosticArray, '/diagnostics')
        self.markers = self.probe.record(MarkerArray, '/dynamics_controller/pfl_markers')
        self.events = self.probe.record(DiagnosticArray, '/dynamics_controller/collision',
                                        EVENT_QOS)
        self.trajectory = self.probe.create_publisher(
            JointTrajectory, '/dynamics_controller/joint_trajectory', 10)
        self.wrench = self.probe.create_publisher(WrenchStamped, '/arm_simulator/external_wrench',
                                                  10)
        self.launch = ros.launch(self.specs)

    def close(self):
        codes = self.launch.processes.stop(timeout=20.0)
        self.probe.stop_recording(self.states, self.scales, self.diagnostics, self.markers,
                                  self.events)
        self.probe.remove_publishers(self.trajectory, self.wrench)
        return codes

    def swing(self, waypoints, times):
        """Send the swing; (t, q, v) of the states from its start until at rest at the end.

        t in seconds from the trajectory's start (as the controller took it), not from the
        first state recorded: the probe may miss the first few (an arrival measured from it
        came out early).

        The end: 0.1 s of states within 1e-3 rad of the last waypoint, every |q̇| < 0.01 rad/s.
        """
        start = self.send(waypoints, times)
        deadline = time.monotonic() + 60.0
        self.wait_until(start)
        while True:
            self.wait_until(self.now() + 0.1)
            t, q, v = self.window(start)
            done = (np.abs(q - waypoints[-1]).max(axis=1) < 1e-3) & (np.abs(v).max(axis=1) < 0.01)
            if t[-1] - start > times[-1] and done[t >= t[-1] - 0.1].all():
                return t - start, q, v
            assert time.monotonic() < deadline, (
                f'the swing did not end: last state q {q[-1]}, v {v[-1]} at {t[-1] - start:.3f} s '
                f'(goal {waypoints[-1]})\n{self.launch.logs()}')

    def send(self, waypoints, times):
        """Publish the trajectory (0.5 s ahead) once; returns the start the controller took.

        Once: the fixture waited for the match, and a reliable sample lost on a busy loopback
        comes again with the writer's next heartbeat (seconds late); a second send would start
        a second swing. Times measured from the controller's start are the swing's.
        """
        msg = JointTrajectory(joint_names=JOINTS)
        stamp = self.now() + 0.5
        msg.header.stamp = to_time(stamp)
        msg.points = [JointTrajectoryPoint(positions=list(p), time_from_start=to_duration(t))
                      for p, t in zip(waypoints, times)]
        start, answer = trajectory_answer(self.launch, lambda: self.trajectory.publish(msg),
                                          stamp, timeout=20.0)
        assert answer and 'joint_trajectory: 3 points' in answer, \
            f'the controller did not take the trajectory\n{self.launch.logs()}'
        return start

    def window(self, since):
        messages = list(self.states.messages)
        picked = messages[bisect.bisect_left(messages, since, key=stamp_of):]
        index = [list(picked[0].name).index(j) for j in JOINTS]
        return (np.array([stamp_of(m) for m in picked]),
                np.array([np.asarray(m.position)[index] for m in picked]),
                np.array([np.asarray(m.velocity)[index] for m in picked]))

    def collision(self, timeout=10.0):
        """Wait until the controller reports a collision, an ERROR status; its values."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.events.messages[-1].status[0] if len(self.events) else None
            if status is not None and status.level == status.ERROR:
                return {kv.key: kv.value for kv in status.values}
            assert time.monotonic() < deadline, \
                f'no collision event\n{self.launch.log("dynamics_controller")[-3000:]}'
            time.sleep(0.01)

    def pfl_statuses(self):
        """(message, status) of every 'power and force limiting' status received so far."""
        return [(m, s) for m in list(self.diagnostics.messages)
                for s in m.status if s.name.startswith('power and force limiting: ')]

    def pfl_status_on_schedule(self, timeout=60.0):
        """Wait for a PFL status a period after the first: its 1 Hz timer then runs on /clock.

        A swing before the status timer has settled on the arm's clock could have no status
        to show it (before ``nodes.common.timers``, Kilted's events executor could call it in
        a burst at the first /clock and then not for 4-8 s of the arm's clock).
        """
        deadline = time.monotonic() + timeout
        while True:
            stamps = [stamp_of(m) for m, _ in self.pfl_statuses()]
            if stamps and max(stamps) - min(stamps) > 0.5:
                return
            assert time.monotonic() < deadline, f'no PFL status\n{self.launch.logs()}'
            time.sleep(0.05)


def contact(model, q, v, region):
    """Per state: speed of tool0's origin, v_max for the region and ½ μ v² (J), from core's m_R."""
    speed, v_max, energy = [], [], []
    for qk, vk in zip(q, v):
        velocity = pfl.point_velocity(model, qk, vk, 'tool0')
        s = float(np.linalg.norm(velocity))
        m_R = pfl.reflected_mass(model, qk, 'tool0', velocity) if s > 1e-6 else math.inf
        speed.append(s)
        mu = pfl.reduced_mass(m_R, region.effective_mass)
        v_max.append(region.transient_force / math.sqrt(mu * region.spring_constant))
        energy.append(0.5 * mu * s ** 2)
    return np.array(speed), np.array(v_max), np.array(energy)


def arrival(run, goal):
    """Seconds from a run's start to its first state within 0.02 rad of the goal."""
    t, q, _ = run
    return t[np.argmax(np.abs(q - goal).max(axis=1) < 0.02)]


# Both engines, in the bring-up's lock step: the figures do not depend on the machine's load.
@pytest.fixture(scope='module', params=('internal', 'mujoco'))
def arm(ros, request):
    arm = Arm(ros, request.param)
    try:
        arm.launch.ready()
        # the first command: the controller has states and, on the simulator's /clock, a time
        assert arm.launch.wait_for_log('arm_simulator', 'brakes released', 60.0), \
            arm.launch.logs()
        arm.probe.wait_for_subscribers(arm.trajectory)
        arm.wait_until(arm.now() + 0.5)
        result = arm.probe.set_parameters('dynamics_controller', {'pfl.enable': True})[0]
        assert result.successful, result.reason
        arm.pfl_status_on_schedule()
        yield arm
    finally:
        codes = arm.close()
    assert codes == {'arm_simulator': 0, 'dynamics_controller': 0}, arm.launch.logs()


@pytest.mark.parametrize('name', CASES)
def test_pfl_limits_the_swing_and_off_exceeds(arm, name):
    region, (times, off_least, s_most) = pfl.BODY_REGIONS[name], CASES[name]
    result = arm.probe.set_parameters('dynamics_controller', {
        'pfl.enable': True, 'pfl.body_regions': [name]})[0]
    assert result.successful, result.reason
    first_scale = len(arm.scales)
    on = arm.swing(SWING, times)
    speed, v_max, energy = contact(arm.model, on[1], on[2], region)
    arm.scales.wait_for_more(5)
    scales = np.array([m.data for m in list(arm.scales.messages)[first_scale:]])
    ratio_on, e_on = (speed / v_max).max(), energy.max()

    result = arm.probe.set_parameters('dynamics_controller', {'pfl.enable': False})[0]
    assert result.successful, result.reason
    off = arm.swing(SWING[::-1], times)
    speed_off, v_max_off, energy_off = contact(arm.model, off[1], off[2], region)
    ratio_off, e_off = (speed_off / v_max_off).max(), energy_off.max()
    duration_on, duration_off = arrival(on, SWING[-1]), arrival(off, SWING[0])
    print(f'UR5e with 2 kg on {arm.engine}, tool point, {name} (E limit '
          f'{region.energy_limit:.3f} J): PFL on: peak {speed.max():.3f} m/s, max speed/v_max '
          f'{ratio_on:.3f}, max ½μv² {e_on:.3f} J, s min {scales.min():.3f}, {duration_on:.2f} s;'
          f' PFL off: peak {speed_off.max():.3f} m/s, max speed/v_max {ratio_off:.3f}, max ½μv² '
          f'{e_off:.3f} J, {duration_off:.2f} s (arrival)')
    print(f'largest state interval {np.diff(on[0]).max() * 1e3:.1f} ms (on), '
          f'{np.diff(off[0]).max() * 1e3:.1f} ms (off)')
    assert len(on[0]) > 500 and len(off[0]) > 500   # the probe may miss a few states
    assert ratio_on <= 1.02 and e_on <= 1.02 ** 2 * region.energy_limit, arm.launch.logs()
    assert ratio_off > off_least and e_off > region.energy_limit
    # s: one smooth dip (total variation = twice the depth: no chatter), back to 1
    assert 0.0 <= scales.min() < s_most and scales.max() <= 1.0 and scales[-1] == 1.0
    assert np.abs(np.diff(scales)).sum() <= 2 * (1 - scales.min()) + 0.02
    # the same path, slower: every on-run position near the swing's path (scipy's clamped
    # spline through the waypoints, what a positions-only trajectory is), velocity along it,
    # arriving later than the path itself does (the off-run may be delayed by a stall)
    path = CubicSpline(times, SWING, bc_type='clamped')
    tau = np.linspace(0.0, times[-1], 1601)
    nominal = tau[np.argmax(np.abs(path(tau) - SWING[-1]).max(axis=1) < 0.02)]
    nearest = np.argmin(np.linalg.norm(on[1][:, None] - path(tau)[None], axis=2), axis=1)
    gap = np.linalg.norm(on[1] - path(tau)[nearest], axis=1).max()
    tangent = path(tau, 1)[nearest]
    moving = (np.linalg.norm(on[2], axis=1) > 0.5) & (np.linalg.norm(tangent, axis=1) > 0.5)
    cosine = np.einsum('ij,ij->i', on[2], tangent)[moving] / (
        np.linalg.norm(on[2], axis=1) * np.linalg.norm(tangent, axis=1))[moving]
    print(f'path: largest distance {gap:.4f} rad from the swing\'s path; arrival {nominal:.2f} s'
          f' on it; velocity against its '
          f'tangent: cosine 1st percentile {np.percentile(cosine, 1):.4f}, min {cosine.min():.4f}')
    # (a stall of the loaded machine may bend a few samples: the 1st percentile, not the min).
    # Asserted on the chest's swing: the hand's, at up to 2 rad/s, left the path by 0.055 rad in
    # 1 of 10 runs under load (its speed within v_max all the same): tracking, not PFL. (In
    # another, under a loop latency p99 of 18 ms, its closed loop diverged: README.)
    assert name != 'chest' or (moving.sum() > 300 and gap < 0.03
                               and np.percentile(cosine, 1) > 0.98), arm.launch.logs()
    assert duration_on > nominal + 0.1 * (1 - scales.min())   # later: by ∫ (1 − s) dt


def test_diagnostics_and_markers(arm):
    """A chest swing under PFL: the statuses while it moves; back at rest, the markers."""
    result = arm.probe.set_parameters('dynamics_controller', {
        'pfl.enable': True, 'pfl.body_regions': ['chest']})[0]
    assert result.successful, result.reason
    since = arm.now()
    arm.swing(SWING, CASES['chest'][0])   # 1 Hz statuses over a swing of 1.6 s or more
    statuses = [{kv.key: kv.value for kv in s.values} for m, s in arm.pfl_statuses()
                if stamp_of(m) >= since]
    moving = [s for s in statuses if s.get('point0.region') == 'chest'
              and float(s['point0.speed_m_s']) > 0.05]
    assert moving, statuses
    for s in moving:
        assert s['point0.frame'] == 'tool0'
        m_R, v_max = float(s['point0.reflected_mass_kg']), float(s['point0.permissible_speed_m_s'])
        # the speed whose first contact peaks at F_T with the default gains' pull (400/s²,
        # 40/s: doc/guides/power_force_limiting.md), from scipy's ODE solver
        mu = pfl.reduced_mass(m_R, CHEST.effective_mass)
        peak = two_mass_peak(m_R, CHEST, 400.0 * m_R, 40.0 * m_R,
                             4 * math.pi * math.sqrt(mu / CHEST.spring_constant))
        assert m_R > 0 and v_max == pytest.approx(CHEST.transient_force / peak, rel=2e-3)
    assert {'enabled', 'speed_scaling', 'speed_scaling_min'} <= set(statuses[-1])
    arm.swing(SWING[::-1], CASES['chest'][0])   # back where the other tests start
    # at rest at the end of the swing: the ellipsoid's semi-axes are scale √m_R along Λ_v's axes
    t, q, _ = arm.window(arm.now() - 0.05)
    arm.markers.wait_for_more(2)
    ellipsoid, arrow = arm.markers.last().markers
    assert (ellipsoid.type, arrow.type) == (Marker.SPHERE, Marker.ARROW)
    assert ellipsoid.header.frame_id == 'base_link'
    p = rd.frame_pose(arm.model, q[-1], 'tool0')[:3, 3]
    position = ellipsoid.pose.position
    np.testing.assert_allclose([position.x, position.y, position.z], p, atol=1e-3)
    masses = np.linalg.eigvalsh(np.linalg.inv(pfl.point_mobility(arm.model, q[-1], 'tool0')))
    semi = np.minimum(0.05 * np.sqrt(masses), speed_limiter.MAX_AXIS)
    np.testing.assert_allclose(sorted([ellipsoid.scale.x, ellipsoid.scale.y, ellipsoid.scale.z]),
                               2 * np.sort(semi), rtol=1e-2)
    assert (arrow.color.r, arrow.color.g) == pytest.approx(speed_limiter.GREEN[:2])


def test_the_marker_timer_runs_only_while_someone_subscribes(ros_in_process):
    """~/pfl_markers: a timer at pfl.marker_rate while subscribed, none otherwise.

    An in-process controller (test_fuzz's) spun here; the probe subscribes and leaves.
    """
    h = Harness()
    limiter, executor = h.node.limiter, SingleThreadedExecutor()
    executor.add_node(h.node)

    def spin_until(done, timeout=10.0):
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, 'the subscriber was not matched in time'
            executor.spin_once(timeout_sec=0.05)
    try:
        assert limiter.marker_timer is None
        markers = ros_in_process.probe.record(MarkerArray, '/fuzz/dynamics_controller/pfl_markers')
        spin_until(lambda: limiter.marker_timer is not None)
        rate = h.node.values['pfl.marker_rate']
        assert limiter.marker_timer.timer_period_ns == round(1e9 / rate)
        ros_in_process.probe.stop_recording(markers)
        spin_until(lambda: limiter.marker_timer is None)
    finally:
        executor.shutdown()
        h.node.destroy_node()


def test_without_matched_events_the_marker_timer_always_runs(monkeypatch):
    """A middleware without publisher matched events: the markers paced as before that event."""
    from rclpy.event_handler import UnsupportedEventTypeError
    from rclpy.node import Node
    create_publisher = Node.create_publisher

    def without_matched_events(self, *args, event_callbacks=None, **kwargs):
        if event_callbacks is not None and event_callbacks.matched is not None:
            raise UnsupportedEventTypeError('matched events: not on this middleware')
        return create_publisher(self, *args, **kwargs)
    monkeypatch.setattr(Node, 'create_publisher', without_matched_events)
    session()
    h = Harness()
    try:
        limiter = h.node.limiter
        assert limiter.marker_subscribers is None and limiter.marker_timer is not None
        assert limiter.markers.topic_name == '/fuzz/dynamics_controller/pfl_markers'
    finally:
        h.node.destroy_node()


def test_bad_pfl_parameters_are_refused_with_the_reason(arm):
    for values, reason in (({'pfl.frames': ['no_such_link']}, "unknown frame 'no_such_link'"),
                           ({'pfl.body_regions': ['face']}, 'permits no transient contact')):
        result = arm.probe.set_parameters('dynamics_controller', values)[0]
        assert not result.successful and reason in result.reason, result.reason


def test_pfl_implies_the_contact_reaction(arm):
    """PFL on: collision detection on with the stop reaction; a reaction of none refused.

    collision.enable stays false. A 100 N push down on tool0 (~50 N m on the shoulder,
    threshold 22.5 N m) is detected and the controller stops until ~/reset.
    """
    result = arm.probe.set_parameters('dynamics_controller', {'pfl.enable': True})[0]
    assert result.successful, result.reason
    values = arm.probe.get_parameters('dynamics_controller', 'collision.enable',
                                      'collision.reaction')
    assert values == {'collision.enable': False, 'collision.reaction': 'stop'}
    result = arm.probe.set_parameters('dynamics_controller', {'collision.reaction': 'none'})[0]
    assert not result.successful and 'refused while pfl.enable' in result.reason, result.reason
    arm.wrench.publish(wrench_message('base_link', [0.0] * 5 + [-100.0]))
    try:
        event = arm.collision()
    finally:
        arm.wrench.publish(wrench_message('base_link', [0.0] * 6))
    assert event['reaction'] == 'stop', event
    arm.wait_until(arm.now() + 0.5)
    response = arm.probe.call(Trigger, '/dynamics_controller/reset', Trigger.Request())
    assert response.success, response.message


def test_the_contact_drive_follows_the_mode():
    """The pull v_max counts, per mode.

    Computed torque's stiffest joint (per unit of reflected mass), operational_space shaped
    (K 1/s², D = 2ζ√K), an impedance's translational K (N/m) at ζ.
    """
    values = {'mode': 'computed_torque', 'cartesian.damping_ratio': 0.7,
              'operational_space.inertia_shaping': True,
              'operational_space.stiffness': [100.0, 900.0, 400.0, 5000.0, 5000.0, 5000.0],
              'cartesian.stiffness': [500.0, 2000.0, 1000.0, 50.0, 50.0, 50.0]}
    kp, kd = np.array([400.0, 300.0, 100.0]), np.array([40.0, 50.0, 20.0])
    assert speed_limiter.contact_drive(values, kp, kd) == pfl.Drive(kp=400.0, kd=50.0)
    values['mode'] = 'operational_space'
    assert speed_limiter.contact_drive(values, kp, kd) == pfl.Drive(kp=900.0, kd=2 * 0.7 * 30.0)
    for mode, shaping in (('operational_space', False), ('cartesian_impedance', True)):
        values.update({'mode': mode, 'operational_space.inertia_shaping': shaping})
        assert speed_limiter.contact_drive(values, kp, kd) == pfl.Drive(
            stiffness=2000.0, damping_ratio=0.7)
