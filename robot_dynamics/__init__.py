"""robot_dynamics: model-based control of robot arms, from a URDF and joint states.

Conventions (every function, node and message follows them):

- Equation of motion ``M(q) q̈ + C(q, q̇) q̇ + g(q) + τ_f(q̇) = τ + J^T F_ext``, with the joints'
  armature I_a (reflected rotor inertia) on M's diagonal and their friction
  ``τ_f(q̇) = f_v q̇ + [f_c + f_s exp(−(q̇ / v_s)²)] tanh(q̇ / ε)`` (``joint_friction``; the
  Model's ``armature``, ``viscous``, ``coulomb``, ``stiction``, zero by default, and velocity
  scales ``coulomb_velocity`` ε and ``stribeck_velocity`` v_s; never read from the URDF).
  Gravity compensation is τ = g(q) = rnea(q, 0, 0).
- Spatial vectors are angular first: twists (ω, v), wrenches (moment, force), as in Lynch & Park.
- ``model.gravity`` is the physical acceleration of gravity in the base frame,
  default (0, 0, -9.81).
- Jacobian references: ``LOCAL`` body Jacobian (frame axes), ``LOCAL_WORLD_ALIGNED`` velocity of the
  frame origin in base axes, ``WORLD`` space Jacobian (L&P).
- C(q, q̇) is the Christoffel-consistent Coriolis matrix: Ṁ - 2C is skew-symmetric.
- One coordinate per joint (continuous joints are angles); SI units, radians, metres, newtons.
  Mimic joints are dependent coordinates (``model.mimic``): q, q̇, q̈, τ, M, C, J are those of
  the independent joints ``model.joint_names``.
"""
from .core.algorithms.coriolis import coriolis_matrix
from .core.algorithms.crba import mass_matrix
from .core.algorithms.forward_dynamics import forward_dynamics
from .core.algorithms.friction import joint_friction
from .core.algorithms.jacobians import (LOCAL, LOCAL_WORLD_ALIGNED, WORLD, Reference,
                                        frame_bias_acceleration, frame_jacobian, frame_pose,
                                        frame_velocity)
from .core.algorithms.operational_space import operational_space, pose_error
from .core.algorithms.rnea import gravity, nonlinear_effects, rnea
from .core.algorithms.task_space import (effective_mass, inverse_task_space_inertia,
                                         task_space_inertia, translational_inertia)
from .core.collision import (CollisionDetector, CollisionEvent, Comply, Reaction,
                             default_thresholds, stop_reference)
from .core.excitation import FourierTrajectory, excitation_trajectory
from .core.feasibility import (InfeasibleTrajectory, Violation, check_trajectory,
                               time_scaling, trajectory_violations)
from .core.identification import identify, identify_payload
from .core.model import Data, Model, with_payload
from .core.regressor import BaseParameters, base_parameters, parameter_vector, regressor
from .core.robots import robot_urdf
from .core.setpoints import SetpointLimiter
from .core.urdf import URDFError, load_urdf

__all__ = [
    'LOCAL', 'LOCAL_WORLD_ALIGNED', 'WORLD', 'Reference', 'Data', 'Model', 'URDFError',
    'load_urdf', 'robot_urdf', 'with_payload', 'rnea', 'gravity', 'nonlinear_effects',
    'mass_matrix', 'coriolis_matrix', 'forward_dynamics', 'joint_friction', 'frame_pose',
    'frame_jacobian', 'frame_velocity', 'frame_bias_acceleration', 'task_space_inertia',
    'inverse_task_space_inertia', 'translational_inertia', 'effective_mass', 'operational_space',
    'pose_error',
    'regressor', 'parameter_vector', 'base_parameters', 'BaseParameters', 'identify',
    'identify_payload', 'excitation_trajectory', 'FourierTrajectory',
    'check_trajectory', 'trajectory_violations', 'time_scaling', 'InfeasibleTrajectory',
    'Violation', 'SetpointLimiter', 'CollisionDetector', 'CollisionEvent', 'Reaction', 'Comply',
    'default_thresholds', 'stop_reference',
]
