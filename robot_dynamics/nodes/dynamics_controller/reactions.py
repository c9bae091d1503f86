"""What overrides the controller's law: a latched collision or a loop gone unstable.

A collision: the momentum observer (contact_safety.ResidualObserver) and its detector
(contact_safety.CollisionMonitor), on when ``collision.*`` detection is; its reaction (none,
stop, comply) holds until ``~/reset``. An unstable loop (loop_health): the controller complies
(gravity compensation plus the joint damping its measured delay allows) until ``~/reset``.
"""
import robot_dynamics as rd
from robot_dynamics.core.collision import Comply, Reaction

from ..common import contact_safety
from ..common.diagnostics import ERROR, WARN
from .loop_health import LoopHealth, comply_damping, natural_frequency


class Reactions:
    """The collision and loop-health reactions of one controller, built with a Context."""

    def __init__(self, context):
        self.collision = contact_safety.CollisionMonitor(context)
        self.loop = LoopHealth()
        self.safety = self.observer = None
        self.settle = None   # the law while the loop is latched unstable

    def configure(self, safety, model, state_timeout):
        """The observer and detector of ``safety`` (contact_safety.Safety); observer None: off."""
        self.safety = safety
        self.collision.configure(safety.detection, model, safety.reaction)
        timeout = min(state_timeout, safety.max_gap)
        if safety.detection is None:
            self.observer = None
        elif self.observer is None:
            self.observer = contact_safety.ResidualObserver(model, safety.observer_gain, timeout)
        else:
            self.observer.configure(model, safety.observer_gain, timeout)

    def detect(self, t, q, v, torque):
        """One observer and detector sample (``torque``: measured, model order); a new event."""
        return self.collision.update(t, self.observer.update(t, q, v, torque), q)

    def reaction(self):
        """The reaction in force: COMPLY while the loop is unstable, else the collision's."""
        if self.loop.unstable is not None:
            return Reaction.COMPLY
        if self.collision.event is None:
            return Reaction.NONE
        return self.safety.reaction

    def comply(self):
        """The complying law (None: plain gravity compensation)."""
        return self.settle if self.loop.unstable is not None else self.safety.comply

    def reset(self):
        """Clear both latches; what was latched (None: nothing)."""
        unstable = self.loop.unstable
        self.loop.reset()
        return self.collision.reset() or unstable

    def check_loop(self, config, task_law, diagnostics, model, q):
        """loop_health's check of this /diagnostics report, and the message of a new latch."""
        was = self.loop.unstable
        counts = diagnostics.counts
        result = self.loop.check(
            natural_frequency(config.mode, config.computed_torque, task_law),
            diagnostics.last_rate, self.loop.ages(diagnostics.latency, 1),
            counts['commands'], counts['clamped_commands'] + counts['rate_limited_commands'])
        if self.loop.unstable is None or was is not None:
            return result, None
        delay = self.loop.delay or 0.0
        self.settle = Comply(model, comply_damping(rd.mass_matrix(model, q), delay))
        return result, (f'{self.loop.unstable}: complying (gravity compensation plus joint '
                        f'damping for a {1e3 * delay:.1f} ms delay) until ~/reset')

    def health(self, level, message, config, task_law, diagnostics, model, q, log):
        """The node's /diagnostics (level, message) as the loop check and a collision raise it.

        With their values; ``log`` says a newly latched instability.
        """
        (loop_level, loop_message, values), latched = self.check_loop(config, task_law,
                                                                      diagnostics, model, q)
        if latched is not None:
            log(latched)
        if loop_level > level:
            level, message = loop_level, loop_message
        if self.collision.event is not None:
            reaction = self.safety.reaction
            level = WARN if reaction is Reaction.NONE else ERROR
            message = f'{self.collision.event} (reaction: {reaction.value})'
        return level, message, {**values, **self.collision.health()}
