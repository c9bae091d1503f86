"""The dynamics_controller node: joint states in, one effort command out.

Gravity compensation, computed torque and the task-space laws, with power and force limiting
and contact safety as components; its parameters are in parameters.yaml beside this file.
"""
from .controller import DynamicsController, main

__all__ = ['DynamicsController', 'main']
