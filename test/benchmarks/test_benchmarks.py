"""The benchmark's own pieces: the closed-form mass matrix and the Pinocchio twin of a model.

``python -m robot_dynamics.benchmarks`` compares our kernels with Pinocchio and with the dense
closed form M = A^T L^T G L A of Lynch & Park §9.4; both comparisons mean something only if the
three compute the same M, which is checked here (no timing is asserted). About 2 s.
"""
import numpy as np
import pinocchio as pin
import pytest

import robot_dynamics as rd
from robot_dynamics.benchmarks import report, suites
from robot_dynamics.benchmarks.models import (closed_form_mass_matrix, pinocchio_model,
                                              random_chain_urdf)
from random_trees import make_case


@pytest.mark.parametrize("name", ["panda/panda_link0/panda_hand", "ur5e/base_link/tool0",
                                  "tree-4-12", "subtree-5-9"])
def test_closed_form_mass_matrix(name):
    model = make_case(name).load()
    for q in np.random.default_rng(3).uniform(-2, 2, (3, model.nv)):
        np.testing.assert_allclose(closed_form_mass_matrix(model, q), rd.mass_matrix(model, q),
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", [2, 9])
def test_pinocchio_twin_of_a_random_chain(n):
    xml = random_chain_urdf(n, seed=n)
    model = rd.load_urdf(xml)
    pm, pd, order = pinocchio_model(xml, model)
    q, v, a = np.random.default_rng(n).uniform(-1, 1, (3, n))
    np.testing.assert_allclose(pin.rnea(pm, pd, q[order], v[order], a[order]),
                               rd.rnea(model, q, v, a)[order], rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(closed_form_mass_matrix(model, q), rd.mass_matrix(model, q),
                               rtol=1e-12, atol=1e-12)


def test_pinocchio_twin_of_the_panda_keeps_the_joint_order():
    model, _, namespace = suites.panda()
    assert namespace['pm'].nv == model.nv == 7
    q = np.linspace(-1, 1, 7)
    np.testing.assert_allclose(pin.computeGeneralizedGravity(namespace['pm'], namespace['pd'], q),
                               rd.gravity(model, q), rtol=1e-11, atol=1e-11)


def test_exponent_fit_and_tables():
    rows = [dict(n=n, rnea=2.0 * n, rnea_batch=0.1 * n ** 2) for n in (2, 4, 8, 16, 32)]
    fits = suites.exponents(rows)
    assert fits['rnea'] == pytest.approx(1.0) and fits['rnea_batch'] == pytest.approx(2.0)
    table = report.table(['a', 'b'], [[1, 2.5]]).splitlines()
    assert table == ['| a | b |', '|---|---|', '| 1 | 2.5 |']


def test_control_law_table():
    """Every control law of the per-cycle table runs and is timed (one round)."""
    rows = suites.control_laws(1)
    assert [r['law'] for r in rows][:2] == ['gravity compensation', 'computed torque']
    assert {'cartesian impedance', 'operational space'} <= {r['law'] for r in rows}
    assert all(r['us'] > 0 for r in rows)
    assert '| cartesian impedance |' in report.control_table(rows)
