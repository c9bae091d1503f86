"""The architecture page names every module of the package, and only modules that exist.

doc/architecture.md's table says which module owns what; a module added, moved or renamed
without the page is a page out of date. A cell's first backticked path gives the folder of the
bare file names after it (`tools/fit_dynamics.py`, `fitting.py`); `folder/` or `folder/*.py`
stands for every module under it.
"""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / 'robot_dynamics'
PAGE = ROOT / 'doc' / 'architecture.md'


def modules():
    """Every module of the package, as a path from robot_dynamics/ (no __init__, __main__)."""
    return {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob('*.py')
            if p.name not in ('__init__.py', '__main__.py')}


def named(cell, known):
    """The modules a table cell names (see the module docstring)."""
    found, folder = set(), ''
    for token in re.findall(r'`([^`]+)`', cell):
        if token.endswith('/') or token.endswith('/*.py'):
            prefix = token.rsplit('/', 1)[0] + '/'
            found |= {m for m in known if m.startswith(prefix)}
        elif token.endswith('.py'):
            if '/' in token:
                folder = token.rsplit('/', 1)[0] + '/'
                found.add(token)
            else:
                found.add(folder + token)
    return found


def test_the_architecture_page_names_every_module():
    known = modules()
    cells = [line.split('|')[1] for line in PAGE.read_text().splitlines()
             if line.startswith('| `')]
    named_modules = set().union(*(named(cell, known) for cell in cells))
    missing = sorted(known - named_modules)
    assert not missing, f'modules the page does not name: {missing}'
    stale = {m for m in named_modules - known if '*' not in m}
    assert not stale, f'the page names modules that do not exist: {sorted(stale)}'
    assert len(known) > 100   # the walk found the package
