"""The controller's state-loss watchdog: what it does when joint states stop coming.

While commanding, a check is due state_timeout after the newest accepted state; each check
sets the next for the newest state's deadline, so a loss is found state_timeout after the last
state and the timer ticks at 1 / state_timeout instead of every STALE_TICK. A check that runs
more than LATE after it was due finds this process itself descheduled: it lets the states queued
meanwhile in first. Past the deadline it ramps, a rate-limited step every STALE_TICK, to the
final command (gravity compensation for the last pose), then stops commanding until states
return. On a graceful stop, ``ramp_down`` ramps there at once.
"""
import time

STALE_TICK = 0.02   # s: the check's period once states are overdue (the ramp)
LATE = 0.08         # s: a check this late: this process itself did not run


class StateWatchdog:
    """``commanding`` and the stale check's timer.

    ``ramp()`` takes one step toward the final command (True once there); ``stopped()`` says
    that commanding stopped (a log line, a counter). ``last_state`` is the node's time of the
    newest accepted state (``accepted``).
    """

    def __init__(self, create_timer, monotonic_time, ramp, stopped):
        self.monotonic_time, self.ramp, self.stopped = monotonic_time, ramp, stopped
        self.timeout = None
        self.commanding, self.last_state, self.due = False, None, None
        self.timer = create_timer(STALE_TICK, self.check)
        self.timer.cancel()   # runs while commanding (``commanded`` starts it)

    def configure(self, timeout):
        """A new state_timeout; while commanding, the next check soon."""
        self.timeout = timeout
        if self.commanding:
            self.schedule(self.monotonic_time(), STALE_TICK)

    def accepted(self, now):
        self.last_state = now

    def commanded(self, now):
        """A command went out: commanding, the first check state_timeout from now."""
        if not self.commanding:
            self.commanding = True
            self.schedule(now, self.timeout)

    def check(self):
        """Look for a state loss when state_timeout runs out; see the module docstring."""
        if not self.commanding:
            self.timer.cancel()
            return
        now = self.monotonic_time()
        left = self.last_state + self.timeout - now
        if left > 0.0 or now - self.due > LATE:
            self.schedule(now, left if left > 0.0 else STALE_TICK)
            return
        if not self.ramp():
            self.schedule(now, STALE_TICK)
            return
        self.stop()
        self.stopped()

    def ramp_down(self, longest, unlimit):
        """Ramp to the final command now, for at most ``longest`` s, then stop commanding.

        Wall time: the process must end even if /clock stopped (the ramp's Δt is the node's
        time, so under use_sim_time without /clock the final command comes after ``longest``,
        sent at once after ``unlimit()``).
        """
        deadline = time.monotonic() + longest
        while not self.ramp():
            if time.monotonic() > deadline:
                unlimit()
                self.ramp()
                break
            time.sleep(STALE_TICK)
        self.stop()

    def stop(self):
        self.commanding = False
        self.timer.cancel()

    def schedule(self, now, delay):
        """The next check in ``delay`` s: the timer restarted with that period."""
        self.due = now + delay
        self.timer.timer_period_ns = max(int(delay * 1e9), 1)
        self.timer.reset()
