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
import importlib

# The public names and the module of each: imported at first use (PEP 562), so that a node
# loads the algorithms it runs and not, say, identification's scipy.
_MODULES = {
    'core.algorithms.coriolis': ('coriolis_matrix',),
    'core.algorithms.crba': ('mass_matrix',),
    'core.algorithms.forward_dynamics': ('forward_dynamics',),
    'core.algorithms.friction': ('joint_friction',),
    'core.algorithms.jacobians': ('LOCAL', 'LOCAL_WORLD_ALIGNED', 'WORLD', 'Reference',
                                  'frame_bias_acceleration', 'frame_jacobian', 'frame_pose',
                                  'frame_velocity'),
    'core.algorithms.operational_space': ('operational_space', 'pose_error'),
    'core.algorithms.rnea': ('gravity', 'nonlinear_effects', 'rnea'),
    'core.algorithms.task_space': ('effective_mass', 'inverse_task_space_inertia',
                                   'task_space_inertia', 'translational_inertia'),
    'core.collision': ('CollisionDetector', 'CollisionEvent', 'Comply', 'Reaction',
                       'default_thresholds', 'stop_reference'),
    'core.excitation': ('FourierTrajectory', 'excitation_trajectory'),
    'core.feasibility': ('InfeasibleTrajectory', 'Violation', 'check_trajectory', 'time_scaling',
                         'trajectory_violations'),
    'core.identification': ('identify', 'identify_payload'),
    'core.model': ('Data', 'Model', 'with_payload'),
    'core.regressor': ('BaseParameters', 'base_parameters', 'parameter_vector', 'regressor'),
    'core.robots': ('robot_urdf',),
    'core.setpoints': ('SetpointLimiter',),
    'core.urdf': ('URDFError', 'load_urdf'),
}
_HOME = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name):
    if name not in _HOME:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(importlib.import_module(f'.{_HOME[name]}', __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_HOME))


__all__ = sorted(_HOME)
