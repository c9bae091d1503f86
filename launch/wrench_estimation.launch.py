"""wrench_estimator alone, beside whatever controls the arm: the external wrench from its efforts.

ros2 launch robot_dynamics wrench_estimation.launch.py robot:=panda
Publishes /wrench_estimator/wrench (WrenchStamped); /wrench_estimator/tare zeroes it.
(arguments and parameters: robot_dynamics/bringup.py)
"""
from robot_dynamics.bringup import launch_description


def generate_launch_description():
    return launch_description('wrench_estimation')
