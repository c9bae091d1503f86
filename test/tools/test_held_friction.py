"""What a wrench estimate can know at rest when dry friction holds (core.observers).

``held_friction_error`` against a closed form on one joint, and against the holding plant
(plant.REALISTIC_STICTION, in process): with the plant's own model in the estimator, the bias
at rest and the error of a push held at rest are the held torques' and stay within the bound.
"""
import numpy as np
import pytest

import robot_dynamics as rd
from robot_dynamics.demo import realistic as scene
from robot_dynamics.core.control import GravityCompensation
from robot_dynamics.core.observers import held_friction_error
from robot_dynamics.simulation import plant
from test_identification_any_arm import foreign_arm, plant_model

ONE_JOINT = """<robot name="one">
  <link name="base"/>
  <link name="arm"><inertial><mass value="1"/><origin xyz="0.2 0 0"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="tip"/>
  <joint name="j" type="revolute"><parent link="base"/><child link="arm"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="10" velocity="2"/></joint>
  <joint name="t" type="fixed"><parent link="arm"/><child link="tip"/>
    <origin xyz="{l} 0 0"/></joint>
</robot>"""


@pytest.mark.parametrize('length', [0.1, 0.5, 2.0])
def test_one_joint_closed_form(length):
    """τ = Jᵀ F, J = (0, 0, 1, 0, l, 0): minimum-norm F = J τ / (1 + l²), |force| l τ / (1 + l²)."""
    model = rd.load_urdf(ONE_JOINT.format(l=length), 'base', 'tip')
    f_s = 0.3
    expected = length * f_s / (1.0 + length ** 2)
    assert held_friction_error(model, [0.4], f_s, 'tip', damping=0.0) == pytest.approx(
        expected, rel=1e-9)
    assert held_friction_error(model, [0.4], f_s, 'tip', exact_up_to=0,
                               damping=0.0) == pytest.approx(expected, rel=1e-9)


def test_the_sum_bound_is_above_the_exact_maximum():
    model = rd.load_urdf(rd.robot_urdf('panda'), 'panda_link0', 'panda_hand_tcp')
    q = np.array([0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.8])
    exact = held_friction_error(model, q, 0.3, model.tip)
    assert 0.0 < exact <= held_friction_error(model, q, 0.3, model.tip, exact_up_to=0)
    assert held_friction_error(model, q, 0.6, model.tip) == pytest.approx(2 * exact)
    with pytest.raises(ValueError, match='breakaway'):
        held_friction_error(model, q, -0.1, model.tip)


@pytest.mark.parametrize('robot', ['panda', 'ur5e', 'kinova'])
def test_a_model_exact_but_for_held_friction_errs_within_the_bound(robot):
    """Held at rest on the holding plant, the estimator on the plant's own model.

    What is left of the bias and of the push error is the held torques, mapped to the tip:
    each within ``held_friction_error`` at the pose (f_s = 0.3 N m). On the Kinova at
    mid-range, whose tip is near its shoulder's axes, that bound is tens of newtons.
    """
    arm = foreign_arm(robot) if robot == 'kinova' else scene.shipped_arm(robot)
    profile = plant.REALISTIC_STICTION
    model = plant_model(arm, profile)
    held = scene.step(arm, model, profile, 'internal', {})
    bound = held_friction_error(model, arm.q0 + scene.STEP, profile['plant.stiction'], arm.tip)
    print(robot, held, 'bound', bound)
    assert held['step_steady_max_rad'] < 0.05   # at the step's pose, to within the bound's pose
    assert held['wrench_bias_n'] <= bound and held['push_error_n'] <= bound


def test_a_push_the_friction_holds_changes_no_measurement():
    """The unobservability itself: held at rest, a push within the friction's margin.

    Gravity compensation on the plant's own model holds the Panda; after 0.5 s a wrench whose
    joint torques are at most half of f_s is applied, or not. Friction holds the arm in both
    runs, so position, velocity and effort, every sample of them, are the same: no estimator
    of these signals can tell the push from no push.
    """
    arm = scene.shipped_arm('panda')
    profile = plant.REALISTIC_STICTION
    model = plant_model(arm, profile)
    J = rd.frame_jacobian(model, arm.q0, arm.tip, rd.LOCAL_WORLD_ALIGNED)
    wrench = np.r_[0.0, 0.0, 0.0, 0.0, 0.0, -1.0]
    wrench *= 0.5 * profile['plant.stiction'] / np.abs(J.T @ wrench).max()
    law = GravityCompensation(model)
    runs = []
    for applied in (None, wrench):
        loop = scene.new_loop(arm, profile, 'internal')
        loop.run(lambda t, q, v: law(q), 0.5)
        runs.append(loop.run(lambda t, q, v: law(q), 2.0, wrench=applied))
    (_, q0, v0, e0, _), (_, q1, v1, e1, _) = runs
    assert np.linalg.norm(wrench[3:]) > 0.1   # a force an estimator should see
    assert np.array_equal(q0, q1) and np.array_equal(v0, v1) and np.array_equal(e0, e1)
