"""The arm_simulator node: a simulated arm (internal engine or MuJoCo) behind ROS topics.

Its parameters are in parameters.yaml beside this file.
"""
from .simulator import ArmSimulator, main

__all__ = ['ArmSimulator', 'main']
