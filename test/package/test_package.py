"""Packaging checks: package.xml, setup.py entry points, and the declared dependencies.

package.xml must declare what the code imports (a ROS user installs dependencies with rosdep
from it), and the numerical core must stay free of ROS.
"""
import ast
import pathlib
import subprocess
import sys

from catkin_pkg.package import parse_package
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = REPO / 'robot_dynamics'

# Import name -> rosdep key, where they differ (ROS packages are imported by their key).
ROSDEP_KEY = {
    'numpy': 'python3-numpy',
    'scipy': 'python3-scipy',
    'numba': 'python3-numba',
    'yaml': 'python3-yaml',
    'matplotlib': 'python3-matplotlib',
    'pytest': 'python3-pytest',
    'hypothesis': 'python3-hypothesis',
    'catkin_pkg': 'python3-catkin-pkg',
}
# Import name -> pip distribution name in setup.py extras_require, where they differ.
PIP_NAME = {'pinocchio': 'pin'}


def setup_keyword(name):
    """Return the literal value of keyword `name` in the setup() call of setup.py."""
    tree = ast.parse((REPO / 'setup.py').read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, 'id', None) == 'setup':
            for keyword in node.keywords:
                if keyword.arg == name:
                    return ast.literal_eval(keyword.value)
    raise KeyError(name)


def top_level_imports(path):
    """Return the top-level module names imported (absolutely) by the file at `path`."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split('.')[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split('.')[0])
    return names


def third_party_imports(paths, local=()):
    """Map each third-party module imported by `paths` to the files importing it."""
    found = {}
    for path in paths:
        for name in top_level_imports(path):
            if name in sys.stdlib_module_names or name == 'robot_dynamics' or name in local:
                continue
            found.setdefault(name, []).append(path.relative_to(REPO).as_posix())
    return found


@pytest.fixture(scope='module')
def manifest():
    return parse_package(REPO / 'package.xml')


def names(dependencies):
    return {d.name for d in dependencies}


def undeclared(imports, rosdep_keys, pip_names):
    return {name: files for name, files in imports.items()
            if ROSDEP_KEY.get(name, name) not in rosdep_keys
            and PIP_NAME.get(name, name) not in pip_names}


def test_manifest_is_valid_format_3_ament_python(manifest):
    manifest.validate()  # raises InvalidPackage with the reason
    assert manifest.package_format == 3
    assert manifest.name == 'robot_dynamics'
    assert manifest.version == setup_keyword('version') == '0.1.0'
    assert [str(license) for license in manifest.licenses] == ['Apache-2.0']
    assert setup_keyword('license') == 'Apache-2.0'
    assert manifest.get_build_type() == 'ament_python'


def test_manifest_declares_the_ros_interfaces(manifest):
    required = {'rclpy', 'sensor_msgs', 'geometry_msgs', 'std_msgs', 'std_srvs',
                'trajectory_msgs', 'diagnostic_msgs', 'ament_index_python',
                'python3-numpy', 'python3-scipy', 'python3-numba'}
    assert required <= names(manifest.exec_depends)
    assert 'python3-pytest' in names(manifest.test_depends)


def test_package_imports_are_declared(manifest):
    sources = sorted(PACKAGE.rglob('*.py')) + sorted(REPO.glob('launch/*.py'))
    assert sources, 'no sources found'
    extras = {dist for dists in setup_keyword('extras_require').values() for dist in dists}
    missing = undeclared(third_party_imports(sources), names(manifest.exec_depends), extras)
    assert not missing, f'imports without an exec_depend in package.xml: {missing}'


def test_test_imports_are_declared(manifest):
    tests = sorted((REPO / 'test').rglob('*.py'))
    local = {path.stem for path in tests} | {'test'}
    keys = names(manifest.exec_depends) | names(manifest.test_depends)
    missing = undeclared(third_party_imports(tests, local), keys,
                         set(setup_keyword('extras_require')['test']))
    assert not missing, f'test imports without a test dependency: {missing}'


def test_every_source_folder_is_an_installed_package():
    folders = {path.parent for path in PACKAGE.rglob('*.py')}
    missing = sorted(str(f.relative_to(REPO)) for f in folders if not (f / '__init__.py').exists())
    assert not missing, f'find_packages() skips folders without __init__.py: {missing}'


def test_console_scripts_point_at_node_mains():
    scripts = dict(entry.replace(' ', '').split('=')
                   for entry in setup_keyword('entry_points')['console_scripts'])
    assert set(scripts) == {'dynamics_controller', 'wrench_estimator', 'arm_simulator',
                            'record_joint_states', 'fit_dynamics', 'pfl_map', 'excite'}
    for name, target in scripts.items():
        module, function = target.split(':')
        path = REPO.joinpath(*module.split('.')).with_suffix('.py')
        assert path.is_file(), f'{name}: {path} does not exist'
        functions = {node.name for node in ast.parse(path.read_text()).body
                     if isinstance(node, ast.FunctionDef)}
        assert function in functions, f'{name}: {module} defines no {function}()'


def is_ros(module):
    return (module in {'rclpy', 'launch', 'launch_ros', 'ament_index_python', 'rosidl_runtime_py'}
            or module.endswith(('_msgs', '_srvs', '_interfaces')))


def test_core_does_not_import_ros():
    imports = third_party_imports(sorted((PACKAGE / 'core').rglob('*.py')))
    assert not {name: files for name, files in imports.items() if is_ros(name)}


def test_importing_the_package_loads_no_ros():
    code = 'import sys, robot_dynamics; print(*{m.split(".")[0] for m in sys.modules})'
    loaded = subprocess.run([sys.executable, '-c', code], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout.split()
    assert not [module for module in loaded if is_ros(module)]


def test_declared_version_floors_are_the_tested_floor(manifest):
    """package.xml and setup.py state as floors the versions the Jazzy-floor CI run installs."""
    pinned = dict(line.split('#')[0].strip().split('==')
                  for line in (REPO / 'requirements-jazzy.txt').read_text().splitlines()
                  if '==' in line.split('#')[0])
    floors = dict(requirement.split('>=') for requirement in setup_keyword('install_requires')
                  if '>=' in requirement)
    for name in ('numpy', 'scipy', 'numba'):
        assert floors[name] == pinned[name], f'setup.py {name}>= vs requirements-jazzy.txt'
        [depend] = [d for d in manifest.exec_depends if d.name == ROSDEP_KEY[name]]
        assert depend.version_gte == pinned[name], f'package.xml {depend.name} version_gte'


@pytest.mark.parametrize('name, controller_type, parameters', [
    ('joint_group_effort_controller', 'effort_controllers/JointGroupEffortController', {}),
    ('forward_command_controller', 'forward_command_controller/ForwardCommandController',
     {'interface_name': 'effort'}),
])
def test_ros2_control_effort_controllers_take_our_commands(name, controller_type, parameters):
    """The shipped controller_manager files load the effort controller we publish to.

    It is named effort_controller, so it reads ~/commands = effort_controller/commands, our
    topic; its joints are the Panda's, in the order of our joints parameter.
    """
    import yaml
    document = yaml.safe_load((REPO / 'config' / 'ros2_control' / f'{name}.yaml').read_text())
    manager = document['controller_manager']['ros__parameters']
    assert manager == {'effort_controller': {'type': controller_type}}
    controller = document['effort_controller']['ros__parameters']
    panda = yaml.safe_load((REPO / 'config' / 'panda.yaml').read_text())
    assert controller == {'joints': panda['/**/dynamics_controller']['ros__parameters']['joints'],
                          **parameters}
    controller_source = (PACKAGE / 'nodes' / 'dynamics_controller' / 'controller.py').read_text()
    assert "'effort_controller/commands'" in controller_source


NODE_MODULES = {'dynamics_controller': 'controller', 'wrench_estimator': 'estimator',
                'arm_simulator': 'simulator'}


@pytest.mark.parametrize('folder, node', NODE_MODULES.items())
def test_no_component_imports_its_node(folder, node):
    """A node's folder: the node module is glue; its components never import it (or a node)."""
    for path in sorted((PACKAGE / 'nodes' / folder).glob('*.py')):
        if path.stem in {node, '__init__', '__main__'}:
            continue
        imported = set()
        for statement in ast.walk(ast.parse(path.read_text())):
            if isinstance(statement, ast.ImportFrom):
                imported.add(statement.module or '')
                imported.update(f'{statement.module or ""}.{a.name}' for a in statement.names)
            elif isinstance(statement, ast.Import):
                imported.update(a.name for a in statement.names)
        nodes = {name for name in imported
                 if name.split('.')[-1] in set(NODE_MODULES.values()) | {'node'}}
        assert not nodes, f'{path.name} imports {nodes}'
