"""dynamics_controller in computed torque, for an arm under ros2_control.

ros2 launch robot_dynamics computed_torque.launch.py robot:=panda
Send trajectory_msgs/JointTrajectory to /dynamics_controller/joint_trajectory.
(arguments and parameters: robot_dynamics/bringup.py)
"""
from robot_dynamics.bringup import launch_description


def generate_launch_description():
    return launch_description('computed_torque')
