"""The manual: doc/ builds with no warning, each node page lists every parameter, links resolve.

The expected parameters come from the node classes (their ``PARAMS`` schema), the rendered ones
from the HTML tables of a fresh build, so a parameter missing from a page fails here. The
performance page's tables are compared with the result files in benchmarks/results/, read here
with json alone.
"""
import html
import json
import pathlib
import re
import subprocess
import sys

import pytest

from robot_dynamics.nodes.arm_simulator import ArmSimulator
from robot_dynamics.nodes.dynamics_controller import DynamicsController
from robot_dynamics.nodes.wrench_estimator import WrenchEstimator

REPO = pathlib.Path(__file__).resolve().parents[2]
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


@pytest.mark.parametrize('readme', ['README.md'])
def test_readme_links_resolve(readme):
    links = markdown_links(REPO / readme)
    assert links, f'{readme} links to no file: the test would check nothing'
    missing = [t for t in links if not (REPO / t).exists()]
    assert not missing, f'{readme} links to files that do not exist: {missing}'


RESULTS = REPO / 'benchmarks' / 'results'


def text_of(fragment):
    """Plain text of an HTML fragment."""
    return ' '.join(html.unescape(re.sub(r'<[^>]+>', ' ', fragment)).split())


def benchmark_tables(page):
    """[(the 'Source:' paragraphs above a table, its rows with the header first)]."""
    tables, sources = [], []
    for m in re.finditer(r'<p>(.*?)</p>|(<table[^>]*benchmark-results.*?</table>)', page, re.S):
        if m.group(2):
            rows = [[text_of(c) for c in re.findall(r'<t[hd][^>]*>(.*?)</t[hd]>', row, re.S)]
                    for row in re.findall(r'<tr[^>]*>(.*?)</tr>', m.group(2), re.S)]
            tables.append((sources, rows))
            sources = []
        elif 'Source:' in m.group(1):
            sources.append(text_of(m.group(1)))
    return tables


def source_file(paragraph):
    return re.search(r'Source: (benchmarks/results/\S+\.json)', paragraph).group(1)


def leaves(value):
    """Every number in a JSON value (nested dicts and lists flattened)."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in leaves(v)]
    return [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


def shown(cell_number, values):
    """Whether a number printed with d decimals is one of values rounded to d decimals."""
    decimals = len(cell_number.partition('.')[2])
    return any(abs(v - float(cell_number)) <= 0.5 * 10 ** -decimals + 1e-9 for v in values)


def expected_rows(results, header):
    """(first-cell key, the JSON of the row) per row of the section the table's header names."""
    nodes = results.get('nodes', results)
    if header[0] == 'function' and 'N' in header:
        return [(r['function'], r) for r in results['batch']]
    if header[0] == 'function':
        return [(r['function'], r) for r in results['single']]
    if header[0] == 'n':
        return [(str(r['n']), r) for r in results['complexity']] + [
            ('exponent k', results['exponents'])]
    if header[0] == 'first call of':
        return [(r['stage'], r) for r in results['startup']]
    if header[0].startswith('to the first output'):
        return [(r['case'], r) for r in results['starts']] + [
            ('python -m robot_dynamics.compile (every node, every mode)', results)]
    if header[0] == 'setting':
        return [(None, f) for per_node in results['settings'].values() for f in per_node.values()]
    if header[0] == 'control law':
        return [(r['law'], r) for r in results['control']]
    if header[0] == 'process':
        return [(None, s) for s in nodes['summary'].values()]
    if header[0].startswith('per message'):
        return list(nodes['readers'].items())
    return list(nodes['callbacks'].items())


def test_every_result_file_is_on_the_performance_page(built):
    tables = benchmark_tables((built / 'performance.html').read_text())
    named = {source_file(p) for sources, _ in tables for p in sources}
    committed = {f'benchmarks/results/{p.name}' for p in RESULTS.glob('*.json')}
    assert committed, 'no result files in benchmarks/results'
    assert named == committed, (f'not on doc/performance.md: {sorted(committed - named)}; '
                                f'not committed: {sorted(named - committed)}')


def test_performance_tables_are_the_result_files(built):
    tables = benchmark_tables((built / 'performance.html').read_text())
    assert len(tables) >= 8, f'{len(tables)} benchmark tables on the performance page'
    for sources, (header, *body) in tables:
        assert sources, f'a benchmark table ({header}) without its source line'
        files = [json.loads((REPO / source_file(p)).read_text()) for p in sources]
        for paragraph, results in zip(sources, files):
            assert results['machine']['date'] in paragraph, paragraph
            assert results['machine']['cpu'] in paragraph, paragraph
        if header[1].startswith('ratio, '):   # the ratios of several runs side by side
            for row in body:
                for cell, results in zip(row[1:], files):
                    ratio = next(r['ratio'] for r in results['single'] if r['function'] == row[0])
                    assert cell == f'{ratio:.2f}', (row, cell, ratio)
            continue
        assert len(files) == 1
        expected = expected_rows(files[0], header)
        assert len(body) == len(expected), (header, len(body), len(expected))
        for row, (key, values) in zip(body, expected):
            assert key is None or row[0] == key, (row, key)
            numbers = [x for cell in row[1:] for x in re.findall(r'\d+(?:\.\d+)?', cell)]
            assert numbers, row
            missing = [x for x in numbers if not shown(x, leaves(values))]
            assert not missing, f'{row}: {missing} not in {values}'


def test_performance_ratios_are_in_their_columns(built):
    """The ratio column of a one-state table and CPU vs (a) of the node table, cell by cell."""
    tables = benchmark_tables((built / 'performance.html').read_text())
    checked = 0
    for sources, (header, *body) in tables:
        results = json.loads((REPO / source_file(sources[0])).read_text())
        if header[:4] == ['function', 'ours µs', 'Pinocchio µs', 'ratio']:
            assert [row[3] for row in body] == [f"{r['ratio']:.2f}" for r in results['single']]
            checked += 1
        if header[0] == 'process':
            summary = results.get('nodes', results)['summary'].values()
            assert [row[2].split()[0] for row in body] == [
                f"{s['vs_minimal']['cpu_us']['median']:.2f}" for s in summary]
            checked += 1
    assert checked >= 4, f'{checked} ratio tables found'
