"""The README's main job, `python -m robot_dynamics.demo`, end to end on an arm we don't ship.

`--urdf` takes any arm URDF with inertials: here a six-joint arm written below (links along
z, cylinder inertias, a tool frame on a fixed joint), base and tip picked by the demo from the
tree. The demo starts MuJoCo, the controller and the estimator as processes over DDS, and
writes its figures to <out>/<name>_demo.yaml and a PNG; the test checks them against the
issue's bounds (drift < 1e-3 rad, tracking RMS < 1e-3 rad, push estimate within 2 %).
"""
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import yaml

from robot_dynamics.demo.joint import WRENCH

pytestmark = pytest.mark.dds   # starts node processes (robot_dynamics.run or a script)

# (joint axis, link length m, link mass kg, position limits rad): the middle of each range is
# the initial pose, bent so that the tip's wrench is observable from the six joint torques
JOINTS = [('0 0 1', 0.15, 3.0, (-2.5, 2.5)), ('0 1 0', 0.40, 4.0, (-0.5, 2.0)),
          ('0 1 0', 0.35, 2.5, (0.2, 2.6)), ('1 0 0', 0.10, 1.0, (-2.0, 2.4)),
          ('0 1 0', 0.10, 0.8, (-1.6, 2.2)), ('0 0 1', 0.08, 0.4, (-2.5, 2.0))]


def cylinder(mass, length, radius=0.04):
    """Inertia of a solid cylinder along z about its centre: (ixx = iyy, izz)."""
    return mass * (3 * radius ** 2 + length ** 2) / 12, mass * radius ** 2 / 2


def six_joint_arm():
    links, joints, parent, offset = ['<link name="world"/>'], [], 'world', 0.05
    for i, (axis, length, mass, (lower, upper)) in enumerate(JOINTS, start=1):
        ixx, izz = cylinder(mass, length)
        links.append(
            f'<link name="l{i}"><inertial><origin xyz="0 0 {length / 2}"/><mass value="{mass}"/>'
            f'<inertia ixx="{ixx}" iyy="{ixx}" izz="{izz}" ixy="0" ixz="0" iyz="0"/>'
            f'</inertial></link>')
        joints.append(
            f'<joint name="j{i}" type="revolute"><parent link="{parent}"/><child link="l{i}"/>'
            f'<origin xyz="0 0 {offset}"/><axis xyz="{axis}"/>'
            f'<limit lower="{lower}" upper="{upper}" effort="150" velocity="3"/></joint>')
        parent, offset = f'l{i}', length
    links.append('<link name="tool"/>')
    joints.append(f'<joint name="tool_joint" type="fixed"><parent link="l6"/>'
                  f'<child link="tool"/><origin xyz="0 0 {offset}"/></joint>')
    return f'<robot name="six_joint_arm">{"".join(links)}{"".join(joints)}</robot>'


def test_demo_on_an_arm_given_by_urdf(tmp_path):
    urdf = tmp_path / 'six_joint_arm.urdf'
    urdf.write_text(six_joint_arm())
    out = tmp_path / 'results'
    run = subprocess.run([sys.executable, '-m', 'robot_dynamics.demo', '--urdf', str(urdf),
                          '--out', str(out)], capture_output=True, text=True, timeout=600)
    print(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr
    assert 'six_joint_arm (world -> tool) on MuJoCo' in run.stdout
    figures = yaml.safe_load((out / 'six_joint_arm_demo.yaml').read_text())
    figure = pathlib.Path(figures['figure'])
    assert figure == (out / 'six_joint_arm_demo.png').resolve()
    assert figure.read_bytes().startswith(b'\x89PNG') and f'figure: {figure}' in run.stdout
    for line in ('gravity compensation drift', 'tracking error RMS', 'push force, estimate',
                 'force after ~/tare', 'controller latency', 'real-time factor'):
        assert line in run.stdout
    assert figures['drift_rad'] < 1e-3
    assert figures['tracking_rms_rad'] < 1e-3
    assert figures['push_force_error_n'] < 0.02 * np.linalg.norm(WRENCH[3:])
    assert figures['force_after_tare_n'] < 0.05
