"""Code style: ament_flake8 (the ROS 2 linter) over the package, its tests and launch files."""
import pathlib

from ament_flake8.main import main_with_errors
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
# Empty folders are not in a git clone: check the paths that exist.
PATHS = [str(REPO / p) for p in ('robot_dynamics', 'test', 'launch', 'doc', 'setup.py')
         if (REPO / p).exists()]


@pytest.mark.flake8
@pytest.mark.linter
def test_flake8(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # the linters walk the working directory: keep out of .venv
    rc, errors = main_with_errors(argv=['--linelength', '100', *PATHS])
    assert rc == 0, f'{len(errors)} flake8 errors:\n' + '\n'.join(errors)
