"""Sphinx directive ``node-parameters``: a node's parameter table, from its parameter schema.

The argument is the node class (``module.Class``); the table lists every ``Param`` of its
``PARAMS`` tuple (robot_dynamics.nodes.parameters), so the page cannot drift from the code.
"""
import importlib

from docutils import nodes
from docutils.parsers.rst import Directive

COLUMNS = ('parameter', 'type', 'default', 'range or values', 'description')
WIDTHS = (18, 8, 12, 14, 48)


def node_class(path):
    """The class named by a dotted path such as ``robot_dynamics.nodes.x.Class``."""
    module, _, name = path.rpartition('.')
    return getattr(importlib.import_module(module), name)


def constraint(param):
    """The range, choices or per-joint rule of a Param, as text ('' if none)."""
    if param.choices:
        return ', '.join(param.choices)
    if param.range:
        return f'[{param.range[0]}, {param.range[1]}]'
    return ''


def cells(param):
    """The cells of one Param's row: lists of docutils inline nodes, one list per column."""
    notes = [text for flag, text in ((param.read_only, 'read-only'),
                                     (param.per_joint, 'one value per joint'))
             if flag]
    description = param.description + (f' ({"; ".join(notes)})' if notes else '')
    default = "''" if param.default == '' else repr(param.default)
    return ([nodes.literal(text=param.name)], [nodes.Text(param.kind)],
            [nodes.literal(text=default)], [nodes.Text(constraint(param))],
            [nodes.Text(description)])


def row(entries):
    """A table row of the given cells (each a list of inline nodes)."""
    tr = nodes.row()
    for inline in entries:
        tr += nodes.entry('', nodes.paragraph('', '', *inline))
    return tr


def parameter_table(params):
    """A docutils table of the Params, one row each, in declaration order."""
    group = nodes.tgroup(cols=len(COLUMNS))
    group.extend(nodes.colspec(colwidth=w) for w in WIDTHS)
    group += nodes.thead('', row([[nodes.Text(c)] for c in COLUMNS]))
    group += nodes.tbody('', *(row(cells(p)) for p in params))
    return nodes.table('', group, classes=['node-parameters'])


class NodeParameters(Directive):
    """``node-parameters <module.Class>``: the table of the class's PARAMS."""

    required_arguments = 1

    def run(self):
        """The table; an error naming the class if it declares a parameter twice."""
        params = node_class(self.arguments[0]).PARAMS
        names = [p.name for p in params]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise self.error(f'{self.arguments[0]} declares {duplicates} twice')
        return [parameter_table(params)]


def setup(app):
    """Register the directive (Sphinx's extension entry point)."""
    app.add_directive('node-parameters', NodeParameters)
    return {'parallel_read_safe': True, 'parallel_write_safe': True}
