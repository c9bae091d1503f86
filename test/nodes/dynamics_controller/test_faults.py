"""Faults: rate limit, lost/bursty/out-of-order joint states, preemption, singular poses (~25 s).

The controller runs in-process (callbacks called by the test, publisher spied on, a fake clock
for the rate limit and state_timeout), except the restart test: simulator and controller as
processes over loopback DDS, the controller killed and started again while the arm runs.
References: g(q) and M(q) from the core's RNEA (tested against Pinocchio elsewhere), the limits
read from the URDF here.
"""
import time

import numpy as np
import pytest
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

import robot_dynamics as rd
from robot_dynamics import bringup
from robot_dynamics.nodes.dynamics_controller.command_output import RATE_SLACK
from robot_dynamics.nodes.wrench_estimator import WrenchEstimator
from ros_harness import BEST_EFFORT, session, stamp_of, to_duration
from test_fuzz import CONFIG, JOINTS, POSE, TIMEOUT, URDF, Harness, joint_state

MODEL = rd.load_urdf(URDF, 'panda_link0', 'panda_hand_tcp')
RATE = 1000.0   # N m/s, the documented default of max_effort_rate
STAMP_ROUNDING = 5e-7   # s: two float stamps near 1.8e9 s (ULP 2.4e-7) differ by this much
STRETCHED = np.zeros(7)   # panda at q = 0: links 1-4 aligned, a singular pose


def g(q):
    return rd.rnea(MODEL, q, np.zeros(7), np.zeros(7))


@pytest.fixture
def controller():
    session()
    h = Harness()
    yield h
    h.node.destroy_node()


def feed(h, q, n=1, dt=0.001, v=None, stamp_offset=0.0):
    """n states at q, dt apart on both clocks; returns the commands they produced."""
    count = len(h.commands)
    for _ in range(n):
        h.clock += dt
        h.node.on_joint_state(joint_state(JOINTS, list(q), list(np.zeros(7) if v is None else v),
                                          h.now() + stamp_offset))
        h.node.watchdog.check()
    return h.commands[count:]


def test_default_rate_limit_and_a_step_in_the_state(controller):
    h = controller
    h.node.set_parameters([Parameter('mode', value='gravity_compensation')])
    assert h.node.values['max_effort_rate'] == RATE
    feed(h, POSE, 10)
    q = POSE + np.array([0.0, 0.4, 0.0, 0.3, 0.0, 0.0, 0.0])   # g changes by ~10 N m at once
    assert np.abs(g(q) - g(POSE)).max() > 5.0
    tau = np.array(feed(h, q, 40))
    steps = np.abs(np.diff(np.vstack([g(POSE), tau]), axis=0)).max(axis=1)
    assert steps.max() <= RATE * (0.001 + STAMP_ROUNDING)     # 1 N m per 1 ms state
    np.testing.assert_allclose(tau[-1], g(q), atol=1e-9)   # reached after |Δg| / rate
    assert h.node.diagnostics.counts['rate_limited_commands'] > 5


def test_rate_limit_runs_on_the_arms_clock(controller):
    """States 1 ms apart on the arm's clock, 0.2 ms in wall time: 1 N m per state.

    As a simulator catching up sees it in real time; a stamp 0.1 s ahead of the wall time moves
    the command by at most RATE_SLACK's worth.
    """
    h = controller
    h.node.set_parameters([Parameter('mode', value='gravity_compensation')])
    feed(h, POSE, 10)
    q = POSE + np.array([0.0, 0.4, 0.0, 0.3, 0.0, 0.0, 0.0])
    tau = []
    for k in range(1, 6):
        h.clock += 2e-4
        h.node.on_joint_state(joint_state(JOINTS, list(q), [0.0] * 7, h.now() + 8e-4 * k))
        tau.append(h.commands[-1])
    steps = np.abs(np.diff(np.vstack([g(POSE), tau]), axis=0)).max(axis=1)
    np.testing.assert_allclose(steps, RATE * 0.001, atol=RATE * STAMP_ROUNDING)
    h.clock += 2e-4
    h.node.on_joint_state(joint_state(JOINTS, list(q), [0.0] * 7, h.now() + 0.1))
    assert np.abs(h.commands[-1] - tau[-1]).max() <= RATE * (2e-4 + RATE_SLACK + 1e-9)


def test_states_stop_resume_burst_and_out_of_order(controller):
    h = controller
    feed(h, POSE, 20)
    count = len(h.commands)
    h.tick(TIMEOUT + 0.05)                       # publisher killed
    assert len(h.commands) == count + 1          # one final command: g(q_last)
    np.testing.assert_allclose(h.commands[-1], g(POSE), atol=1e-9)
    assert not h.node.watchdog.commanding
    h.tick(1.0)
    assert len(h.commands) == count + 1          # then silence
    q = POSE + 0.05                              # the arm drifted meanwhile
    tau = feed(h, q, 1)[0]                       # resumes: holds where it is (bumpless)
    np.testing.assert_allclose(tau, g(q), atol=1e-6)
    # a burst: 50 queued states handled within 1 ms of wall time move the command little
    before = h.commands[-1]
    burst = feed(h, q + 0.3, 50, dt=2e-5)
    assert np.abs(burst[-1] - before).max() <= RATE * 50 * (2e-5 + STAMP_ROUNDING)
    # out of order: an older stamp is dropped and counted
    count, rejected = len(h.commands), h.node.diagnostics.counts['rejected_states']
    feed(h, q, 1, stamp_offset=-0.05)
    assert len(h.commands) == count and h.node.diagnostics.counts['rejected_states'] == rejected + 1
    # a clock jump far ahead is dropped too; after state_timeout the new clock is learned
    assert not feed(h, q, 5, stamp_offset=1e4)
    h.tick(TIMEOUT + 0.05)
    assert feed(h, q, 1, stamp_offset=1e4)


def test_the_stale_check_is_due_at_the_deadline(controller):
    """The check comes state_timeout after the newest state, not on a 20 ms tick.

    So the loss is found then, and the check does not run while the node is not commanding.
    """
    h = controller
    timer = h.node.watchdog.timer
    assert timer.is_canceled()                   # nothing to check before the first command
    feed(h, POSE, 5)
    last = h.clock
    assert not timer.is_canceled() and timer.timer_period_ns == round(TIMEOUT * 1e9)
    assert h.node.watchdog.due == last + TIMEOUT
    count = len(h.commands)
    h.clock = last + TIMEOUT - 1e-4              # early (a timer's jitter): set again, for 0.1 ms
    h.node.watchdog.check()
    assert len(h.commands) == count and h.node.watchdog.due == pytest.approx(last + TIMEOUT)
    h.clock = last + TIMEOUT
    h.node.watchdog.check()                         # due: the final command, g(q_last)
    assert len(h.commands) == count + 1 and not h.node.watchdog.commanding and timer.is_canceled()
    np.testing.assert_allclose(h.commands[-1], g(POSE), atol=1e-9)
    feed(h, POSE, 1)                             # states back: due again
    assert not timer.is_canceled() and h.node.watchdog.due == h.clock + TIMEOUT


def test_stale_in_computed_torque_ramps_to_gravity(controller):
    """Commands far from g(q) (tracking): after the timeout they ramp at the rate limit."""
    h = controller
    feed(h, POSE, 5)
    h.node.set_parameters([Parameter('max_effort_rate', value=50.0)])
    far = POSE + np.array([0.0, 0.2, 0.0, 0.2, 0.0, 0.0, 0.0])
    tau = feed(h, far, 400)[-1]                  # held at POSE: M Kp e pulls back hard
    assert np.abs(tau - g(far)).max() > 5.0
    count = len(h.commands)
    h.tick(TIMEOUT + 0.5)
    ramp = np.array(h.commands[count - 1:])
    assert len(ramp) > 2                         # more than one 20 ms tick at 50 N m/s
    assert np.abs(np.diff(ramp, axis=0)).max() <= 50.0 * 0.12 + 1e-9
    np.testing.assert_allclose(ramp[-1], g(far), atol=1e-9)
    assert not h.node.watchdog.commanding


def trajectory(q_points, times, stamp=None):
    msg = JointTrajectory(joint_names=JOINTS, points=[
        JointTrajectoryPoint(positions=list(q), time_from_start=to_duration(t))
        for q, t in zip(q_points, times)])
    return msg


def test_trajectory_preempted_midway_blends_from_the_current_reference(controller):
    h = controller
    h.node.set_parameters([Parameter('max_effort_rate', value=1e9)])
    feed(h, POSE, 5)
    goal = POSE + 0.2
    h.node.on_trajectory(trajectory([goal], [1.0]))
    feed(h, POSE, 500)                               # halfway (the arm does not move here)
    midway = h.node.reference.current.sample(h.now())[0]
    assert 0.05 < (midway - POSE)[0] < 0.15
    other = POSE - 0.1
    h.node.on_trajectory(trajectory([other], [1.0]))  # preempts now, from the reference
    feed(h, POSE, 1)
    q_d, v_d, _ = h.node.reference.current.sample(h.now())
    np.testing.assert_allclose(q_d, midway, atol=2e-3)   # continuous: no step in q_d
    feed(h, POSE, 1100)
    np.testing.assert_allclose(h.node.reference.current.sample(h.now())[0], other, atol=1e-12)
    # a first point at time 0 far from the reference would be a step: rejected
    h.node.on_trajectory(trajectory([POSE + 0.5], [0.0]))
    assert h.node.reference.pending is None
    assert h.node.diagnostics.counts['rejected_references'] == 1


def test_singular_pose_keeps_lambda_and_the_wrench_finite():
    session()
    sigma = np.linalg.svd(rd.frame_jacobian(MODEL, STRETCHED, MODEL.tip), compute_uv=False)
    assert sigma[-1] / sigma[0] < 1e-6            # singular indeed
    Lambda = rd.task_space_inertia(MODEL, STRETCHED, MODEL.tip, damping=1e-3)
    assert np.isfinite(Lambda).all()
    node = WrenchEstimator(namespace='/faults', parameter_overrides=[
        Parameter(k, value=v) for k, v in {**CONFIG['wrench_estimator']['ros__parameters'],
                                           'robot_description': URDF}.items()])
    wrenches = []
    node.wrench_publisher.publish = lambda m: wrenches.append(
        [m.wrench.force.x, m.wrench.force.y, m.wrench.force.z])
    node.torque_publisher.publish = lambda m: None
    t0 = time.time()
    for k in range(200):   # a force of 10 N along z at the tip: effort = g(q) - J^T F
        J = rd.frame_jacobian(MODEL, STRETCHED, MODEL.tip)
        effort = g(STRETCHED) - J.T @ np.array([0, 0, 0, 0, 0, 10.0])
        msg = joint_state(JOINTS, list(STRETCHED), [0.0] * 7, t0 + 1e-3 * k)
        msg.effort = list(effort)
        node.on_joint_state(msg)
    assert len(wrenches) == 200 and np.isfinite(wrenches).all()
    assert node.diagnostics.counts['near_singular'] >= 1
    level, message, values = node.health()
    assert 'singular' in message and values['jacobian_conditioning'] < 1e-2
    # still at rest: the static residual τ_measured − g(q) is the external torque −Jᵀ F
    np.testing.assert_allclose(values['static_residual_nm'], effort - g(STRETCHED), atol=1e-4)
    node.destroy_node()


def test_controller_restart_while_the_simulator_runs(ros):
    """Kill the controller, start it again: its first command is g(q), no spike; the arm settles.

    The simulated joints have viscous damping (2 N m s/rad): gravity compensation alone
    conserves energy, so only a damped arm settles. While no controller runs, the arm keeps the
    last command, a constant torque that does not hold it (g(q) changes as it moves).
    """
    commands = ros.probe.record(Float64MultiArray, 'effort_controller/commands', BEST_EFFORT)
    states = ros.probe.record(JointState, 'joint_states', BEST_EFFORT)
    specs = bringup.nodes('simulated_arm', robot='panda',
                          overrides={'arm_simulator': {'joint_damping': [2.0] * 7}})
    simulator = [s for s in specs if s.name == 'arm_simulator']
    controller = [s for s in specs if s.name == 'dynamics_controller']
    try:
        with ros.launch(simulator) as sim, ros.launch(controller) as first:
            sim.ready(), first.ready()
            assert commands.wait(1, timeout=20), first.logs()
            states.wait_for_stamp(stamp_of(states.last()) + 0.3)
            first.stop()
            count = len(commands)
            with ros.launch(controller) as second:
                second.ready()
                assert commands.wait(count + 1, timeout=20), second.logs()
                restarted = states.last()
                states.wait_for_stamp(stamp_of(restarted) + 2.0)
                after = np.array([m.data for m in list(commands.messages)[count:]])
        index = [list(restarted.name).index(j) for j in JOINTS]
        q_restart = np.asarray(restarted.position)[index]
        settled = [m for m in list(states.messages) if stamp_of(m) >= stamp_of(restarted) + 1.5]
        q = np.array([np.asarray(m.position)[index] for m in settled])
        v = np.abs(np.asarray(settled[-1].velocity)).max()
        spike = np.abs(after[0] - g(q_restart)).max()
        steps = np.abs(np.diff(after, axis=0)).max()
        print(f'controller restart: first command - g(q) {spike:.2e} N m, largest step between '
              f'commands {steps:.3f} N m; 1.5 s later the arm moves {np.ptp(q, axis=0).max():.2e}'
              f' rad in 0.5 s, |v| {v:.1e} rad/s')
        assert np.isfinite(after).all() and spike < 1.0 and steps < 1.0
        assert np.ptp(q, axis=0).max() < 1e-2 and v < 1e-2
    finally:
        ros.probe.stop_recording(commands, states)
