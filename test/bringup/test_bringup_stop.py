"""The simulated-arm bring-up stops in seconds on a loaded machine (DDS, separate processes).

``python -m robot_dynamics.run simulated_arm --mode computed_torque`` runs until the arm is
released (its first effort command) and the estimator is active; then two CPU-bound processes
load both cores (``stress-ng --cpu 2``; two Python loops where stress-ng is not installed) and:

1. ctrl-c (SIGINT to the process group, as a terminal sends it), or SIGTERM to the runner
   alone: every node exits 0 within launch's 5 s before it escalates to SIGTERM, the controller
   on its final command, and no node outlives the runner;
2. SIGKILL to the controller: the simulated drive's watchdog stops the arm before the bring-up
   ends (bringup.STOP_GRACE), and the run's status is 1, naming the controller.

How fast each stop is on this machine, the test prints (``-s``); doc/guides/stopping.md says it.
"""
import contextlib
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from robot_dynamics import bringup

pytestmark = pytest.mark.dds   # starts node processes (robot_dynamics.run or a script)

LAUNCH_STOP = 5.0    # s: launch's sigterm_timeout, the time a stop has before SIGTERM
START_LIMIT = 180.0  # s: generous (a cold start compiles; make bench-start says how fast)
READY = ('[arm_simulator]: first effort command', '[wrench_estimator]: active')


@contextlib.contextmanager
def cpu_load():
    """Both cores busy: stress-ng --cpu 2, else two Python loops (the same load)."""
    if shutil.which('stress-ng'):
        command = ['stress-ng', '--cpu', '2', '--quiet']
    else:
        command = [sys.executable, '-c', 'import os; os.fork(); exec("while True: pass")']
    load = subprocess.Popen(command, start_new_session=True)
    print(f"load: {command[0]}")
    try:
        yield
    finally:
        os.killpg(load.pid, signal.SIGKILL)
        load.wait()


def children(pid):
    """{pid: command line} of the process's children."""
    found = {}
    for task in pathlib.Path(f'/proc/{pid}/task').iterdir():
        for child in (task / 'children').read_text().split():
            cmdline = pathlib.Path(f'/proc/{child}/cmdline').read_bytes()
            found[int(child)] = cmdline.replace(b'\0', b' ').decode()
    return found


def gone(pid):
    try:
        status = pathlib.Path(f'/proc/{pid}/status').read_text()
    except FileNotFoundError:
        return True
    return '\nState:\tZ' in status


class BringUp:
    """One run of the simulated-arm bring-up in its own session, its output in a file."""

    def __init__(self, directory):
        self.log = pathlib.Path(directory) / 'run.log'
        self.process = subprocess.Popen(
            [sys.executable, '-m', 'robot_dynamics.run', 'simulated_arm',
             '--mode', 'computed_torque'], cwd=directory, stdout=open(self.log, 'w'),
            stderr=subprocess.STDOUT, start_new_session=True)

    def output(self):
        return self.log.read_text()

    def wait_ready(self):
        deadline = time.monotonic() + START_LIMIT
        while not all(line in self.output() for line in READY):
            assert self.process.poll() is None, self.output()[-3000:]
            assert time.monotonic() < deadline, self.output()[-3000:]
            time.sleep(0.1)
        self.nodes = children(self.process.pid)
        assert len(self.nodes) == 3, self.nodes

    def node(self, executable):
        [pid] = [p for p, cmd in self.nodes.items() if f'nodes.{executable} ' in cmd]
        return pid

    def stop_under_load(self, stop):
        """Once ready, with both cores busy: ``stop()``; (exit status, seconds it took)."""
        try:
            self.wait_ready()
            with cpu_load():
                time.sleep(2.0)
                start = time.monotonic()
                stop()
                code = self.process.wait(60.0)
                return code, time.monotonic() - start
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)

    def stop_time(self):
        """The runner's 'stopped in X s: ...' line: (X, the rest)."""
        match = re.search(r'^stopped in ([0-9.]+) s: (.*)$', self.output(), re.M)
        assert match, self.output()[-3000:]
        return float(match.group(1)), match.group(2)


@pytest.mark.parametrize('how', ['ctrl-c', 'SIGTERM to the runner'])
def test_a_loaded_bringup_stops_cleanly_within_launchs_5_s(tmp_path, how):
    run = BringUp(tmp_path)
    if how == 'ctrl-c':
        code, took = run.stop_under_load(lambda: os.killpg(run.process.pid, signal.SIGINT))
    else:
        code, took = run.stop_under_load(lambda: run.process.send_signal(signal.SIGTERM))
    output = run.output()
    assert code == 0, output[-3000:]
    seconds, statuses = run.stop_time()
    assert statuses == ('arm_simulator exited with status 0, dynamics_controller exited with '
                        'status 0, wrench_estimator exited with status 0'), output[-3000:]
    assert seconds < LAUNCH_STOP, output[-3000:]
    assert 'stopping: published the final gravity compensation command' in output
    assert 'Traceback' not in output, output[-3000:]
    assert all(gone(pid) for pid in run.nodes)
    print(f'{how} under load: the nodes stopped in {seconds:.1f} s, the run in {took:.1f} s')


def test_a_killed_controller_leaves_the_simulated_drive_time_to_stop_the_arm(tmp_path):
    run = BringUp(tmp_path)
    code, took = run.stop_under_load(
        lambda: os.kill(run.node('dynamics_controller'), signal.SIGKILL))
    output = run.output()
    assert code == 1, output[-3000:]
    grace = f'in {bringup.STOP_GRACE:g} s'
    assert f'dynamics_controller was killed by SIGKILL: stopping the bring-up {grace}' in output
    watchdog = output.find('[arm_simulator]: no effort command on /effort_controller/commands')
    assert 0 <= watchdog < output.find('stopped in '), output[-3000:]
    _, statuses = run.stop_time()
    assert statuses == ('arm_simulator exited with status 0, wrench_estimator exited with '
                        'status 0'), output[-3000:]
    assert all(gone(pid) for pid in run.nodes)
    print(f'a killed controller under load: the run ended {took:.1f} s after the kill')


class RacedProcesses:
    """run.Processes as a loaded machine shows it: some nodes ended before the runner looked."""

    def __init__(self, ended, final):
        self.ended, self.final = ended, final

    def __call__(self, specs, env, work_dir, output=None):
        return self

    def exited(self):
        return self.ended

    def stop(self):
        return self.final


@pytest.mark.parametrize('ended, final, code, stopped', [
    ({'arm_simulator': 0, 'wrench_estimator': 0},   # ctrl-c reached them before the runner
     {'arm_simulator': 0, 'dynamics_controller': 0, 'wrench_estimator': 0}, 0,
     'arm_simulator exited with status 0, dynamics_controller exited with status 0, '
     'wrench_estimator exited with status 0'),
    ({'dynamics_controller': -9},                   # a node died: named, not among the stopped
     {'arm_simulator': 0, 'dynamics_controller': -9, 'wrench_estimator': 0}, 1,
     'arm_simulator exited with status 0, wrench_estimator exited with status 0')])
def test_the_runner_counts_a_node_that_exited_0_as_stopped(
        monkeypatch, capsys, ended, final, code, stopped):
    from robot_dynamics import run as runner
    monkeypatch.setattr(runner, 'Processes', RacedProcesses(ended, final))
    monkeypatch.setattr(bringup, 'STOP_GRACE', 0.0)
    assert runner.main(['simulated_arm', '--domain-id', '0']) == code
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.fullmatch(r'stopped in [0-9.]+ s: (.*)', last).group(1) == stopped, last
