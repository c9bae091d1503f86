"""dynamics_controller in gravity compensation, for an arm under ros2_control.

ros2 launch robot_dynamics gravity_compensation.launch.py robot:=panda
(arguments and parameters: robot_dynamics/bringup.py)
"""
from robot_dynamics.bringup import launch_description


def generate_launch_description():
    return launch_description('gravity_compensation')
