"""Docstring style: ament_pep257 (the ROS 2 linter) over the sources.

Its 'ament' convention, except that a multi-line docstring's summary may start on the first line
(D213 is ignored as well as D212, which the convention already ignores: either layout passes),
and D401/D403: docstrings of numerical code rightly start with a symbol (``q``, ``τ``) or a noun.
"""
import pathlib

from ament_pep257.main import main
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
# Empty folders are not in a git clone: check the paths that exist.
PATHS = [str(REPO / p) for p in ('robot_dynamics', 'test', 'launch', 'doc', 'setup.py')
         if (REPO / p).exists()]


@pytest.mark.pep257
@pytest.mark.linter
def test_pep257(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # the linters walk the working directory: keep out of .venv
    rc = main(argv=[*PATHS, '--add-ignore', 'D213,D401,D403'])
    assert rc == 0, 'docstring style errors: see the captured output above'
