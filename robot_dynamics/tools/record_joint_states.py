"""record_joint_states: log joint positions, velocities and efforts to a file for identification.

    record_joint_states --ros-args -p output:=excitation.npz [-p duration:=60.0]
        [-p joints:="[j1, j2]"] [-p robot_description:="$(cat arm.urdf)"] [-p urdf:=arm.urdf]
    python -m robot_dynamics.tools.record_joint_states --ros-args -p output:=excitation.csv

Subscribes to ``joint_states`` (sensor_msgs/JointState, mapped by name; QoS reliability
``joint_states_reliability``, best effort by default, which matches every publisher) and writes
``output`` (.npz or .csv, layout in ``robot_dynamics.tools.recording``) on SIGINT or SIGTERM, or
once the stamps span ``duration`` seconds. Messages delivered before the signal are recorded.
``joints`` picks and orders the columns (default: the names of the first message). Efforts
that are motor currents (``measured_effort: current``) are recorded as joint torques, times
``torque_constants`` (given in ``joints`` order), so the file always holds torques. Rejected,
counted, with a throttled warning: non-finite values, no efforts, a stamp not after the previous
one, and a joint set different from the first recorded message's. Messages carrying none of the
joints (another publisher's) are ignored. With no ``robot_description`` parameter the latest
``robot_description`` topic message (robot_state_publisher's) goes into the file. On exit it
logs the sample count and rate; exit status 1 if fewer than ``min_samples`` were recorded (no
file is written) or the file cannot be written.
"""
import collections
import pathlib
import time

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from robot_dynamics.nodes.common.joint_states import DESCRIPTION_QOS, BadInput, JointStateReader, \
    state_qos
from robot_dynamics.nodes.common.node import Throttled
from robot_dynamics.nodes.common.process import main as run_node
from robot_dynamics.nodes.common.parameters import ConfigError, check as check_parameters, \
    declare_parameters
from robot_dynamics.nodes.common.schema import load
from robot_dynamics.tools import recording

QUEUE_DEPTH = 1000   # a burst of joint states waits here while a callback runs
DRAIN_TIME = 0.5     # s spent at most, after a signal, on messages already delivered
PARAMS = load('record_joint_states')   # its schema: record_joint_states.parameters.yaml


def torque_constants(p):
    """The torque constants (``joints`` order) that turn recorded currents into torques, or None.

    Identification needs joint torques: motor currents (the UR driver's default efforts) are
    converted when recorded, so the file always holds torques.
    """
    if p['measured_effort'] != 'current':
        return None
    k = np.asarray(p['torque_constants'], dtype=float)
    if not p['joints'] or k.shape != (len(p['joints']),) or not (k > 0).all():
        raise ConfigError('measured_effort current needs joints and one torque constant > 0 per '
                          f"joint (N m/A), got joints {p['joints']} and {k.tolist()}")
    return k


class JointStateRecorder(Node):
    """Collects joint states in memory; ``write()`` saves them."""

    NAME = 'record_joint_states'

    def __init__(self):
        super().__init__(self.NAME)
        p = declare_parameters(self, PARAMS)
        check_parameters(PARAMS, p)
        self.output, self.duration = p['output'], p['duration']
        self.min_samples, self.urdf = p['min_samples'], p['urdf']
        self.description = p['robot_description']
        try:
            recording.check_path(self.output)   # exit before recording anything
        except ValueError as error:
            raise ConfigError(str(error)) from None
        if not pathlib.Path(self.output).resolve().parent.is_dir():
            raise ConfigError(f'output {self.output}: no such directory')
        if not (self.duration >= 0.0 and np.isfinite(self.duration)):
            raise ConfigError(f'duration must be >= 0, got {self.duration}')
        self.joints = p['joints'] or None
        self.torque_constants = torque_constants(p)
        self.reader = self.names = None
        self.stamps, self.rows = [], []
        self.rejected, self.ignored, self.callbacks = collections.Counter(), 0, 0
        self.done = False
        self.warn = Throttled(self.get_logger().warning)
        self.create_subscription(JointState, 'joint_states', self.on_joint_state,
                                 state_qos(p['joint_states_reliability'], QUEUE_DEPTH))
        if not self.description:
            self.create_subscription(String, 'robot_description', self.on_description,
                                     DESCRIPTION_QOS)
        self.get_logger().info(f'ready: recording joint_states to {self.output}')

    def on_description(self, msg):
        self.description = msg.data

    def on_joint_state(self, msg):
        self.callbacks += 1
        if self.done:
            return
        if self.reader is None:
            self.reader = JointStateReader(self.joints or list(msg.name))
        try:
            state = self.reader.read(msg)
            if state is None:
                self.ignored += 1
                return
            stamp = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
            self.check(msg, stamp, state[2])
        except BadInput as error:
            self.rejected[str(error)] += 1
            self.warn(f'rejected joint state: {error}')
            return
        if self.duration and self.stamps and stamp - self.stamps[0] > self.duration * 1e9:
            self.done = True
            return
        q, v, effort = state
        if self.torque_constants is not None:
            effort = self.torque_constants * effort
        self.stamps.append(stamp)
        self.rows.append((q, np.full(len(q), np.nan) if v is None else v, effort))

    def check(self, msg, stamp, effort):
        """BadInput for a message not to record (the reader checked names and values)."""
        names = frozenset(msg.name)
        if self.names is None:
            self.names = names
            self.get_logger().info(f'first joint state: recording {list(self.reader.joint_names)}')
        if names != self.names:
            raise BadInput(f'the joint set changed: {sorted(names ^ self.names)} added or '
                           f'removed')
        if effort is None:
            raise BadInput('no efforts')
        if self.stamps and stamp <= self.stamps[-1]:
            raise BadInput('stamp not after the previous one')

    def spin(self, spinner, stopped):
        """Record until stopped() or done, take the messages already delivered, write."""
        while not stopped() and not self.done:
            spinner.spin_once(timeout_sec=0.1)
        self.drain(spinner)
        return self.write()

    def drain(self, spinner):
        """Run the callbacks of messages already delivered (at most DRAIN_TIME seconds)."""
        end = time.monotonic() + DRAIN_TIME
        while time.monotonic() < end:
            before = self.callbacks
            spinner.spin_once(timeout_sec=0.05)
            if self.callbacks == before:
                return

    def write(self):
        """Save the file and log what was recorded; returns the exit status."""
        log, n = self.get_logger(), len(self.stamps)
        rejected = sum(self.rejected.values())
        if rejected:
            log.warning(f'rejected {rejected} messages: {dict(self.rejected)}')
        if self.ignored:
            log.info(f'ignored {self.ignored} messages without the recorded joints')
        if n < self.min_samples:
            log.error(f'{n} samples recorded, fewer than min_samples = {self.min_samples}: '
                      f'no file written')
            return 1
        q, v, tau = (np.array(x) for x in zip(*self.rows))
        data = recording.from_stamps(self.stamps, q, v, tau, self.reader.joint_names,
                                     robot_description=self.description, urdf=self.urdf)
        try:
            recording.save(data, self.output)
        except OSError as error:
            log.error(f'cannot write {self.output}: {error}')
            return 1
        span = data.t[-1]
        rate = f'{(n - 1) / span:.1f} Hz' if span > 0 else 'one stamp'
        log.info(f'wrote {self.output}: {n} samples of {len(data.joint_names)} joints over '
                 f'{span:.3f} s ({rate}){"" if data.v is not None else ", without velocities"}')
        return 0


def main(args=None):
    """Record until SIGINT/SIGTERM or ``duration``; exit status 0 when the file was written."""
    return run_node(JointStateRecorder, args)


if __name__ == '__main__':
    raise SystemExit(main())
