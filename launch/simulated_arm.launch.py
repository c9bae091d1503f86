"""A simulated arm: arm_simulator + dynamics_controller + wrench_estimator.

ros2 launch robot_dynamics simulated_arm.launch.py robot:=panda mode:=computed_torque
(arguments and parameters: robot_dynamics/bringup.py)
"""
from robot_dynamics.bringup import launch_description


def generate_launch_description():
    return launch_description('simulated_arm')
