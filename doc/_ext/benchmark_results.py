"""Sphinx directive ``benchmark-table``: a table of a committed benchmark result file.

``benchmark-table <section> <file> [<file> ...]`` renders one section of result files in
``benchmarks/results/`` (the JSON ``make bench`` and ``make bench-nodes`` write) with the tables
the benchmark itself prints (``robot_dynamics.benchmarks.report``), under a line naming the date,
the machine and the file, so the performance page cannot drift from the measurements.
Sections: single, control, batch, complexity, startup, starts, tail, nodes, readers, callbacks
(one file), and ratios (ours / the peer's per function, one column per file).
"""
import json
import pathlib

from docutils import nodes
from docutils.parsers.rst import Directive

from robot_dynamics.benchmarks import report

REPO = pathlib.Path(__file__).resolve().parents[2]

# section: (the key it needs, its table from the results); the node sections read the 'nodes'
# part of a make bench file, or a make bench-nodes file (nodes.json) as a whole
SECTIONS = {
    'single': ('single', lambda r: report.single_table(r['single'])),
    'control': ('control', lambda r: report.control_table(r['control'])),
    'batch': ('batch', lambda r: report.batch_table(r['batch'])),
    'complexity': ('complexity',
                   lambda r: report.complexity_table(r['complexity'], r['exponents'])),
    'startup': ('startup', lambda r: report.startup_table(r['startup'])),
    'starts': ('starts', report.starts_table),
    'tail': ('settings', report.tail_table),
    'nodes': ('summary', lambda r: report.node_table(r['summary'])),
    'readers': ('readers', lambda r: report.reader_table(r['readers'])),
    'callbacks': ('callbacks', lambda r: report.callback_table(r['callbacks'])),
}


def section_table(name, results, section):
    """The markdown table of one section of a result file; ValueError if it has none."""
    key, render = SECTIONS[section]
    part = results.get('nodes', results) if key in ('summary', 'readers', 'callbacks') \
        else results
    if key not in part:
        raise ValueError(f'benchmark-table: {name} has no {section!r} section')
    return render(part)


VERSIONS = (('python', 'Python'), ('numpy', 'numpy'), ('numba', 'numba'),
            ('pinocchio', 'Pinocchio'), ('rclpy', 'rclpy'), ('rmw', 'RMW'))


def load(name):
    """(path relative to the repository, the parsed JSON) of a result file."""
    path = (REPO / name).resolve()
    if not path.is_file():
        raise ValueError(f'benchmark-table: no result file {name} (give a path from the '
                         'repository root, e.g. benchmarks/results/<date>-bench.json)')
    return path.relative_to(REPO).as_posix(), json.loads(path.read_text())


def load_average(results):
    """'a → b', the 1-minute load average before and after the run ('' if not recorded)."""
    before = results.get('load_average_before') or results['machine'].get('load_average')
    after = results.get('load_average_after')
    return f'{before[0]:.1f} → {after[0]:.1f}' if before and after else ''


def provenance(name, results):
    """The line above a table: when, on what and from which file."""
    m = results['machine']
    versions = ', '.join(f'{label} {m[key]}' for key, label in VERSIONS if m.get(key))
    load = load_average(results)
    text = (f"Measured {m['date']} on {m['cpu']}, {m['cores']} cores; {versions}"
            + (f'; load average {load}' if load else '') + '. Source: ')
    para = nodes.paragraph('', '', nodes.Text(text), nodes.literal(text=name), nodes.Text('.'))
    if results.get('transcribed'):
        para += nodes.Text(f" ({results['transcribed']}.)")
    return para


def markdown_rows(table):
    """Header and body rows (lists of cell texts) of a markdown table."""
    rows = [[c.strip() for c in line.strip().strip('|').split('|')]
            for line in table.splitlines()]
    return rows[0], rows[2:]


def cell(text):
    """A table entry; a cell written **x** is set in bold."""
    if text.startswith('**') and text.endswith('**'):
        inline = nodes.strong(text=text[2:-2])
    else:
        inline = nodes.Text(text)
    return nodes.entry('', nodes.paragraph('', '', inline))


def table(header, body):
    """A docutils table with the result-table class the tests look for."""
    group = nodes.tgroup(cols=len(header))
    group.extend(nodes.colspec(colwidth=1) for _ in header)
    group += nodes.thead('', nodes.row('', *(cell(c) for c in header)))
    group += nodes.tbody('', *(nodes.row('', *(cell(c) for c in r)) for r in body))
    return nodes.table('', group, classes=['benchmark-results'])


def ratio_table(loaded):
    """function | ratio ours / peer of each file (same function order as the first file)."""
    for name, results in loaded:
        if 'single' not in results:
            raise ValueError(f"benchmark-table: {name} has no 'single' section")
    header = ['function'] + [f"ratio, {r['machine']['date']}, numba {r['machine']['numba']}, "
                             f"Pinocchio {r['machine']['pinocchio']}" for _, r in loaded]
    per_file = [{row['function']: f"{row['ratio']:.2f}" for row in r['single']}
                for _, r in loaded]
    functions = [row['function'] for row in loaded[0][1]['single']]
    return header, [[f] + [ratios.get(f, '–') for ratios in per_file] for f in functions]


class BenchmarkTable(Directive):
    """``benchmark-table <section> <file> [<file> ...]``: see the module docstring."""

    required_arguments = 2
    optional_arguments = 8

    def run(self):
        """The provenance line of each file and the section's table."""
        section, names = self.arguments[0], self.arguments[1:]
        if section not in SECTIONS and section != 'ratios':
            raise self.error(f'benchmark-table: unknown section {section!r}; one of '
                             f"{', '.join(sorted(SECTIONS))}, ratios")
        if section != 'ratios' and len(names) != 1:
            raise self.error(f'benchmark-table {section}: give exactly one result file')
        try:
            loaded = [load(n) for n in names]
            if section == 'ratios':
                header, body = ratio_table(loaded)
            else:
                header, body = markdown_rows(section_table(*loaded[0], section))
        except ValueError as error:
            raise self.error(str(error))
        for name, _ in loaded:
            self.state.document.settings.env.note_dependency(str(REPO / name))
        return [*(provenance(n, r) for n, r in loaded), table(header, body)]


def setup(app):
    """Register the directive (Sphinx's extension entry point)."""
    app.add_directive('benchmark-table', BenchmarkTable)
    return {'parallel_read_safe': True, 'parallel_write_safe': True}
