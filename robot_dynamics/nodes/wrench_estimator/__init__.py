"""The wrench_estimator node: the momentum observer's external joint torques and tip wrench.

With collision detection; its parameters are in parameters.yaml beside this file.
"""
from .estimator import WrenchEstimator, main

__all__ = ['WrenchEstimator', 'main']
