"""The demo's Cartesian scene: MuJoCo's arm in the task-space modes of dynamics_controller.

    python -m robot_dynamics.demo --scene cartesian [--robot panda|ur5e] [--out DIR]

1. hold: released at its initial pose in cartesian_impedance, how far the tip strays in 2 s;
2. push: a force along x at the tip (arm_simulator's ~/external_wrench) in steps of 5 N up to
   20 N and back, 1 s each: the tip's displacement at the end of each step against F/k;
3. release: the force removed, how far the tip is from its hold pose after 1 s;
4. target: a ~/target_pose 5 cm and 0.1 rad away, given in the tip frame: the error after 2 s;
5. circle: in operational_space, a circle of 10 cm diameter at 0.5 Hz streamed as target poses
   at about 100 Hz (no velocity feed-forward: a pose carries none), two turns with and two
   without inertia shaping: the tip's tracking error against the circle at the tip's stamps
   (it includes the stream's own lag behind the arm's clock).

Writes DIR/<robot>_cartesian.png (displacement against force; the circles) and the figures
to DIR/<robot>_cartesian.yaml. The tip pose is the controller's ~/tip_pose.
"""
import pathlib
import time

import numpy as np
import yaml
from geometry_msgs.msg import PoseStamped, WrenchStamped
from scipy.spatial.transform import Rotation

from robot_dynamics.demo import session as demo
from robot_dynamics.nodes.common.joint_states import stamp_of

STIFFNESS = [1000.0, 1000.0, 1000.0, 10.0, 10.0, 10.0]   # N/m ×3, N m/rad ×3
FORCES = [5.0, 10.0, 15.0, 20.0, 15.0, 10.0, 5.0, 0.0]   # N along x, 1 s each
RADIUS, FREQUENCY, TURNS = 0.05, 0.5, 2                  # m, Hz
CONTROLLER = {'mode': 'cartesian_impedance', 'cartesian.stiffness': STIFFNESS}


class CartesianObserver(demo.Observer):
    """The demo's observer with the controller's ~/tip_pose and ~/target_pose."""

    def __init__(self, probe):
        super().__init__(probe)
        self.tips = probe.record(PoseStamped, '/dynamics_controller/tip_pose')
        self.target = probe.create_publisher(PoseStamped, '/dynamics_controller/target_pose', 10)

    def now(self):
        """The arm's clock as the controller's ~/tip_pose (100 Hz) tells it."""
        return stamp_of(self.tips.messages[-1]) if len(self.tips) else 0.0

    def stop_fast_topics(self):
        """No more 1 kHz joint states and wrenches here: the target stream keeps its pace."""
        self.probe.stop_recording(self.states, self.wrenches)

    def tip(self, since, until=np.inf):
        """(stamps, positions (k, 3), rotation vectors (k, 3)) of ~/tip_pose in [since, until]."""
        picked = [m for m in list(self.tips.messages) if since <= stamp_of(m) <= until]
        if not picked:
            raise RuntimeError(f'no ~/tip_pose stamped in [{since:.3f}, {until:.3f}]: the '
                               'controller stopped publishing?')
        p = np.array([[m.pose.position.x, m.pose.position.y, m.pose.position.z] for m in picked])
        quaternion = [[m.pose.orientation.x, m.pose.orientation.y, m.pose.orientation.z,
                       m.pose.orientation.w] for m in picked]
        return (np.array([stamp_of(m) for m in picked]), p,
                Rotation.from_quat(quaternion).as_rotvec())

    def send_target(self, frame, position, rotation, stamp=None):
        msg = PoseStamped()
        msg.header.frame_id = frame
        if stamp is not None:
            msg.header.stamp = demo.ros_time(stamp)
        p, o = msg.pose.position, msg.pose.orientation
        p.x, p.y, p.z = [float(x) for x in position]
        o.x, o.y, o.z, o.w = rotation.as_quat().tolist()
        self.target.publish(msg)


def force(observer, base, fx):
    msg = WrenchStamped()
    msg.header.frame_id = base
    msg.wrench.force.x = float(fx)
    observer.wrench.publish(msg)


def hold(observer, processes):
    """Release; (hold pose position, rotation vector, largest tip deviation over 2 s)."""
    demo.wait_for_release(observer, processes)
    observer.stop_fast_topics()
    while not observer.tips:
        time.sleep(0.01)
    released = observer.now()
    demo.progress(observer, released + 2.0, 'holding the tip')
    _, p, r = observer.tip(released, released + 2.0)
    return p[0], r[0], np.linalg.norm(p - p[0], axis=1).max()


def push_steps(observer, base, p0):
    """Displacement along x at the end of each force step (mean over its last 0.2 s)."""
    displacement = []
    for fx in FORCES:
        force(observer, base, fx)
        start = observer.now()
        demo.progress(observer, start + 1.0, f'pushing with {fx:4.1f} N along x')
        _, p, _ = observer.tip(start + 0.7, start + 1.0)
        displacement.append((p - p0).mean(axis=0))
    return np.array(displacement)


def reach(observer, tip, p0, r0):
    """Release 1 s, then a target 5 cm / 0.1 rad away in the tip frame; (residual, errors)."""
    start = observer.now()
    demo.progress(observer, start + 1.0, 'released')
    _, p, _ = observer.tip(start + 0.8)
    residual = np.linalg.norm(p[-1] - p0)
    offset, turn = np.array([0.03, 0.0, 0.04]), Rotation.from_rotvec([0.0, 0.0, 0.1])
    R0 = Rotation.from_rotvec(r0)
    goal_p, goal_r = p0 + R0.apply(offset), R0 * turn
    observer.send_target(tip, offset, turn)
    start = observer.now()
    demo.progress(observer, start + 2.0, 'reaching a target in the tip frame')
    _, p, r = observer.tip(start + 1.8)
    rotation = (goal_r.inv() * Rotation.from_rotvec(r[-1])).magnitude()
    return residual, np.linalg.norm(p[-1] - goal_p), rotation


def circle(observer, base, label):
    """Stream a circle through the current tip pose; (times, tip, reference) over the turns."""
    _, p, r = observer.tip(observer.now() - 0.05)
    centre, rotation = p[-1] - (RADIUS, 0.0, 0.0), Rotation.from_rotvec(r[-1])
    omega = 2 * np.pi * FREQUENCY

    def reference(t):
        t = np.clip(t, 0.0, TURNS / FREQUENCY)
        return centre + RADIUS * np.stack([np.cos(omega * t), np.sin(omega * t),
                                           np.zeros_like(t)], axis=-1)

    start = observer.now()
    end = start + TURNS / FREQUENCY + 0.5
    print(f'   {label}: streaming {TURNS} turns', flush=True)
    while (now := observer.now()) < end:
        observer.send_target(base, reference(now - start), rotation, stamp=now)
        time.sleep(0.01)
    t, p, _ = observer.tip(start + 0.25 / FREQUENCY, start + TURNS / FREQUENCY)
    return t - start, p, reference(t - start)


def plot(path, title, displacement, circles):
    """Displacement against force; the circles (tip and reference, x-y) as a PNG."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.8))
    forces = np.array(FORCES)
    left.plot(forces, 1e3 * displacement[:, 0], 'o', label='measured, x')
    left.plot(forces, 1e3 * displacement[:, 1:], 'x', color='gray', label='measured, y and z')
    left.plot([0, forces.max()], [0, 1e3 * forces.max() / STIFFNESS[0]], '--',
              label=f'F/k, k = {STIFFNESS[0]:.0f} N/m')
    left.set(xlabel='force at the tip along x, N', ylabel='tip displacement, mm',
             title=f'{title}: cartesian_impedance on MuJoCo')
    left.legend(fontsize=8)
    for label, (_, p, ref) in circles.items():
        right.plot(1e3 * p[:, 0], 1e3 * p[:, 1], lw=1.0, label=f'tip, {label}')
    right.plot(1e3 * ref[:, 0], 1e3 * ref[:, 1], 'k--', lw=0.8, label='streamed circle')
    right.set(xlabel='x, mm (base)', ylabel='y, mm (base)', aspect='equal',
              title='operational_space: a 10 cm circle at 0.5 Hz')
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(args, name):
    """Run the scene; print and write what it measured (status 0)."""
    began = time.monotonic()
    with demo.session(args, name, CartesianObserver, CONTROLLER) as (observer, processes, arm):
        base, tip = arm[1], arm[2]
        print('1. released in cartesian_impedance: holding the tip', flush=True)
        p0, r0, strayed = hold(observer, processes)
        print('2. pushing the tip along x in steps', flush=True)
        displacement = push_steps(observer, base, p0)
        print('3. released, then 4. a target in the tip frame', flush=True)
        residual, reach_error, reach_rotation = reach(observer, tip, p0, r0)
        print('5. operational_space: a streamed circle, with and without inertia shaping',
              flush=True)
        observer.probe.apply_parameters('dynamics_controller', {'mode': 'operational_space'})
        circles = {'shaped': circle(observer, base, 'inertia shaping')}
        observer.probe.apply_parameters('dynamics_controller',
                                        {'operational_space.inertia_shaping': False})
        circles['unshaped'] = circle(observer, base, 'no inertia shaping')
        controller = observer.diagnostics.get('dynamics_controller', {})
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    figure = out / f'{name}_cartesian.png'
    plot(figure, name, displacement, circles)
    loaded = np.array(FORCES) > 0
    ratio = displacement[loaded, 0] / (np.array(FORCES)[loaded] / STIFFNESS[0])
    errors = {k: np.linalg.norm(p - ref, axis=1) for k, (_, p, ref) in circles.items()}
    figures = dict(
        robot=name, hold_max_mm=1e3 * strayed,
        push_ratio_min=ratio.min(), push_ratio_max=ratio.max(),
        push_other_axes_max_mm=1e3 * np.abs(displacement[:, 1:]).max(),
        release_residual_mm=1e3 * residual, reach_error_mm=1e3 * reach_error,
        reach_error_mrad=1e3 * reach_rotation,
        **{f'circle_{k}_{s}_mm': 1e3 * f(e) for k, e in errors.items()
           for s, f in (('rms', lambda e: np.sqrt(np.mean(e ** 2))), ('max', np.max))},
        condition_number=controller.get('task_condition_number'),
        controller_compute_median_us=controller.get('compute_median_us'))
    figures = {k: round(float(v), 4) if isinstance(v, (float, np.floating)) else v
               for k, v in figures.items()}
    print(f'\n{name} on MuJoCo, task space: measured')
    for key, value in figures.items():
        print(f'  {key:32s} {value}')
    figures.update(figure=str(figure.resolve()), seconds=round(time.monotonic() - began, 1))
    (out / f'{name}_cartesian.yaml').write_text(yaml.safe_dump(figures, sort_keys=False))
    print(f'\nfigure: {figure.resolve()}')
    return 0
