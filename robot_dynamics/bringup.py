"""Which nodes run, with which parameters: the single source of truth of the bring-ups.

Both launch/*.launch.py (through ``launch_description``) and the pip-environment runner
(robot_dynamics.run) render it. Both end the whole bring-up when any of its nodes ends, with a
non-zero status unless that node exited 0 (``on_node_exit``; doc/guides/stopping.md).

Every node gets ``config/<robot>.yaml`` or the ``config`` given (``/**/<node>: ros__parameters:``
sections, which match the node in any namespace) and then the inline parameters of its NodeSpec:
the URDF as ``robot_description`` and the setup's choices. ``namespace`` puts every node (and so
its relative topics: joint_states, effort_controller/commands, ~/...) under it; ``prefix`` is
prepended to the frame and joint names the config file gives (PREFIXED), for descriptions whose
names carry one (franka_fr3_duo's left_/right_, a dual xArm).
"""
import dataclasses
import functools
import os
import pathlib
import signal

import yaml

from robot_dynamics.nodes.common.exit_guard import LAUNCHER
from robot_dynamics.nodes.common.schema import choices

PACKAGE = 'robot_dynamics'
ROBOTS = ('panda', 'ur5e')
EXECUTABLES = ('arm_simulator', 'dynamics_controller', 'wrench_estimator')  # robot_dynamics.nodes.*
MODES = choices('dynamics_controller', 'mode')   # the controller's schema's

# The simulator is the clock of a simulated arm: when its process is held up (a shared machine),
# simulated time stops too, so the controller and estimator may wait longer for its states; and
# its drive waits as long for a controller held up on the same machine before it stops the arm.
SIMULATED_STATE_TIMEOUT = 0.5  # s
# ... and, as a simulator running the controller inside its step, the simulated arm runs in lock
# step with its controller (arm_simulator's lock_step): its figures do not depend on the load.
# The controller and the estimator run on the simulator's /clock (use_sim_time), so that every
# interval they act on (the rate limit's dt, the state timeout, trajectory sampling) is the arm's.
SIM_TIME = {'use_sim_time': True}

# A node that died (killed, or an exit status not 0) ends the bring-up this long after, so that
# the arm's side acts first, as a real drive would: arm_simulator's lock step waits
# lock_step_timeout (1 s) for the dead controller, then its command watchdog (command_timeout:
# SIMULATED_STATE_TIMEOUT of simulated time here) stops the arm and engages the brakes.
STOP_GRACE = 2.0  # s

# setup -> nodes (executable == node name) with their setup-specific parameters
SETUPS = {
    'gravity_compensation': {'dynamics_controller': {'mode': 'gravity_compensation'}},
    'computed_torque': {'dynamics_controller': {'mode': 'computed_torque'}},
    'wrench_estimation': {'wrench_estimator': {}},
    'simulated_arm': {'arm_simulator': {'command_timeout': SIMULATED_STATE_TIMEOUT,
                                        'lock_step': True},
                      'dynamics_controller': {'state_timeout': SIMULATED_STATE_TIMEOUT,
                                              **SIM_TIME},
                      'wrench_estimator': {'state_timeout': SIMULATED_STATE_TIMEOUT, **SIM_TIME}},
}

# launch arguments: name -> (default, description); every setup takes all of them
ARGUMENTS = {
    'robot': ('panda', f"shipped robot whose URDF and config/<robot>.yaml are used: "
                       f"{', '.join(ROBOTS)}"),
    'urdf': ('', 'URDF file (empty: the shipped URDF of robot)'),
    'use_description_topic': ('false', 'true: pass no robot_description parameter; the nodes '
                                       'read the robot_description topic (robot_state_publisher)'),
    'config': ('', 'parameter file, or the name of one in config/ of this package (e.g. fr3, '
                   'ur5e_ros2_driver); empty: config/<robot>.yaml'),
    'namespace': ('', 'namespace of every node and topic (empty: none), e.g. left'),
    'prefix': ('', "prepended to the config's joint and frame names (empty: none), e.g. left_"),
    'engine': ('', 'arm_simulator engine for simulated_arm: internal or mujoco (empty: the '
                   "config file's, else internal)"),
    'mode': ('', f"dynamics_controller mode for simulated_arm: {', '.join(MODES)} (empty: the "
                 "config file's, else gravity_compensation)"),
    'thread_priority': ('', 'SCHED_FIFO priority of every node\'s loop (as ros2_control_node\'s; '
                            'e.g. 50; 0: the default scheduler; empty: the config file\'s, '
                            'else 0); doc/guides/real_time.md'),
    'cpu_affinity': ('', 'CPUs of every node, comma-separated, e.g. 2,3 (empty: the config '
                         'file\'s, else all)'),
    'lock_memory': ('', 'true: every node mlockall()s its memory (empty: the config file\'s, '
                        'else false)'),
}
REALTIME_ARGUMENTS = ('thread_priority', 'cpu_affinity', 'lock_memory')   # node parameters


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    executable: str        # console script; also the module robot_dynamics.nodes.<executable>
    name: str
    params_file: str
    parameters: dict       # applied after params_file
    namespace: str = ''

    @property
    def label(self):
        """Unique within a bring-up: the name, after its namespace ('left.arm_simulator')."""
        return f"{self.namespace.replace('/', '.')}.{self.name}" if self.namespace else self.name


def share_directory():
    """share/robot_dynamics of a ROS install, else the source tree (editable pip install)."""
    try:
        from ament_index_python.packages import get_package_share_directory
        share = pathlib.Path(get_package_share_directory(PACKAGE))
        if (share / 'config').is_dir():
            return share
    except (ImportError, LookupError, OSError):  # not installed, or no AMENT_PREFIX_PATH
        pass
    return pathlib.Path(__file__).resolve().parent.parent


def config_file(name):
    """Path of a file in config/ (parameter files, the Fast DDS profile)."""
    return str(share_directory() / 'config' / name)


PREFIXED = ('base', 'tip', 'joints', 'reference_frame')  # names the ``prefix`` argument prefixes


def config_path(config, robot):
    """The parameter file: ``config`` (a path, or a file name in config/ without .yaml)."""
    if not config:
        return config_file(f'{robot}.yaml')
    if pathlib.Path(config).suffix in ('.yaml', '.yml') or '/' in config:
        return config
    path = pathlib.Path(config_file(f'{config}.yaml'))
    if not path.is_file():
        shipped = sorted(p.stem for p in path.parent.glob('*.yaml'))
        raise ValueError(f"no parameter file '{config}': give a path or one of {shipped}")
    return str(path)


def load_config(path):
    """A parameter file as {node name: {'ros__parameters': {...}}} ('/**/' keys unwrapped)."""
    document = yaml.safe_load(pathlib.Path(path).read_text()) or {}
    return {key.removeprefix('/**/'): value for key, value in document.items()}


def flatten(values, prefix=''):
    """Nested YAML parameters as ROS names: {'friction': {'viscous': x}} -> friction.viscous."""
    flat = {}
    for key, value in values.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f'{prefix}{key}.'))
        else:
            flat[f'{prefix}{key}'] = value
    return flat


def config_section(path, node):
    """The ros__parameters of ``node`` in a parameter file ({} if it has none)."""
    return dict(load_config(path).get(node, {}).get('ros__parameters', {}))


def prefixed(section, prefix):
    """The PREFIXED names of a config section with ``prefix`` prepended."""
    out = {}
    for name in PREFIXED:
        value = section.get(name)
        if value:
            out[name] = [prefix + v for v in value] if isinstance(value, list) else prefix + value
    return out


def realtime_parameters(thread_priority='', cpu_affinity='', lock_memory=''):
    """The real-time launch arguments given (not empty) as node parameters, typed."""
    given = {}
    if str(thread_priority).strip():
        given['thread_priority'] = int(thread_priority)
    if str(cpu_affinity).strip():
        given['cpu_affinity'] = [int(c) for c in str(cpu_affinity).strip('[]').split(',')
                                 if c.strip()]
    if str(lock_memory).strip():
        given['lock_memory'] = _true(lock_memory)
    return given


def nodes(setup, robot='panda', urdf='', use_description_topic=False, config='',
          mode='', overrides=None, engine='', namespace='', prefix='',
          thread_priority='', cpu_affinity='', lock_memory=''):
    """The NodeSpecs of a setup; ``overrides``: {node name: {parameter: value}} applied last.

    ``thread_priority``, ``cpu_affinity``, ``lock_memory``: launch arguments (strings; empty:
    not given) for every node (``realtime_parameters``).
    """
    if setup not in SETUPS:
        raise ValueError(f"unknown setup '{setup}'; known: {', '.join(SETUPS)}")
    if robot not in ROBOTS:
        raise ValueError(f"unknown robot '{robot}'; shipped: {', '.join(ROBOTS)}")
    if mode and mode not in MODES:
        raise ValueError(f"unknown mode '{mode}'; known: {', '.join(MODES)}")
    description = {}
    if not _true(use_description_topic):
        from robot_dynamics.core.robots import robot_urdf
        description['robot_description'] = pathlib.Path(urdf or robot_urdf(robot)).read_text()
    params_file = config_path(config, robot)
    realtime = realtime_parameters(thread_priority, cpu_affinity, lock_memory)
    specs = []
    for name, parameters in SETUPS[setup].items():
        renamed = prefixed(config_section(params_file, name), prefix) if prefix else {}
        parameters = {**description, **renamed, **realtime, **parameters}
        if setup == 'simulated_arm' and name == 'dynamics_controller' and mode:
            parameters['mode'] = mode   # given: over the config file's (else the file's)
        if setup == 'simulated_arm' and name == 'arm_simulator' and engine:
            parameters['engine'] = engine
        parameters.update((overrides or {}).get(name, {}))
        specs.append(NodeSpec(name, name, params_file, parameters, namespace.strip('/')))
    return specs


def _true(value):
    return str(value).lower() in ('true', '1', 'yes')


class NodeDied(RuntimeError):
    """A node of the bring-up ended while the bring-up ran (launch's status: non-zero)."""


def exit_status(code):
    """How a process ended, in words: 'exited with status 1', 'was killed by SIGKILL'."""
    if code is not None and code < 0:
        try:
            return f'was killed by {signal.Signals(-code).name}'
        except ValueError:
            return f'was killed by signal {-code}'
    return f'exited with status {code}'


def on_node_exit(label, event, context):
    """A node's process ended: end the bring-up, with a non-zero status unless it exited 0.

    Nothing while the bring-up is shutting down (its own stop). launch's LaunchService.run
    returns non-zero only for an error in launch itself (an exception in an action or event
    handler: it logs it, shuts the launch down and returns 1), never for a process's exit
    code, in Jazzy's launch 3.4 as in Rolling's (ros2/launch#780): so a node that died raises
    NodeDied, STOP_GRACE later (a timer's action), which ``ros2 launch`` reports and exits 1 on.
    A node that exited 0 (it was stopped, SIGINT or SIGTERM) shuts the bring-up down at once
    with status 0.
    """
    if context.is_shutdown:
        return None
    how = f'{label} {exit_status(event.returncode)}'
    if event.returncode != 0:
        from launch.actions import OpaqueFunction, TimerAction

        def died(context):
            raise NodeDied(f'{how}: ending the bring-up')
        return [TimerAction(period=STOP_GRACE, actions=[OpaqueFunction(function=died)])]
    from launch.actions import EmitEvent
    from launch.events import Shutdown
    return [EmitEvent(event=Shutdown(reason=f'{how}: ending the bring-up'))]


def launch_description(setup):
    """A launch.LaunchDescription for ``setup`` (imports launch/launch_ros: real ROS installs).

    Every node's ``on_exit`` is ``on_node_exit``: the bring-up ends when any node ends.
    """
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch_ros.actions import Node

    def render(context):
        arguments = {name: context.launch_configurations[name] for name in ARGUMENTS}
        return [Node(package=PACKAGE, executable=spec.executable, name=spec.name,
                     namespace=spec.namespace, output='screen',
                     parameters=[spec.params_file, spec.parameters],
                     additional_env={LAUNCHER: str(os.getpid())},   # launch's process
                     on_exit=functools.partial(on_node_exit, spec.label))
                for spec in nodes(setup, **arguments)]

    return LaunchDescription(
        [DeclareLaunchArgument(name, default_value=default, description=text)
         for name, (default, text) in ARGUMENTS.items()] + [OpaqueFunction(function=render)])
