"""Run a setup of robot_dynamics.bringup as processes, as ``ros2 launch`` does, on loopback DDS.

    python -m robot_dynamics.run simulated_arm --robot panda [--mode computed_torque]
        [--engine mujoco] [--urdf FILE] [--config FILE] [--set NODE:PARAM:=VALUE ...] [--duration S]
        [--domain-id N]

Each node runs as ``python -m robot_dynamics.nodes.<executable> --ros-args -r __node:=<name>
[-r __ns:=/<namespace>] --params-file config/<robot>.yaml --params-file <generated: the
bring-up's parameters>``.
DDS stays on 127.0.0.1 (FASTDDS_DEFAULT_PROFILES_FILE = config/fastdds_loopback.xml,
RMW_IMPLEMENTATION = rmw_fastrtps_cpp) in a ROS_DOMAIN_ID of its own: the given one, else a free
one from 1..101 held by a lock file in the temp directory while the run lasts, so parallel runs
never share a domain. The domain is printed: ``ROS_DOMAIN_ID=<id>`` plus the same two variables
let other tools join.

The run ends when any node ends, as the launch files do: the others are stopped (after
bringup.STOP_GRACE if it died), and the status is 1 with a message naming the node and its exit
status, unless it exited 0. SIGTERM to the runner stops the nodes as ctrl-c does. Every stop ends
with a line saying how each node ended and how long the stop took.
"""
import argparse
import fcntl
import os
import pathlib
import random
import signal
import subprocess
import sys
import tempfile
import time

import yaml

from robot_dynamics import bringup
from robot_dynamics.nodes.common.exit_guard import LAUNCHER   # set for every node it starts

DOMAIN_IDS = range(1, 102)  # 0 is everyone's default; above 101 the port numbers run out


def allocate_domain_id():
    """(domain id, open lock file): a domain no other run of this function holds."""
    ids = list(DOMAIN_IDS)
    random.shuffle(ids)
    for domain in ids:
        lock = open(pathlib.Path(tempfile.gettempdir()) / f'robot_dynamics_domain_{domain}.lock',
                    'w')
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return domain, lock
        except OSError:
            lock.close()
    raise RuntimeError(f'every ROS_DOMAIN_ID in {DOMAIN_IDS} is taken by another run')


def loopback_environment(domain_id, log_dir, base=None):
    """The environment of every process of a run: loopback DDS, its domain, logs in log_dir."""
    env = dict(os.environ if base is None else base)
    env.update(ROS_DOMAIN_ID=str(domain_id), RMW_IMPLEMENTATION='rmw_fastrtps_cpp',
               FASTDDS_DEFAULT_PROFILES_FILE=bringup.config_file('fastdds_loopback.xml'),
               ROS_LOG_DIR=str(log_dir), PYTHONUNBUFFERED='1', RCUTILS_COLORIZED_OUTPUT='0',
               RCUTILS_LOGGING_BUFFERED_STREAM='0')
    return env


def node_command(spec, work_dir):
    """Command line of one node.

    The bring-up's parameters go in a generated file under the node's name, after the robot's
    file, as launch_ros does with a dict: for one node name, the later file wins (``-p`` would
    not: rcl files it under "/**", below the node sections).
    """
    argv = [sys.executable, '-m', f'robot_dynamics.nodes.{spec.executable}', '--ros-args',
            '-r', f'__node:={spec.name}']
    if spec.namespace:
        argv += ['-r', f'__ns:=/{spec.namespace}']
    argv += ['--params-file', spec.params_file]
    if spec.parameters:
        path = pathlib.Path(work_dir) / f'{spec.label}.params.yaml'
        path.write_text(yaml.safe_dump({f'/**/{spec.name}': {'ros__parameters': spec.parameters}}))
        argv += ['--params-file', str(path)]
    return argv


def ignores_sigint():
    """Whether this process ignores SIGINT, which its children would inherit through exec.

    A shell's background job (``cmd &`` in a script) starts so. A node that ignores SIGINT until
    it sets its own handler loses a stop sent while it is still importing: it runs on until
    ``stop`` kills it.
    """
    return signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def default_sigint():
    """In a node's process before exec: SIGINT's default action, a stop."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Processes:
    """The processes of one run; stop() interrupts them all (SIGINT, then SIGKILL)."""

    def __init__(self, specs, env, work_dir, output=None):
        """output: None to inherit stdout/stderr, or a directory for <name>.log files."""
        self.procs, self.logs, self.read = {}, {}, {}
        for spec in specs:
            out = None
            if output is not None:
                self.logs[spec.label] = pathlib.Path(output) / f'{spec.label}.log'
                out = open(self.logs[spec.label], 'w')
            self.procs[spec.label] = subprocess.Popen(
                node_command(spec, work_dir), env={**env, LAUNCHER: str(os.getpid())},
                stdout=out, stderr=subprocess.STDOUT if out else None,
                preexec_fn=default_sigint if ignores_sigint() else None)

    def new_lines(self):
        """The complete lines the nodes logged since the last call ("<node>: <line>")."""
        lines = []
        for label, path in self.logs.items():
            with open(path, 'rb') as log:
                log.seek(self.read.get(label, 0))
                text = log.read()
            end = text.rfind(b'\n') + 1
            self.read[label] = self.read.get(label, 0) + end
            lines += [f'{label}: {line}' for line in
                      text[:end].decode(errors='replace').splitlines()]
        return lines

    def exited(self):
        """{name: return code} of the processes that have ended."""
        return {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}

    def stop(self, timeout=20.0):   # a graceful stop: 1 s of ramp, 1 s of acks, 5 s of teardown
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        deadline = time.monotonic() + timeout
        for p in self.procs.values():
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGUSR1)  # the node prints its stacks (faulthandler)
                time.sleep(0.2)
                p.kill()
                p.wait()
        return {n: p.returncode for n, p in self.procs.items()}


def parse_overrides(items):
    """['node:param:=value', ...] -> {node: {param: value}} (values parsed as YAML, like -p)."""
    overrides = {}
    for item in items:
        target, sep, value = item.partition(':=')
        node, colon, param = target.partition(':')
        if not (sep and colon and node and param):
            raise SystemExit(f'--set expects NODE:PARAM:=VALUE, got {item!r}')
        overrides.setdefault(node, {})[param] = yaml.safe_load(value)
    return overrides


def parse(argv=None):
    """(the parsed command line, the NodeSpecs it asks for)."""
    parser = argparse.ArgumentParser(prog='python -m robot_dynamics.run',
                                     description=__doc__.split('\n\n')[0])
    parser.add_argument('setup', choices=list(bringup.SETUPS))
    for name, (default, text) in bringup.ARGUMENTS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", default=default, help=text)
    parser.add_argument('--set', action='append', default=[], metavar='NODE:PARAM:=VALUE',
                        help='a parameter for one node, after the parameter files')
    parser.add_argument('--duration', type=float, help='stop after this many seconds')
    parser.add_argument('--domain-id', type=int, help='ROS_DOMAIN_ID (default: a free one)')
    args = parser.parse_args(argv)
    return args, bringup.nodes(args.setup, overrides=parse_overrides(args.set),
                               **{name: getattr(args, name) for name in bringup.ARGUMENTS})


def interrupt(signum, frame):
    """SIGTERM to the runner: stop the nodes as on ctrl-c (SIGINT to each), then exit."""
    raise KeyboardInterrupt


def main(argv=None):
    """Run until --duration, ctrl-c or SIGTERM, or until any node ends.

    A node that ends stops the others (SIGINT: each ends on its safe final command; after
    STOP_GRACE if it died, so that the simulated drive's watchdog acts first), and the run exits
    1 with a message naming it and how it ended, unless it exited 0 (it was stopped).
    """
    args, specs = parse(argv)
    domain, lock = (args.domain_id, None) if args.domain_id is not None else allocate_domain_id()
    signal.signal(signal.SIGTERM, interrupt)
    with tempfile.TemporaryDirectory(prefix='robot_dynamics_run_') as work:
        env = loopback_environment(domain, work)
        print(f'ROS_DOMAIN_ID={domain} RMW_IMPLEMENTATION=rmw_fastrtps_cpp '
              f"FASTDDS_DEFAULT_PROFILES_FILE={env['FASTDDS_DEFAULT_PROFILES_FILE']}", flush=True)
        procs = Processes(specs, env, work)
        end = time.monotonic() + args.duration if args.duration else float('inf')
        interrupted = False
        try:
            while time.monotonic() < end and not procs.exited():
                time.sleep(0.1)
        except KeyboardInterrupt:
            interrupted = True
        # ctrl-c reaches the nodes too: one that ended before this process woke was stopped by
        # the user, not ended by itself (seen under load); a node that exited 0 was stopped
        ended = {} if interrupted else procs.exited()
        died = {n: c for n, c in ended.items() if c}
        for name, code in ended.items():
            print(f'{name} {bringup.exit_status(code)}: stopping the bring-up'
                  + (f' in {bringup.STOP_GRACE:g} s' if died else ''), file=sys.stderr,
                  flush=True)
        if died:
            try:
                time.sleep(bringup.STOP_GRACE)
            except KeyboardInterrupt:
                pass
        stopping = time.monotonic()
        codes = procs.stop()
    if lock:
        lock.close()
    stopped = ', '.join(f'{n} {bringup.exit_status(c)}' for n, c in codes.items()
                        if n not in died)
    print(f'stopped in {time.monotonic() - stopping:.1f} s: {stopped or "nothing else ran"}',
          file=sys.stderr, flush=True)
    return 1 if died else 0


if __name__ == '__main__':
    raise SystemExit(main())
