"""Compile every kernel the nodes call into numba's cache, ahead of their start.

    python -m robot_dynamics.compile [--jobs N] [--quiet]

A node compiles at its start only what its configuration calls (a cold start of the controller
in one mode); this compiles what every node calls in every mode, its components switched on, so
that later starts, and a switch of mode at run time, load the kernels from the cache in a
fraction of a second. ``make demo``, ``make test`` and ``scripts/check_colcon.sh`` run it first;
the controller runs it in the background after a cold start (``ArmNode.refuse_uncompiled``).
The kernels' types do not depend on the arm, so one arm (the shipped Panda) serves them all.

The nodes are built in this process as they run (a private ROS domain on loopback, no topic
traffic), each with the warm-up of every mode (``warm_up_steps(config, every_mode=True)``), in
``--jobs`` worker processes (default: the number of cores, at most the number of nodes); the
cache's kernel locks (core/_jit.py) make a kernel that two workers need compile once. A progress
bar (a line every 5 s where stderr is not a terminal) shows the steps done. When all succeed,
the cache is marked complete for these sources (``_jit.mark_complete``). Exit status 0, or 1
with the failing node's error.
"""
import argparse
import importlib.util
import multiprocessing
import os
import sys
import time

#: (node, its parameters beside robot_description): every node, every engine
NODES = (('dynamics_controller', {'mode': 'computed_torque', 'pfl.enable': True}),
         ('wrench_estimator', {}),
         ('arm_simulator', {'engine': 'internal'}),
         ('arm_simulator', {'engine': 'mujoco'}))
PERIOD = 5.0   # s between progress lines where stderr is not a terminal


def node_class(name):
    if name == 'dynamics_controller':
        from robot_dynamics.nodes.dynamics_controller import DynamicsController
        return DynamicsController
    if name == 'wrench_estimator':
        from robot_dynamics.nodes.wrench_estimator import WrenchEstimator
        return WrenchEstimator
    from robot_dynamics.nodes.arm_simulator import ArmSimulator
    return ArmSimulator


def compiling(cls, queue):
    """``cls`` warming up every mode, each step reported on ``queue`` ('steps', n), ('done', s)."""
    class Compiling(cls):
        COMPILE_REST = False   # this is the compile

        def warm_up_steps(self, config, every_mode=False):
            return super().warm_up_steps(config, every_mode=True)

        def warm_up(self, steps):
            queue.put(('steps', len(steps)))
            for name, step in steps:
                step()
                self.warmed.add(name)
                queue.put(('done', f'{self.get_name()}: {name}'))
    return Compiling


def worker(jobs, queue):
    """Build the nodes of ``jobs`` (NODES entries) on a private loopback domain, then exit."""
    try:
        from robot_dynamics import run
        domain, lock = run.allocate_domain_id()
        os.environ.update(run.loopback_environment(domain, os.environ.get('ROS_LOG_DIR', '/tmp')))
        import rclpy
        from rclpy.parameter import Parameter
        import robot_dynamics as rd
        urdf = open(rd.robot_urdf('panda'), encoding='utf-8').read()
        rclpy.init(args=['--ros-args', '--log-level', 'warn'])
        try:
            for k, (name, values) in enumerate(jobs):
                values = {'robot_description': urdf, 'base': 'panda_link0',
                          'tip': 'panda_hand_tcp', **values}
                node = compiling(node_class(name), queue)(
                    namespace=f'/robot_dynamics_compile_{os.getpid()}_{k}',
                    parameter_overrides=[Parameter(p, value=v) for p, v in values.items()])
                node.destroy_node()
        finally:
            rclpy.try_shutdown()
            lock.close()
        queue.put(('ok', None))
    except BaseException as error:   # reported by the parent, which exits 1
        queue.put(('failed', f'{type(error).__name__}: {error}'))
    queue.close()
    queue.join_thread()   # the report is in the pipe: nothing else of this process is needed
    os._exit(0)   # a spawned worker's interpreter teardown took tens of seconds of CPU


class Bar:
    """The steps done of those announced, on one line of a terminal, else a line every PERIOD."""

    def __init__(self, quiet):
        self.quiet, self.tty = quiet, sys.stderr.isatty()
        self.total = self.done = 0
        self.began = self.printed = time.monotonic()
        self.last = ''

    def show(self, force=False):
        now = time.monotonic()
        if self.quiet or not (self.tty or force or now - self.printed >= PERIOD):
            return
        self.printed = now
        width = 30
        filled = int(width * self.done / self.total) if self.total else 0
        line = (f'compiling numba kernels [{"#" * filled}{"." * (width - filled)}] '
                f'{self.done}/{self.total} steps, {now - self.began:.0f} s  {self.last}')
        if self.tty:
            sys.stderr.write('\r' + line[:110].ljust(110))
        else:
            sys.stderr.write(line + '\n')
        sys.stderr.flush()


def compile_all(jobs=None, quiet=False):
    """Compile every node's kernels in ``jobs`` processes; 0, or 1 with the error printed."""
    from robot_dynamics.core import _jit
    nodes = [(name, values) for name, values in NODES   # MuJoCo is optional
             if values.get('engine') != 'mujoco' or importlib.util.find_spec('mujoco')]
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(nodes)))
    context = multiprocessing.get_context('spawn')
    queue = context.Queue()
    shares = [nodes[k::jobs] for k in range(jobs)]
    workers = [context.Process(target=worker, args=(share, queue), daemon=True)
               for share in shares]
    for process in workers:
        process.start()
    bar, finished, failures = Bar(quiet), 0, []
    while finished < len(workers):
        try:
            kind, value = queue.get(timeout=0.5)
        except Exception:   # queue.Empty: a worker that died without a word is found below
            if any(p.exitcode not in (None, 0) for p in workers) and queue.empty():
                failures.append('a compile worker died: '
                                + str([p.exitcode for p in workers]))
                break
            bar.show()
            continue
        if kind == 'steps':
            bar.total += value
        elif kind == 'done':
            bar.done, bar.last = bar.done + 1, value
        else:
            finished += 1
            if kind == 'failed':
                failures.append(value)
        bar.show()
    for process in workers:
        process.join(30.0)
    bar.show(force=True)
    if not quiet:
        sys.stderr.write('\n' if bar.tty else '')
    if failures:
        print('robot_dynamics.compile failed: ' + '; '.join(failures), file=sys.stderr)
        return 1
    _jit.mark_complete()
    if not quiet:
        print(f'compiled: every kernel of the nodes is in the cache '
              f'({time.monotonic() - bar.began:.0f} s)', file=sys.stderr)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m robot_dynamics.compile',
                                     description=__doc__.split('\n\n')[0])
    parser.add_argument('--jobs', type=int, default=None,
                        help='worker processes (default: the cores, at most one per node)')
    parser.add_argument('--quiet', action='store_true', help='no progress, errors only')
    args = parser.parse_args(argv)
    from robot_dynamics.core import _jit
    if not _jit.ENABLED:
        print('NUMBA_DISABLE_JIT is set: nothing to compile', file=sys.stderr)
        return 0
    return compile_all(args.jobs, args.quiet)


if __name__ == '__main__':
    raise SystemExit(main())
