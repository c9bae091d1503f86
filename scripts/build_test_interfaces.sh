#!/usr/bin/env bash
# Build the test-only control_msgs interface package (test/interfaces/control_msgs) with colcon
# and the rosidl generators of a venv, into build/test_interfaces/<distro>/ (git-ignored). The
# tests find it there (test/conftest.py); it is never installed with robot_dynamics.
#   ROS_DISTRO: kilted (default) or jazzy, the fields of that distribution's control_msgs
#   PYTHON:     the venv's python (default: the venv of ROS_DISTRO, scripts/setup_venv.sh)
# Cheap when nothing changed: a stamp records the hash of the definitions and the interpreter.
# Prints the install prefix of control_msgs on its last line of stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
distro=${ROS_DISTRO:-kilted}
python=${PYTHON:-$repo/$(scripts/setup_venv.sh | tail -1)/bin/python}
venv=$(cd "$(dirname "$python")/.." && pwd)
base=$repo/build/test_interfaces/$distro
prefix=$base/install/control_msgs

key=$( (cd test/interfaces && find . -type f | sort | xargs cat; echo "$venv") | sha256sum)
stamp=$base/.stamp-${key:0:16}
if [ -f "$stamp" ]; then echo "$prefix"; exit 0; fi

for tool in cmake c++ cc; do
    command -v $tool >/dev/null || { echo "build_test_interfaces: $tool is not on PATH" >&2; exit 1; }
done
[ -f "$venv/share/rosidl_default_generators/cmake/rosidl_default_generatorsConfig.cmake" ] || {
    echo "build_test_interfaces: $venv has no rosidl_default_generators: install the" \
        "requirements-test*.txt of ROS_DISTRO=$distro into it" >&2; exit 1; }

rm -rf "$base"
start=$SECONDS
# The venv is the underlay: its share/ holds the CMake configs of the ROS wheels. The libraries
# get the install's lib/ as RPATH, so the Python extension loads without LD_LIBRARY_PATH.
PATH="$venv/bin:$PATH" AMENT_PREFIX_PATH="$venv" CMAKE_PREFIX_PATH="$venv" \
    colcon --log-base "$base/log" build --paths test/interfaces/control_msgs \
    --build-base "$base/build" --install-base "$base/install" \
    --event-handlers console_cohesion- console_stderr- \
    --cmake-args -DROS_DISTRO="$distro" -DBUILD_TESTING=OFF \
    "-DPython3_EXECUTABLE=$python" "-DCMAKE_INSTALL_RPATH=$prefix/lib" >&2
echo "build_test_interfaces: control_msgs for $distro built in $((SECONDS - start)) s" >&2
touch "$stamp"
echo "$prefix"
