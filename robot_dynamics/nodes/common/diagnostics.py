"""/diagnostics (diagnostic_msgs/DiagnosticArray) for the controller and the estimator.

A node counts what happened (``count``), times its work (``time``) and, once a second, publishes
one DiagnosticStatus with the message rate, latency percentiles, its counters and the values
of its model-health checks (``report``). Values are strings, as the message wants.

The period and the rate are on the node's clock (its timer, ``ArmNode.monotonic_time``: /clock under
use_sim_time); the latencies ``time`` records are what the node measured (wall time).
"""
import collections

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

OK, WARN, ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR
STILL = 1e-3   # rad/s: below this on every joint the arm is still (static residual check)


class Percentiles:
    """The last ``size`` samples of a few named quantities; median, p99 and maximum of each."""

    def __init__(self, names, size=10000):
        self.names, self.samples, self.count = names, np.full((len(names), size), np.nan), 0
        self.size, self._columns = size, self.samples.T   # a sample: one row of the transpose

    def add(self, *values):
        self._columns[self.count % self.size] = values
        self.count += 1

    def since(self, since):
        """The samples after the first ``since``, (quantities, k), oldest first.

        Exact while at most ``size`` samples came since; else the last ``size``.
        """
        new = max(min(self.count - since, self.size), 0)
        return self.samples[:, (self.count - new + np.arange(new)) % self.size]

    def maxima(self, since):
        """The largest value of each quantity among the samples after the first ``since``."""
        new = self.since(since)
        return new.max(axis=1) if new.shape[1] else np.full(len(self.names), -np.inf)

    def stats(self, scale=1e6, unit='us'):
        """{name_median_<unit>: ..., name_p99_<unit>: ...} (empty before the first sample)."""
        x = self.samples[:, :min(self.count, self.samples.shape[1])]
        if x.shape[1] == 0:
            return {}
        median, p99 = np.percentile(x, [50, 99], axis=1) * scale
        return {f'{n}_{k}_{unit}': round(float(v), 1) for n, m, p in zip(self.names, median, p99)
                for k, v in (('median', m), ('p99', p))}


class Diagnostics:
    """Counters, message rate and latency percentiles of one node, published on /diagnostics.

    ``time`` only writes the samples; each report folds the maxima since the last one in.
    """

    def __init__(self, node, title, counters, latencies=('compute',), period=1.0):
        self.node, self.title = node, title
        self.publisher = node.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self.counts = collections.Counter({c: 0 for c in counters})
        self.latency = Percentiles(latencies)
        self.max_latency, self._maxed = np.zeros(len(latencies)), 0   # folded in at each report
        self._received, self._since = 0, node.monotonic_time()
        self.last_rate = 0.0   # the rate of the report being made (the node's health reads it)
        self._stamp = None     # the last report's
        node.create_timer(period, self.publish)

    def count(self, what, n=1):
        self.counts[what] += n

    def received(self):
        self._received += 1

    def time(self, *seconds):
        self.latency.add(*seconds)

    def rate(self):
        """Messages per second (of the node's time) since the previous call.

        0 when the window began before the node had a time (use_sim_time, no /clock yet).
        """
        now = self.node.monotonic_time()
        rate = self._received / max(now - self._since, 1e-9) if self._since else 0.0
        self._received, self._since = 0, now
        return rate

    def publish(self):
        """Publish one report stamped with the node's time, none if it has not moved since the last.

        Under use_sim_time, rclpy may run the timer twice at one /clock (seen at the first).
        """
        stamp = self.node.get_clock().now().to_msg()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        self.last_rate = self.rate()
        level, message, values = self.node.health()
        self.max_latency = np.maximum(self.max_latency, self.latency.maxima(self._maxed))
        self._maxed = self.latency.count
        values = {'rate_hz': round(self.last_rate, 1), **self.latency.stats(),
                  **{f'{n}_max_us': round(1e6 * float(m), 1)
                     for n, m in zip(self.latency.names, self.max_latency)},
                  **self.counts, **values, **self.node.realtime_health()}
        status = DiagnosticStatus(level=level, name=f'{self.node.get_name()}: {self.title}',
                                  message=message, hardware_id=self.node.values['tip'],
                                  values=[KeyValue(key=k, value=str(v)) for k, v in values.items()])
        array = DiagnosticArray(status=[status])
        array.header.stamp = stamp
        self.publisher.publish(array)


def inertia_health(mass_matrix):
    """(ok, smallest eigenvalue of M(q)): M must be symmetric positive definite and finite."""
    if not np.isfinite(mass_matrix).all():
        return False, float('nan')
    smallest = float(np.linalg.eigvalsh(0.5 * (mass_matrix + mass_matrix.T))[0])
    return smallest > 0.0, smallest


class StaticResidual:
    """τ_measured − g(q) while the arm is still (|q̇| < STILL): the model's error at rest.

    Zero for an exact model with nothing touching the arm; an unmodelled payload or a cable
    shows up here. Keeps the newest residual and the largest |component| seen.
    """

    def __init__(self):
        self.last, self.worst = None, 0.0

    def update(self, v, effort, gravity):
        if np.abs(v).max() >= STILL:
            return
        self.last = effort - gravity
        self.worst = max(self.worst, float(np.abs(self.last).max()))

    def values(self, to_joints):
        if self.last is None:
            return {'static_residual': 'arm not still yet'}
        return {'static_residual_nm': np.round(to_joints(self.last), 4).tolist(),
                'static_residual_max_nm': round(self.worst, 4)}
