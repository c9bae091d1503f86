"""Pure numerics of robot_dynamics: no ROS import anywhere below here."""
