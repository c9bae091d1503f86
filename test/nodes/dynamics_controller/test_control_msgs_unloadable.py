"""control_msgs importable but its type support not loadable: the documented fallback, no crash.

A broken or partial control_msgs install (the Python package there, a type-support library of
it missing) made the controller die creating its action server. It must say so once and serve
the topic interface, as where control_msgs does not import at all.
"""
import os
import shutil
import subprocess
import sys
import textwrap

from robot_dynamics import run

SCRIPT = textwrap.dedent('''
    import time
    import rclpy
    from rclpy.parameter import Parameter
    import robot_dynamics as rd
    import control_msgs.action   # importable
    from robot_dynamics.nodes.dynamics_controller import DynamicsController
    rclpy.init()
    node = DynamicsController(namespace='/broken', parameter_overrides=[
        Parameter('robot_description', value=open(rd.robot_urdf('panda')).read()),
        Parameter('base', value='panda_link0'), Parameter('tip', value='panda_hand_tcp')])
    ns = '/broken/dynamics_controller'
    wanted = {f'{ns}/joint_trajectory', f'{ns}/controller_state/reference'}
    for _ in range(100):   # the node's own endpoints reach its graph cache within moments
        topics = dict(node.get_topic_names_and_types())
        if wanted <= set(topics):
            break
        time.sleep(0.05)
    print(node.action.available, node.state.available,
          *(name in topics for name in sorted(wanted)))
    node.destroy_node()
''')


def test_an_unloadable_control_msgs_falls_back_to_the_topics(control_msgs_prefix, tmp_path):
    prefix = tmp_path / 'control_msgs'
    shutil.copytree(control_msgs_prefix, prefix, symlinks=True)
    for library in (prefix / 'lib').glob('libcontrol_msgs__rosidl_typesupport_fastrtps_c*.so'):
        library.unlink()   # the library the RMW loads to create the action server
    version = '%d.%d' % sys.version_info[:2]
    site = prefix / 'lib' / f'python{version}' / 'site-packages'
    domain, lock = run.allocate_domain_id()
    env = run.loopback_environment(domain, tmp_path, os.environ)
    clean = [p for p in env.get('PYTHONPATH', '').split(os.pathsep)
             if p and not p.startswith(str(control_msgs_prefix))]
    env['PYTHONPATH'] = os.pathsep.join([str(site), *clean])
    libraries = [p for p in env.get('LD_LIBRARY_PATH', '').split(os.pathsep)
                 if p and not p.startswith(str(control_msgs_prefix))]
    env['LD_LIBRARY_PATH'] = os.pathsep.join([str(prefix / 'lib'), *libraries])
    env['ROS_LOG_DIR'] = str(tmp_path)
    try:
        node = subprocess.run([sys.executable, '-c', SCRIPT], capture_output=True, text=True,
                              timeout=240, env=env)
    finally:
        lock.close()
    assert node.returncode == 0, node.stderr
    assert node.stdout.split() == ['False', 'False', 'True', 'True'], node.stdout + node.stderr
    assert 'control_msgs imports but its type support does not load' in node.stderr, node.stderr
