"""The live part of ``excite``: check the controller, approach, send, record, fit (ROS 2).

The recording is record_joint_states' own recorder (``JointStateRecorder``) in this process,
started just before the excitation with ``duration`` = LEAD + the excitation + SETTLE. Each
joint's recorded motion is compared with the plan (tools.excitation_check); if one lags, the
joint terms ``excitation_check.compensation`` fits from this first pass are set on the
controller (its ``armature``, ``friction.viscous`` and ``friction.coulomb``) and the excitation
runs again, recorded anew; a joint that still moves too little for the fit is refused.
"""
import time

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import JointState
from trajectory_msgs import msg as trajectory_msgs

from robot_dynamics.core.trajectory import JointTrajectory
from robot_dynamics.nodes.common.joint_states import stamp_of, trajectory_message
from robot_dynamics.probe import BEST_EFFORT, ParametersRefused, spinning
from robot_dynamics.tools.excitation_check import Refused

LEAD = 0.5      # s between sending a trajectory and its start, on the joint states' clock
SETTLE = 0.5    # s recorded after the excitation
ARRIVED = 0.02  # rad: the arm is at q0 when every joint is this close after the approach
ASTRAY = 0.25   # rad: farther from q0 after the approach, the arm is not following


class Excitation:
    """The controller the excitation runs through, on the package's probe.

    The newest joint state, the controller's parameters and its trajectory topic; ``timeout``:
    how long to wait for each.
    """

    def __init__(self, probe, controller, joints, timeout):
        self.probe, self.controller, self.joints = probe, controller, list(joints)
        self.timeout, self.states = timeout, None
        self.watch()
        self.publisher = probe.create_publisher(trajectory_msgs.JointTrajectory,
                                                f'/{controller}/joint_trajectory', 10)

    def watch(self, on=True):
        """Record the joint states (on), or stop: one 1 kHz subscription in this process."""
        if on:
            self.states = self.probe.record(JointState, 'joint_states', BEST_EFFORT)
        else:
            self.probe.stop_recording(self.states)

    def newest(self):
        """The newest joint state that names every joint with its position, or None."""
        for msg in reversed(self.states.messages[-100:]):
            if set(self.joints) <= set(msg.name) and len(msg.position) == len(msg.name):
                return msg
        return None

    def position(self):
        """(stamp, q in ``joints`` order) of the newest joint state (waiting for one)."""
        spin_until(lambda: self.newest() is not None, self.timeout,
                   f'no joint states naming every joint for {self.timeout} s')
        state = self.newest()
        index = [list(state.name).index(j) for j in self.joints]
        return stamp_of(state), np.asarray(state.position)[index]

    def send(self, trajectory, start):
        """Publish a core JointTrajectory's knots, starting at ``start`` on the states' clock."""
        self.publisher.publish(trajectory_message(
            self.joints, start, trajectory.times, trajectory.positions, trajectory.velocities,
            trajectory.accelerations))

    def parameter(self, name):
        """The value of one of the controller's parameters (its get_parameters service)."""
        try:
            return self.probe.get_parameters(self.controller, name)[name]
        except TimeoutError:
            raise Refused(f'no controller answers at /{self.controller}/get_parameters within '
                          f'{self.timeout} s: is {self.controller} running (and this terminal in '
                          'its ROS_DOMAIN_ID)?') from None


def spin_until(condition, timeout, what, step=lambda: time.sleep(0.01)):
    """step() until condition() holds; Refused(what) after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise Refused(what)
        step()


def compensate(arm, model, terms):
    """Set the joint terms {kind: (nv,) chain order} on the controller, in its joints' order."""
    joints = list(arm.parameter('joints'))
    index = [model.joint_names.index(j) for j in joints] if joints else range(model.nv)
    names = dict(armature='armature', viscous='friction.viscous', coulomb='friction.coulomb')
    values = {names[k]: [float(x[i]) for i in index] for k, x in terms.items()}
    try:
        arm.probe.apply_parameters(arm.controller, values, arm.timeout)
    except (ParametersRefused, TimeoutError) as error:
        raise Refused(f'{arm.controller}: the compensation was not set: {error}') from None
    print(f'{arm.controller} now compensates (until you load the fit): ' + ', '.join(
        f'{k} {np.round(v, 3).tolist()}' for k, v in values.items()), flush=True)


def assess(path, model, trajectory, start):
    """excitation_check.JointMotion per joint of the recording at ``path`` against the plan."""
    from robot_dynamics.tools import excitation_check, recording
    data = recording.load(path)
    t = data.start_time + data.t - start
    inside = (t >= 0.0) & (t <= trajectory.duration)
    planned = [trajectory.sample(x) for x in t[inside]]
    order = [list(data.joint_names).index(j) for j in model.joint_names]
    q = data.q[inside][:, order]
    v = (np.gradient(data.q, data.t, axis=0) if data.v is None else data.v)[inside][:, order]
    return excitation_check.assess(model, [p[1] for p in planned], [p[0] for p in planned],
                                   v, q)


def wait_for_stamp(arm, t, timeout):
    spin_until(lambda: (state := arm.newest()) is not None and stamp_of(state) >= t, timeout,
               f'joint states stopped before t = {t:.3f} s')


def approach(model, q_from, q_to, speed):
    """One point: q_to at rest, T = 1.875 max|q_to − q_from| / speed (≥ 1 s) from now.

    The controller blends from its current reference (a quintic from rest: peak speed
    1.875 Δq / T), so the arm's steady error at the start does not matter.
    """
    duration = max(1.0, 1.875 * np.abs(q_to - q_from).max() / speed)
    return JointTrajectory([duration], [q_to], np.zeros((1, model.nv)), np.zeros((1, model.nv)))


def move_to_start(arm, model, q0, args):
    """Approach q0 at args.approach_speed unless the arm is there.

    Under a model unlike the arm, computed torque leaves a steady error: a note beyond ARRIVED;
    Refused beyond ASTRAY (the arm does not follow the controller).
    """
    stamp, q = arm.position()
    if np.abs(q - q0).max() < ARRIVED:
        return
    path = approach(model, q, q0, args.approach_speed)
    print(f'moving to q0 over {path.duration:.1f} s', flush=True)
    arm.send(path, stamp + LEAD)
    wait_for_stamp(arm, stamp + LEAD + path.duration + 0.5, path.duration + args.timeout)
    off = np.abs(arm.position()[1] - q0).max()
    if off > ASTRAY:
        raise Refused(f'the arm did not reach q0: at {np.round(arm.position()[1], 4).tolist()}')
    if off > ARRIVED:
        print(f'note: the arm stands {off:.3g} rad from q0 (the steady error of computed torque '
              'on this model); the excitation starts from the reference q0', flush=True)


def record(arm, trajectory, args):
    """Send the excitation and record it; returns (the recorder's exit status, its start).

    The recorder is record_joint_states' node, spun here; the probe stops recording the states
    meanwhile (one 1 kHz subscription in this process).
    """
    from robot_dynamics.tools.record_joint_states import JointStateRecorder
    arm.watch(False)
    recorder = JointStateRecorder()
    executor = SingleThreadedExecutor()
    executor.add_node(recorder)

    def step():
        executor.spin_once(timeout_sec=0.05)
    try:
        spin_until(lambda: len(recorder.stamps) > 0, args.timeout,
                   'the recorder receives no joint states', step)
        start = recorder.stamps[-1] * 1e-9 + LEAD
        arm.send(trajectory, start)
        print(f'exciting for {trajectory.duration:.1f} s, recording to {args.output}',
              flush=True)
        while not recorder.done:   # a loaded simulator may run far slower than real time
            count = len(recorder.stamps)
            spin_until(lambda: recorder.done or len(recorder.stamps) > count, args.timeout,
                       f'the recording did not complete: no joint states for {args.timeout} s',
                       step)
        recorder.drain(executor)
        return recorder.write(), start
    finally:
        executor.shutdown()
        recorder.destroy_node()
        arm.watch()


def run(args, model, trajectory, fit_command):
    """The live experiment (excite's module docstring, step 3); returns the exit status."""
    duration = LEAD + trajectory.duration + SETTLE
    ros_args = ['excite', '--ros-args', '-p', f'output:={args.output}',
                '-p', f'duration:={duration}', '-p', 'min_samples:=100',
                '-p', f'joint_states_reliability:={args.reliability}']
    if args.urdf:
        ros_args += ['-p', f'urdf:={args.urdf}']
    rclpy.init(args=ros_args, signal_handler_options=SignalHandlerOptions.NO)
    try:
        with spinning('excite') as probe:
            arm = Excitation(probe, args.controller, model.joint_names, args.timeout)
            mode = arm.parameter('mode')
            if mode != 'computed_torque':
                raise Refused(f'{arm.controller} is in mode {mode!r}, not computed_torque: the '
                              f'arm would not follow the excitation. Switch it: ros2 param set '
                              f'/{arm.controller} mode computed_torque')
            spin_until(lambda: arm.publisher.get_subscription_count() > 0 and
                       arm.newest() is not None, args.timeout,
                       f'no joint states, or {arm.controller} does not subscribe to its '
                       'trajectory')
            motions = excite_checked(arm, model, trajectory, args)
    finally:
        rclpy.try_shutdown()
    from robot_dynamics.tools import excitation_check
    print(excitation_check.report(motions), flush=True)
    refusal = excitation_check.refusal(motions)
    if refusal:
        raise Refused(refusal)
    return fit_or_print(args, fit_command)


def excite_checked(arm, model, trajectory, args):
    """Approach, excite and record; again compensated if a joint lags; the JointMotions."""
    from robot_dynamics.tools import excitation_check, fitting, recording
    for attempt in range(2):
        move_to_start(arm, model, trajectory.positions[0], args)
        status, start = record(arm, trajectory, args)
        if status:
            raise Refused(f'the recording failed (status {status})')
        motions = assess(args.output, model, trajectory, start)
        if attempt or not excitation_check.lagging(motions):
            return motions
        print(excitation_check.report(motions) + '\nsome joints lag: fitting their friction '
              'and armature from this pass, then exciting again with them compensated',
              flush=True)
        try:
            samples = fitting.prepare(recording.load(args.output), model, 10.0)
            terms = excitation_check.compensation(model, samples, motions)
        except (fitting.FitError, ValueError) as error:
            raise Refused(f'cannot compensate the lagging joints: {error}') from None
        compensate(arm, model, terms)


def fit_or_print(args, fit_command):
    command = fit_command(args, args.output)
    if not args.fit:
        print('next: fit_dynamics ' + ' '.join(command))
        return 0
    from robot_dynamics.tools import fit_dynamics
    print('fit_dynamics ' + ' '.join(command), flush=True)
    return fit_dynamics.main(command)
