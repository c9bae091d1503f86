"""The Linux exit machinery of a node process: no node outlives its launcher or its stop.

``stop_with_launcher`` (``prctl(PR_SET_PDEATHSIG)``) turns the launcher's death into a SIGINT;
``exit_guard`` bounds a teardown that hangs in C (faulthandler's watchdog, then ``_exit`` from a
C library timer, ``timer_create``); ``exit_now`` ends a torn-down process without the
interpreter's finalization. No rclpy here: ``robot_dynamics.run`` imports LAUNCHER.
"""
import ctypes
import faulthandler
import os
import signal
import sys

LAUNCHER = 'ROBOT_DYNAMICS_LAUNCHER_PID'   # set for every node by robot_dynamics.run
TEARDOWN_TIMEOUT = 5.0   # s
PR_SET_PDEATHSIG = 1   # linux/prctl.h


def stop_with_launcher():
    """SIGINT (a graceful stop) when the launching process dies, if it asked for it.

    ``robot_dynamics.run`` (and so the tests) and the launch files set
    ROBOT_DYNAMICS_LAUNCHER_PID to the launcher's pid: a launcher killed outright (SIGKILL, a
    test's timeout) or ended by SIGTERM (``ros2 launch`` then leaves its processes running) must
    not leave its nodes running. Only for the launcher's own children: a node started through a
    prefix (``gdb``, ``xterm -e``) follows the prefix's process as any program does.
    """
    launcher = int(os.environ.get(LAUNCHER) or 0)
    if not launcher or not sys.platform.startswith('linux'):
        return
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl(PR_SET_PDEATHSIG, int(signal.SIGINT))
    if os.getppid() == launcher:
        return
    prctl(PR_SET_PDEATHSIG, 0)
    if not alive(launcher):   # it died before the prctl
        os.kill(os.getpid(), signal.SIGINT)


def alive(pid):
    """Whether process ``pid`` exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def exit_now(status):
    """End the process with ``status`` at once: stdio flushed, then ``_exit``.

    For a process whose node is torn down (rclpy's context shut down, its logging with it). The
    interpreter's own exit would tear every module down and collect what remains: seconds per
    node on a loaded 2-core machine, past the 5 s launch gives a stop before SIGTERM. No
    ``atexit`` function of the node's needs to run; a thread still working (a background
    compile) ends with the process, as numba writes its cache entries whole or not at all.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    ctypes.CDLL(None).fflush(None)   # the C library's streams: rcutils may log to stdout
    os._exit(status)


def exit_guard(status):
    """After TEARDOWN_TIMEOUT: where every thread is, to stderr; then ``_exit(status)``.

    Both act without the GIL (faulthandler's C watchdog, ``exit_later``). Returns the cancel.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    faulthandler.dump_traceback_later(TEARDOWN_TIMEOUT, file=sys.stderr)
    cancel_exit = exit_later(TEARDOWN_TIMEOUT + 0.5, status)

    def cancel():
        faulthandler.cancel_dump_traceback_later()
        cancel_exit()
    return cancel


CLOCK_MONOTONIC, SIGEV_THREAD = 1, 2   # time.h, signal.h (Linux)


class SigEvent(ctypes.Structure):
    """``struct sigevent`` of Linux (64 bytes) for SIGEV_THREAD: the function and its argument."""

    _fields_ = [('value', ctypes.c_void_p), ('signo', ctypes.c_int), ('notify', ctypes.c_int),
                ('function', ctypes.c_void_p), ('attributes', ctypes.c_void_p),
                ('padding', ctypes.c_byte * 32)]


class TimeSpec(ctypes.Structure):
    _fields_ = [('seconds', ctypes.c_long), ('nanoseconds', ctypes.c_long)]


def exit_later(seconds, status):
    """``_exit(status)`` after ``seconds``, from a thread of the C library; returns its cancel.

    POSIX ``timer_create`` with SIGEV_THREAD calls ``_exit`` on a thread that never takes the
    GIL, so the exit happens even while the main thread blocks in C holding it. Where the C
    library has no ``timer_create`` (not Linux), nothing is armed.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if not sys.platform.startswith('linux') or not hasattr(libc, 'timer_create'):
        return lambda: None
    event = SigEvent(value=status, notify=SIGEV_THREAD,
                     function=ctypes.cast(libc._exit, ctypes.c_void_p).value)
    timer = ctypes.c_void_p()
    if libc.timer_create(CLOCK_MONOTONIC, ctypes.byref(event), ctypes.byref(timer)) != 0:
        return lambda: None
    whole = int(seconds)
    due = (TimeSpec * 2)(TimeSpec(0, 0), TimeSpec(whole, int((seconds - whole) * 1e9)))
    libc.timer_settime(timer, 0, due, None)
    return lambda: libc.timer_delete(timer)
