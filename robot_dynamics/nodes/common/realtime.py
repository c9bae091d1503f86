"""The 1 kHz process as a real-time process: scheduling, CPU affinity, locked memory, collections.

The settings are ros2_control_node's (read-only parameters, applied once, when the node is first
ready, after numba's warm-up, so that compiling never runs at real-time priority):

- ``thread_priority``: SCHED_FIFO at this priority for the thread that runs the state loop (the
  executor's, the main thread), as ros2_control_node's ``thread_priority``; 0 (the default here)
  leaves the default scheduler. Not 50 as ros2_control_node: a Python loop at SCHED_FIFO on a
  stock kernel shares its core with its own DDS threads, which it would then starve.
- ``cpu_affinity``: the CPUs every thread of the process may run on (empty: all).
- ``lock_memory``: ``mlockall(MCL_CURRENT | MCL_FUTURE)``, no page faults in the loop.

Where a setting is not permitted (no ``rtprio`` or ``memlock`` limit, a container without
CAP_SYS_NICE / CAP_IPC_LOCK), a WARN says what to configure and the node runs on
(doc/guides/real_time.md).

Collections (``Collections``): once ready, everything the node allocated so far is moved to the
permanent generation (``gc.freeze()``) and automatic full (generation 2) collections are kept out
of the loop; young generations still run (they see only what the loop allocates, microseconds). A
full collection runs where it costs nothing: at deactivation and on an idle timer when the node
has no joint state to serve (``collect_when_idle``).
"""
import ctypes
import errno
import gc
import os

from .schema import section

#: the real-time parameters (every 1 kHz node's schema has them, the same)
NAMES = ('thread_priority', 'cpu_affinity', 'lock_memory')
REALTIME_PARAMS = section('dynamics_controller', *NAMES)
MCL_CURRENT, MCL_FUTURE = 1, 2   # sys/mman.h (Linux)
YOUNG_THRESHOLDS = (2000, 10)     # generations 0 and 1: Python's defaults (3.12: 2000, 10)
NO_FULL = 1_000_000_000           # generation 2 threshold: never reached in a run
PRIORITY_HINT = ("allow it: '@realtime - rtprio 98' in /etc/security/limits.conf and the user in "
                 'group realtime (log in again), or in a container the CAP_SYS_NICE capability '
                 '(docker run --cap-add=SYS_NICE --ulimit rtprio=98)')
MEMORY_HINT = ("allow it: '@realtime - memlock unlimited' in /etc/security/limits.conf, or in a "
               'container CAP_IPC_LOCK (docker run --cap-add=IPC_LOCK --ulimit memlock=-1)')


def threads():
    """The thread ids of this process (Linux: /proc/self/task), else this thread's (0)."""
    try:
        return [int(t) for t in os.listdir('/proc/self/task')]
    except OSError:
        return [0]


def set_priority(priority):
    """SCHED_FIFO at ``priority`` for the calling thread: None, or the refusal in words."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, AttributeError) as error:
        return f'thread_priority {priority}: SCHED_FIFO refused ({error}); {PRIORITY_HINT}'
    return None


def set_affinity(cpus):
    """Every thread of the process on ``cpus``: None, or the refusal in words."""
    try:
        for thread in threads():
            try:
                os.sched_setaffinity(thread, cpus)
            except ProcessLookupError:   # a thread that ended meanwhile
                pass
    except (OSError, AttributeError) as error:
        return (f'cpu_affinity {sorted(cpus)}: refused ({error}); this machine has CPUs '
                f'{sorted(os.sched_getaffinity(0))}')
    return None


def lock_memory():
    """Lock the process's memory (mlockall), now and from now on: None, or the refusal."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mlockall(MCL_CURRENT | MCL_FUTURE) != 0:
        code = ctypes.get_errno()
        return (f'lock_memory: mlockall refused ({errno.errorcode.get(code, code)}: '
                f'{os.strerror(code)}); {MEMORY_HINT}')
    return None


def apply(values, log):
    """Apply the real-time parameters of ``values``; log each as done (INFO) or refused (WARN).

    ``log``: the node's logger. Returns {setting: 'applied' | 'refused' | 'off'} (/diagnostics).
    """
    done = {}
    steps = (('cpu_affinity', bool(values['cpu_affinity']),
              lambda: set_affinity(set(values['cpu_affinity']))),
             ('lock_memory', values['lock_memory'], lock_memory),
             ('thread_priority', values['thread_priority'] > 0,
              lambda: set_priority(values['thread_priority'])))
    for name, wanted, step in steps:
        if not wanted:
            done[name] = 'off'
            continue
        refusal = step()
        done[name] = 'refused' if refusal else 'applied'
        if refusal:
            log.warning(f'{refusal}: running on without it')
        else:
            log.info(f'real time: {name} {values[name]} applied')
    return done


class Collections:
    """Automatic full collections kept out of the loop (module docstring)."""

    def __init__(self):
        self.frozen = False
        self.frozen_objects = 0

    def freeze(self):
        """After configure: all allocated so far frozen; no automatic full collection from now.

        The count of frozen objects is taken here, once: ``gc.get_freeze_count`` walks the
        whole permanent generation (milliseconds for a node's million objects).
        """
        gc.collect()
        gc.freeze()
        gc.set_threshold(*YOUNG_THRESHOLDS, NO_FULL)
        self.frozen = True
        self.frozen_objects = gc.get_freeze_count()

    def collect(self):
        """A full collection now (where it costs nothing: inactive, or idle)."""
        if self.frozen:
            gc.collect()

    def health(self):
        """/diagnostics values: the frozen objects and the collections of each generation."""
        counts = [s['collections'] for s in gc.get_stats()]
        return {'gc_frozen': str(self.frozen_objects),
                'gc_collections': ' '.join(map(str, counts))}
