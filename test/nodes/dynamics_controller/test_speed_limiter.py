"""The controller's power-and-force-limiting hook (its speed_limiter module), in process.

Parameter checks (each bad value rejected with its reason), the scaled reference (q, q̇, q̈
consistent by integration, the contact point's commanded speed within v_max, no jump when
PFL is switched off mid-trajectory) and the markers' geometry. The reference values come from
core (JointTrajectory, reflected mass, tested against Pinocchio elsewhere) and finite
differences, not from the hook.
"""
import dataclasses
import time
import types

import numpy as np
import pytest
import rclpy.node
from scipy.integrate import cumulative_trapezoid

import robot_dynamics as rd
from robot_dynamics.core import power_force_limiting as pfl
from robot_dynamics.core.trajectory import JointTrajectory
from robot_dynamics.nodes.common.context import Context
from robot_dynamics.nodes.dynamics_controller import speed_limiter, cartesian_modes
from robot_dynamics.nodes.dynamics_controller.reference import TimedTrajectory
from robot_dynamics.nodes.common.parameters import ConfigError
from ros_harness import session
from test_cartesian_modes import Host, task_space_of

MODEL = rd.with_payload(rd.load_urdf(rd.robot_urdf('ur5e'), 'base_link', 'tool0'), 2.0,
                        [0.0, 0.0, 0.05])
Q0 = np.array([0.0, -1.2, 1.5, -1.9, -1.57, 0.0])
SWING = JointTrajectory([0.0, 0.8, 1.6], Q0 + np.array(
    [[0.0] * 6, [0.8, 0.3, -0.4, 0.2, 0.3, 0.0], [1.6, 0.0, 0.0, 0.0, 0.0, 0.0]]))
CHEST = pfl.BODY_REGIONS['chest']
DT = 1e-3


def values(**changes):
    """The declared defaults of the pfl.* parameters, with changes ('pfl.' left out)."""
    v = {p.name: p.default for p in speed_limiter.PARAMS}
    v.update({f'pfl.{k}': x for k, x in changes.items()})
    v['tip'] = 'tool0'
    return v


@pytest.mark.parametrize('changes, reason', [
    ({'frames': ['no_such_link']}, "unknown frame 'no_such_link'"),
    ({'frames': ['tool0', 'wrist_2_link'], 'offsets': [0.0, 0.0, 0.1]}, '3 finite values'),
    ({'offsets': [0.0, float('nan'), 0.0]}, '3 finite values'),
    ({'body_regions': ['hand', 'knee']}, "unknown ['knee']"),
    ({'body_regions': ['face']}, 'permits no transient contact'),
    ({'region_overrides': '/nonexistent/regions.yaml'}, 'pfl.region_overrides'),
])
def test_bad_parameters_are_rejected_with_the_reason(changes, reason):
    with pytest.raises(ConfigError, match=reason.replace('[', r'\[').replace(']', r'\]')):
        speed_limiter.configure(values(**changes), MODEL)


def test_defaults_and_overrides(tmp_path):
    config = speed_limiter.configure(values(), MODEL)
    assert config.scaling.contact_points == [pfl.ContactPoint('tool0', (0.0, 0.0, 0.0))]
    permitted = {n for n, r in pfl.BODY_REGIONS.items() if r.transient_force is not None}
    assert {r.name for r in config.scaling.regions} == permitted
    path = tmp_path / 'regions.yaml'
    path.write_text('chest: {spring_constant: 50000.0}\n')
    config = speed_limiter.configure(values(body_regions=['chest'], region_overrides=str(path),
                                            frames=['wrist_3_link'], offsets=[0, 0, 0.1]), MODEL)
    assert config.scaling.regions[0].spring_constant == 50000.0
    assert config.scaling.contact_points[0].offset == (0.0, 0.0, 0.1)


@pytest.fixture(scope='module')
def node():
    session()   # rclpy initialised on loopback, in a domain of its own
    node = rclpy.node.Node('speed_limiter_test')
    node.values = {'tip': 'tool0'}
    yield node
    node.destroy_node()


def context_of(node):
    """The Context of a plain rclpy node: what the controller gives its speed limiter."""
    return Context(node.get_name(), lambda: node.values, node.get_logger(), print,
                   node.get_clock(), time.monotonic, lambda: None, None, node.create_publisher,
                   node.create_subscription, node.create_timer, node.destroy_timer)


def run(limiter, reference, until, switch_off_at=np.inf, enabled=True):
    """Sample the hook at 1 kHz from 0 to ``until``; (t, q_d, v_d, a_d) arrays."""
    rows = []
    for t in np.arange(0.0, until, DT):
        if t >= switch_off_at and limiter.config.enabled:
            limiter.apply(speed_limiter.configure(values(enable=False,
                                                         body_regions=['chest']), MODEL))
        rows.append((t, *limiter.sample(reference, t, Q0, np.zeros(6))))
    return [np.array(x) for x in zip(*rows)]


def test_scaled_reference_is_consistent_and_within_v_max(node):
    limiter = speed_limiter.SpeedLimiter(context_of(node))
    limiter.apply(speed_limiter.configure(values(enable=True, body_regions=['chest']), MODEL))
    t, q, v, a = run(limiter, TimedTrajectory(SWING, 0.0), 3.0)
    # q and q̇ are the integrals of q̇ and q̈ (trapezoids: q̈ jumps where ṡ does, which
    # finite differences would not take); ScaledClock steps τ by s dt, first order: O(DT Δs)
    np.testing.assert_allclose(q[0] + cumulative_trapezoid(v, dx=DT, axis=0, initial=0), q,
                               atol=5e-4)
    np.testing.assert_allclose(v[0] + cumulative_trapezoid(a, dx=DT, axis=0, initial=0), v,
                               atol=5e-3)
    assert np.abs(a).max() < 20.0   # no spikes: ṡ is bounded by the rates
    # the same path: every q_d is the nominal trajectory at some τ, reached later than at s = 1
    nominal = np.array([SWING.sample(x)[0] for x in np.arange(0.0, 1.6 + DT, DT)])
    distance = np.linalg.norm(q[:, None] - nominal[None, ::4], axis=2).min(axis=1)
    assert distance.max() < 0.01
    assert np.abs(q[-1] - SWING.sample(1.6)[0]).max() < 1e-9
    arrival = t[np.argmax(np.abs(q - q[-1]).max(axis=1) < 1e-3)]
    ratio = [np.linalg.norm(pfl.point_velocity(MODEL, qk, vk, 'tool0'))
             / pfl.permissible_speed(pfl.reflected_mass(MODEL, qk, 'tool0', pfl.point_velocity(
                 MODEL, qk, vk, 'tool0')), CHEST)
             for qk, vk in zip(q[::10], v[::10]) if np.linalg.norm(vk) > 1e-3]
    print(f'scaled swing: arrival {arrival:.3f} s (nominal 1.6 s), commanded speed / v_max at '
          f'most {max(ratio):.4f}')
    assert arrival > 1.7 and max(ratio) < 1.005


def test_switching_off_mid_trajectory_does_not_jump(node):
    limiter = speed_limiter.SpeedLimiter(context_of(node))
    limiter.apply(speed_limiter.configure(values(enable=True, body_regions=['chest']), MODEL))
    _, q, v, _ = run(limiter, TimedTrajectory(SWING, 0.0), 3.0, switch_off_at=0.9)
    step = np.abs(np.diff(q, axis=0)).max()
    assert step < 3.0 * DT   # |q̇| stays below 3 rad/s: no jump of the reference
    np.testing.assert_allclose(q[-1], SWING.sample(1.6)[0], atol=1e-9)


def test_a_new_trajectory_blends_from_the_scaled_reference(node):
    limiter = speed_limiter.SpeedLimiter(context_of(node))
    limiter.apply(speed_limiter.configure(values(enable=True, body_regions=['chest']), MODEL))
    reference = TimedTrajectory(SWING, 0.0)
    t, q, v, _ = run(limiter, reference, 0.9)
    assert limiter.s < 0.9   # slowed: the unscaled reference is ahead
    current = limiter.blend_source(reference)
    q_now, v_now, _ = current.sample(t[-1])
    np.testing.assert_allclose(q_now, q[-1], atol=1e-12)
    np.testing.assert_allclose(v_now, v[-1], atol=1e-12)
    assert np.abs(reference.sample(t[-1])[0] - q[-1]).max() > 0.05
    later = current.sample(t[-1] + 0.01)[0]   # extrapolated at the current s
    np.testing.assert_allclose(later, q[-1] + 0.01 * v[-1], atol=1e-3)
    assert limiter.blend_source(None) is None


def test_markers_ellipsoid_and_arrow():
    q = Q0 + 0.1
    v = np.array([0.5, 0.0, 0.0, 0.0, 0.0, 0.0])
    scaling = speed_limiter.configure(values(body_regions=['chest']), MODEL).monitor
    scaling.target(q, v)
    status = scaling.points[0]
    ellipsoid, arrow = speed_limiter.point_markers(MODEL, q, status, 0.05)
    Lambda = np.linalg.inv(pfl.point_mobility(MODEL, q, 'tool0'))
    x, y, z, w = (getattr(ellipsoid.pose.orientation, k) for k in 'xyzw')
    R = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                  [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                  [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
    semi = np.array([ellipsoid.scale.x, ellipsoid.scale.y, ellipsoid.scale.z]) / 2
    # the ellipsoid's axes diagonalise Λ_v, with semi-axes 0.05 √(m_R along each)
    along = np.diag(R.T @ Lambda @ R)
    np.testing.assert_allclose(semi, np.minimum(0.05 * np.sqrt(along), speed_limiter.MAX_AXIS),
                               rtol=1e-6)
    off_diagonal = R.T @ Lambda @ R - np.diag(along)
    assert np.abs(off_diagonal).max() < 1e-8 * np.abs(Lambda).max()
    start, end = ([p.x, p.y, p.z] for p in arrow.points)
    np.testing.assert_allclose(start, rd.frame_pose(MODEL, q, 'tool0')[:3, 3], atol=1e-12)
    np.testing.assert_allclose(np.subtract(end, start),
                               0.2 * pfl.point_velocity(MODEL, q, v, 'tool0'), atol=1e-12)
    ratio = status.speed / status.permissible_speed
    expected = speed_limiter.GREEN if ratio < 0.8 else speed_limiter.ORANGE if ratio <= 1 \
        else speed_limiter.RED
    assert (arrow.color.r, arrow.color.g, arrow.color.b) == pytest.approx(expected)


def line_stream(T0, length=0.3, duration=1.2, period=0.01):
    """Stamped target poses at 100 Hz: the tip back along x, peak speed π L / 2T (cosine)."""
    for t in np.arange(0.0, duration + period / 2, period):
        T = T0.copy()
        T[0, 3] -= length * (1.0 - np.cos(np.pi * t / duration)) / 2.0
        yield t, T


def test_a_task_space_stream_is_slowed_to_v_max(node, monkeypatch):
    """operational_space on forward dynamics (1 kHz), a streamed line of peak 0.39 m/s.

    A region with F_T lowered to 60 N: v_max ~0.3 m/s along the line. With PFL the tip's speed
    stays <= v_max (+2 %), the targets stay on the line and its end is reached later; without,
    the tip exceeds v_max. The node's clock, which the stream's lapse reads, is the simulated one.
    """
    model = rd.load_urdf(rd.robot_urdf('ur5e'), 'base_link', 'tool0')
    region = dataclasses.replace(CHEST, transient_force=60.0)
    clock = [0.0]
    T0 = rd.frame_pose(model, Q0, 'tool0')
    runs = {}
    for enabled in (True, False):
        space = task_space_on(node, model, enabled, region)
        monkeypatch.setattr(space.host, 'monotonic_time', lambda: clock[0])   # the node's clock
        q, v = Q0.copy(), np.zeros(6)
        space.hold(q)
        stream = line_stream(T0)
        t_next, pose_next = next(stream)
        qs, vs, targets = [], [], []
        for k in range(2500):
            t = clock[0] = k * DT
            if pose_next is not None and t >= t_next - 1e-9:
                space.stream(pose_next, 100.0 + t_next)
                t_next, pose_next = next(stream, (None, None))
            tau = space.control(q, v, 100.0 + t)
            v = v + DT * rd.forward_dynamics(model, q, v, tau)
            q = q + DT * v
            qs.append(q)
            vs.append(v)
            targets.append(space.pose_d)
        ratio = [np.linalg.norm(u) / pfl.permissible_speed(
            pfl.reflected_mass(model, qk, 'tool0', u), region) for qk, u in
            ((qk, pfl.point_velocity(model, qk, vk, 'tool0')) for qk, vk in zip(qs, vs))
            if np.linalg.norm(u) > 1e-3]
        targets = np.array(targets)
        end = np.argmax(targets[:, 0, 3] <= T0[0, 3] - 0.3 + 1e-6) * DT
        runs[enabled] = max(ratio), end, targets, qs[-1]
        print(f'PFL {enabled}: tip speed / v_max at most {max(ratio):.4f}, target at the end '
              f'of the line after {end:.3f} s (nominal 1.2 s)')
    (ratio_on, end_on, targets, q_end), (ratio_off, end_off, _, _) = runs[True], runs[False]
    assert ratio_on <= 1.02 and ratio_off > 1.2
    assert end_off == pytest.approx(1.2, abs=2 * DT) and end_on > 1.3
    # every target on the line, orientation held; the arm ends at the line's end
    np.testing.assert_allclose(targets[:, 1:3, 3], np.broadcast_to(T0[1:3, 3], (2500, 2)),
                               atol=1e-9)
    np.testing.assert_allclose(targets[:, :3, :3], np.broadcast_to(T0[:3, :3], (2500, 3, 3)),
                               atol=1e-9)
    np.testing.assert_allclose(rd.frame_pose(model, q_end, 'tool0')[:3, 3],
                               T0[:3, 3] - [0.3, 0.0, 0.0], atol=1e-3)


def task_space_on(node, model, enabled, region):
    """A TaskSpace in operational_space with its speed limiter (one contact point: the tip)."""
    limiter = speed_limiter.SpeedLimiter(context_of(node))
    config = speed_limiter.configure(values(enable=enabled), model)
    config.scaling.regions[:] = [region]
    limiter.apply(config)
    space = task_space_of(Host(model), limiter)
    task = {**{p.name: p.default for p in cartesian_modes.PARAMS}, 'mode': 'operational_space'}
    space.apply(cartesian_modes.configure(task, types.SimpleNamespace(model=model,
                                                                      per_joint=None)))
    return space
