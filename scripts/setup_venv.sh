#!/usr/bin/env bash
# Create (or reuse) the virtual environment of one supported environment, with the test
# requirements and the package installed editable. ROS_DISTRO picks it:
#   kilted (default): .venv,        Python >= 3.11 (PYTHON, default python3), requirements-test.txt
#   jazzy:            .venv-jazzy,  Python 3.12 (PYTHON, else python3.12 or pyenv's 3.12),
#                                   requirements-test-jazzy.txt (the Jazzy floor versions)
# Cheap when nothing changed: a stamp file records the hash of the inputs. VENV overrides the
# directory. Prints the directory of the venv on its last line of stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

distro=${ROS_DISTRO:-kilted}
case $distro in
    kilted) venv=${VENV:-.venv}; requirements=requirements-test.txt; want=3.11+ ;;
    jazzy) venv=${VENV:-.venv-jazzy}; requirements=requirements-test-jazzy.txt; want=3.12 ;;
    *) echo "ROS_DISTRO=$distro is not a tested environment; use kilted or jazzy" >&2; exit 1 ;;
esac

# The interpreter: PYTHON, else python3 (Kilted) or a Python 3.12 (Jazzy: on PATH or pyenv's).
find_python() {
    if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
    if [ "$want" != 3.12 ]; then echo python3; return; fi
    if python3.12 -c '' 2>/dev/null; then echo python3.12; return; fi
    # pyenv's newest 3.12 (also when pyenv itself is not on PATH)
    local found
    found=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12.*/bin/python3.12 2>/dev/null \
        | sort -V | tail -1)
    echo "${found:-python3.12}"
}
python=$(find_python)

inputs=(requirements*.txt setup.py setup.cfg package.xml)
key=$(cat "${inputs[@]}" | sha256sum)
stamp="$venv/.robot_dynamics-${key:0:16}"
if [ -f "$stamp" ]; then echo "$venv"; exit 0; fi

if ! version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); then
    echo "Cannot run '$python'; set PYTHON to a Python $want interpreter." >&2
    exit 1
fi
case $want in
    3.12) ok=$([ "$version" = 3.12 ] && echo y || echo n) ;;
    *) ok=$("$python" -c 'import sys; print("yn"[sys.version_info < (3, 11)])') ;;
esac
if [ "$ok" != y ]; then
    echo "The $distro environment needs Python $want; '$python' is $version. Set PYTHON=..." >&2
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
"$venv/bin/python" -m pip install --quiet -r "$requirements" >&2
"$venv/bin/python" -m pip install --quiet --no-deps -e . >&2
rm -f "$venv"/.robot_dynamics-*
touch "$stamp"
echo "$venv"
