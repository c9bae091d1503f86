"""A model with a mimic joint, for the tests of several folders (core, simulation).

example-robot-data's Panda as a whole tree, whose second finger mimics the first (nb = 9 bodies,
nv = 8 independent joints): ``RIGID`` as the URDF has it, ``MODEL`` with armature and friction on
every joint.
"""
import importlib.metadata
import warnings

import numpy as np

import robot_dynamics as rd


def panda_xml():
    files = importlib.metadata.distribution('example-robot-data').files
    return next(f.locate() for f in files if f.name == 'panda.urdf').read_text()


with warnings.catch_warnings():
    warnings.simplefilter('ignore')
    RIGID = rd.load_urdf(panda_xml())
MODEL = RIGID.replace(armature=np.full(8, 0.1), viscous=np.linspace(0.1, 0.8, 8),
                      coulomb=np.full(8, 0.3))
