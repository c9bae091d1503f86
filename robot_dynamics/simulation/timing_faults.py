"""Timing faults between a simulated arm and its controller: what a busy host does to states.

``TimingFaults`` takes the state sensed at each step and says which states go out at that step,
in order, each with its own (sensing) stamp: the arm keeps moving on simulated time whatever
reaches the controller.

- **delay** d and **jitter** j: a state sensed at step k goes out at step
  k + round((d + u j) / dt), u uniform in [0, 1); never before a state sensed earlier (the
  transport keeps order), so a late state holds back the ones behind it;
- **drop** p: each state is lost with probability p;
- **bunch** n > 1: the states go out n at a time, every n-th step (a reader with a depth-1
  queue keeps the newest);
- **stall** s every **stall_period** P: from P, 2P, … on, nothing goes out for s; the states
  sensed meanwhile are lost except the newest, which goes out when the stall ends (a publisher
  descheduled for s, with a depth-1 queue).

Seeded (``seed``): the same faults in every run, so a closed loop in lock step with them is
reproducible.
"""
import collections
import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Faults:
    delay: float = 0.0          # s
    jitter: float = 0.0         # s, uniform extra delay
    drop: float = 0.0           # probability a state is lost
    bunch: int = 1              # states per release (1: each as it is due)
    stall: float = 0.0          # s without states
    stall_period: float = 1.0   # s between stall starts
    seed: int = 0

    def __post_init__(self):
        for name in ('delay', 'jitter', 'stall'):
            if not getattr(self, name) >= 0:
                raise ValueError(f'faults.{name} must be >= 0 s, got {getattr(self, name)}')
        if not 0 <= self.drop < 1:
            raise ValueError(f'faults.drop must be in [0, 1), got {self.drop}')
        if self.bunch < 1:
            raise ValueError(f'faults.bunch must be >= 1, got {self.bunch}')
        if self.stall and not self.stall_period > self.stall:
            raise ValueError(f'faults.stall_period ({self.stall_period} s) must exceed '
                             f'faults.stall ({self.stall} s)')

    @property
    def any(self):
        return bool(self.delay or self.jitter or self.drop or self.bunch > 1 or self.stall)


class TimingFaults:
    """The states of each step that reach the controller (module docstring)."""

    def __init__(self, faults, dt):
        self.faults, self.dt = faults, dt
        self.rng = np.random.default_rng(faults.seed)
        self.queue = collections.deque()   # (step due, state), due non-decreasing
        self.ready = []                    # due, not yet out (a bunch, a stall)

    def stalling(self, k):
        """Whether step k is inside a stall."""
        f = self.faults
        if not f.stall:
            return False
        t = k * self.dt
        return t >= f.stall_period and t % f.stall_period < f.stall

    def due(self, k, state):
        """The states (oldest first) that go out at step k, ``state`` sensed at it."""
        f = self.faults
        if not (f.drop and self.rng.random() < f.drop):
            late = round((f.delay + f.jitter * self.rng.random()) / self.dt)
            after = self.queue[-1][0] if self.queue else k
            self.queue.append((max(k + late, after), state))
        while self.queue and self.queue[0][0] <= k:
            self.ready.append(self.queue.popleft()[1])
        if self.stalling(k):
            del self.ready[:-1]   # a depth-1 queue keeps the newest
            return []
        if k % f.bunch:
            return []
        out, self.ready = self.ready, []
        return out
