"""Install the robot_dynamics ament_python package (colcon build or pip install)."""
from glob import glob

from setuptools import find_packages, setup

package_name = 'robot_dynamics'


def share(subdir, *patterns):
    """Return the data_files entry installing files matching `patterns` to share/<pkg>/subdir."""
    files = sorted(f for pattern in patterns for f in glob(pattern))
    return (f'share/{package_name}/{subdir}', files)


setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test', 'test.*']),
    # the robots' URDFs and the nodes' parameter schemas (nodes/common/schema.py reads them)
    package_data={package_name: ['robots/*.urdf'], f'{package_name}.nodes': ['*/parameters.yaml'],
                  f'{package_name}.tools': ['*.parameters.yaml']},
    data_files=[
        ('share/ament_index/resource_index/packages', [f'resource/{package_name}']),
        (f'share/{package_name}', ['package.xml']),
        share('launch', 'launch/*.launch.py'),
        share('config', 'config/*.yaml', 'config/*.xml'),
        share('config/ros2_control', 'config/ros2_control/*.yaml'),
        share('config/security', 'config/security/*.xml'),
        share('urdf', f'{package_name}/robots/*.urdf'),
    ],
    # The floors CI tests (requirements-jazzy.txt): Ubuntu 24.04's numpy and scipy, the oldest
    # numba for Python 3.12.
    install_requires=['setuptools', 'numpy>=1.26.4', 'scipy>=1.11.4', 'numba>=0.59.1', 'PyYAML'],
    extras_require={
        'test': ['pytest', 'pytest-timeout', 'hypothesis', 'pin', 'mujoco', 'matplotlib',
                 'rosbags'],
        'bags': ['rosbags'],      # fit_dynamics on rosbag2 recordings (MCAP, sqlite3)
        'mujoco': ['mujoco'],
        'plot': ['matplotlib'],   # pfl_map's PNG
    },
    zip_safe=False,
    maintainer='robot_dynamics maintainers',
    maintainer_email='maintainer@example.com',
    description='Rigid-body dynamics and model-based control of robot arms from URDF.',
    license='Apache-2.0',
    entry_points={
        'console_scripts': [
            'dynamics_controller = robot_dynamics.nodes.dynamics_controller.controller:main',
            'wrench_estimator = robot_dynamics.nodes.wrench_estimator.estimator:main',
            'arm_simulator = robot_dynamics.nodes.arm_simulator.simulator:main',
            'record_joint_states = robot_dynamics.tools.record_joint_states:main',
            'fit_dynamics = robot_dynamics.tools.fit_dynamics:main',
            'pfl_map = robot_dynamics.tools.pfl_map:main',
            'excite = robot_dynamics.tools.excite:main',
        ],
    },
)
