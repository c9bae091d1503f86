"""The regressor τ = Y θ and the base parameters, on the shipped arms and random trees.

References: rd.rnea (the same dynamics computed recursively), Pinocchio's joint-torque regressor
column by column (an independent implementation), and for the base parameters the planar 2R
arm's classical groupings (Khalil & Dombre, Modeling, Identification and Control of Robots,
2002, ch. 12: ZZ1R = ZZ1 + l1² M2, MX1R = MX1 + l1 M2, MY1, ZZ2, MX2, MY2).
"""
import zlib

import numpy as np
import pytest

import robot_dynamics as rd
from random_trees import (ARMS, MORE_ARMS, TREES, PinocchioReference, assert_close, joint_terms,
                          make_case, random_state)
from robot_dynamics.core import regressor as regressor_module
from robot_dynamics.core.model import COULOMB_VELOCITY as COULOMB_EPS
from robot_dynamics.core.regressor import (base_parameters, parameter_names,
                                           parameter_vector, regressor)

EXACT = 1e-10
PIN_ORDER = [0, 1, 2, 3, 4, 7, 5, 8, 9, 6]   # ours -> Pinocchio's (m, h, Ixx Ixy Iyy Ixz Iyz Izz)


@pytest.fixture(scope='module', params=ARMS + MORE_ARMS + TREES)
def case(request):
    case = make_case(request.param)
    model = case.load()
    rng = np.random.default_rng(zlib.crc32(request.param.encode()))
    states = [random_state(model.lower, model.upper, rng) for _ in range(3)]
    return case, model, states


def batch(states):
    return [np.array(x) for x in zip(*states)]


def test_regressor_times_parameters_is_rnea(case):
    _, model, states = case
    theta = parameter_vector(model)
    assert np.array_equal(theta, model.inertia.ravel())
    for q, v, a in states:
        Y = regressor(model, q, v, a)
        assert Y.shape == (model.nv, 10 * model.nb)
        assert_close(Y @ theta, rd.rnea(model, q, v, a), EXACT, label='regressor Y theta')


def test_regressor_matches_pinocchio_column_by_column(case):
    case, model, states = case
    ref = PinocchioReference(case.xml, model.joint_names, base=case.base, gravity=case.gravity)
    for q, v, a in states:
        Y_pin = ref.pin.computeJointTorqueRegressor(ref.model, ref.data, ref.q(q), ref.v(v),
                                                    ref.v(a)).reshape(ref.nv, -1)[ref.iv]
        Y_pin = np.concatenate([Y_pin[:, 10 * (j.id - 1):10 * j.id] for j in ref.joints], axis=1)
        Y = regressor(model, q, v, a).reshape(model.nv, model.nb, 10)[..., PIN_ORDER]
        assert_close(Y.reshape(model.nv, -1), Y_pin, EXACT, label='regressor vs Pinocchio')


def test_batched_regressor_is_per_state(case, monkeypatch):
    _, model, states = case
    monkeypatch.setattr(regressor_module, 'CHUNK', 2)   # several chunks, the last one short
    q, v, a = batch(states)
    Y = regressor(model, q, v, a, viscous=True, coulomb=True, armature=True)
    assert Y.shape == (len(states), model.nv, 13 * model.nv)
    for k, (qk, vk, ak) in enumerate(states):
        assert np.array_equal(Y[k], regressor(model, qk, vk, ak, True, True, True))


def test_friction_and_armature_columns(case):
    """Y θ with the optional columns = rnea + f_v q̇ + f_c tanh(q̇ / ε) + I_a q̈, in that order."""
    _, model, states = case
    rng = np.random.default_rng(7)
    fv, fc, ia = rng.uniform(0.1, 2.0, (3, model.nv))
    names = parameter_names(model, viscous=True, coulomb=True, armature=True)
    assert names[10 * model.nb] == f'{model.joint_names[0]}.viscous'
    assert names[-1] == f'{model.joint_names[-1]}.armature'
    for q, v, a in states:
        tau = rd.rnea(model, q, v, a)
        friction = fv * v + fc * np.tanh(v / COULOMB_EPS)
        expected = {(True, True, True): tau + friction + ia * a,
                    (True, False, False): tau + fv * v,
                    (False, True, False): tau + fc * np.tanh(v / COULOMB_EPS),
                    (False, False, True): tau + ia * a,
                    (False, True, True): tau + fc * np.tanh(v / COULOMB_EPS) + ia * a}
        for flags, tau_expected in expected.items():
            kwargs = dict(zip(('viscous', 'coulomb', 'armature'), flags))
            Y = regressor(model, q, v, a, **kwargs)
            given = (x if f else None for x, f in zip((fv, fc, ia), flags))
            theta = parameter_vector(model, *given)
            assert len(parameter_names(model, **kwargs)) == Y.shape[1] == len(theta)
            assert_close(Y @ theta, tau_expected, EXACT)


def test_the_models_own_joint_terms(case, monkeypatch):
    """Y θ with parameter_vector(model, True, True, True, True) is rnea of the model (ε, v_s)."""
    _, rigid, states = case
    monkeypatch.setattr(regressor_module, 'CHUNK', 2)
    model = rigid.replace(**joint_terms(rigid.nv, np.random.default_rng(4)))
    flags = dict(viscous=True, coulomb=True, armature=True, stiction=True)
    theta = parameter_vector(model, **flags)
    assert_close(theta, np.concatenate([model.inertia.ravel(), model.viscous, model.coulomb,
                                        model.armature, model.stiction]), 0.0)
    q, v, a = batch(states)
    assert_close(regressor(model, q, v, a, **flags) @ theta, rd.rnea(model, q, v, a), EXACT,
                 label='regressor with joint terms')
    assert_close(regressor(model, q, v, a) @ parameter_vector(model), rd.rnea(rigid, q, v, a),
                 EXACT)   # without the flags: the rigid bodies alone
    for state in states:
        assert_close(regressor(model, *state, **flags) @ theta, rd.rnea(model, *state), EXACT)
    assert np.array_equal(parameter_vector(model, False, None, False), model.inertia.ravel())
    assert np.array_equal(parameter_vector(model, np.True_), theta[:len(theta) - 3 * model.nv])


def test_coulomb_is_smooth_sign():
    model = make_case('chain-3-7').load()
    q, a = np.zeros(model.nv), np.zeros(model.nv)
    v = np.array([0.0, COULOMB_EPS, 100 * COULOMB_EPS])
    column = np.diag(regressor(model, q, v, a, coulomb=True)[:, -model.nv:])
    assert_close(column, [0.0, np.tanh(1.0), 1.0], 1e-12)


def test_stiction_column_is_the_stribeck_term():
    """Column f_s,i: exp(−(q̇_i / v_s,i)²) tanh(q̇_i / ε) in closed form, and ∂τ/∂f_s of rnea."""
    rigid = make_case('chain-3-7').load()
    model = rigid.replace(stribeck_velocity=[0.05, 0.2, 1.0], stiction=[0.3, 0.0, 0.1])
    rng = np.random.default_rng(6)
    q, a = rng.normal(size=(2, model.nv))
    v = np.array([0.05, -0.1, 2.0])
    Y = regressor(model, q, v, a, coulomb=True, stiction=True)
    assert Y.shape == (model.nv, 10 * model.nb + 2 * model.nv)
    assert parameter_names(model, stiction=True)[-1] == 'joint3.stiction'
    expected = np.exp(-np.array([1.0, 0.25, 4.0])) * np.tanh(v / COULOMB_EPS)
    assert_close(Y[:, -model.nv:], np.diag(expected), 1e-15)
    h = 0.1   # τ is linear in f_s: the difference quotient is exact up to round-off
    for i in range(model.nv):
        stiction = model.stiction + h * np.eye(model.nv)[i]
        column = (rd.rnea(model.replace(stiction=stiction), q, v, a) - rd.rnea(model, q, v, a)) / h
        assert_close(Y[:, 10 * model.nb + model.nv + i], column, 1e-12)
    assert_close(regressor(model, q, v, a, stiction=True, stribeck=[1.0, 2.0, 3.0])[:, -3:],
                 np.diag([1.0, 2.0, 3.0]), 0.0)   # given (filtered) column values


def test_regressor_rejects_bad_shapes():
    model = make_case('chain-3-7').load()
    with pytest.raises(ValueError, match=r'\(3,\)'):
        regressor(model, np.zeros(2), np.zeros(2), np.zeros(2))
    with pytest.raises(ValueError):
        regressor(model, np.zeros((4, 3)), np.zeros((4, 3)), np.zeros((3, 3)))


# ---- base parameters ----

def test_base_regressor_reproduces_torques_with_full_rank(case):
    _, model, states = case
    rng = np.random.default_rng(3)
    fv, fc, ia = rng.uniform(0.1, 2.0, (3, model.nv))
    for flags, theta in (({}, parameter_vector(model)),
                         (dict(viscous=True, coulomb=True, armature=True),
                          parameter_vector(model, fv, fc, ia))):
        base = base_parameters(model, **flags)
        assert base.count < len(theta)
        assert base.P.shape == (base.count, len(theta))
        q, v, a = batch(states)
        Y = regressor(model, q, v, a, **flags)
        assert_close(base.regressor(model, q, v, a), Y[..., base.independent], 0.0)
        assert_close(base.regressor(model, q, v, a) @ base(theta), Y @ theta, EXACT,
                     label='base regressor')
        # full column rank on fresh states, with a singular-value gap to the full regressor's
        lower = np.where(np.isfinite(model.lower), model.lower, -np.pi)
        upper = np.where(np.isfinite(model.upper), model.upper, np.pi)
        q = rng.uniform(lower, upper, (60, model.nv))
        v, a = rng.normal(size=(2, 60, model.nv))
        W = regressor(model, q, v, a, **flags).reshape(60 * model.nv, -1)
        s = np.linalg.svd(W[:, base.independent] / np.linalg.norm(W[:, base.independent], axis=0),
                          compute_uv=False)
        assert s[-1] > 1e-6 * s[0]
        assert np.linalg.matrix_rank(W) == base.count


def planar_2r(l1=0.7, gravity=(0.0, -9.81, 0.0)):
    """Two revolute joints about z, link 1 of length l1 along x: gravity in the plane by default."""
    def inertial(mass, com, ixx, iyy, izz):
        return (f'<inertial><origin xyz="{com}"/><mass value="{mass}"/><inertia ixx="{ixx}" '
                f'iyy="{iyy}" izz="{izz}" ixy="0.01" ixz="0.02" iyz="0.03"/></inertial>')
    xml = f"""<robot name="planar_2r">
      <link name="base"/>
      <link name="link1">{inertial(2.0, '0.3 0.05 0.02', 0.2, 0.3, 0.4)}</link>
      <link name="link2">{inertial(1.5, '0.25 -0.04 0.03', 0.1, 0.2, 0.25)}</link>
      <joint name="joint1" type="revolute"><parent link="base"/><child link="link1"/>
        <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="10" velocity="2"/></joint>
      <joint name="joint2" type="revolute"><parent link="link1"/><child link="link2"/>
        <origin xyz="{l1} 0 0"/><axis xyz="0 0 1"/>
        <limit lower="-3" upper="3" effort="10" velocity="2"/></joint>
    </robot>"""
    return rd.load_urdf(xml, gravity=gravity)


def parameter_combination(names, **terms):
    """A row vector over the parameters ``names`` from terms like joint1_Izz=1.0, joint2_m=0.49."""
    c = np.zeros(len(names))
    for key, value in terms.items():
        c[names.index(key.replace('_', '.', 1))] = value
    return c


@pytest.mark.parametrize('gravity, count', [((0.0, -9.81, 0.0), 6), ((0.0, 0.0, -9.81), 4)])
def test_planar_2r_base_parameters_are_the_classical_groupings(gravity, count):
    """Gravity in the plane: ZZ1R, MX1R, MY1, ZZ2, MX2, MY2.

    With gravity along the axes, the first link's MX1R and MY1 never act: 4 remain. The rows
    of P span exactly these combinations.
    """
    l1 = 0.7
    model = planar_2r(l1, gravity)
    base = base_parameters(model)
    assert base.count == count
    names = parameter_names(model)
    groups = [parameter_combination(names, joint1_Izz=1.0, joint2_m=l1 ** 2),
              parameter_combination(names, joint2_Izz=1.0),
              parameter_combination(names, joint2_mx=1.0),
              parameter_combination(names, joint2_my=1.0)]
    if count == 6:
        groups += [parameter_combination(names, joint1_mx=1.0, joint2_m=l1),
                   parameter_combination(names, joint1_my=1.0)]
    stacked = np.vstack([base.P, groups])
    assert np.linalg.matrix_rank(stacked, tol=1e-8) == count


def test_planar_2r_armature_of_the_first_joint_merges_with_its_inertia():
    """Ia1 only ever multiplies q̈1 on row 1, exactly as ZZ1R does: 6 + Ia2 + 2 f_v + 2 f_c."""
    model = planar_2r()
    assert base_parameters(model, armature=True).count == 7
    assert base_parameters(model, viscous=True, coulomb=True, armature=True).count == 11
    base = base_parameters(model, armature=True)
    names = parameter_names(model, armature=True)
    merged = parameter_combination(names, joint1_Izz=1.0, joint2_m=0.49, joint1_armature=1.0)
    alone = parameter_combination(names, joint1_armature=1.0)
    assert np.linalg.matrix_rank(np.vstack([base.P, merged]), tol=1e-8) == 7
    assert np.linalg.matrix_rank(np.vstack([base.P, alone]), tol=1e-8) == 8


def test_panda_has_43_base_inertial_parameters():
    """A 7R arm without parallel consecutive axes, first axis vertical: 7 n - 6 = 43.

    Khalil & Dombre's grouping rules: 1 for link 1 (ZZ1R), 7 for each other link once M, MZ
    and YY are grouped into its parent's parameters.
    """
    model = make_case(ARMS[0]).load()
    assert base_parameters(model).count == 43
