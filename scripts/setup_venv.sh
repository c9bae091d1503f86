#!/usr/bin/env bash
# Create (or reuse) the virtual environment .venv with the test requirements and the package
# installed editable. Cheap when nothing changed: a stamp file records the hash of the inputs.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${VENV:-.venv}
python=${PYTHON:-python3}
inputs=(requirements.txt requirements-test.txt setup.py setup.cfg package.xml)
key=$(cat "${inputs[@]}" | sha256sum)
stamp="$venv/.robot_dynamics-${key:0:16}"
[ -f "$stamp" ] && exit 0

if ! version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); then
    echo "Cannot run '$python'; set PYTHON to a Python >= 3.11 interpreter." >&2
    exit 1
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "robot_dynamics needs Python >= 3.11; '$python' is $version. Set PYTHON=..." >&2
    exit 1
fi
if ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    rm -rf "$venv"  # absent, or left broken by an earlier failed attempt
    if ! "$python" -m venv "$venv"; then
        rm -rf "$venv"
        echo "'$python -m venv' failed. On Debian/Ubuntu: sudo apt-get install python3-venv" >&2
        exit 1
    fi
fi
# colcon must not mistake the ROS packages installed inside the venv for workspace packages.
touch "$venv/COLCON_IGNORE"
"$venv/bin/python" -m pip install --quiet -r requirements-test.txt
"$venv/bin/python" -m pip install --quiet --no-deps -e .
rm -f "$venv"/.robot_dynamics-*
touch "$stamp"
