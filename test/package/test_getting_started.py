"""The newcomer's path: every command the getting-started page and the README give is checked.

The commands are read from the pages (indented code blocks, and inline code on the
getting-started page): each make target must be a rule of the Makefile and each make variable
used by it, each ``python -m`` module must accept the options shown (its own argument parser),
each ``ros2 launch`` file must exist and take the arguments shown, each colcon or ros2 package
name must be this package, each file named must exist, and each ``name: value`` parameter must
be declared by a node (with the value among its choices). The one-line Python example is run.
Nothing here starts a node, a demo or the network.
"""
import importlib.util
import pathlib
import re
import shlex
import subprocess
import sys

from catkin_pkg.package import parse_package
import pytest

from robot_dynamics import bringup, demo, run
from robot_dynamics.nodes.arm_simulator import ArmSimulator
from robot_dynamics.nodes.dynamics_controller import DynamicsController
from robot_dynamics.nodes.wrench_estimator import WrenchEstimator

REPO = pathlib.Path(__file__).resolve().parents[2]
PAGES = {'getting_started': REPO / 'doc' / 'getting_started.md', 'README': REPO / 'README.md'}
PACKAGE = parse_package(str(REPO / 'package.xml')).name
SHELL_STEPS = {'cd', 'git', 'source', 'sudo'}   # the shell's and git's, nothing of ours to check


def code_lines(page, inline):
    """Commands of a Markdown page: lines of indented blocks, and inline code if asked."""
    text = page.read_text()
    lines = [m.group(1) for m in re.finditer(r'^(?: {4}|\t)(\S.*)$', text, re.M)]
    if inline:
        lines += [m.group(1) for m in re.finditer(r'`((?:make|ros2|\.venv/bin/python|'
                                                  r'python3?) [^`]+)`', text)]
    return lines


def commands(line):
    """The commands of one shell line: words of each part between &&, without [ ] or comments."""
    words = [w if ' ' in w else w.lstrip('[').rstrip(']')   # [--tip LINK]: an option
             for w in shlex.split(line, comments=True)]
    parts, current = [], []
    for word in words:
        if word == '&&':
            parts.append(current)
            current = []
        else:
            current.append(word)
    return [p for p in parts + [current] if p]


def all_commands():
    """(page, command words) of every command on the pages."""
    found = [(name, words) for name, page in PAGES.items()
             for line in code_lines(page, inline=name == 'getting_started')
             for words in commands(line)]
    return [c for k, c in enumerate(found) if c not in found[:k]]


def makefile_targets():
    return set(re.findall(r'^([\w-]+):', (REPO / 'Makefile').read_text(), re.M))


def check_make(words):
    """make [VAR=value ...] target ...: targets are rules, variables are read by the build."""
    targets = makefile_targets()
    build = (REPO / 'Makefile').read_text() + (REPO / 'scripts' / 'setup_venv.sh').read_text()
    for word in words[1:]:
        name, sep, value = word.partition('=')
        if sep:
            assert re.search(rf'\b{name}\b', build), f'make: no variable {name} in the build'
            if name == 'ROS_DISTRO':
                assert value in ('kilted', 'jazzy'), f'make: ROS_DISTRO={value}'
        else:
            assert word in targets, f'make: no target {word!r} in the Makefile'


def check_demo(argv):
    demo.arguments(argv)   # argparse exits (SystemExit) on an option or value it does not take


def check_run(argv, monkeypatch):
    asked = {}
    monkeypatch.setattr(bringup, 'nodes', lambda setup, **kwargs: asked.update(setup=setup))
    run.parse(argv)
    assert asked['setup'] in bringup.SETUPS


def check_other_module(module, argv):
    """A module with no parser to call here: it exists, and its --help names the options."""
    assert importlib.util.find_spec(module), f'no module {module}'
    options = [w.split('=')[0] for w in argv if w.startswith('--')]
    if options:
        help_text = subprocess.run([sys.executable, '-m', module, '--help'], cwd=REPO,
                                   capture_output=True, text=True, timeout=120).stdout
        assert all(o in help_text for o in options), (module, options, help_text)


def check_python(words, monkeypatch):
    """python -m MODULE ...: the module takes the arguments; python -c: left to the example."""
    if words[1] == '-c':
        return
    assert words[1] == '-m', f'a python command that is not -m or -c: {words}'
    module, argv = words[2], words[3:]
    if module == 'venv':
        return
    if module == 'pip':
        for flag, value in zip(argv, argv[1:]):
            if flag in ('-r', '-e'):
                assert (REPO / value).exists(), f'pip: {value} is not in the repository'
        return
    if module == 'robot_dynamics.demo':
        return check_demo(argv)
    if module == 'robot_dynamics.run':
        return check_run(argv, monkeypatch)
    check_other_module(module, argv)


def check_launch(argv):
    """ros2 launch PACKAGE FILE name:=value ...: the file exists and declares each argument."""
    package, launch_file, *arguments = argv
    assert package == PACKAGE, f'ros2 launch {package}: the package is {PACKAGE}'
    assert (REPO / 'launch' / launch_file).is_file(), f'no launch/{launch_file}'
    # every launch file declares bringup.ARGUMENTS (test_launch.py checks that)
    for argument in arguments:
        name, sep, value = argument.partition(':=')
        assert sep and name in bringup.ARGUMENTS, f'{launch_file} takes no argument {name!r}'
        choices = {'robot': bringup.ROBOTS, 'mode': bringup.MODES,
                   'engine': ('internal', 'mujoco'), 'use_description_topic': ('true', 'false')}
        assert name not in choices or value in choices[name], f'{name}:={value}'


def check_ros2(argv):
    verb, rest = argv[0], argv[1:]
    if verb == 'launch':
        return check_launch(rest)
    assert verb == 'run', f'ros2 {verb}: not a command this test knows'
    package, executable = rest[:2]
    assert package == PACKAGE
    assert f"'{executable} = " in (REPO / 'setup.py').read_text(), f'no console script {executable}'


def check_command(words, monkeypatch):
    """Dispatch on the program; a program this test does not know fails, to be added here."""
    program = words[0]
    if program in SHELL_STEPS:
        return
    if program == 'make':
        return check_make(words)
    if program.endswith('python') or program.startswith('python3'):
        return check_python(words, monkeypatch)
    if program == 'ros2':
        return check_ros2(words[1:])
    if program == 'colcon':
        selected = words[words.index('--packages-select') + 1:]
        assert selected == [PACKAGE], f'colcon selects {selected}; the package is {PACKAGE}'
        return
    if program == 'rosdep':
        assert (REPO / 'package.xml').is_file()
        return
    pytest.fail(f'a command this test does not know how to check: {shlex.join(words)}')


COMMANDS = all_commands()


def test_the_pages_give_commands():
    pages = {name for name, _ in COMMANDS}
    assert pages == set(PAGES), f'no command found on {set(PAGES) - pages}'
    programs = {words[0] for _, words in COMMANDS}
    assert {'make', 'colcon', 'ros2'} <= programs, programs


@pytest.mark.parametrize('page, words', COMMANDS,
                         ids=[f'{page}: {shlex.join(words)[:60]}' for page, words in COMMANDS])
def test_command_names_what_exists(page, words, monkeypatch):
    try:
        check_command(words, monkeypatch)
    except SystemExit as error:   # argparse refused the command line
        pytest.fail(f'{page}: {shlex.join(words)}: rejected by its parser ({error})')


def test_parameters_shown_are_declared():
    declared = {}
    for node in (DynamicsController, WrenchEstimator, ArmSimulator):
        declared.update({p.name: p for p in node.PARAMS})
    shown = [(name, m.group(1), m.group(2).strip()) for name, page in PAGES.items()
             for m in re.finditer(r'`([a-z_][\w.]*):\s+([^`]+)`', page.read_text())]
    for page, name, value in shown:
        assert name in declared, f'{page}: `{name}: {value}` is no parameter of any node'
        choices = declared[name].choices
        assert not choices or value in choices, f'{page}: {name} takes {choices}, not {value}'


def test_the_python_example_runs():
    """The one-line example prints the Panda's gravity torques at q = 0.

    The first joint's axis is vertical, so gravity has no torque about it; the arm's offsets
    put a load on some other joint.
    """
    snippets = [words[2] for _, words in COMMANDS if words[0].endswith('python')
                and words[1] == '-c']
    assert snippets, 'the pages no longer show a python -c example: drop this test'
    for code in snippets:
        out = subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        torques = [float(x) for x in re.findall(r'-?\d+(?:\.\d+)?(?:e[-+]?\d+)?', out.stdout)]
        assert len(torques) == 7, out.stdout
        assert abs(torques[0]) < 1e-9
        assert max(abs(t) for t in torques) > 0.1
