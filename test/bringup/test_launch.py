"""Launch files, bring-up, parameter files and runner agree with the nodes (about 20 s).

``launch``/``launch_ros`` are not installed here: the launch files run against a small stand-in
of both, injected into sys.modules, which records what they declare and start. Every executable,
parameter file and parameter they name must exist and be declared by the node, and every node
ends the bring-up when it ends. The runner is run once for real, with a node that dies at start.
"""
import importlib
import os
import pathlib
import re
import runpy
import signal
import subprocess
import sys
import time
import types

import numpy as np
import pytest
import yaml

import robot_dynamics as rd
from robot_dynamics import bringup, run
from robot_dynamics.nodes.arm_simulator import ArmSimulator
from robot_dynamics.nodes.dynamics_controller import DynamicsController
from robot_dynamics.nodes.wrench_estimator import WrenchEstimator

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAUNCH_FILES = sorted((ROOT / 'launch').glob('*.launch.py'))
NODES = {'arm_simulator': ArmSimulator, 'dynamics_controller': DynamicsController,
         'wrench_estimator': WrenchEstimator}
PYTHON_TYPES = {'bool': bool, 'double': float, 'integer': int, 'string': str}


class Recorded:
    """A launch action of the stand-in: keeps its arguments."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


@pytest.fixture
def launch_stub(monkeypatch):
    modules = {name: types.ModuleType(name) for name in
               ('launch', 'launch.actions', 'launch.events', 'launch_ros', 'launch_ros.actions')}
    modules['launch'].LaunchDescription = type('LaunchDescription', (Recorded,), {})
    for name in ('DeclareLaunchArgument', 'EmitEvent', 'OpaqueFunction', 'TimerAction'):
        setattr(modules['launch.actions'], name, type(name, (Recorded,), {}))
    modules['launch.events'].Shutdown = type('Shutdown', (Recorded,), {})
    modules['launch_ros.actions'].Node = type('Node', (Recorded,), {})
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)


def rendered_nodes(path, arguments=None):
    """(declared launch arguments {name: default}, Node actions) of a launch file."""
    description = runpy.run_path(str(path))['generate_launch_description']()
    entities = description.args[0]
    declared = {e.args[0]: e.kwargs['default_value'] for e in entities
                if type(e).__name__ == 'DeclareLaunchArgument'}
    context = types.SimpleNamespace(launch_configurations={**declared, **(arguments or {})})
    nodes = [n for e in entities if type(e).__name__ == 'OpaqueFunction'
             for n in e.kwargs['function'](context)]
    return declared, nodes


def check_parameters(node_name, values, where):
    """Every parameter is declared by the node, with a value of the declared type.

    use_sim_time is rclpy's, declared by every node: a bool.
    """
    declared = {p.name: p for p in NODES[node_name].PARAMS}
    for name, value in values.items():
        if name == 'use_sim_time':
            assert isinstance(value, bool), (where, name, value)
            continue
        assert name in declared, f'{where}: {node_name} declares no parameter {name}'
        kind = declared[name].kind
        if kind.endswith('[]'):
            assert isinstance(value, list) and all(
                isinstance(x, PYTHON_TYPES[kind[:-2]]) for x in value), (where, name, value)
        else:
            assert isinstance(value, PYTHON_TYPES[kind]), (where, name, value)


def test_every_setup_has_a_launch_file():
    assert sorted(p.name for p in LAUNCH_FILES) == sorted(
        f'{setup}.launch.py' for setup in bringup.SETUPS)


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize('robot', bringup.ROBOTS)
def test_launch_files_name_existing_executables_files_and_parameters(launch_stub, path, robot):
    declared, nodes = rendered_nodes(path, {'robot': robot})
    assert declared == {k: v[0] for k, v in bringup.ARGUMENTS.items()}
    setup = path.name.removesuffix('.launch.py')
    assert [n.kwargs['name'] for n in nodes] == list(bringup.SETUPS[setup])
    console_scripts = (ROOT / 'setup.py').read_text()
    for node in nodes:
        kwargs = node.kwargs
        assert kwargs['package'] == bringup.PACKAGE
        executable = kwargs['executable']
        assert executable in bringup.EXECUTABLES
        assert f'{executable} = robot_dynamics.nodes.{executable}.' in console_scripts
        assert callable(importlib.import_module(f'robot_dynamics.nodes.{executable}').main)
        params_file, inline = kwargs['parameters']
        raw = yaml.safe_load(pathlib.Path(params_file).read_text())
        assert '/**' not in raw, 'see the comment at the top of the parameter files'
        assert all(key.startswith('/**/') for key in raw), 'sections must match any namespace'
        config = bringup.load_config(params_file)
        check_parameters(kwargs['name'], config[kwargs['name']]['ros__parameters'], params_file)
        check_parameters(kwargs['name'], inline, path.name)
        assert inline['robot_description'] == pathlib.Path(rd.robot_urdf(robot)).read_text()


@pytest.mark.parametrize('robot', bringup.ROBOTS)
def test_parameter_files_fit_the_robot(robot):
    """Every node section lists the chain's joints, and one value per joint where it should."""
    config = bringup.load_config(bringup.config_file(f'{robot}.yaml'))
    for node, section in config.items():
        values = section['ros__parameters']
        model = rd.load_urdf(rd.robot_urdf(robot), values['base'], values['tip'])
        assert sorted(values['joints']) == sorted(model.joint_names), node
        per_joint = [p.name for p in NODES[node].PARAMS if p.per_joint]
        for name in per_joint:
            if name in values:
                assert len(values[name]) == model.nv, (node, name)
        q0 = values.get('initial_position')
        if q0 is not None:
            order = [model.joint_names.index(j) for j in values['joints']]
            assert np.all(model.lower[order] <= q0) and np.all(q0 <= model.upper[order])


def test_runner_renders_the_bringup_as_ros_arguments(tmp_path):
    specs = bringup.nodes('simulated_arm', robot='ur5e', mode='computed_torque',
                          overrides=run.parse_overrides(['arm_simulator:payload.mass:=1.5']))
    for spec in specs:
        argv = run.node_command(spec, tmp_path)
        assert argv[1:4] == ['-m', f'robot_dynamics.nodes.{spec.executable}', '--ros-args']
        assert argv[4:6] == ['-r', f'__node:={spec.name}']
        assert argv[6:8] == ['--params-file', bringup.config_file('ur5e.yaml')]
        generated = yaml.safe_load(pathlib.Path(argv[argv.index('--params-file', 7) + 1])
                                   .read_text())
        assert generated == {f'/**/{spec.name}': {'ros__parameters': spec.parameters}}
        check_parameters(spec.name, spec.parameters, 'runner')
    assert specs[0].parameters['payload.mass'] == 1.5
    assert specs[1].parameters['mode'] == 'computed_torque'


@pytest.mark.parametrize('robot', bringup.ROBOTS)
def test_runner_command_line_reaches_every_node(robot):
    """Every launch argument of the command line lands where the launch file would put it."""
    urdf = rd.robot_urdf(robot)
    _, specs = run.parse(['simulated_arm', '--robot', robot, '--urdf', urdf, '--engine', 'mujoco',
                          '--mode', 'computed_torque', '--set', 'wrench_estimator:damping:=0.01'])
    parameters = {spec.name: spec.parameters for spec in specs}
    assert parameters['arm_simulator']['engine'] == 'mujoco'
    assert parameters['dynamics_controller']['mode'] == 'computed_torque'
    assert parameters['wrench_estimator']['damping'] == 0.01
    assert all(p['robot_description'] == pathlib.Path(urdf).read_text()
               for p in parameters.values())
    assert {spec.params_file for spec in specs} == {bringup.config_file(f'{robot}.yaml')}
    _, specs = run.parse(['simulated_arm', '--use-description-topic', 'true'])
    assert not any('robot_description' in spec.parameters for spec in specs)
    assert 'engine' not in specs[0].parameters   # the parameter file's


def test_loopback_environment():
    env = run.loopback_environment(42, '/tmp/x', base={})
    assert env['ROS_DOMAIN_ID'] == '42' and env['RMW_IMPLEMENTATION'] == 'rmw_fastrtps_cpp'
    profile = pathlib.Path(env['FASTDDS_DEFAULT_PROFILES_FILE']).read_text()
    addresses = re.findall(r'<address>([^<]*)</address>', profile)
    assert addresses and set(addresses) == {'127.0.0.1'}
    assert '<useBuiltinTransports>false</useBuiltinTransports>' in profile


def test_domain_ids_are_not_shared_between_runs():
    held = [run.allocate_domain_id() for _ in range(5)]
    assert len({domain for domain, _ in held}) == 5
    for _, lock in held:
        lock.close()


def exited(code, shutting_down=False):
    """A ProcessExited event's and the launch context's fields that on_exit reads."""
    return (types.SimpleNamespace(returncode=code),
            types.SimpleNamespace(is_shutdown=shutting_down))


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=lambda p: p.name)
def test_any_node_that_ends_ends_the_bringup(launch_stub, path):
    """on_exit of every node: raise (launch's status 1) unless it exited 0 or launch stops.

    launch's LaunchService.run returns 1 for an exception in an action; it returns 0 after a
    Shutdown event, whatever the processes' exit codes (doc/guides/stopping.md). A node that
    died raises STOP_GRACE later, from a timer's action: the simulated drive's watchdog first.
    """
    _, nodes = rendered_nodes(path, {'namespace': 'left'})
    for node in nodes:
        on_exit, label = node.kwargs['on_exit'], f"left.{node.kwargs['name']}"
        assert node.kwargs['additional_env'] == {run.LAUNCHER: str(os.getpid())}
        for code, how in ((1, 'exited with status 1'), (-signal.SIGKILL, 'was killed by SIGKILL')):
            [timer] = on_exit(*exited(code))
            assert type(timer).__name__ == 'TimerAction'
            assert timer.kwargs['period'] == bringup.STOP_GRACE >= 0.5   # the watchdog's 0.1 s
            [action] = timer.kwargs['actions']
            with pytest.raises(bringup.NodeDied, match=rf'^{label} {how}: ending the bring-up'):
                action.kwargs['function'](None)
        [emit] = on_exit(*exited(0))
        assert type(emit).__name__ == 'EmitEvent'
        shutdown = emit.kwargs['event']
        assert type(shutdown).__name__ == 'Shutdown'
        assert shutdown.kwargs['reason'].startswith(f'{label} exited with status 0')
        for code in (0, 1, -signal.SIGINT):   # the bring-up's own stop: nothing more
            assert on_exit(*exited(code, shutting_down=True)) is None


@pytest.mark.dds   # a real run of the runner
def test_runner_stops_every_node_when_one_dies(tmp_path):
    """A real run whose simulator dies at start (an engine typo): all stopped, status 1."""
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, '-m', 'robot_dynamics.run', 'simulated_arm', '--engine', 'mujocoo'],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "engine must be one of internal, mujoco; got 'mujocoo'" in result.stderr
    assert 'arm_simulator exited with status 1: stopping the bring-up' in result.stderr
    # SIGINT ends them (still importing, on a loaded machine: Python's default handler)
    stopped = '(exited with status 0|was killed by SIGINT)'
    assert re.search(rf'^stopped in [0-9.]+ s: dynamics_controller {stopped}, '
                     rf'wrench_estimator {stopped}$',
                     result.stderr, re.M), result.stderr[-3000:]
    print(f'run with a dead node: {time.monotonic() - started:.1f} s')


def test_exit_status_in_words():
    assert bringup.exit_status(0) == 'exited with status 0'
    assert bringup.exit_status(-signal.SIGTERM) == 'was killed by SIGTERM'
    assert bringup.exit_status(-99) == 'was killed by signal 99'
