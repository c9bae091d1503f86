"""The real-time settings (nodes.common.realtime): applied, or refused with a WARN saying how.

In this process: a refused SCHED_FIFO (a child without CAP_SYS_NICE and with no rtprio limit,
as a user's login shell on a stock system is) logs the WARN naming limits.conf and the
capability, and goes on; the collector frozen with no automatic full collection. Over DDS: the
simulated arm's three nodes with ``cpu_affinity`` and ``thread_priority``, each process's CPU
set and scheduler read from the kernel (os.sched_getaffinity / sched_getscheduler of its pid),
and their /diagnostics saying so, with the collector frozen.
"""
import gc
import os
import shutil
import subprocess
import sys
import time

import pytest
from diagnostic_msgs.msg import DiagnosticArray

from robot_dynamics import bringup
from robot_dynamics.nodes.common import realtime, schema

NODES = ('dynamics_controller', 'wrench_estimator', 'arm_simulator')
REFUSED = """
import os, resource, sys
from robot_dynamics.nodes.common import realtime
resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0))

class Log:
    def warning(self, text):
        print('WARN', text)

    def info(self, text):
        print('INFO', text)

done = realtime.apply({'thread_priority': 10, 'cpu_affinity': [], 'lock_memory': False}, Log())
print('DONE', done['thread_priority'], os.sched_getscheduler(0) == os.SCHED_OTHER)
"""


def test_every_1khz_node_has_the_same_realtime_parameters():
    for node in NODES:
        assert schema.section(node, *realtime.NAMES) == realtime.REALTIME_PARAMS, node
    defaults = {p.name: p.default for p in realtime.REALTIME_PARAMS}
    assert defaults == {'thread_priority': 0, 'cpu_affinity': [], 'lock_memory': False}


@pytest.mark.skipif(shutil.which('setpriv') is None, reason='needs util-linux setpriv')
def test_a_refused_priority_warns_what_to_configure_and_runs_on():
    # without CAP_SYS_NICE (even as root) and with an rtprio limit of 0: EPERM, as for a user
    out = subprocess.run(['setpriv', '--bounding-set=-sys_nice', '--inh-caps=-sys_nice',
                          sys.executable, '-c', REFUSED], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    warn = [line for line in out.stdout.splitlines() if line.startswith('WARN')]
    assert len(warn) == 1, out.stdout
    assert 'thread_priority 10: SCHED_FIFO refused' in warn[0]
    assert '/etc/security/limits.conf' in warn[0] and 'rtprio' in warn[0]
    assert 'CAP_SYS_NICE' in warn[0] and 'running on without it' in warn[0]
    assert 'DONE refused True' in out.stdout


def test_collections_freeze_and_keep_full_collections_out():
    before = gc.get_threshold()
    try:
        collections = realtime.Collections()
        collections.freeze()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[2] > 10 ** 8   # no automatic full collection in a run
        full = gc.get_stats()[2]['collections']
        garbage = [[] for _ in range(50000)]   # young collections run, full ones do not
        for item in garbage:
            item.append(item)
        del garbage
        assert gc.get_stats()[2]['collections'] == full
        collections.collect()
        assert gc.get_stats()[2]['collections'] == full + 1
        assert int(collections.health()['gc_frozen']) > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def fifo_permitted():
    """Whether a child process of this one may take SCHED_FIFO (root, CAP_SYS_NICE, rtprio)."""
    code = 'import os; os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))'
    return subprocess.run([sys.executable, '-c', code], capture_output=True).returncode == 0


def reports(recorder, names, timeout=30.0):
    """{node: its newest /diagnostics values} once every node of ``names`` has reported."""
    deadline, found = time.monotonic() + timeout, {}
    while time.monotonic() < deadline and set(found) != set(names):
        recorder.wait_for_more(1, timeout=timeout)
        for msg in list(recorder.messages):
            for status in msg.status:
                node = status.name.split(':')[0]
                values = {kv.key: kv.value for kv in status.values}
                if node in names and 'gc_frozen' in values:
                    found[node] = values
    return found


def test_the_simulated_arm_runs_with_its_realtime_settings(ros):
    cpu = min(os.sched_getaffinity(0))
    permitted = fifo_permitted()
    diagnostics = ros.probe.record(DiagnosticArray, '/diagnostics')
    specs = bringup.nodes('simulated_arm', mode='computed_torque', thread_priority='1',
                          cpu_affinity=str(cpu))
    launch = ros.launch(specs)
    try:
        launch.ready()
        found = reports(diagnostics, NODES)
        assert set(found) == set(NODES), launch.logs()
        for spec in specs:
            pid = launch.processes.procs[spec.label].pid
            assert os.sched_getaffinity(pid) == {cpu}, spec.label
            assert (os.sched_getscheduler(pid) == os.SCHED_FIFO) == permitted, spec.label
            values = found[spec.name]
            assert values['realtime_cpu_affinity'] == 'applied'
            assert values['realtime_thread_priority'] == ('applied' if permitted else 'refused')
            assert values['realtime_lock_memory'] == 'off'
            assert int(values['gc_frozen']) > 1000, values   # the model, rclpy, numba: frozen
            log = launch.log(spec.label)
            if not permitted:
                assert 'SCHED_FIFO refused' in log and 'limits.conf' in log
    finally:
        codes = launch.processes.stop(timeout=20.0)
        ros.probe.stop_recording(diagnostics)
    assert set(codes.values()) == {0}, launch.logs()


def test_launch_arguments_reach_every_node_typed():
    specs = bringup.nodes('simulated_arm', thread_priority='50', cpu_affinity='2,3',
                          lock_memory='true')
    for spec in specs:
        assert {k: spec.parameters[k] for k in realtime.NAMES} == {
            'thread_priority': 50, 'cpu_affinity': [2, 3], 'lock_memory': True}
    # not given: no override, so the config file's value (or the node's default) holds
    for spec in bringup.nodes('simulated_arm'):
        assert not set(realtime.NAMES) & set(spec.parameters)
