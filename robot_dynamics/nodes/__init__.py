"""ROS 2 nodes: thin rclpy glue from parameters and messages to robot_dynamics.core objects."""
