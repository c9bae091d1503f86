"""The internal engine's dry friction that holds, measured before it is trusted.

A single joint (a hand-written URDF, its inertia about the axis worked out here): under a
constant torque below its breakaway torque it does not move at all over 5 s (where the smooth
tanh law creeps); above it, it slides with q̈ = (τ − [f_c + (f_s − f_c) exp(−(q̇/v_s)²)]
sign(q̇) − f_v q̇) / I at every step. The Panda, coupled: friction never adds kinetic energy
and brings a spinning arm to rest, where it stays; released under gravity within every joint's
holding capacity (g(q) from Pinocchio) it stays exactly put; a shoulder whose capacity is below
its gravity load slides down while the joints holding theirs stay put. A few seconds.
"""
import numpy as np
import pinocchio
import pytest

import robot_dynamics as rd
from robot_dynamics.simulation import make_engine

DT = 1e-3
MASS, COM, IZZ, ARMATURE = 2.0, 0.3, 0.01, 0.05   # the single joint's link and rotor
INERTIA = IZZ + MASS * COM ** 2 + ARMATURE          # about the joint axis (parallel axes)
COULOMB, BREAKAWAY, STRIBECK, VISCOUS = 0.2, 0.3, 0.05, 0.3
SINGLE = f"""<robot name="single">
  <link name="base"/>
  <link name="arm">
    <inertial><origin xyz="{COM} 0 0"/><mass value="{MASS}"/>
      <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="{IZZ}"/></inertial>
  </link>
  <joint name="j" type="continuous"><parent link="base"/><child link="arm"/>
    <axis xyz="0 0 1"/><limit effort="100" velocity="10"/></joint>
</robot>"""
PANDA_Q0 = np.array([0.1, -0.6, 0.2, -2.0, 0.1, 1.6, 0.7])


def single_joint(dry=True, coulomb_velocity=0.01):
    """The joint about a vertical axis (gravity does not load it), its friction as above."""
    terms = dict(armature=ARMATURE, viscous=VISCOUS, coulomb=COULOMB,
                 coulomb_velocity=coulomb_velocity)
    if not dry:   # the smooth law: Stribeck excess in the model, tanh(q̇ / ε)
        terms.update(stiction=BREAKAWAY - COULOMB, stribeck_velocity=STRIBECK)
    sim = make_engine('internal', SINGLE, 'base', 'arm', ['j'], [0.0], DT, joint_dynamics=terms)
    if dry:
        sim.hold_dry_friction(BREAKAWAY, STRIBECK)
    return sim


def run(sim, tau, seconds):
    q, v = [], []
    for _ in range(int(round(seconds / DT))):
        sim.step(np.atleast_1d(tau))
        q.append(sim.q.copy()), v.append(sim.v.copy())
    return np.array(q), np.array(v)


@pytest.mark.parametrize('fraction', [0.5, 0.99])
def test_a_torque_below_breakaway_does_not_creep(fraction):
    for sign in (1.0, -1.0):
        sim = single_joint()
        q, v = run(sim, sign * fraction * BREAKAWAY, 5.0)
        assert np.abs(q).max() < 1e-9 and np.abs(v).max() == 0.0
        assert sim.holding.all()


def test_the_smooth_law_creeps_where_the_dry_one_holds():
    """The measurement can tell: tanh(q̇/ε) friction settles on q̇ = ε atanh(τ/f_s) ≠ 0."""
    q, _ = run(single_joint(dry=False), 0.5 * BREAKAWAY, 5.0)
    assert abs(q[-1, 0]) > 1e-3


def test_above_breakaway_it_slides_with_the_coulomb_level():
    """From rest, 0.4 N m > f_s: it breaks away at once; each step's q̈ is the closed form."""
    sim, tau = single_joint(), 0.4
    q, v = run(sim, tau, 2.0)
    assert not sim.holding.any()
    assert v[0, 0] > 0.0 and (np.diff(v[:, 0]) > 0).all() and q[-1, 0] > 0.05
    measured = np.diff(v[:, 0]) / DT
    middle = (v[1:, 0] + v[:-1, 0]) / 2
    stribeck = (BREAKAWAY - COULOMB) * np.exp(-(middle / STRIBECK) ** 2)
    expected = (tau - COULOMB - stribeck - VISCOUS * middle) / INERTIA
    np.testing.assert_allclose(measured, expected, atol=2e-3 * np.abs(expected).max())
    # well past the Stribeck velocity (t >= 1 s): I q̈ = τ − f_c − f_v q̇, an exponential
    terminal, decay = (tau - COULOMB) / VISCOUS, np.exp(-1.0 * VISCOUS / INERTIA)
    np.testing.assert_allclose(v[-1, 0], terminal + (v[999, 0] - terminal) * decay, rtol=1e-6)


def test_a_released_joint_stops_under_friction_and_then_holds():
    """Spun at 1 rad/s and left alone (τ = 0.1 < f_s), it stops and stays stopped."""
    sim = single_joint()
    sim.set_state([0.0], [-1.0])
    q, v = run(sim, 0.1, 3.0)
    stopped = int(np.argmax(v[:, 0] == 0.0))
    assert 0 < stopped < 2000 and (v[stopped:, 0] == 0.0).all()
    assert (q[stopped:, 0] == q[stopped, 0]).all() and (np.diff(v[:stopped, 0]) > 0).all()


def panda(gravity=(0.0, 0.0, -9.81), breakaway=0.3, q0=PANDA_Q0):
    xml = open(rd.robot_urdf('panda')).read()
    names = rd.load_urdf(xml, 'panda_link0', 'panda_hand').joint_names
    sim = make_engine('internal', xml, 'panda_link0', 'panda_hand', names, q0, DT,
                      gravity=gravity, end_stops=False,
                      joint_dynamics=dict(armature=0.05, coulomb=0.2))
    sim.hold_dry_friction(breakaway, STRIBECK)
    return sim, xml


def test_friction_never_adds_kinetic_energy_and_brings_the_arm_to_rest():
    """No gravity, damping or torque: ½ q̇ᵀ M q̇ falls at every step, to 0, and stays."""
    sim, _ = panda(gravity=(0.0, 0.0, 0.0))
    sim.set_state(sim.q, [0.3, -0.25, 0.2, 0.3, -0.4, 0.3, 0.5])
    kinetic = []
    for _ in range(6000):
        sim.step(np.zeros(7))
        kinetic.append(0.5 * sim.v @ rd.mass_matrix(sim.model, sim.q) @ sim.v)
    kinetic = np.array(kinetic)
    assert (np.diff(kinetic) <= 0.0).all()
    assert kinetic[-1] == 0.0 and sim.holding.all()


def pinocchio_gravity(xml, q):
    """g(q) of the Panda with armature-free links, by Pinocchio (independent of rd)."""
    model = pinocchio.buildModelFromXML(xml)
    return pinocchio.computeGeneralizedGravity(model, model.createData(),
                                               np.concatenate([q, np.zeros(model.nq - 7)]))[:7]


def test_an_arm_released_within_its_holding_capacity_stays_put():
    """Each joint holds 5 % more than its gravity load, and its Coulomb 0.2 N m: none moves."""
    xml = open(rd.robot_urdf('panda')).read()
    load = np.abs(pinocchio_gravity(xml, PANDA_Q0))
    sim, _ = panda(breakaway=1.05 * load + 0.2)
    q, v = run(sim, np.zeros(7), 5.0)
    assert np.abs(q - PANDA_Q0).max() < 1e-9 and np.abs(v).max() == 0.0


def test_a_shoulder_below_its_load_slides_while_the_others_hold():
    """Joint 2 holds 4 N m of its |g₂| ~ 7.8 N m; the others 200 N m: only joint 2 falls."""
    xml = open(rd.robot_urdf('panda')).read()
    g = pinocchio_gravity(xml, PANDA_Q0)
    assert abs(g[1]) > 6.0
    capacity = np.full(7, 200.0)
    capacity[1] = 4.0
    sim, _ = panda(breakaway=capacity)
    q, v = run(sim, np.zeros(7), 0.3)
    others = [0, 2, 3, 4, 5, 6]
    assert np.abs(q[:, others] - PANDA_Q0[others]).max() < 1e-9
    # it falls the way gravity pulls it: q̈₂ of the same sign as −g₂
    assert np.sign(q[-1, 1] - PANDA_Q0[1]) == -np.sign(g[1]) and abs(q[-1, 1] - PANDA_Q0[1]) > 0.01


def test_breakaway_below_coulomb_is_refused():
    with pytest.raises(ValueError, match='breakaway torque >= the Coulomb'):
        panda(breakaway=0.1)
