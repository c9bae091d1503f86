"""The plant layer (robot_dynamics.simulation.plant): each effect does what it says.

Quantisation, noise statistics with a seed, the delay in cycles, the friction curves (closed
forms from their definitions), and the perturbed URDF: the engines (ours and MuJoCo) load a
plant whose inertias differ from the nominal URDF's by the stated bounds, and both agree on it.
"""
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import robot_dynamics as rd
from robot_dynamics.simulation import make_engine
from robot_dynamics.simulation import plant

Q0 = np.array([0.0, -0.4, 0.0, -2.1, 0.0, 1.7, 0.8])


def panda_urdf():
    with open(rd.robot_urdf('panda')) as f:
        return f.read()


def test_positions_are_quantised_to_the_resolution():
    sensors = plant.Sensors(3, resolution=1e-5)
    q = np.random.default_rng(1).uniform(-3, 3, (1000, 3))
    measured = np.array([sensors.measure(x, np.zeros(3), np.zeros(3))[0] for x in q])
    counts = measured / 1e-5
    assert np.abs(counts - np.round(counts)).max() < 1e-6
    assert np.abs(measured - q).max() <= 0.5e-5 * (1 + 1e-9)
    assert np.abs(measured - q).max() > 0.4e-5   # the rounding error really spans the step


def test_noise_has_the_configured_statistics_and_the_seed_repeats_it():
    n, samples = 4, 20000
    offset = np.array([0.5, -0.2, 0.0, 1.0])

    def run(seed):
        sensors = plant.Sensors(n, velocity_noise=2e-3, effort_noise=0.05, offset=offset,
                                seed=seed)
        out = [sensors.measure(np.zeros(n), np.ones(n), np.full(n, 3.0)) for _ in range(samples)]
        return np.array([o[1] for o in out]), np.array([o[2] for o in out])

    v, effort = run(7)
    for x, mean, std in ((v, np.ones(n), 2e-3), (effort, 3.0 + offset, 0.05)):
        assert np.abs(x.mean(0) - mean).max() < 5 * std / np.sqrt(samples)
        assert np.abs(x.std(0) / std - 1).max() < 0.03   # 5 sigma of the std's estimate: 2.5 %
        correlation = np.corrcoef(x[1:, 0] - mean[0], x[:-1, 0] - mean[0])[0, 1]
        assert abs(correlation) < 5 / np.sqrt(samples)   # white
    again = run(7)
    assert np.array_equal(again[0], v) and np.array_equal(again[1], effort)
    assert not np.array_equal(run(8)[0], v)


@pytest.mark.parametrize('cycles', [0, 1, 3])
def test_a_command_acts_exactly_the_given_number_of_cycles_later(cycles):
    delay = plant.CommandDelay(cycles)
    commands = [np.array([float(k), -float(k)]) for k in range(1, 11)]
    applied = [delay.push(c) for c in commands]
    for k, tau in enumerate(applied):
        assert np.array_equal(tau, commands[max(k - cycles, 0)])   # the first fills the line
    with pytest.raises(ValueError, match='whole number'):
        plant.CommandDelay(1.5)


def test_gaz_sigmoid_friction_follows_its_published_law():
    phi1, phi2, phi3 = (np.array(plant.GAZ_2019_FRICTION[k]) for k in ('amplitude', 'slope',
                                                                       'offset'))
    friction = plant.Friction(7, sigmoid=plant.GAZ_2019_FRICTION)
    assert np.abs(friction(np.zeros(7))).max() < 1e-15   # no torque at rest
    for v in (-1.0, -0.05, 0.02, 0.3, 2.0):
        expected = [a / (1 + np.exp(-b * (v + c))) - a / (1 + np.exp(-b * c))
                    for a, b, c in zip(phi1, phi2, phi3)]
        np.testing.assert_allclose(friction(np.full(7, v)), expected, rtol=1e-12)
    # asymmetric where φ3 ≠ 0: fast forward and fast backward differ by φ1 (1 − 2 σ(φ2 φ3))
    fast = friction(np.full(7, 5.0)) + friction(np.full(7, -5.0))
    np.testing.assert_allclose(fast, phi1 * (1 - 2 / (1 + np.exp(-phi2 * phi3))), atol=1e-6)
    assert (friction.max_slope() >= phi1 * phi2 / 4 * (1 - 1e-12)).all()


def test_stiction_is_the_breakaway_excess_over_coulomb_at_low_speed_only():
    stiction, coulomb = np.array([0.3, 0.5]), np.array([0.2, 0.5])
    friction = plant.Friction(2, stiction, coulomb, stribeck=0.05, coulomb_velocity=0.001)
    np.testing.assert_allclose(friction([0.01, 0.01]), (stiction - coulomb) * np.exp(-0.04),
                               rtol=1e-6)   # tanh(10) = 1 - 4e-9
    np.testing.assert_allclose(friction([-0.01, 0.01]), [-0.1 * np.exp(-0.04), 0.0], rtol=1e-6)
    assert np.abs(friction([0.5, 0.5])).max() < 1e-40   # exp(-100): Coulomb level reached
    assert friction([0.0, 0.0]).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match='each >= its Coulomb'):
        plant.Friction(2, [0.1, 0.5], coulomb)


def test_perturbed_urdf_moves_each_link_within_the_stated_bounds():
    nominal = panda_urdf()
    xml, changes = plant.perturbed_urdf(nominal, mass_error=0.1, com_error=0.005, seed=3)
    links = {link.get('name'): link.find('inertial')
             for link in ET.fromstring(nominal).findall('link')}
    perturbed = {link.get('name'): link.find('inertial')
                 for link in ET.fromstring(xml).findall('link')}
    assert set(changes) == {n for n, i in links.items() if i is not None}
    factors, shifts = [], []
    for name in changes:
        before, after = links[name], perturbed[name]
        factor = float(after.find('mass').get('value')) / float(before.find('mass').get('value'))
        shift = (np.array(after.find('origin').get('xyz').split(), dtype=float)
                 - np.array(before.find('origin').get('xyz').split(), dtype=float))
        for key, value in before.find('inertia').attrib.items():
            assert float(after.find('inertia').get(key)) == pytest.approx(float(value) * factor)
        factors.append(factor)
        shifts.append(np.linalg.norm(shift))
    factors, shifts = np.array(factors), np.array(shifts)
    assert (np.abs(factors - 1) <= 0.1).all() and np.abs(factors - 1).max() > 0.05
    assert (shifts <= 0.005 + 1e-12).all() and shifts.max() > 0.0025
    assert plant.perturbed_urdf(nominal, 0.1, 0.005, seed=3)[0] == xml   # seeded


@pytest.mark.parametrize('engine', ['internal', 'mujoco'])
def test_the_engines_simulate_the_plant_not_the_nominal_model(engine):
    """The holding torque the engine computes is the plant's g(q), rd's on the plant URDF."""
    xml = plant.perturbed_urdf(panda_urdf(), mass_error=0.1, com_error=0.005, seed=3)[0]
    joints = [f'panda_joint{i}' for i in range(1, 8)]
    sim = make_engine(engine, xml, 'panda_link0', 'panda_hand_tcp', joints, Q0, 1e-3)
    held = sim.holding_torque()
    plant_model = rd.load_urdf(xml, 'panda_link0', 'panda_hand_tcp')
    nominal = rd.load_urdf(panda_urdf(), 'panda_link0', 'panda_hand_tcp')
    np.testing.assert_allclose(held, rd.gravity(plant_model, Q0), atol=1e-9)
    difference = np.abs(held - rd.gravity(nominal, Q0))
    assert difference.max() > 0.1   # N m: a static error gravity compensation leaves
    np.testing.assert_allclose(sim.acceleration(np.zeros(7)), rd.forward_dynamics(
        plant_model, Q0, np.zeros(7), np.zeros(7)), rtol=1e-7, atol=1e-7)


def test_plant_layers_compose_and_defaults_do_nothing():
    idle = plant.Plant(3)
    q, v, e = np.array([0.1, 0.2, 0.3]), np.array([1.0, -1.0, 0.5]), np.array([2.0, 0.0, -1.0])
    assert all(np.array_equal(a, b) for a, b in zip(idle.sense(q, v, e), (q, v, e)))
    assert not idle.friction(v).any() and np.array_equal(idle.command(e), e)
    assert set(plant.PROFILES) == {'none', 'realistic', 'panda_gaz2019'}


def test_a_profile_fills_what_is_not_given_and_given_values_win():
    from robot_dynamics.nodes.common.parameters import MODEL_PARAMS
    from robot_dynamics.nodes.arm_simulator.plant_parameters import PLANT_PARAMS, with_profile
    model = rd.load_urdf(panda_urdf(), 'panda_link0', 'panda_hand_tcp')
    values = {p.name: p.default for p in MODEL_PARAMS + PLANT_PARAMS}
    joints = [f'panda_joint{i}' for i in (7, 1, 2, 3, 4, 5, 6)]   # not the chain order
    values.update({'plant.profile': 'panda_gaz2019', 'joints': joints})
    filled = with_profile(values, model, given={'plant.mass_error'})
    assert filled['plant.mass_error'] == 0.0   # given at its default: kept
    assert filled['plant.com_error'] == 0.005 and filled['plant.command_delay'] == 1
    assert filled['armature'] == [0.05] * 7
    amplitude = plant.GAZ_2019_FRICTION['amplitude']
    assert filled['plant.sigmoid_friction.amplitude'] == [amplitude[6]] + amplitude[:6]
    assert filled['friction.viscous'] == []   # not in this profile
