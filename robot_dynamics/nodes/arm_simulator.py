"""arm_simulator: a simulated arm driven by effort commands, paced by the wall clock.

Integration: semi-implicit (symplectic) Euler at a fixed step dt = 1/``rate``,
v⁺ = v + dt q̈(q, v, τ), q⁺ = q + dt v⁺, with q̈ from robot_dynamics.forward_dynamics:
one dynamics call per step (RK4 would take four) and no energy drift for a conservative arm.
τ = clamp(command, URDF limits) − ``joint_damping`` v + Jᵀ F_ext.

Timing: step k is published with stamp t₀ + k dt, simulated time anchored at the system clock
at start (no /clock, no use_sim_time: the stamps are the arm's clock, as a robot driver's are).
Between steps the node processes its callbacks until the next wall-clock deadline, so a command
answering state k within one period acts on the step k -> k+1, as on a 1 kHz real-time arm.
A controller may lag one step; one lagging more is waited for, up to ``command_wait`` (2 ms),
while commands flow: on a loaded machine the simulated time then slows down rather than the
arm running on stale commands. Behind the wall clock, steps run back to back (still taking
callbacks once per step); a step finished more than a period late counts as an overrun; more
than 0.5 s behind, the deadlines are re-anchored (a slip: the stamps stay continuous and fall
behind the system clock).
/diagnostics (1 Hz) and the log (``log_period``) give the real-time factor, overruns, slips and
the loop latency: state published -> next effort command received.

Brakes (``brakes``, default on): the arm holds ``initial_position`` until the first command.
Reported effort: the joint torque a link-side torque sensor would measure, i.e. the clamped
command minus the damping torque; while braked, the torque the brakes hold, g(q) − Jᵀ F_ext.
``~/external_wrench`` (geometry_msgs/WrenchStamped) acts at the tip, frame_id = the base link
(force and moment about the tip origin in base axes) or the tip link (tip axes); it stays until
replaced (send zeros to remove it).
"""
import dataclasses
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

import robot_dynamics as rd
from robot_dynamics.core.control import clamp_effort

from .common import (COMMAND_QOS, MODEL_PARAMS, ArmNode, ConfigError, Param, Percentiles,
                     main as run_node, to_array)

SLIP = 0.5  # s behind the wall clock before the deadlines are re-anchored


@dataclasses.dataclass(frozen=True)
class Config:
    damping: np.ndarray     # model order, N m s/rad
    initial: np.ndarray     # model order


class ArmSimulator(ArmNode):
    """Integrates the arm at ``rate`` Hz and publishes joint_states every step."""

    NAME = 'arm_simulator'
    PARAMS = MODEL_PARAMS + (
        Param('rate', 1000.0, 'double', 'integration and publishing rate, Hz', read_only=True,
              range=(1.0, 10000.0)),
        Param('joint_damping', [], 'double[]', 'viscous joint damping, N m s/rad (empty: none)',
              per_joint=True),
        Param('initial_position', [], 'double[]', 'initial joint positions (empty: zero, clamped '
              'into the joint limits)', read_only=True, per_joint=True),
        Param('brakes', True, 'bool', 'hold the initial pose until the first effort command',
              read_only=True),
        Param('command_wait', 0.002, 'double', 'a step is due but the controller lags more than '
              'one step: wait up to this long for its command, s (0: strict wall-clock pacing)',
              range=(0.0, 0.1)),
        Param('log_period', 5.0, 'double', 'period of the real-time factor log line, s',
              range=(0.1, 3600.0)),
    )

    def __init__(self):
        self.config = self.q = None
        self.external = None   # (wrench (6,), Jacobian reference) or None
        super().__init__(self.NAME)
        self.dt = 1.0 / self.values['rate']
        self.braked = self.values['brakes']
        self.publisher = self.create_publisher(JointState, 'joint_states', COMMAND_QOS)
        self.create_subscription(Float64MultiArray, 'effort_controller/commands',
                                 self.on_command, COMMAND_QOS)
        self.create_subscription(WrenchStamped, '~/external_wrench', self.on_wrench, 10)
        self.diagnostics = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self.loop_latency = Percentiles(('loop_latency',), size=2000)
        self.published_at = self.previous_published_at = self.commanded_at = time.monotonic()
        self.load_model()

    def configure(self, values, arm):
        n = arm.model.nv
        damping = arm.per_joint(values, 'joint_damping') if len(values['joint_damping']) \
            else np.zeros(n)
        if (damping < 0).any():
            raise ConfigError(f"joint_damping must be >= 0, got {values['joint_damping']}")
        if len(values['initial_position']):
            initial = arm.per_joint(values, 'initial_position')
        else:
            initial = np.clip(np.zeros(n), arm.model.lower, arm.model.upper)
        return Config(damping, initial)

    def apply(self, config):
        self.config = config
        if self.q is None:
            m = self.arm.model
            self.q, self.v = config.initial.copy(), np.zeros(m.nv)
            self.tau = np.zeros(m.nv)       # clamped command, model order
            self.effort = np.zeros(m.nv)    # reported joint torque, model order
            self.data = rd.Data(m)
            self.state = JointState(name=list(self.arm.joints))

    # -- inputs --------------------------------------------------------------------------------
    def on_command(self, msg):
        if self.config is None:
            return
        tau = np.array(msg.data, dtype=float)
        if tau.shape != (self.arm.model.nv,) or not np.isfinite(tau).all():
            self.get_logger().warning(f'command ignored: needs {self.arm.model.nv} finite '
                                      f'values, got {tau.tolist()}', throttle_duration_sec=1.0)
            return
        self.commanded_at = time.monotonic()
        self.loop_latency.add(self.commanded_at - self.published_at)
        self.tau, clamped = clamp_effort(self.arm.to_model(tau), self.arm.model.effort_limit)
        if clamped.any():
            self.get_logger().warning(f'command saturated at the effort limits: {tau.tolist()}',
                                      throttle_duration_sec=1.0)
        if self.braked:
            self.braked = False
            self.get_logger().info('first effort command: brakes released')

    def on_wrench(self, msg):
        if self.config is None:
            return
        m, w = self.arm.model, msg.wrench
        references = {m.base: rd.LOCAL_WORLD_ALIGNED, m.tip: rd.LOCAL}
        wrench = np.array([w.torque.x, w.torque.y, w.torque.z, w.force.x, w.force.y, w.force.z])
        if msg.header.frame_id not in references or m.tip is None or \
                not np.isfinite(wrench).all():
            self.get_logger().warning(f'external_wrench ignored: needs frame_id {m.base} or '
                                      f'{m.tip} and finite values', throttle_duration_sec=1.0)
            return
        self.external = (wrench, references[msg.header.frame_id]) if wrench.any() else None
        self.get_logger().info(f'external wrench {wrench.tolist()} in {msg.header.frame_id}')

    # -- simulation ----------------------------------------------------------------------------
    def external_torque(self):
        """Jᵀ F_ext for the wrench at the tip (zero without one)."""
        if self.external is None:
            return 0.0
        wrench, reference = self.external
        m = self.arm.model
        return rd.frame_jacobian(m, self.q, m.tip, reference, data=self.data).T @ wrench

    def step(self):
        m, tau_ext = self.arm.model, self.external_torque()
        if self.braked:
            self.effort = rd.gravity(m, self.q, data=self.data) - tau_ext
            return
        self.effort = self.tau - self.config.damping * self.v
        try:
            qdd = rd.forward_dynamics(m, self.q, self.v, self.effort + tau_ext, data=self.data)
        except ValueError as error:  # a diverged state: stop rather than publish garbage
            self.braked, self.v = True, np.zeros(m.nv)
            self.get_logger().error(f'simulation diverged ({error}): brakes engaged')
            return
        self.v = self.v + self.dt * qdd
        self.q = self.q + self.dt * self.v

    def publish(self, stamp):
        self.previous_published_at, self.published_at = self.published_at, time.monotonic()
        s = self.state
        s.header.stamp.sec, s.header.stamp.nanosec = divmod(int(round(stamp * 1e9)), 10**9)
        s.position = to_array(self.arm.to_joints(self.q))
        s.velocity = to_array(self.arm.to_joints(self.v))
        s.effort = to_array(self.arm.to_joints(self.effort))
        self.publisher.publish(s)

    def spin(self, executor, stopped):
        """Fixed-step loop paced by the wall clock (callbacks run in wait_for_step)."""
        while self.config is None:
            if stopped():
                return
            executor.spin_once(timeout_sec=0.1)
        pace = Pace(self.dt)
        self.publish(pace.stamp())
        next_report = time.monotonic() + 1.0
        next_log = time.monotonic() + self.values['log_period']
        while not stopped():
            self.wait_for_step(executor, pace)
            self.step()
            pace.tick()
            self.publish(pace.stamp())
            if time.monotonic() >= next_report:
                next_report += 1.0
                report = {**pace.report(), **self.loop_latency.stats()}
                self.publish_diagnostics(report)
                if time.monotonic() >= next_log:
                    next_log += self.values['log_period']
                    self.get_logger().info(', '.join(f'{k} {v}' for k, v in report.items()))

    def wait_for_step(self, executor, pace):
        """Take callbacks until the next step is due.

        A step is due when its deadline has passed and a command has come since the state
        before the newest one (the controller may lag one step, not more), or ``command_wait``
        has passed, or no commands flow (braked, or none for 0.1 s). At least one round of
        callbacks per step.
        """
        executor.spin_once(timeout_sec=max(pace.remaining(), 0.0))
        while (remaining := pace.remaining()) > 0:
            executor.spin_once(timeout_sec=remaining)
        give_up = time.monotonic() + self.values['command_wait']
        while (self.commanded_at < self.previous_published_at and not self.braked
               and time.monotonic() - self.commanded_at < 0.1
               and (left := give_up - time.monotonic()) > 0):
            executor.spin_once(timeout_sec=left)

    def publish_diagnostics(self, report):
        status = DiagnosticStatus(
            level=DiagnosticStatus.OK, name=f'{self.get_name()}: simulation',
            message='braked' if self.braked else 'running', hardware_id=self.values['tip'],
            values=[KeyValue(key=k, value=str(v)) for k, v in report.items()])
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.state.header.stamp
        self.diagnostics.publish(array)


class Pace:
    """Deadlines w₀ + k dt on the monotonic clock, stamps t₀ + k dt, and their statistics.

    The stamps are simulated time, anchored at the system clock at start. Behind the wall clock
    the steps run back to back; more than SLIP behind, the deadlines (not the stamps) are
    re-anchored, counted as a slip.
    """

    def __init__(self, dt):
        self.dt, self.k = dt, 0
        self.wall0, self.stamp0 = time.monotonic(), time.time()
        self.overruns = self.slips = 0
        self.worst = 0.0
        self.window = (self.wall0, 0)    # (wall time, step) at the last report

    def remaining(self):
        """Wall time until the deadline of the next step, s (negative: late)."""
        return self.wall0 + (self.k + 1) * self.dt - time.monotonic()

    def tick(self):
        """Step k -> k+1 done: count it as an overrun if it finished a period late."""
        lateness = -self.remaining()
        self.worst = max(self.worst, lateness)
        if lateness > self.dt:
            self.overruns += 1
        if lateness > SLIP:
            self.slips += 1
            self.wall0 += lateness
        self.k += 1

    def stamp(self):
        return self.stamp0 + self.k * self.dt

    def report(self):
        """Real-time factor since the last report, counters, worst lateness (then reset)."""
        now = time.monotonic()
        factor = (self.k - self.window[1]) * self.dt / (now - self.window[0])
        self.window = (now, self.k)
        report = {'real_time_factor': round(factor, 3), 'overruns': self.overruns,
                  'slips': self.slips, 'worst_lateness_ms': round(self.worst * 1e3, 2),
                  'simulated_time_s': round(self.k * self.dt, 3)}
        self.worst = 0.0
        return report


def main(args=None):
    return run_node(ArmSimulator, args)


if __name__ == '__main__':
    raise SystemExit(main())
