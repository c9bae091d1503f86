"""The manual: doc/ builds with no warning, each node page lists every parameter, links resolve.

The expected parameters come from the node classes (their ``PARAMS`` schema), the rendered ones
from the HTML tables of a fresh build, so a parameter missing from a page fails here.
"""
import html
import pathlib
import re
import subprocess
import sys

import pytest

from robot_dynamics.nodes.arm_simulator import ArmSimulator
from robot_dynamics.nodes.dynamics_controller import DynamicsController
from robot_dynamics.nodes.wrench_estimator import WrenchEstimator

REPO = pathlib.Path(__file__).resolve().parents[1]
NODES = {'dynamics_controller': DynamicsController, 'wrench_estimator': WrenchEstimator,
         'arm_simulator': ArmSimulator}


@pytest.fixture(scope='module')
def built(tmp_path_factory):
    """The HTML build of doc/, with warnings as errors (as make docs builds it)."""
    out = tmp_path_factory.mktemp('doc')
    run = subprocess.run([sys.executable, '-m', 'sphinx', '-W', '--keep-going', '-q', '-b',
                          'html', '-d', str(out / '.doctrees'), str(REPO / 'doc'), str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f'sphinx-build failed:\n{run.stdout}\n{run.stderr}'
    return out


def table_rows(page):
    """Rows of the page's node-parameters table, each a list of its cells' text."""
    table = re.search(r'<table[^>]*node-parameters.*?</table>', page, re.S)
    assert table, 'no node-parameters table on the page'
    body = table.group(0).split('<tbody>', 1)[1]
    return [[html.unescape(re.sub(r'<[^>]+>', '', cell)).strip()
             for cell in re.findall(r'<td[^>]*>(.*?)</td>', row, re.S)]
            for row in re.findall(r'<tr[^>]*>(.*?)</tr>', body, re.S)]


@pytest.mark.parametrize('node', sorted(NODES))
def test_node_page_lists_every_parameter(built, node):
    rows = table_rows((built / 'nodes' / f'{node}.html').read_text())
    declared = {p.name: p for p in NODES[node].PARAMS}
    listed = [row[0] for row in rows]
    assert sorted(listed) == sorted(declared), (
        f'missing: {sorted(set(declared) - set(listed))}; '
        f'not declared: {sorted(set(listed) - set(declared))}')
    for name, kind, _, _, description in rows:
        assert kind == declared[name].kind, name
        assert declared[name].description in description, name


def test_parameter_table_shows_defaults_and_ranges(built):
    rows = {row[0]: row for row in table_rows(
        (built / 'nodes' / 'dynamics_controller.html').read_text())}
    # written out here, not read from the schema: what a reader of the page must see
    assert rows['gravity'][2] == '[0.0, 0.0, -9.81]'
    assert rows['robot_description'][2] == "''"
    assert rows['joint_states_reliability'][3] == 'best_effort, reliable'
    assert rows['state_timeout'][3] == '[0.001, 60.0]'
    assert '(read-only)' in rows['joints'][4]
    assert 'one value per joint' in rows['armature'][4]


def markdown_links(path):
    """Relative link targets of a Markdown file (no URLs, no in-page anchors)."""
    targets = re.findall(r'\]\(([^)\s]+)\)', path.read_text())
    return [t.split('#')[0] for t in targets if not re.match(r'[a-z]+:|#', t)]


@pytest.mark.parametrize('readme', ['README.md', 'CHANGELOG.md'])
def test_readme_links_resolve(readme):
    links = markdown_links(REPO / readme)
    missing = [t for t in links if not (REPO / t).exists()]
    assert not missing, f'{readme} links to files that do not exist: {missing}'
