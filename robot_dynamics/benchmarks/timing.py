"""Interleaved timing: ours and Pinocchio's calls alternate, so machine drift cancels in ratios.

Single-threaded code is timed in CPU time of the calling thread (``time.thread_time``): time
the OS gives to other processes on a busy machine does not count, which keeps medians stable;
multi-threaded code needs wall time (``time.perf_counter``).
"""
import gc
import time
import timeit

import numpy as np

CPU, WALL = time.thread_time, time.perf_counter


def per_call(statement, namespace, number, clock=CPU):
    """Seconds per execution of ``statement`` (a string evaluated in ``namespace``)."""
    return timeit.Timer(statement, timer=clock, globals=namespace).timeit(number) / number


def calibrate(statement, namespace, target, clock=CPU):
    """A repetition count that makes one timing take about ``target`` seconds.

    A first call, which may compile or load the kernel, is not counted.
    """
    per_call(statement, namespace, 1, clock)
    number = 1
    while per_call(statement, namespace, number, clock) * number < target and number < 10 ** 6:
        number *= 2
    return number


def interleaved(statements, namespace, rounds=41, target=0.002, clocks=None):
    """{name: per-call seconds of each round} for {name: statement}, alternating every round.

    Each round times every statement once, in an order that reverses from round to round; the
    garbage collector is off while timing (as in timeit). ``clocks``: {name: clock} where not CPU.
    """
    clocks = {name: (clocks or {}).get(name, CPU) for name in statements}
    numbers = {name: calibrate(s, namespace, target, clocks[name])
               for name, s in statements.items()}
    times = {name: [] for name in statements}
    names = list(statements)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(rounds):
            for name in (names if r % 2 == 0 else names[::-1]):
                times[name].append(per_call(statements[name], namespace, numbers[name],
                                            clocks[name]))
    finally:
        if gc_was_enabled:
            gc.enable()
    return {name: np.array(t) for name, t in times.items()}


def ratio(ours, theirs):
    """Median over rounds of our time / their time, round by round (drift cancels)."""
    return float(np.median(np.asarray(ours) / np.asarray(theirs)))


def fit_exponent(n, t):
    """k of t ~ c n^k, least squares in log-log."""
    return float(np.polyfit(np.log(n), np.log(t), 1)[0])
