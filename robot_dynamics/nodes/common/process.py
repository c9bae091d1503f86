"""Running one node as a process: its executor, its signals, its bounded teardown (``main``)."""
import faulthandler
import signal
import sys
import traceback

import rclpy
from rclpy.exceptions import ParameterException
from rclpy.executors import SingleThreadedExecutor
from rclpy.signals import SignalHandlerOptions

from .exit_guard import exit_guard, exit_now, stop_with_launcher
from .parameters import ConfigError


def executor():
    """rclpy's C++ events executor where available (Kilted), else the SingleThreadedExecutor.

    The events executor takes less CPU per message than the other (make bench-nodes measures
    it); Jazzy has only the SingleThreadedExecutor.
    """
    try:
        from rclpy.experimental import EventsExecutor
        return EventsExecutor()
    except ImportError:
        return SingleThreadedExecutor()


def main(node_class, args=None):
    """Run one node until SIGINT/SIGTERM; a configuration error at start exits with status 1.

    Either signal stops the spin; the node then does its last act (``finish``, where it has
    one: the controller's safe final command) with rclpy's context still valid (rclpy's own signal
    handlers are off, which Jazzy's rclpy 7 and Kilted's 9 both allow), and exits. A signal
    while the node is still being built (numba may be compiling) stops it at once: it has
    published nothing yet. The exit status is what ``node.spin(executor, stopped)`` returns
    (None: 0); 0 after a signal. The process ends as soon as the node is torn down
    (``exit_now``), without the interpreter's finalization.
    """
    rclpy.init(args=sys.argv if args is None else args,
               signal_handler_options=SignalHandlerOptions.NO)
    stop, running = [], []

    def on_signal(signum, frame):
        stop.append(signum)
        if not running:
            raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 <pid>: print where every thread is
    try:
        stop_with_launcher()
        node = node_class()
        running.append(True)
    except (ConfigError, ParameterException) as error:
        rclpy.logging.get_logger(node_class.NAME).fatal(str(error))
        return end_early(1)
    except KeyboardInterrupt:
        rclpy.logging.get_logger(node_class.NAME).info('stopped while starting')
        return end_early(0)
    spinner = executor()
    spinner.add_node(node)
    status = 1   # an exception out of spin
    try:
        status = node.spin(spinner, lambda: bool(stop)) or 0
    except Exception:
        traceback.print_exc()   # here: the process will not reach the interpreter's exit
    finally:
        try:
            getattr(node, 'finish', lambda: None)()   # nodes that are not ArmNodes have none
        finally:
            tear_down(node, spinner, status)
    exit_now(status)


def tear_down(node, spinner, status):
    """Destroy the executor, the node and rclpy's context, bounded in time.

    The node has done its last act by now. rclpy's teardown has been seen to hang in
    ``destroy_node`` (once in some hundred stops of the simulator under the events executor),
    inside rcl with the GIL held, so no Python thread can act on it. After TEARDOWN_TIMEOUT,
    faulthandler's watchdog (a C thread) writes where every thread is to stderr, and a C
    library timer (``exit_later``) ends the process with the status it would have had: a
    process that outlives its stop looks dead-locked to its launcher.
    """
    cancel = exit_guard(status)
    spinner.shutdown()
    node.destroy_node()
    rclpy.try_shutdown()
    cancel()


def end_early(status):
    """End a process whose node was never built whole: ``status``, within TEARDOWN_TIMEOUT.

    rclpy's shutdown destroys the partly built node's handles, where its teardown can hang as
    in ``tear_down`` (seen once: a refused recorder still running after 90 s): the guard stays
    armed until the process ends (``exit_now``).
    """
    exit_guard(status)
    rclpy.try_shutdown()
    exit_now(status)
