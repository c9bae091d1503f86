"""The versions robot_dynamics runs with: ``python -m robot_dynamics.versions`` (for bug reports).

Prints Python's, the numerical libraries' and ROS 2's (the distribution of the installed rclpy:
the ``ros-<distro>-rclpy`` wheel's, else ``$ROS_DISTRO`` of a sourced install).
"""
import importlib.metadata
import os
import platform
import re

LIBRARIES = ('numpy', 'scipy', 'numba', 'llvmlite')


def ros_distribution():
    """Return 'distro rclpy-version' of the rclpy wheel, else $ROS_DISTRO, else 'none'."""
    for dist in importlib.metadata.distributions():
        wheel = re.fullmatch(r'ros-([a-z]+)-rclpy', dist.metadata['Name'] or '')
        if wheel:
            return f'{wheel[1]} (rclpy {dist.version})'
    return os.environ.get('ROS_DISTRO', 'none')


def versions():
    """Return {name: version} of Python, LIBRARIES and ROS 2."""
    found = {'python': platform.python_version()}
    for name in LIBRARIES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = 'not installed'
    found['ros'] = ros_distribution()
    return found


def main():
    """Print the versions on one line."""
    print('robot_dynamics environment: '
          + ', '.join(f'{name} {version}' for name, version in versions().items()))


if __name__ == '__main__':
    main()
