"""Locate the shipped inertial-only URDFs (share/robot_dynamics/urdf in a ROS install)."""
import pathlib

ROBOTS_DIR = pathlib.Path(__file__).resolve().parent.parent / 'robots'


def robot_urdf(name):
    """Path of a shipped robot's URDF: 'panda' or 'ur5e'."""
    path = ROBOTS_DIR / f'{name}.urdf'
    if not path.is_file():
        known = sorted(p.stem for p in ROBOTS_DIR.glob('*.urdf'))
        raise ValueError(f"unknown robot '{name}'; shipped robots: {', '.join(known)}")
    return str(path)
