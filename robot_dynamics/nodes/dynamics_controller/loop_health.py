"""The control loop's health: states too late for the mode, and a loop going unstable.

Checked once per /diagnostics report (no cost per state), over the states and commands since
the previous report:

- **late states**: the mode tolerates a delay of about 0.65 / ω_n less 1.5 state periods (a
  critically damped mode of natural frequency ω_n with a delay T loses stability at
  ω_n T ≈ 0.65; doc/guides/timing_faults.md). More than half the states older than half that:
  WARN; older than all of it: ERROR. Gravity compensation has no feedback: no limit.
- **instability**: more than a quarter of the commands saturated (clamped at the effort limits
  or cut by the rate limit; a loop with too much delay rings in a limit cycle the rate limit
  bounds, or at the clamps) is WARN; so in UNSTABLE_REPORTS reports running, the loop is
  unstable (ERROR, latched until ``~/reset``) and the controller's reaction is to comply
  (gravity compensation plus joint damping) instead of driving on in saturated oscillation,
  with a damping the delay allows: M v̇ = −D v(t − T) is stable while every eigenvalue of
  M⁻¹ D is below π / (2 T); D = c diag(M(q)) with c setting the largest at 1 / (2 T)
  (``comply_damping``), T the measured delay.
"""
import numpy as np
import scipy.linalg

from ..common.diagnostics import ERROR, OK, WARN

CRITICAL = 0.65        # ω_n T at which a critically damped loop with a delay T is lost
UNSTABLE_REPORTS = 2   # reports in a row with many commands saturated: unstable
MANY = 0.25            # "many": more than this share of the commands


def natural_frequency(mode, computed_torque, task_law):
    """ω_n of the mode's fastest feedback, rad/s (None: no feedback, no delay limit)."""
    if mode == 'gravity_compensation':
        return None
    if mode == 'computed_torque':
        return float(np.sqrt(np.max(computed_torque.kp)))
    if task_law is None:
        return None
    limit = task_law.max_frequency
    if getattr(task_law, 'inertia_shaping', False):
        return min(float(np.sqrt(task_law.stiffness.max())), limit)
    return limit if np.isfinite(limit) else None


class LoopHealth:
    """Late states and clamped commands of one controller, per report (module docstring)."""

    def __init__(self):
        self.unstable = None      # the reason, while latched
        self._saturated_reports = 0
        self._counts = (0, 0)     # (commands, saturated commands) at the last report
        self._ages_seen = 0       # age samples (Percentiles.count) at the last report
        self.delay = None         # s: the last report's median state age plus 1.5 periods

    def reset(self):
        self.unstable, self._saturated_reports = None, 0

    def check(self, frequency, rate, ages, commands, saturated):
        """(level, message, values) for this report.

        ``frequency``: natural_frequency; ``rate``: states per second; ``ages``: the state ages
        of the report (s); ``commands``, ``saturated``: the counters so far (commands clamped
        plus commands rate limited).
        """
        level, message, values = OK, '', {}
        tolerated = None
        if frequency and rate > 0:
            tolerated = CRITICAL / frequency - 1.5 / rate
            values['tolerated_delay_ms'] = round(1e3 * tolerated, 1)
        if len(ages) and rate > 0:
            self.delay = max(float(np.median(ages)), 0.0) + 1.5 / rate
        if tolerated is not None and len(ages):
            median = float(np.median(ages))
            if median > tolerated:
                level = ERROR
            elif median > tolerated / 2:
                level = WARN
            if level != OK:
                message = (f'joint states {1e3 * median:.1f} ms late (median): the mode '
                           f'tolerates about {1e3 * tolerated:.1f} ms with its gains')
        new, hit = commands - self._counts[0], saturated - self._counts[1]
        self._counts = (commands, saturated)
        if new and hit > MANY * new:
            self._saturated_reports += 1
            share = min(100 * hit / new, 100)
            if level == OK:
                level, message = WARN, (f'effort clamped or rate limited on {share:.0f} % of '
                                        f'the commands')
        else:
            self._saturated_reports = 0
        if self.unstable is None and self._saturated_reports >= UNSTABLE_REPORTS:
            self.unstable = (f'loop unstable: effort clamped or rate limited on over '
                             f'{100 * MANY:.0f} % of the commands for {self._saturated_reports} '
                             f'reports running')
        if self.unstable is not None:
            level, message = ERROR, f'{self.unstable}: complying until ~/reset'
        return level, message, values

    def ages(self, percentiles, column):
        """The samples of one quantity of ``percentiles`` added since the last call."""
        new = percentiles.since(self._ages_seen)[column]
        self._ages_seen = percentiles.count
        return new


def comply_damping(mass_matrix, delay):
    """D = c diag(M), the largest eigenvalue of M⁻¹ D at 1 / (2 T) (module docstring)."""
    diagonal = np.diag(mass_matrix)
    largest = scipy.linalg.eigh(np.diag(diagonal), mass_matrix, eigvals_only=True).max()
    return diagonal / (2.0 * max(delay, 1e-3) * largest)
