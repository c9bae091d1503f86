"""pfl_map on the shipped Panda and UR5e: the PNG is written, the printed numbers are the core's."""
import re

import numpy as np
import pytest

import robot_dynamics as rd
from robot_dynamics.core import power_force_limiting as pfl
from robot_dynamics.tools import pfl_map

CHAINS = {"panda": ("panda_link0", "panda_hand_tcp"), "ur5e": ("base_link", "tool0")}


def numbers(line):
    return [float(x) for x in re.findall(r"(?<![\w.])-?\d+\.\d+", line)]


@pytest.mark.parametrize("robot", sorted(CHAINS))
def test_pfl_map(robot, tmp_path, capsys):
    out = tmp_path / "map.png"
    offset, payload = (0.0, 0.0, 0.03), 1.5
    assert pfl_map.main(["--robot", robot, "--region", "hand", "--region", "chest",
                         "--poses", "12", "--seed", "4", "--payload", str(payload),
                         "--offset", *map(str, offset), "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = capsys.readouterr().out.splitlines()
    arm = rd.load_urdf(rd.robot_urdf(robot), *CHAINS[robot])
    model = rd.with_payload(arm, payload)
    m_std = pfl.standard_robot_mass(arm, payload)
    assert numbers(lines[0]) == pytest.approx(
        [pfl.moving_mass(arm), payload, m_std], abs=5e-5)
    poses = pfl_map.sample_poses(model, 12, 4)
    assert np.all((poses >= arm.lower) & (poses <= arm.upper))
    masses = np.array([[pfl.reflected_mass(model, q, arm.tip, u, offset)
                        for u in pfl_map.DIRECTIONS] for q in poses])
    assert numbers(lines[1]) == pytest.approx(
        [masses.min(), np.median(masses), masses.max()], abs=5e-5)
    for line, name in zip(lines[2:4], ("hand", "chest")):
        region = pfl.BODY_REGIONS[name]
        v = [pfl.permissible_speed(m, region) for m in masses.ravel()]
        assert line.startswith(name)
        assert numbers(line) == pytest.approx(
            [pfl.permissible_speed(m_std, region), min(v), np.median(v), max(v)], abs=5e-5)


def test_pfl_map_refuses_unknown_region(tmp_path, capsys):
    assert pfl_map.main(["--robot", "ur5e", "--region", "elbow",
                         "--out", str(tmp_path / "x.png")]) == 1
    assert "unknown body region elbow" in capsys.readouterr().err
