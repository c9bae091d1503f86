"""What an arm's interface means: the effort command and the measured efforts (hardware profile).

Real arms differ in both directions, and a wrong assumption throws an arm:

- ``hardware_compensates_gravity``: the robot adds its own gravity torque to every command
  (Franka through franka_ros2, KUKA LBR through FRI). Every command we send is then
  τ − g_robot(q): gravity compensation sends 0 plus whatever else is asked, computed torque its
  feedback and inertial terms, in every mode, on state loss and in the ramps.
- ``hardware_compensates_payload``: the robot's own load setting (Franka Desk or setLoad, UR
  set_payload, KUKA load data) carries the same payload as our ``payload.*``, so the robot
  compensates its gravity too: g_robot(q) is our model's gravity WITH the payload. False (the
  default): g_robot(q) is our model's gravity without ``payload.*`` (the robot knows the arm,
  not the payload), so the payload's gravity stays in our command. Never give a payload to
  both without this flag.
- ``measured_effort``: what the ``effort`` of joint_states is. ``torque``: the joint torque,
  gravity included (Franka's tau_J, KUKA's measured torque, UR with PolyScope >= 5.23 and
  ``use_currents_as_efforts: false``). ``current``: motor current, A (the UR driver's default);
  τ = ``torque_constants`` · i, per joint, N m/A at the joint (gear ratio included).
  ``torque_minus_gravity``: the joint torque less g_robot(q), as reported by a fake or mock
  hardware that echoes the commands of a gravity-compensating arm; g_robot(q) is added back.
  Efforts are converted to joint torques before any use (observer, payload identification).
"""
import dataclasses

import numpy as np

import robot_dynamics as rd

from .parameters import ConfigError, section

TORQUE, CURRENT, TORQUE_MINUS_GRAVITY = 'torque', 'current', 'torque_minus_gravity'
PARAMS = section('dynamics_controller', 'hardware_compensates_gravity',
                 'hardware_compensates_payload', 'measured_effort', 'torque_constants')


@dataclasses.dataclass(frozen=True)
class Profile:
    """The hardware profile of one arm: command and effort conversions (model order)."""

    robot_model: rd.Model            # the model whose gravity the robot compensates
    compensates_gravity: bool
    measured_effort: str
    torque_constants: np.ndarray     # model order; None unless measured_effort is current

    def robot_gravity(self, q):
        """g_robot(q): the gravity torque the robot itself compensates."""
        return rd.gravity(self.robot_model, q)

    def command(self, q, tau):
        """The effort to send for a total joint torque τ: τ − g_robot(q) or τ itself."""
        return tau - self.robot_gravity(q) if self.compensates_gravity else tau

    def joint_torque(self, q, effort):
        """Measured ``effort`` (model order) -> joint torque, gravity included."""
        if self.measured_effort == CURRENT:
            return self.torque_constants * effort
        if self.measured_effort == TORQUE_MINUS_GRAVITY:
            return effort + self.robot_gravity(q)
        return effort

    def reported_effort(self, q, tau):
        """The inverse of joint_torque: what such an arm reports for a joint torque τ."""
        if self.measured_effort == CURRENT:
            return tau / self.torque_constants
        if self.measured_effort == TORQUE_MINUS_GRAVITY:
            return tau - self.robot_gravity(q)
        return tau


def profile(values, arm):
    """The Profile of the parameter values for ``arm`` (robot_dynamics.nodes.common.arm.Arm)."""
    constants = None
    if values['measured_effort'] == CURRENT:
        if not len(values['torque_constants']):
            raise ConfigError('measured_effort current needs torque_constants (N m/A at the '
                              'joint, one per joint): the arm reports motor currents')
        constants = arm.per_joint(values, 'torque_constants')   # the schema: each > 0
    robot_model = arm.model if values['hardware_compensates_payload'] else arm.unloaded
    return Profile(robot_model, bool(values['hardware_compensates_gravity']),
                   values['measured_effort'], constants)
