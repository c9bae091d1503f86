"""The nodes' /diagnostics bookkeeping (robot_dynamics.nodes.common.diagnostics), without ROS.

Expected values: numpy's max and percentile of the samples the test adds.
"""
import numpy as np

from robot_dynamics.nodes.common.diagnostics import Percentiles


def test_percentiles_and_maxima_since_a_report():
    x = np.random.default_rng(0).random((250, 2))
    samples = Percentiles(('a', 'b'), size=100)
    assert samples.stats() == {}
    for since, until in ((0, 30), (30, 130), (130, 250)):   # 30, 100 = size, 120 > size new
        for row in x[since:until]:
            samples.add(*row)
        window = x[max(since, until - 100):until]            # beyond size: the last size only
        np.testing.assert_array_equal(samples.maxima(since), window.max(axis=0))
    assert (samples.maxima(samples.count) == -np.inf).all()   # nothing new
    median, p99 = np.percentile(x[-100:], [50, 99], axis=0) * 1e6
    assert samples.stats() == {'a_median_us': round(median[0], 1), 'a_p99_us': round(p99[0], 1),
                               'b_median_us': round(median[1], 1), 'b_p99_us': round(p99[1], 1)}
