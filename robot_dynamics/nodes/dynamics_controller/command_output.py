"""The controller's command on its way out: rate limit, clamp, publication and heartbeat.

A command is τ less the gravity the robot adds itself (the hardware profile's ``command``), rate
limited and clamped to the effort limits in one compiled pass (core.limits.limit_command), in
``joints`` order; never NaN. The rate limit lets each joint's command change by at most
max_effort_rate Δt from the last one published, Δt the node's time since then, or the
difference of the stamps of the states the two answer where that is longer (by at most
RATE_SLACK: states that come bunched after a stall still take their own time). It goes out
serialized after a state that came serialized (the fast path), else as a message, and
~/command_stamp then carries the stamp of the state it answers.
"""
import math

import numpy as np
from std_msgs.msg import Float64MultiArray

from robot_dynamics.core.control import clamp_effort
from robot_dynamics.core.limits import CLAMPED, NON_FINITE, RATE_LIMITED, limit_command

from ..common.cdr import Float64MultiArrayWriter, serialized_time
from ..common.joint_states import to_array

RATE_SLACK = 0.002   # s: a command's Δt for the rate limit exceeds the node's time by at most


class CommandOutput:
    """effort_controller/commands and ~/command_stamp, and the last command published.

    ``warn`` logs a warning throttled per text; ``on_published(now)`` is called after each
    command (the watchdog's ``commanded``).
    """

    def __init__(self, publisher, heartbeat, diagnostics, logger, warn, clock, on_published):
        self.publisher, self.heartbeat = publisher, heartbeat
        self.diagnostics, self.logger, self.warn, self.clock = diagnostics, logger, warn, clock
        self.on_published = on_published
        self.command = Float64MultiArray()
        self.config = self.joint_names = self.order = None
        self.writer = self.tau_last = self.clamped = None   # joints order, model order, flags
        self.published_at = self.stamp_published = None     # node time, stamp answered (ns)
        self.serialized = False                              # a raw state came last

    def apply(self, config, model, order):
        """The limits and profile of ``config``; the buffers once (the joints are read-only)."""
        self.config, self.joint_names, self.order = config, model.joint_names, order
        if self.writer is None:
            n = model.nv
            self.writer, self.tau_last, self.clamped = (Float64MultiArrayWriter(n), np.zeros(n),
                                                        np.zeros(n, bool))

    def publish(self, tau, q, now, stamp=None):
        """Publish the command for τ at q (for the state stamped ``stamp``, ns); returns whether."""
        tau = self.config.profile.command(q, tau)
        status = limit_command(tau, self.tau_last, self.effort_step(now, stamp),
                               self.config.effort_limits, self.order, self.writer.data,
                               self.clamped)
        if status == NON_FINITE:
            self.diagnostics.count('non_finite_commands')
            self.logger.error(f'non-finite effort {tau}: not published', throttle_duration_sec=1.0)
            return False
        self.published(status, now, stamp)
        return True

    def ramp_to(self, tau, q, now):
        """One rate-limited step toward the command for τ at q; True once it is there."""
        self.publish(tau, q, now)
        command = self.config.profile.command(q, tau)
        return np.array_equal(self.tau_last, clamp_effort(command, self.config.effort_limits)[0])

    def unlimit(self):
        """The next command goes out unlimited by max_effort_rate (a stop's final command)."""
        self.published_at = None

    def effort_step(self, now, stamp):
        """The rate limit's largest step of a command published at ``now`` from the last one."""
        if self.published_at is None:
            return math.inf
        dt = now - self.published_at
        if stamp is not None and self.stamp_published is not None:
            dt = min(max(1e-9 * (stamp - self.stamp_published), dt), dt + RATE_SLACK)
        return self.config.max_effort_rate * max(dt, 0.0)

    def published(self, status, now, stamp):
        """Publish the limited command in ``writer`` (``limit_command``'s status) and count it."""
        if status & RATE_LIMITED:
            self.diagnostics.count('rate_limited_commands')
        if status & CLAMPED:
            self.diagnostics.count('clamped_commands')
            names = [n for n, c in zip(self.joint_names, self.clamped) if c]
            self.warn(f'effort clamped at {names}')
        if self.serialized:
            self.publisher.publish(self.writer.serialized())
        else:
            self.command.data = to_array(self.writer.data)
            self.publisher.publish(self.command)
        self.diagnostics.count('commands')
        self.published_at, self.stamp_published = now, stamp
        self.on_published(now)

    def beat(self, sec, nanosec):
        """~/command_stamp: the stamp of the state the command just published answers.

        An unstamped state's command carries the node's clock instead.
        """
        if not (sec or nanosec):
            sec, nanosec = self.clock.now().seconds_nanoseconds()
        self.heartbeat.publish(serialized_time(sec, nanosec))
