"""Simulation engines (internal RK4, MuJoCo RK4) on the shipped arms, against each other and rd.*.

The engines take their joints in reverse model order here, so every comparison with rd.* also
checks the mapping by name. Run with -s for the per-step cost of each engine.
"""
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import robot_dynamics as rd
from robot_dynamics.simulation import make_engine, simulate
from robot_dynamics.simulation.mujoco_engine import matrix_rpy

ARMS = {
    'panda': ('panda_link0', 'panda_hand', [0.1, -0.6, 0.2, -2.0, 0.1, 1.6, 0.7]),
    'ur5e': ('base_link', 'tool0', [0.3, -1.2, 1.4, -1.6, -1.5, 0.2]),
}
ENGINES = ('internal', 'mujoco')
DT = 1e-3
PAYLOAD = dict(mass=1.3, com=(0.02, -0.01, 0.06),
               inertia=[[4e-3, 2e-4, -1e-4], [2e-4, 5e-3, 3e-4], [-1e-4, 3e-4, 3e-3]])


def urdf(arm):
    with open(rd.robot_urdf(arm)) as f:
        return f.read()


def arm_engine(arm, engine, base=None, tip=None, **kwargs):
    """(engine, rd model without payload); the engine's joints are in reverse model order."""
    base_, tip_, q0 = ARMS[arm]
    model = rd.load_urdf(urdf(arm), base=base or base_, tip=tip or tip_)
    q0 = np.clip(np.asarray(q0)[:model.nv], model.lower, model.upper)
    sim = make_engine(engine, urdf(arm), model.base, model.tip, model.joint_names[::-1],
                      np.asarray(q0)[::-1], DT, **kwargs)
    return sim, model


def energy(model, xml, q, v):
    """½ q̇ᵀ M q̇ − Σ m gᵀ c over the URDF's links, c each link's COM placed by rd.frame_pose."""
    potential = 0.0
    for link in ET.fromstring(xml).findall('link'):
        inertial = link.find('inertial')
        if inertial is None or link.get('name') not in model.frame_names:
            continue
        origin = inertial.find('origin')
        com = [float(x) for x in origin.get('xyz').split()] if origin is not None else [0, 0, 0]
        T = rd.frame_pose(model, q, link.get('name'))
        mass = float(inertial.find('mass').get('value'))
        potential -= mass * model.gravity @ (T[:3, :3] @ com + T[:3, 3])
    return 0.5 * v @ rd.mass_matrix(model, q) @ v + potential


@pytest.mark.parametrize('arm', ARMS)
def test_engines_agree_on_a_driven_trajectory(arm):
    """τ = g(q) + a sinusoid, damping and a tip wrench (tip axes, then base axes): 0.5 s.

    Free joints: the engines' end stops differ (an impact, a soft constraint), their dynamics not.
    """
    damping = np.linspace(0.2, 1.0, len(ARMS[arm][2]))
    sims = [arm_engine(arm, engine, damping=damping, end_stops=False)[0] for engine in ENGINES]
    model = sims[0].model
    wrench = np.array([0.3, -0.2, 0.1, 4.0, -3.0, 5.0])
    for k in range(500):
        for sim in sims:
            q = sim.q[::-1]
            tau = rd.gravity(model, q)[::-1] + 2.0 * np.sin(8.0 * sim.time + np.arange(model.nv))
            sim.step(tau, wrench, 'tip' if k < 250 else 'base')
            np.testing.assert_array_equal(sim.effort, tau)
    internal, mujoco = sims
    assert internal.time == mujoco.time == pytest.approx(0.5)
    assert np.abs(internal.q - np.asarray(ARMS[arm][2])[::-1]).max() > 0.05  # it did move
    np.testing.assert_allclose(mujoco.q, internal.q, rtol=0, atol=1e-9)
    np.testing.assert_allclose(mujoco.v, internal.v, rtol=0, atol=1e-8)


@pytest.mark.parametrize('arm', ARMS)
def test_engines_agree_with_armature_and_friction(arm):
    """The arm's own armature and friction (stiction too), beside D; q̈ = rd.forward_dynamics.

    The joint terms are given in joint_names order (the reverse of the model's).
    """
    n = len(ARMS[arm][2])
    joint_dynamics = dict(armature=np.linspace(0.3, 0.1, n), viscous=np.linspace(0.5, 0.1, n),
                          coulomb=np.linspace(0.3, 1.0, n), coulomb_velocity=0.02,
                          stiction=np.linspace(0.5, 0.2, n), stribeck_velocity=0.3)
    damping = np.linspace(0.2, 1.0, n)
    sims = [arm_engine(arm, engine, damping=damping, joint_dynamics=joint_dynamics)[0]
            for engine in ENGINES]
    model = sims[0].model
    for name in ('armature', 'viscous', 'coulomb', 'stiction'):   # the engines' joints reversed
        np.testing.assert_array_equal(getattr(model, name), joint_dynamics[name][::-1])
    np.testing.assert_array_equal(model.stribeck_velocity, np.full(n, 0.3))
    assert model.coulomb_velocity == 0.02 and sims[1].joint_dynamics == joint_dynamics
    wrench = np.array([0.3, -0.2, 0.1, 4.0, -3.0, 5.0])
    for k in range(500):
        for sim in sims:
            tau = rd.gravity(model, sim.q[::-1])[::-1] + 2.0 * np.sin(8.0 * sim.time + np.arange(n))
            sim.step(tau, wrench, 'tip' if k < 250 else 'base')
    internal, mujoco = sims
    assert np.abs(internal.q - np.asarray(ARMS[arm][2])[::-1]).max() > 0.05
    assert np.abs(internal.v).max() > 0.1   # through the Coulomb band |q̇| < ε and beyond
    np.testing.assert_allclose(mujoco.q, internal.q, rtol=0, atol=1e-9)
    np.testing.assert_allclose(mujoco.v, internal.v, rtol=0, atol=1e-8)
    tau = np.random.default_rng(3).normal(0.0, 2.0, n)
    for sim in sims:
        q, v = sim.q[::-1], sim.v[::-1]
        expected = rd.forward_dynamics(model, q, v, (tau - damping * sim.v)[::-1])[::-1]
        np.testing.assert_allclose(sim.acceleration(tau), expected, rtol=1e-9, atol=1e-9)


def rk4_of_public_functions(model, q, v, tau, damping, F, h=DT):
    """One classical RK4 step composed of rd.forward_dynamics and rd.frame_jacobian (numpy).

    Model order; J^T F summed over F's rows in order (numpy's axis-0 sum), F None: none.
    """
    def qdd(q, v):
        torque = tau - damping * v
        if F is not None:
            J = rd.frame_jacobian(model, q, model.tip, rd.LOCAL_WORLD_ALIGNED)
            torque = torque + (J * F[:, None]).sum(axis=0)
        return rd.forward_dynamics(model, q, v, torque)

    a1 = qdd(q, v)
    v2 = v + h / 2 * a1
    a2 = qdd(q + h / 2 * v, v2)
    v3 = v + h / 2 * a2
    a3 = qdd(q + h / 2 * v2, v3)
    v4 = v + h * a3
    a4 = qdd(q + h * v3, v4)
    return q + h / 6 * (v + 2 * v2 + 2 * v3 + v4), v + h / 6 * (a1 + 2 * a2 + 2 * a3 + a4)


def bits(x):
    return np.asarray(x, dtype=float).view(np.uint64)


@pytest.mark.parametrize('arm', ARMS)
def test_internal_steps_are_rk4_of_the_public_functions_to_the_bit(arm):
    """300 steps, τ varying, with joint friction, payload, damping, a wrench in either frame.

    Every third step through ``sensed_step`` (τ = command − friction, the effort command − D q̇),
    the others through ``step``; both must give the composition's bits.
    """
    n = len(ARMS[arm][2])
    terms = dict(armature=np.linspace(0.3, 0.1, n), viscous=np.linspace(0.5, 0.1, n),
                 coulomb=np.linspace(0.3, 1.0, n), coulomb_velocity=0.02,
                 stiction=np.linspace(0.5, 0.2, n), stribeck_velocity=0.3)
    damping = np.linspace(0.2, 1.0, n)
    sim, bare = arm_engine(arm, 'internal', damping=damping, payload=PAYLOAD,
                           joint_dynamics=terms)
    model, order = sim.model, sim.order   # order: model index of each of the engine's joints
    D, q, v = np.empty(n), np.empty(n), np.zeros(n)
    D[order], q[order] = damping, sim.q
    assert model.armature.any() and model.stiction.any()      # the joint terms
    assert np.abs(rd.gravity(model, q) - rd.gravity(bare, q)).max() > 1.0   # and the payload
    rng = np.random.default_rng(7)
    for k in range(300):
        wrench, frame = [(None, 'base'), (rng.normal(0.0, 5.0, 6), 'base'),
                         (rng.normal(0.0, 5.0, 6), 'tip')][k // 20 % 3]
        F = wrench
        if frame == 'tip':
            R = rd.frame_pose(model, q, model.tip)[:3, :3]
            F = np.concatenate([R @ wrench[:3], R @ wrench[3:]])
        command = rd.gravity(model, q) + 4.0 * np.sin(8.0 * k * DT + np.arange(n)) \
            + rng.normal(0.0, 0.5, n)
        if k % 3 == 2:
            friction, effort = rng.normal(0.0, 0.5, n), np.empty(n)
            sim.sensed_step(command, friction, effort, wrench, frame)
            np.testing.assert_array_equal(bits(effort), bits(command - D * v))
            tau = command - friction
        else:
            tau = command
            sim.step(command[order], wrench, frame)
        np.testing.assert_array_equal(bits(sim.effort), bits(tau[order]))
        q, v = rk4_of_public_functions(model, q, v, tau, D, F)
        np.testing.assert_array_equal(bits(sim.q), bits(q[order]))
        np.testing.assert_array_equal(bits(sim.v), bits(v[order]))
    assert np.abs(v).max() > 0.1 and sim.steps == 300


def test_internal_steps_with_mimic_joints_are_rk4_of_the_public_functions():
    """A whole Panda tree whose second finger mimics the first: the stages by the public path."""
    from mimic_panda import MODEL
    rng = np.random.default_rng(8)
    damping = rng.uniform(0.1, 1.0, MODEL.nv)
    q = np.clip(rng.normal(0.0, 0.5, MODEL.nv), MODEL.lower, MODEL.upper)
    sim = simulate('internal', MODEL, MODEL.joint_names, q, DT, damping=damping,
                   end_stops=False)   # the stages alone (end stops: test_simulator_safety)
    v = np.zeros(MODEL.nv)
    for _ in range(50):
        tau = rd.gravity(MODEL, q) + rng.normal(0.0, 2.0, MODEL.nv)
        sim.step(tau)
        q, v = rk4_of_public_functions(MODEL, q, v, tau, damping, None)
        np.testing.assert_array_equal(bits(sim.q), bits(q))
        np.testing.assert_array_equal(bits(sim.v), bits(v))
    assert np.abs(v).max() > 0.01


@pytest.mark.parametrize('sensed', [False, True], ids=['step', 'sensed_step'])
def test_a_diverging_step_raises_and_leaves_the_state_as_it_was(sensed):
    """Coulomb friction far too stiff for RK4 at this step (simulation module docstring).

    The state runs away to non-finite values; the step from there raises and leaves it. Free
    joints: an end stop would catch the runaway joint.
    """
    sim, model = arm_engine('panda', 'internal', joint_dynamics=dict(coulomb=1e4,
                                                                     coulomb_velocity=1e-4),
                            end_stops=False)
    zero, effort = np.zeros(model.nv), np.empty(model.nv)
    with pytest.raises(ValueError, match='tau must be 7 finite'):
        sim.sensed_step(np.full(model.nv, np.inf), zero, effort)
    tau = rd.gravity(model, sim.q[::-1]) + 1.0
    for _ in range(1000):
        q, v = sim.q, sim.v
        try:
            sim.sensed_step(tau, zero, effort) if sensed else sim.step(tau[::-1])
        except ValueError as error:
            assert 'not positive definite' in str(error)
            break
    else:
        pytest.fail('did not diverge')
    assert sim.steps > 1
    np.testing.assert_array_equal(sim.q, q)
    np.testing.assert_array_equal(sim.v, v)


@pytest.mark.parametrize('engine', ENGINES)
@pytest.mark.parametrize('arm', ARMS)
def test_gravity_compensation_holds_the_arm(arm, engine):
    sim, model = arm_engine(arm, engine)
    q0 = sim.q
    for _ in range(1000):
        sim.step(rd.gravity(model, sim.q[::-1])[::-1])
    assert sim.time == pytest.approx(1.0)
    assert np.abs(sim.q - q0).max() < 1e-9
    assert np.abs(sim.v).max() < 1e-8


@pytest.mark.parametrize('engine', ENGINES)
@pytest.mark.parametrize('arm', ARMS)
@pytest.mark.parametrize('frame, reference', [('base', rd.LOCAL_WORLD_ALIGNED), ('tip', rd.LOCAL)])
@pytest.mark.parametrize('wrench', [(0, 0, 0, 3.0, -5.0, 8.0), (0.7, 0.4, -0.9, 0, 0, 0)],
                         ids=['force', 'moment'])
def test_tip_wrench_accelerates_a_held_arm_by_inverse_mass_times_jt_f(
        arm, engine, frame, reference, wrench):
    """At rest with τ = g: q̈ = M⁻¹ Jᵀ F, J of the tip in the wrench's axes (rd.* reference)."""
    sim, model = arm_engine(arm, engine)
    q = sim.q[::-1]
    tau = rd.gravity(model, q)[::-1]
    J = rd.frame_jacobian(model, q, model.tip, reference)
    expected = np.linalg.solve(rd.mass_matrix(model, q), J.T @ wrench)[::-1]
    np.testing.assert_allclose(sim.acceleration(tau, wrench, frame), expected,
                               rtol=0, atol=1e-9 * np.abs(expected).max())
    sim.step(tau, wrench, frame)   # the first step from rest: q̇(dt) = q̈ dt + O(dt³)
    np.testing.assert_allclose(sim.v / DT, expected, rtol=0, atol=2e-4 * np.abs(expected).max())


@pytest.mark.parametrize('engine', ENGINES)
@pytest.mark.parametrize('arm', ARMS)
def test_payload_changes_the_dynamics_as_with_payload_predicts(arm, engine):
    sim, model = arm_engine(arm, engine, payload=PAYLOAD)
    loaded = rd.with_payload(model, **PAYLOAD)
    q, zero = sim.q[::-1], np.zeros(model.nv)
    g, g_loaded = rd.gravity(model, q), rd.gravity(loaded, q)
    assert np.abs(g_loaded - g).max() > 1.0            # the payload weighs on the joints
    np.testing.assert_allclose(sim.acceleration(g_loaded[::-1]), zero, atol=1e-10)
    np.testing.assert_allclose(sim.acceleration(g[::-1])[::-1],
                               np.linalg.solve(rd.mass_matrix(loaded, q), g - g_loaded),
                               rtol=1e-9, atol=1e-12)
    tau = np.random.default_rng(1).normal(0.0, 3.0, model.nv)
    for _ in range(100):                               # get moving: Coriolis terms too
        sim.step(g_loaded[::-1] + tau)
    q, v = sim.q[::-1], sim.v[::-1]
    np.testing.assert_allclose(sim.acceleration(tau)[::-1],
                               rd.forward_dynamics(loaded, q, v, tau[::-1]), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize('engine', ENGINES)
@pytest.mark.parametrize('arm', ARMS)
def test_energy_is_conserved_without_torque_or_damping(arm, engine):
    """Free joints (the arm falls through its limits: end stops would take energy)."""
    sim, model = arm_engine(arm, engine, end_stops=False)
    xml, energies, kinetic = urdf(arm), [], []
    for k in range(1001):
        if k % 20 == 0:
            q, v = sim.q[::-1], sim.v[::-1]
            energies.append(energy(model, xml, q, v))
            kinetic.append(0.5 * v @ rd.mass_matrix(model, q) @ v)
        sim.step(np.zeros(model.nv))
    assert max(kinetic) > 1.0                          # the arm fell a long way
    assert np.ptp(energies) < 1e-6 * max(kinetic)


@pytest.mark.parametrize('engine', ENGINES)
@pytest.mark.parametrize('arm, base, tip', [('panda', 'panda_link1', 'panda_link3'),
                                            ('ur5e', 'upper_arm_link', 'tool0')])
def test_sub_chain_with_a_base_below_the_root(arm, base, tip, engine):
    """Make the base MuJoCo's world; the panda's joint 4 is locked at its limit -0.0698, not 0."""
    sim, model = arm_engine(arm, engine, base=base, tip=tip, payload=PAYLOAD)
    loaded = rd.with_payload(model, **PAYLOAD)
    tau = np.random.default_rng(2).normal(0.0, 2.0, model.nv)
    for _ in range(100):
        sim.step(tau)
    q, v = sim.q[::-1], sim.v[::-1]
    np.testing.assert_allclose(sim.acceleration(tau)[::-1],
                               rd.forward_dynamics(loaded, q, v, tau[::-1]), rtol=1e-9, atol=1e-9)


def test_arguments_are_checked():
    xml, (base, tip, q0) = urdf('ur5e'), ARMS['ur5e']
    names = rd.load_urdf(xml, base=base, tip=tip).joint_names
    with pytest.raises(ValueError, match='unknown simulation engine'):
        make_engine('bullet', xml, base, tip, names, q0, DT)
    with pytest.raises(ValueError, match='each joint of the chain'):
        make_engine('internal', xml, base, tip, names[:-1], q0[:-1], DT)
    with pytest.raises(ValueError, match='dt must be > 0'):
        make_engine('internal', xml, base, tip, names, q0, 0.0)
    with pytest.raises(ValueError, match='damping must be 6 finite'):
        make_engine('internal', xml, base, tip, names, q0, DT, damping=[1.0, 2.0])
    with pytest.raises(ValueError, match='joint_dynamics takes armature, viscous, coulomb'):
        make_engine('internal', xml, base, tip, names, q0, DT, joint_dynamics=dict(damping=1.0))
    with pytest.raises(ValueError, match='coulomb must be 6 finite numbers >= 0'):
        make_engine('mujoco', xml, base, tip, names, q0, DT, joint_dynamics=dict(coulomb=-1.0))
    with pytest.raises(ValueError, match='armature must be 6 finite'):
        make_engine('mujoco', xml, base, tip, names, q0, DT, joint_dynamics=dict(armature=[1.0]))
    sim = make_engine('mujoco', xml, base, tip, names, q0, DT, damping=0.5)
    with pytest.raises(ValueError, match='tau must be 6 finite'):
        sim.step(np.full(6, np.nan))
    with pytest.raises(ValueError, match="wrench_frame must be 'base' or 'tip'"):
        sim.step(np.zeros(6), np.ones(6), 'world')
    with pytest.raises(ValueError, match='wrench must be 6 finite'):
        sim.step(np.zeros(6), np.ones(3))
    assert sim.time == 0.0


@pytest.mark.parametrize('field', ['position', 'velocity', 'acceleration'])
def test_mujoco_divergence_is_an_error_not_a_reset_to_qpos0(field, tmp_path, monkeypatch):
    """MuJoCo resets a state beyond 1e10 to qpos0 and goes on: the engine must raise instead."""
    monkeypatch.chdir(tmp_path)   # where MuJoCo writes MUJOCO_LOG.TXT
    sim, model = arm_engine('ur5e', 'mujoco')
    q0 = sim.q.copy()
    q, v, tau = q0.copy(), np.zeros(model.nv), np.zeros(model.nv)
    {'position': q, 'velocity': v, 'acceleration': tau}[field][1] = 1e12
    sim.set_state(q, v)
    with pytest.raises(ValueError, match=f'MuJoCo: non-finite or huge {field} at t = 0.0010 s'):
        sim.step(tau)


def test_missing_mujoco_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, 'mujoco', None)    # import mujoco now raises ImportError
    base, tip, q0 = ARMS['ur5e']
    xml = urdf('ur5e')
    names = rd.load_urdf(xml, base=base, tip=tip).joint_names
    with pytest.raises(ImportError, match='pip install mujoco'):
        make_engine('mujoco', xml, base, tip, names, q0, DT)


@pytest.mark.parametrize('pitch', [0.3, np.pi / 2, -np.pi / 2])
def test_matrix_rpy_inverts_urdf_rpy(pitch):
    """The locked joints' origins go through it; pitch ±π/2 is the gimbal lock."""
    from robot_dynamics.core.spatial import rpy_matrix
    R = rpy_matrix((0.4, pitch, -1.1))
    np.testing.assert_allclose(rpy_matrix(matrix_rpy(R)), R, atol=1e-12)
