"""Sphinx directive ``node-parameters``: a node's parameter table, from its parameter schema.

The argument is the node's name (record_joint_states, a tool's node, too); the table lists every
parameter of its schema, robot_dynamics/nodes/<node>/parameters.yaml (a tool's:
robot_dynamics/tools/<node>.parameters.yaml) with the groups it includes, read by
robot_dynamics.nodes.common.schema as the node reads it, so the page cannot drift from what the
node declares.
"""
from docutils import nodes
from docutils.parsers.rst import Directive

from robot_dynamics.nodes.common import schema

COLUMNS = ('parameter', 'type', 'default', 'range or values', 'description')
WIDTHS = (18, 8, 12, 14, 48)


def constraint(param):
    """The rules of a Param but the per-joint size, as text ('' if none)."""
    texts = []
    for rule, args in param.rules:
        if rule == 'one_of<>':
            texts.append(', '.join(args[0]))
        elif rule == 'bounds<>':
            texts.append(f'[{args[0]}, {args[1]}]')
        elif rule != schema.PER_JOINT:
            text = schema.rule_text(rule, args).removeprefix('must be ')
            element = rule.startswith(('element', 'lower_element', 'upper_element'))
            texts.append(f'each {text}' if element else text)
    return '; '.join(texts)


def cells(param):
    """The cells of one Param's row: lists of docutils inline nodes, one list per column."""
    notes = ['read-only'] if param.read_only else []
    notes += [schema.rule_text(rule, args) for rule, args in param.rules
              if rule == schema.PER_JOINT]
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
    """A docutils table of the Params, one row each, in the schema's order."""
    group = nodes.tgroup(cols=len(COLUMNS))
    group.extend(nodes.colspec(colwidth=w) for w in WIDTHS)
    group += nodes.thead('', row([[nodes.Text(c)] for c in COLUMNS]))
    group += nodes.tbody('', *(row(cells(p)) for p in params))
    return nodes.table('', group, classes=['node-parameters'])


class NodeParameters(Directive):
    """``node-parameters <node>``: the table of the node's parameter schema."""

    required_arguments = 1

    def run(self):
        """The table; an error naming the schema if it cannot be read."""
        try:
            params = schema.load(self.arguments[0])
        except (OSError, ValueError) as error:
            raise self.error(f'node-parameters {self.arguments[0]}: {error}')
        return [parameter_table(params)]


def setup(app):
    """Register the directive (Sphinx's extension entry point)."""
    app.add_directive('node-parameters', NodeParameters)
    return {'parallel_read_safe': True, 'parallel_write_safe': True}
