"""The package's modules: no import cycle among them, and each imports on its own.

The graph is read from the sources (every ``import`` and ``from ... import`` of a
robot_dynamics module, those inside functions too: a lazy import in a cycle still makes two
modules that cannot be read apart). Importing each module in a fresh set of robot_dynamics
modules (third-party ones stay loaded) finds a module that works only after another.
"""
import ast
import pathlib
import subprocess
import sys
import textwrap

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / 'robot_dynamics'


def modules():
    """{dotted name: path} of every module of the package but the ``__main__`` scripts."""
    found = {}
    for path in sorted(PACKAGE.rglob('*.py')):
        parts = path.relative_to(PACKAGE.parent).with_suffix('').parts
        if parts[-1] == '__main__':
            continue
        if parts[-1] == '__init__':
            parts = parts[:-1]
        found['.'.join(parts)] = path
    return found


def imported(name, path, known):
    """The package's modules that module ``name`` imports."""
    package = name if path.name == '__init__.py' else name.rpartition('.')[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                parent = package.split('.')[:len(package.split('.')) - node.level + 1]
                base = '.'.join(parent + ([node.module] if node.module else []))
            targets |= {f'{base}.{alias.name}' if f'{base}.{alias.name}' in known else base
                        for alias in node.names}
    return {t for t in targets if t in known and t != name}


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, found = {}, {}, [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle():
    known = modules()
    graph = {name: imported(name, path, known) for name, path in known.items()}
    assert sum(map(len, graph.values())) > len(known)   # the graph was read
    assert cycles(graph) == []


def test_cycles_are_found():
    assert cycles({'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}) == [['a', 'b', 'c']]


ALONE = textwrap.dedent("""
    import importlib, sys
    failed = []
    for name in sys.argv[1:]:
        for loaded in [m for m in sys.modules if m.split('.')[0] == 'robot_dynamics']:
            del sys.modules[loaded]
        try:
            importlib.import_module(name)
        except Exception as error:
            failed.append(f'{name}: {type(error).__name__}: {error}')
    print('\\n'.join(failed))
""")


def test_every_module_imports_on_its_own():
    names = list(modules())
    done = subprocess.run([sys.executable, '-c', ALONE, *names], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == '', done.stdout
    assert len(names) > 100
