"""Which nodes run, with which parameters: the single source of truth of the bring-ups.

Both launch/*.launch.py (through ``launch_description``) and the pip-environment runner
(robot_dynamics.run) render it.

Every node gets ``config/<robot>.yaml`` (``<node>: ros__parameters:`` sections) and then the
inline parameters of its NodeSpec: the URDF as ``robot_description`` and the setup's choices.
"""
import dataclasses
import pathlib

PACKAGE = 'robot_dynamics'
ROBOTS = ('panda', 'ur5e')
EXECUTABLES = ('arm_simulator', 'dynamics_controller', 'wrench_estimator')  # robot_dynamics.nodes.*
MODES = ('gravity_compensation', 'computed_torque', 'cartesian_impedance', 'operational_space')

# The simulator is the clock of a simulated arm: when its process is held up (a shared machine),
# simulated time stops too, so the controller and estimator may wait longer for its states.
SIMULATED_STATE_TIMEOUT = 0.5  # s

# setup -> nodes (executable == node name) with their setup-specific parameters
SETUPS = {
    'gravity_compensation': {'dynamics_controller': {'mode': 'gravity_compensation'}},
    'computed_torque': {'dynamics_controller': {'mode': 'computed_torque'}},
    'wrench_estimation': {'wrench_estimator': {}},
    'simulated_arm': {'arm_simulator': {},
                      'dynamics_controller': {'state_timeout': SIMULATED_STATE_TIMEOUT},
                      'wrench_estimator': {'state_timeout': SIMULATED_STATE_TIMEOUT}},
}

# launch arguments: name -> (default, description); every setup takes all of them
ARGUMENTS = {
    'robot': ('panda', f"shipped robot whose URDF and config/<robot>.yaml are used: "
                       f"{', '.join(ROBOTS)}"),
    'urdf': ('', 'URDF file (empty: the shipped URDF of robot)'),
    'use_description_topic': ('false', 'true: pass no robot_description parameter; the nodes '
                                       'read the robot_description topic (robot_state_publisher)'),
    'config': ('', 'parameter file (empty: config/<robot>.yaml of this package)'),
    'engine': ('', 'arm_simulator engine for simulated_arm: internal or mujoco (empty: the '
                   "config file's, else internal)"),
    'mode': ('gravity_compensation', f"dynamics_controller mode for simulated_arm: "
                                     f"{', '.join(MODES)}"),
}


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    executable: str        # console script; also the module robot_dynamics.nodes.<executable>
    name: str
    params_file: str
    parameters: dict       # applied after params_file


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


def nodes(setup, robot='panda', urdf='', use_description_topic=False, config='',
          mode='gravity_compensation', overrides=None, engine=''):
    """The NodeSpecs of a setup; ``overrides``: {node name: {parameter: value}} applied last."""
    if setup not in SETUPS:
        raise ValueError(f"unknown setup '{setup}'; known: {', '.join(SETUPS)}")
    if robot not in ROBOTS:
        raise ValueError(f"unknown robot '{robot}'; shipped: {', '.join(ROBOTS)}")
    if mode not in MODES:
        raise ValueError(f"unknown mode '{mode}'; known: {', '.join(MODES)}")
    description = {}
    if not _true(use_description_topic):
        from robot_dynamics.core.robots import robot_urdf
        description['robot_description'] = pathlib.Path(urdf or robot_urdf(robot)).read_text()
    specs = []
    for name, parameters in SETUPS[setup].items():
        parameters = {**description, **parameters}
        if setup == 'simulated_arm' and name == 'dynamics_controller':
            parameters['mode'] = mode
        if setup == 'simulated_arm' and name == 'arm_simulator' and engine:
            parameters['engine'] = engine
        parameters.update((overrides or {}).get(name, {}))
        specs.append(NodeSpec(name, name, config or config_file(f'{robot}.yaml'), parameters))
    return specs


def _true(value):
    return str(value).lower() in ('true', '1', 'yes')


def launch_description(setup):
    """A launch.LaunchDescription for ``setup`` (imports launch/launch_ros: real ROS installs)."""
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch_ros.actions import Node

    def render(context):
        arguments = {name: context.launch_configurations[name] for name in ARGUMENTS}
        return [Node(package=PACKAGE, executable=spec.executable, name=spec.name,
                     output='screen', parameters=[spec.params_file, spec.parameters])
                for spec in nodes(setup, **arguments)]

    return LaunchDescription(
        [DeclareLaunchArgument(name, default_value=default, description=text)
         for name, (default, text) in ARGUMENTS.items()] + [OpaqueFunction(function=render)])
