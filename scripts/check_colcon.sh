#!/usr/bin/env bash
# Build the package with colcon (the ROS 2 user's path) in a temporary workspace and check the
# install layout: executables, share/ files, the ament index, and the installed entry points.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
venv=$repo/$(scripts/setup_venv.sh | tail -1)   # ROS_DISTRO's venv (setup_venv.sh)

ws=$(mktemp -d)
trap 'rm -rf "$ws"' EXIT
start=$SECONDS
PATH="$venv/bin:$PATH" colcon --log-base "$ws/log" build --base-paths "$repo" \
    --build-base "$ws/build" --install-base "$ws/install" --event-handlers console_cohesion-
prefix=$ws/install/robot_dynamics
share=$prefix/share/robot_dynamics

fail() { echo "check_colcon: $*" >&2; exit 1; }
for exe in dynamics_controller wrench_estimator arm_simulator record_joint_states fit_dynamics pfl_map \
    excite; do
    [ -x "$prefix/lib/robot_dynamics/$exe" ] || fail "missing executable lib/robot_dynamics/$exe"
done
[ -f "$prefix/share/ament_index/resource_index/packages/robot_dynamics" ] \
    || fail "missing ament index marker"
cmp -s package.xml "$share/package.xml" || fail "share/robot_dynamics/package.xml differs"
for dir in launch config urdf; do
    [ -d "$share/$dir" ] || fail "missing share/robot_dynamics/$dir"
done
for src in launch/*.launch.py config/*.yaml config/*.xml config/ros2_control/*.yaml \
    robot_dynamics/robots/*.urdf; do
    [ -e "$src" ] || continue  # an unmatched glob
    case $src in robot_dynamics/robots/*) dst=urdf/${src##*/} ;; *) dst=$src ;; esac
    cmp -s "$src" "$share/$dst" || fail "share/robot_dynamics/$dst missing or different"
done

# With the install's environment sourced (as a ROS user does), from outside the source tree:
# the ament index finds the share directory, and each console script's entry point loads
# from the installed copy of the package.
(
    cd "$ws"
    set +u  # colcon's setup scripts read unset variables
    # shellcheck disable=SC1091
    source "$ws/install/setup.bash"
    set -u
    "$venv/bin/python" - "$share" "$prefix" <<'PY'
import os
import sys
from importlib.metadata import distribution

from ament_index_python.packages import get_package_share_directory

share, prefix = sys.argv[1:]
found = get_package_share_directory('robot_dynamics')
assert os.path.samefile(found, share), f'ament index gives {found}, expected {share}'
scripts = [ep for ep in distribution('robot_dynamics').entry_points
           if ep.group == 'console_scripts']
executables = set(os.listdir(os.path.join(prefix, 'lib', 'robot_dynamics')))
assert {ep.name for ep in scripts} == executables, (scripts, executables)
for ep in scripts:
    main = ep.load()
    module = sys.modules[ep.module]
    assert callable(main), ep
    assert module.__file__.startswith(prefix), f'{ep.name} loads {module.__file__}'
from robot_dynamics.nodes.common import schema  # noqa: E402 (the nodes' parameter schemas)
assert str(schema.NODES_DIR).startswith(prefix), schema.NODES_DIR
for node in ('dynamics_controller', 'wrench_estimator', 'arm_simulator'):
    assert schema.load(node), f'no parameters in the installed {node}/parameters.yaml'
print(f'ament index: {found}; entry points load: {", ".join(ep.name for ep in scripts)}')
PY
)
echo "check_colcon: OK ($((SECONDS - start)) s)"
