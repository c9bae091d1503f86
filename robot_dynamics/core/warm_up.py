"""Warm-up: named steps that compile (or load from the cache) the kernels a caller will use.

A step is ``(name, function)``: calling it runs the kernels once, so that numba compiles them (or
loads them from its cache, _jit.py) now rather than at the first call that matters. ``run``
calls the steps in order and, while they run, reports progress every ``period`` seconds: the
step, its number of how many, the kernel numba is compiling, and the seconds so far; a start
that takes a minute on a fresh install is then one a person can follow.
"""
import threading
import time

from numba.core import event

PERIOD = 5.0   # s between progress reports


class _Compiling(event.Listener):
    """The name of the kernel numba compiles now (the outermost one), or None."""

    def __init__(self):
        self.names, self.count = [], 0

    def on_start(self, ev):
        self.names.append(ev.data['dispatcher'].py_func.__name__)

    def on_end(self, ev):
        self.names.pop()
        self.count += 1

    @property
    def current(self):
        return self.names[0] if self.names else None


def run(steps, report, period=PERIOD):
    """Call each step of ``steps`` in order; ``report(text)`` every ``period`` s until done.

    Returns (seconds taken, number of kernels compiled, not loaded from the cache).
    """
    compiling, done, began = _Compiling(), threading.Event(), time.monotonic()
    position = [0, None]   # the step running: its index, its name

    def reporter():
        while not done.wait(period):
            k, name = position
            kernel = compiling.current
            report(f'warming up: {name} ({k + 1} of {len(steps)})'
                   + (f', compiling {kernel}' if kernel else '')
                   + f', {time.monotonic() - began:.0f} s so far')

    thread = threading.Thread(target=reporter, daemon=True, name='warm-up progress')
    with event.install_listener('numba:compile', compiling):
        thread.start()
        try:
            for k, (name, step) in enumerate(steps):
                position[:] = k, name
                step()
        finally:
            done.set()
            thread.join()
    return time.monotonic() - began, compiling.count
