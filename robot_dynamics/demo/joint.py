"""The demo's joint scene: release, a trajectory under computed torque, a push at the tip.

    python -m robot_dynamics.demo [--robot panda|ur5e] [--urdf PATH [--base LINK] [--tip LINK]]

Steps 1-4 and the figures of robot_dynamics.demo's docstring.
"""
import pathlib
import time

import numpy as np
import yaml
from geometry_msgs.msg import WrenchStamped
from rclpy.duration import Duration
from scipy.interpolate import CubicSpline
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robot_dynamics.demo.session import progress, ros_time, session, wait_for_release
from robot_dynamics.nodes.common.joint_states import stamp_of

WAYPOINT_OFFSETS = np.array([0.0, 0.3, -0.2, 0.1, 0.0])  # rad, added to every joint, 1 s apart
WRENCH = np.array([0.4, -0.3, 0.2, 6.0, -8.0, 12.0])      # moment (N m), force (N), base axes


PUSH_TIME = 1.0   # s


def gravity_compensation(observer, processes, joints, q0):
    wait_for_release(observer, processes)
    released = observer.now()
    progress(observer, released + 2.0, 'released under gravity compensation')
    t, q = observer.positions(joints, released, released + 2.0)
    return np.abs(q - q0).max(), t[-1] - t[0]


def tracking(observer, joints, lower, upper):
    observer.probe.apply_parameters('dynamics_controller', {'mode': 'computed_torque'})
    observer.wait_until(observer.now() + 0.3)
    q_now = observer.positions(joints, observer.now() - 0.01, np.inf)[1][-1]
    times = np.arange(len(WAYPOINT_OFFSETS), dtype=float)
    signs = np.where(np.arange(len(joints)) % 2, -1.0, 1.0)
    margin = np.minimum(0.05, 0.1 * (upper - lower))   # rad (m for a prismatic joint)
    scale = np.minimum(1.0, 0.25 * (upper - lower))     # a finger's few cm: offsets in cm
    waypoints = np.clip(q_now + np.outer(WAYPOINT_OFFSETS, signs * scale), lower + margin,
                        upper - margin)
    waypoints[0] = q_now
    start = observer.now() + 0.5   # our clock may lag the arm's by ~0.1 s
    msg = JointTrajectory(joint_names=list(joints))
    msg.header.stamp = ros_time(start)
    msg.points = [JointTrajectoryPoint(positions=list(p), time_from_start=ros_time(t, Duration))
                  for p, t in zip(waypoints, times)]
    observer.trajectory.publish(msg)
    progress(observer, start + times[-1] + 0.3, 'computed torque along the trajectory')
    t, q = observer.positions(joints, start, start + times[-1] + 0.3)
    error = q - CubicSpline(times, waypoints, bc_type='clamped')(np.clip(t - start, 0, times[-1]))
    return t - start, error, times[-1]


def vector(m):
    w = m.wrench
    return np.array([w.torque.x, w.torque.y, w.torque.z, w.force.x, w.force.y, w.force.z])


def push(observer, base, wrench):
    """Apply ``wrench`` at the tip for PUSH_TIME, then remove it; estimates around it; tare."""
    def publish(w):
        msg = WrenchStamped()
        msg.header.frame_id = base
        m = msg.wrench
        (m.torque.x, m.torque.y, m.torque.z, m.force.x, m.force.y, m.force.z) = w.tolist()
        observer.wrench.publish(msg)

    before = observer.now()
    publish(wrench)
    applied_at = None
    deadline = time.monotonic() + 20.0
    while applied_at is None:   # the first estimate above 5 % of the push (within ~1 ms of it)
        applied_at = next((stamp_of(m) for m in list(observer.wrenches.messages)
                           if stamp_of(m) > before and
                           np.linalg.norm(vector(m)[3:]) > 0.05 * np.linalg.norm(wrench[3:])),
                          None)
        if time.monotonic() > deadline:
            raise TimeoutError('the wrench estimator does not respond')
        time.sleep(0.01)
    progress(observer, applied_at + PUSH_TIME, 'pushing the end effector')
    publish(np.zeros(6))
    progress(observer, observer.now() + 0.5, 'released')
    picked = [m for m in list(observer.wrenches.messages) if before - 0.2 <= stamp_of(m)]
    t = np.array([stamp_of(m) for m in picked]) - applied_at
    estimates = np.array([vector(m) for m in picked])
    settled = estimates[(t >= 0.3) & (t <= PUSH_TIME - 0.05)].mean(axis=0)
    # the push ends where the estimate falls below 95 % (as it starts where it passes 5 %): the
    # arm's clock at our zero wrench is only known to within our lag behind it
    falling = (t > 0.3) & (estimates[:, 3:] @ wrench[3:] < 0.95 * settled[3:] @ wrench[3:])
    duration = t[np.argmax(falling)] if falling.any() else PUSH_TIME
    tares = len(observer.biases)
    response = observer.probe.call(Trigger, '/wrench_estimator/tare', Trigger.Request())
    if response is None or not response.success:
        raise RuntimeError(f'~/tare did not answer or refused: {response}')
    deadline = time.monotonic() + 5.0
    while len(observer.biases) == tares:   # the tare's ~/bias, stamped with its joint state
        if time.monotonic() > deadline:
            raise RuntimeError('~/tare answered but ~/bias brought no message')
        time.sleep(0.01)
    tared = stamp_of(observer.biases.messages[-1])
    while stamp_of(observer.wrenches.messages[-1]) < tared + 0.3:
        time.sleep(0.01)
    residual = np.linalg.norm(vector(observer.wrenches.messages[-1])[3:])
    return t, estimates, duration, settled, residual


def plot(path, title, tracking, push):
    """Joint tracking error and estimated vs applied wrench over time, as a PNG."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    (t_track, error, joints), (t_push, estimates, duration) = tracking, push
    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(9, 10))
    top.plot(t_track, 1e3 * error, lw=0.8)
    top.set(xlabel='time along the trajectory, s', ylabel='tracking error, mrad',
            title=f'{title}: computed torque on MuJoCo')
    top.legend(joints, fontsize=7, ncol=4)
    applied = np.where(((t_push >= 0) & (t_push < duration))[:, None], WRENCH, 0.0)
    for k, (axes, unit, rows) in enumerate(((middle, 'N', range(3, 6)),
                                            (bottom, 'N m', range(3)))):
        for i, name in zip(rows, 'xyz'):
            line, = axes.plot(t_push, estimates[:, i], lw=1.0, label=f'estimated {name}')
            axes.plot(t_push, applied[:, i], '--', color=line.get_color(), lw=1.0,
                      label=f'applied {name}')
        axes.set(xlabel='time since the push, s',
                 ylabel=f"{'force' if k == 0 else 'moment'} at the tip, base axes, {unit}")
        axes.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(args, name):
    """The joint scene: prints the table, writes the figure and YAML to --out; 0."""
    began = time.monotonic()
    with session(args, name) as (observer, processes, arm):
        config, base, tip, joints, q0, lower, upper = arm
        print('1. release under gravity compensation', flush=True)
        drift, window = gravity_compensation(observer, processes, joints, q0)
        print(f'2. computed torque through {len(WAYPOINT_OFFSETS)} waypoints', flush=True)
        t_track, error, duration = tracking(observer, joints, lower, upper)
        print('3. a push at the end effector, then ~/tare', flush=True)
        t_push, estimates, push_time, settled, tared = push(observer, base, WRENCH)
        controller = observer.diagnostics.get('dynamics_controller', {})
        simulator = observer.diagnostics.get('arm_simulator', {})
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    figure = out / f'{name}_demo.png'
    plot(figure, name, (t_track, error, joints), (t_push, estimates, push_time))
    rms, worst = np.sqrt(np.mean(error ** 2)), np.abs(error).max()
    force_error = np.linalg.norm(settled[3:] - WRENCH[3:])
    moment_error = np.linalg.norm(settled[:3] - WRENCH[:3])
    rows = [
        ('gravity compensation drift', f'{drift:.1e} rad', f'max |q - q0| over {window:.1f} s'),
        ('tracking error RMS', f'{rms:.1e} rad',
         f'{duration:.0f} s, {len(WAYPOINT_OFFSETS)} waypoints'),
        ('tracking error max', f'{worst:.1e} rad', ''),
        ('push force, applied', f'{np.linalg.norm(WRENCH[3:]):.2f} N', 'at the tip'),
        ('push force, estimate error', f'{force_error:.3f} N',
         f'{100 * force_error / np.linalg.norm(WRENCH[3:]):.2f} %, 0.3-{PUSH_TIME - 0.05:.2f} s'),
        ('push moment, estimate error', f'{moment_error:.3f} N m',
         f'applied {np.linalg.norm(WRENCH[:3]):.2f} N m'),
        ('force after ~/tare', f'{tared:.3f} N', ''),
        ('controller latency', f"{controller.get('compute_median_us')} us",
         f"median; p99 {controller.get('compute_p99_us')} us (state in -> effort out)"),
        ('loop latency', f"{simulator.get('loop_latency_median_us')} us",
         f"median; p99 {simulator.get('loop_latency_p99_us')} us (state out -> command in)"),
        ('real-time factor', f"{simulator.get('real_time_factor')}",
         f"overruns {simulator.get('overruns')}"),
    ]
    print(f'\n{name} on MuJoCo: measured')
    for label, value, note in rows:
        print(f'  {label:30s} {value:>14s}   {note}')
    took = time.monotonic() - began
    figures = dict(robot=name, drift_rad=float(drift), tracking_rms_rad=float(rms),
                   tracking_max_rad=float(worst), push_force_error_n=float(force_error),
                   push_moment_error_nm=float(moment_error), force_after_tare_n=float(tared),
                   figure=str(figure.resolve()), seconds=round(took, 1))
    (out / f'{name}_demo.yaml').write_text(yaml.safe_dump(figures, sort_keys=False))
    print(f'\nfigure: {figure.resolve()}\ndemo took {took:.0f} s')
    return 0
