"""The compiled kernels' fallbacks: plain Python, and the on-disk cache.

NUMBA_DISABLE_JIT=1 computes the same numbers as plain Python, and numba's on-disk cache works
from a read-only install and never serves stale code.

Each test runs Python in a subprocess; the cache tests make a copy of the package read-only
(file modes, or read-only bind mounts in a private mount namespace when run as root, whom
modes do not stop). About 20 s: two cold compiles of one kernel.
"""
import json
import os
import pathlib
import shutil
import stat
import subprocess
import sys

import numpy as np
import pytest

import robot_dynamics as rd
from random_trees import make_case, random_state

PACKAGE = pathlib.Path(rd.__file__).resolve().parent
TEST_DIR = pathlib.Path(__file__).resolve().parent
ONE_JOINT = """<robot name="one">
  <link name="base"/>
  <link name="arm"><inertial><origin xyz="0.1 0.02 0.3"/><mass value="2.0"/>
    <inertia ixx="0.2" iyy="0.25" izz="0.3" ixy="0.01" ixz="0.02" iyz="0.03"/></inertial></link>
  <joint name="j" type="revolute"><parent link="base"/><child link="arm"/>
    <origin xyz="0 0 0.2" rpy="0.1 0.2 0.3"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" effort="1" velocity="1"/></joint>
</robot>"""
MASS_MATRIX = f"""
import json, warnings
import robot_dynamics as rd
from robot_dynamics.core.algorithms.crba import mass_matrix_kernel
model = rd.load_urdf('''{ONE_JOINT}''')
stats = mass_matrix_kernel.stats
print(json.dumps({{'M': rd.mass_matrix(model, [0.3]).tolist(), 'path': stats.cache_path,
                  'hits': sum(stats.cache_hits.values()),
                  'misses': sum(stats.cache_misses.values())}}))
"""


def read_only(paths):
    """The command prefix that makes ``paths`` read-only for a child process.

    File modes do it for an ordinary user; root, whom they do not stop, gets private read-only
    bind mounts.
    """
    if os.geteuid() != 0:
        return []
    mounts = ' && '.join(f'mount --bind -o ro {p} {p}' for p in paths)
    return ['unshare', '--mount', 'sh', '-c', f'{mounts} && exec "$0" "$@"']


def python(code, env=None, prefix=()):
    """stdout (parsed as JSON) and stderr of ``code`` run by this interpreter."""
    run = subprocess.run([*prefix, sys.executable, '-c', code], capture_output=True, text=True,
                         env={**os.environ, **(env or {})}, cwd='/')
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout), run.stderr


@pytest.fixture
def install(tmp_path):
    """A read-only copy of the package (no compiled cache), and a writable and a closed cache."""
    shutil.copytree(PACKAGE, tmp_path / 'site' / 'robot_dynamics',
                    ignore=shutil.ignore_patterns('__pycache__'))
    (tmp_path / 'cache').mkdir()
    (tmp_path / 'closed').mkdir()
    for path in [*(tmp_path / 'site').rglob('*'), tmp_path / 'site', tmp_path / 'closed']:
        path.chmod(0o555 if path.is_dir() else 0o444)
    yield tmp_path
    for path in [*(tmp_path / 'site').rglob('*'), tmp_path / 'site', tmp_path / 'closed']:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


def environment(root, cache):
    """Import the copy; the user's cache directory is root/cache (NUMBA_CACHE_DIR unset)."""
    return {'PYTHONPATH': str(root / 'site'), 'HOME': str(root / cache),
            'XDG_CACHE_HOME': str(root / cache), 'NUMBA_CACHE_DIR': ''}


def test_cache_of_a_read_only_install_goes_to_the_user_cache(install):
    expected = rd.mass_matrix(rd.load_urdf(ONE_JOINT), [0.3])
    prefix = read_only([install / 'site'])
    cold, _ = python(MASS_MATRIX, environment(install, 'cache'), prefix)
    warm, _ = python(MASS_MATRIX, environment(install, 'cache'), prefix)
    assert pathlib.Path(cold['path']).is_relative_to(install / 'cache' / 'numba')
    assert (cold['hits'], warm['misses']) == (0, 0) and cold['misses'] > 0 and warm['hits'] > 0
    assert list((install / 'cache').rglob('*.nbi'))
    assert not list((install / 'site').rglob('*.nbi'))
    np.testing.assert_allclose(cold['M'], expected, rtol=1e-14)
    np.testing.assert_allclose(warm['M'], expected, rtol=1e-14)


def test_without_a_writable_cache_directory_it_compiles_and_warns(install):
    result, stderr = python(MASS_MATRIX, environment(install, 'closed'),
                            read_only([install / 'site', install / 'closed']))
    assert 'numba kernels are not cached' in stderr
    np.testing.assert_allclose(result['M'], rd.mass_matrix(rd.load_urdf(ONE_JOINT), [0.3]),
                               rtol=1e-14)


def test_an_edit_of_a_helper_module_invalidates_every_cached_kernel(install):
    """numba stamps a cache entry with its own file; ours with all kernel sources."""
    stamp = 'from robot_dynamics.core import _jit; import json; print(json.dumps(_jit.STAMP))'
    env = environment(install, 'cache')
    before, _ = python(stamp, env)
    spatial = install / 'site' / 'robot_dynamics' / 'core' / 'spatial.py'
    spatial.chmod(0o644)
    spatial.write_text(spatial.read_text() + '\n# an edit\n')
    after, _ = python(stamp, env)
    assert before != after


FALLBACK = f"""
import json, sys
import numpy as np
sys.path[:0] = [{str(TEST_DIR)!r}, {str(TEST_DIR.parent)!r}]
import robot_dynamics as rd
from test_jit import outputs
print(json.dumps({{name: outputs(name).tolist() for name in sys.argv[1:]}}))
"""


def outputs(name):
    """A few results of every kernel family, flattened, for case ``name``."""
    model = make_case(name).load()
    rng = np.random.default_rng(7)
    Q, V, A = (np.array(x) for x in zip(*(random_state(model.lower, model.upper, rng)
                                          for _ in range(2))))
    frame = model.tip or model.frame_names[-1]
    results = [rd.rnea(model, Q, V, A), rd.gravity(model, Q[0]), rd.mass_matrix(model, Q),
               rd.coriolis_matrix(model, Q[0], V[0]), rd.forward_dynamics(model, Q, V, A),
               rd.frame_pose(model, Q, frame), rd.frame_jacobian(model, Q[0], frame, rd.LOCAL),
               rd.frame_bias_acceleration(model, Q, V, frame),
               rd.task_space_inertia(model, Q[1], frame, damping=1e-2)]
    return np.concatenate([np.ravel(r) for r in results])


def test_pure_python_fallback_computes_the_same_numbers():
    names = ['panda/panda_link0/panda_hand', 'tree-4-12']
    run = subprocess.run([sys.executable, '-c', FALLBACK, *names], capture_output=True,
                         text=True, env={**os.environ, 'NUMBA_DISABLE_JIT': '1'})
    assert run.returncode == 0, run.stderr
    fallback = json.loads(run.stdout)
    for name in names:
        np.testing.assert_allclose(fallback[name], outputs(name), rtol=1e-12, atol=1e-12)


def test_a_reinstall_of_the_same_sources_loads_the_cache(install):
    """Cache entries are stamped with the sources' contents: new mtimes recompile nothing."""
    env = environment(install, 'cache')
    cold, _ = python(MASS_MATRIX, env)
    for path in (install / 'site').rglob('*.py'):   # what a reinstall or colcon build does
        os.utime(path, (path.stat().st_atime, path.stat().st_mtime + 3600))
    warm, _ = python(MASS_MATRIX, env)
    assert cold['misses'] > 0 and (warm['hits'], warm['misses']) == (1, 0)


def test_processes_compiling_at_once_compile_a_kernel_once(install):
    """A process finding another compiling a kernel waits for its cache entry (_jit's lock)."""
    env = {**os.environ, **environment(install, 'cache')}
    runs = [subprocess.Popen([sys.executable, '-c', MASS_MATRIX], env=env, cwd='/',
                             stdout=subprocess.PIPE, text=True) for _ in range(2)]
    results = [json.loads(run.communicate(timeout=240)[0]) for run in runs]
    assert sorted(r['misses'] for r in results)[0] == 0, results   # one of them only loaded
    assert sorted(r['hits'] for r in results) == [0, 1], results
    for result in results:
        np.testing.assert_allclose(result['M'], results[0]['M'], rtol=0)
