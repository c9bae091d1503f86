"""Every URDF of example-robot-data (the corpus Pinocchio's own tests use) against Pinocchio.

The directory is discovered at test time from the installed package, so a new release's robots
are covered too. Each file loads as a whole tree and agrees with Pinocchio on rnea, gravity, M, C,
a frame Jacobian and its task-space inertia Λ, at two random states; or it is refused, and then
only where Pinocchio's own model has no degree of freedom or a singular mass matrix (or cannot be
built), with the message that says so.

Mimic joints: compared with Pinocchio's mimic model (``mimic=True``) where Pinocchio builds one,
else with its model without mimic through q_body = G q + o, τ = Gᵀ τ_body, M = Gᵀ M_body G, ...,
G built here from the file's <mimic> elements. C always through G and the model without mimic:
Pinocchio 4.1's computeCoriolisMatrix on a mimic model (the Panda's) meets neither
Ṁ = C + Cᵀ nor C q̇ = nle - g (off by ~1e-3, measured), while Gᵀ C_body G is the Christoffel
matrix of Gᵀ M_body G for a constant G.
"""
import importlib.metadata
import os
import pathlib
import warnings
import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin
import pytest

import robot_dynamics as rd


def corpus():
    """The URDF files of the installed example-robot-data, found through its file list."""
    files = importlib.metadata.distribution('example-robot-data').files
    return sorted(pathlib.Path(f.locate()) for f in files if f.name.endswith('.urdf'))


pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")   # tested in test_urdf_loader.py
FILES = corpus()
ROOT = pathlib.Path(os.path.commonpath(FILES)) if FILES else None
TOLERANCE = 1e-9


def test_the_corpus_is_installed():
    assert len(FILES) >= 60, 'example-robot-data (requirements-test.txt) must be installed'


def relative_error(ours, theirs, scale=0.0):
    """max |ours - theirs| over the largest |theirs| (or scale: C's is |M| |q̇|)."""
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape
    return np.abs(ours - theirs).max() / max(np.abs(theirs).max(), scale, 1e-300)


def mimic_map(xml):
    """name -> (root leader, multiplier, offset) of the moving mimic joints, chains composed."""
    joints = {j.get('name'): j for j in ET.fromstring(xml).findall('joint')}
    direct = {}
    for name, j in joints.items():
        m = j.find('mimic')
        if m is not None and j.get('type') != 'fixed' and m.get('joint') in joints:
            direct[name] = (m.get('joint'), float(m.get('multiplier', 1)),
                            float(m.get('offset', 0)))
    resolved = {}
    for name, (leader, k, o) in direct.items():
        while leader in direct:
            leader, k, o = direct[leader][0], k * direct[leader][1], k * direct[leader][2] + o
        resolved[name] = (leader, k, o)
    return resolved


class Reference:
    """Pinocchio's model of the file, seen in the independent coordinates of ours."""

    def __init__(self, xml, model, mimic):
        names = list(model.joint_names)
        try:
            self.pm = pin.buildModelFromXML(xml, mimic=mimic)
            dependent = {}
        except (RuntimeError, ValueError, TypeError):
            # Pinocchio builds no mimic model of it (Pinocchio 2 has none at all: its binding
            # refuses the keyword with a TypeError): G by hand
            mimic = False
        if not mimic:
            self.pm = pin.buildModelFromXML(xml)
            dependent = mimic_map(xml)
        self.pd = self.pm.createData()
        joints = [(n, self.pm.joints[self.pm.getJointId(n)]) for n in self.pm.names[1:]]
        columns = {n: i for i, n in enumerate(names)}
        self.G, self.offset = np.zeros((self.pm.nv, len(names))), np.zeros(self.pm.nv)
        self.coordinates = []   # (idx_q, nq, row of G, offset) of every joint with coordinates
        for name, joint in joints:
            if joint.nv == 0:
                continue   # Pinocchio's mimic joint: no coordinate of its own
            if name in columns:
                self.G[joint.idx_v, columns[name]] = 1.0
            else:
                leader, k, o = dependent[name]
                self.G[joint.idx_v, columns[leader]], self.offset[joint.idx_v] = k, o
            self.coordinates.append((joint.idx_q, joint.nq, joint.idx_v))

    def q(self, q):
        x = self.G @ q + self.offset
        q_pin = pin.neutral(self.pm)
        for idx_q, nq, idx_v in self.coordinates:
            q_pin[idx_q:idx_q + nq] = [np.cos(x[idx_v]), np.sin(x[idx_v])] if nq == 2 else x[idx_v]
        return q_pin

    def mass_matrix(self, q):
        M = pin.crba(self.pm, self.pd, self.q(q))
        return self.G.T @ (np.triu(M) + np.triu(M, 1).T) @ self.G

    def frame_jacobian(self, q, frame, reference):
        q_pin = self.q(q)
        pin.computeJointJacobians(self.pm, self.pd, q_pin)
        pin.updateFramePlacements(self.pm, self.pd)
        J = pin.getFrameJacobian(self.pm, self.pd, self.pm.getFrameId(frame, pin.BODY), reference)
        return np.vstack([J[3:], J[:3]]) @ self.G   # Pinocchio is linear-first


def pinocchio_refuses(xml):
    """Why Pinocchio's model has nothing to control, or None.

    It cannot be built, has no degree of freedom, or its M is singular (smallest eigenvalue below
    1e-10 of the largest) at q = 0, where the loader checks ours.
    """
    try:
        pm = pin.buildModelFromXML(xml)
    except (RuntimeError, ValueError):
        return 'unbuildable'
    if pm.nv == 0:
        return 'no dof'
    M = pin.crba(pm, pm.createData(), pin.neutral(pm))
    w = np.linalg.eigvalsh(np.triu(M) + np.triu(M, 1).T)
    return 'singular' if w[0] <= 1e-10 * w[-1] else None


REFUSALS = {'unbuildable': r'.', 'no dof': r'no moving joint.*no degree of freedom',
            'singular': r'singular|not positive semi-definite'}


def deepest_frame(model):
    """The link of the last body (a leaf of the tree)."""
    body = model.nb - 1
    return next(n for n, b, T in zip(model.frame_names, model.frame_body, model.frame_placement)
                if b == body and np.allclose(T, np.eye(4)))


@pytest.mark.timeout(600)
@pytest.mark.parametrize('path', FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_every_urdf_loads_and_agrees_with_pinocchio_or_is_refused_as_pinocchio_would(path):
    xml = path.read_text()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')   # the warnings are tested in test_urdf_loader.py
            model = rd.load_urdf(xml)
    except rd.URDFError as error:
        reason = pinocchio_refuses(xml)
        assert reason is not None, f'refused although Pinocchio has a regular model: {error}'
        assert pytest.raises(rd.URDFError, rd.load_urdf, xml).match(REFUSALS[reason])
        return
    ref, body = Reference(xml, model, mimic=True), Reference(xml, model, mimic=False)
    rng = np.random.default_rng(7)
    frame = deepest_frame(model)
    for _ in range(2):
        q = np.clip(rng.uniform(-1.0, 1.0, model.nv), model.lower, model.upper)
        v, a = rng.normal(size=(2, model.nv))
        q_pin, v_pin, a_pin = ref.q(q), ref.G @ v, ref.G @ a
        M = ref.mass_matrix(q)
        checks = {
            'rnea': (rd.rnea(model, q, v, a),
                     ref.G.T @ pin.rnea(ref.pm, ref.pd, q_pin, v_pin, a_pin)),
            'gravity': (rd.gravity(model, q),
                        ref.G.T @ pin.computeGeneralizedGravity(ref.pm, ref.pd, q_pin)),
            'M': (rd.mass_matrix(model, q), M),
            'C': (rd.coriolis_matrix(model, q, v), body.G.T @ pin.computeCoriolisMatrix(
                body.pm, body.pd, body.q(q), body.G @ v) @ body.G),
        }
        for name, reference in (('LOCAL', pin.LOCAL),
                                ('LOCAL_WORLD_ALIGNED', pin.LOCAL_WORLD_ALIGNED)):
            checks[f'J {name}'] = (rd.frame_jacobian(model, q, frame, getattr(rd, name)),
                                   ref.frame_jacobian(q, frame, reference))
        J = checks['J LOCAL_WORLD_ALIGNED'][1]
        Phi = J @ np.linalg.solve(M, J.T)
        if np.linalg.cond(Phi) < 1e6:   # Λ exists: a frame moved in six directions
            checks['Λ'] = (rd.task_space_inertia(model, q, frame), np.linalg.inv(Phi))
        errors = {name: relative_error(*pair) for name, pair in checks.items()}
        errors['C'] = relative_error(*checks['C'], scale=np.abs(M).max() * np.abs(v).max())
        assert max(errors.values()) < TOLERANCE, errors
