"""The defaults the manual's parameter tables state are the schemas' defaults.

A table whose header is ``| parameter | default | ... |`` names parameters in its first column
(in backticks; several share a row, with one value or one value each, comma-separated) and their
defaults in the second: a literal, optionally followed by a unit or a parenthesised note. Each
literal is compared with the schema default of the name (on a node's own page, that node's;
elsewhere the first of the three nodes that declares it). A schema default that is empty ([] or
'') stands for a fallback its description gives, which the page may state in words; those rows
name the parameter only.
"""
import math
import pathlib
import re

import pytest

from robot_dynamics.nodes.common import schema

DOC = pathlib.Path(__file__).resolve().parents[2] / 'doc'
NODES = ('dynamics_controller', 'wrench_estimator', 'arm_simulator')
LITERAL = re.compile(r"\s*(\[[^\]]*\](?:\s*×\s*\d+)?|''|[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|\.inf)|"
                     r"true|false|[a-z_]+)")


def tables(text):
    """(line number, cells of each row) of every table headed | parameter | default | ... |."""
    lines = text.splitlines()
    for k, line in enumerate(lines):
        header = [c.strip().lower() for c in line.strip().strip('|').split('|')]
        if header[:2] == ['parameter', 'default']:
            for j in range(k + 2, len(lines)):
                if not lines[j].startswith('|'):
                    break
                yield j + 1, [c.strip() for c in re.split(r'(?<!\\)\|', lines[j].strip())[1:-1]]


def number(token):
    return float(token.replace('.inf', 'inf'))


def literal(text):
    """The value a default cell's text starts with: a number, list, bool, '' or a word."""
    token = LITERAL.match(text.replace('`', '')).group(1)
    repeated = re.fullmatch(r'\[([^\]]*)\]\s*×\s*(\d+)', token)
    if repeated:
        return [number(repeated.group(1))] * int(repeated.group(2))
    if token.startswith('['):
        return [number(x) for x in token[1:-1].split(',') if x.strip()]
    if token in ("''", 'true', 'false'):
        return {"''": '', 'true': True, 'false': False}[token]
    return token if token[0].isalpha() else number(token)


def declared(nodes):
    """{name: default} of the nodes' schemas (the first node's where they differ)."""
    found = {}
    for node in reversed(nodes):
        found.update({p.name: p.default for p in schema.load(node)})
    return found


def rows():
    """({name: schema default}, default cell) of each table row that names a node's parameter."""
    for page in sorted(DOC.rglob('*.md')):
        defaults = declared((page.stem,) if page.stem in NODES else NODES)
        for line, cells in tables(page.read_text()):
            names = [n for n in re.findall(r'`([a-z_][a-z_.]*)`', cells[0]) if n in defaults]
            if names:
                yield pytest.param({n: defaults[n] for n in names}, cells[1],
                                   id=f'{page.relative_to(DOC)}:{line}')


def same(documented, default):
    if isinstance(default, bool) or isinstance(documented, bool):
        return documented is default
    if isinstance(default, (int, float)):
        return isinstance(documented, float) and math.isclose(documented, default)
    if isinstance(default, (list, tuple)):
        return isinstance(documented, list) and len(documented) == len(default) and all(
            same(d, x) for d, x in zip(documented, default))
    return documented == default


@pytest.mark.parametrize('defaults, cell', list(rows()))
def test_a_documented_default_is_the_schema_s(defaults, cell):
    parts = [p.strip() for p in re.sub(r'\([^)]*\)', '', cell).split(',')]
    if not (len(defaults) > 1 and len(parts) == len(defaults)):
        parts = [cell] * len(defaults)   # one value for every name of the row
    for (name, default), text in zip(defaults.items(), parts):
        if default in ([], ''):
            continue   # a fallback the description gives, which the page may say in words
        documented = literal(text)
        assert same(documented, default), f'{name}: the page says {text!r}, the schema {default!r}'
