"""``called_when_due``: a timer whose callback runs once per due time, whatever the executor.

rclpy's events executor (Kilted) dispatches a due timer once more for every clock jump it
handles before the first dispatch has run. On /clock (use_sim_time) every message is a jump:
after a stall of the node's thread, a due 1 Hz timer is called tens of times in a burst, each
call moving its next call a period on, and then stays silent for as many periods (a status
that should come every second of the arm's clock comes after tens of seconds).

rcl moves a timer's next call before its callback runs, to at most a period from now when
the call was due. So a call that finds the next call further away is an extra one: it re-arms
the timer a period from now and does nothing.

The same executor may also dispatch a call it queued before the timer was destroyed (a node
that replaces a timer, as the PFL markers' pacing does): that call finds the handle gone and
does nothing, instead of raising out of the executor and ending the node.
"""
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy


def called_when_due(create_timer, period, callback, *args, **kwargs):
    """``create_timer(period, …)`` (rclpy's) with ``callback`` run only for calls made when due."""
    timer = None

    def when_due():
        try:
            wait = timer.time_until_next_call()
        except _rclpy.InvalidHandle:   # destroyed after this call was queued
            return
        if wait is not None and wait > timer.timer_period_ns:
            timer.reset()
            return
        callback()

    timer = create_timer(period, when_due, *args, **kwargs)
    return timer
