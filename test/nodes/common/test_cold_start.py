"""A fresh install's first start: nothing compiled anywhere, the node still reaches its output.

The controller's process, on an empty NUMBA_CACHE_DIR and an arm the package does not ship,
publishes its first effort command, having logged its warm-up (``make bench-start`` measures
how fast; the limit here is generous). Before every kernel is in the cache a switch to a mode
whose kernels are not loaded is refused with the reason, rather than compiled in the loop.
"""
import os
import subprocess
import sys
import textwrap

import pytest

from robot_dynamics import run
from robot_dynamics.benchmarks import start

pytestmark = pytest.mark.dds   # starts node processes (robot_dynamics.run or a script)

REFUSED = textwrap.dedent('''
    import rclpy
    from rclpy.parameter import Parameter
    from robot_dynamics.benchmarks.start import unshipped_urdf
    from robot_dynamics.nodes.dynamics_controller import DynamicsController
    rclpy.init()
    node = DynamicsController(namespace='/cold', parameter_overrides=[
        Parameter('robot_description', value=unshipped_urdf()[1]),
        Parameter('mode', value='gravity_compensation')])
    result = node.set_parameters([Parameter('mode', value='computed_torque')])[0]
    print(result.successful, result.reason)
    node.destroy_node()   # ends the background compile too
''')


def test_a_cold_controller_reaches_its_first_command(tmp_path):
    (tmp_path / 'cache').mkdir()
    _, urdf = start.unshipped_urdf()
    seconds = start.first_output('dynamics_controller', {'mode': 'computed_torque'},
                                 'effort_controller/commands', str(tmp_path / 'cache'),
                                 str(tmp_path), urdf, timeout=300.0)
    log = (tmp_path / 'dynamics_controller.log').read_text()
    assert 'warming up 6 steps' in log and 'kernels compiled' in log, log
    assert list((tmp_path / 'cache').rglob('*.nbi')), 'nothing was cached'
    print(f'first command {seconds:.1f} s after the process started, cold')


def test_a_switch_to_an_uncompiled_mode_waits_for_the_cache(tmp_path):
    domain, lock = run.allocate_domain_id()
    env = {**run.loopback_environment(domain, tmp_path, os.environ),
           'NUMBA_CACHE_DIR': str(tmp_path)}
    try:
        node = subprocess.run([sys.executable, '-c', REFUSED], capture_output=True, text=True,
                              timeout=300, env=env)
    finally:
        lock.close()
    assert node.returncode == 0, node.stderr
    successful, reason = node.stdout.strip().split(' ', 1)
    assert successful == 'False'
    assert 'not compiled yet' in reason and 'computed torque' in reason, reason
    assert 'compiling the kernels of every other mode in the background' in node.stderr
