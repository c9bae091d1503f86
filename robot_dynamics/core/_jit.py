"""The numba decorators of every kernel, and a compile cache that never serves stale code.

``jit`` compiles a kernel lazily, in nopython mode, releasing the GIL, with fused multiply-adds
allowed (fastmath 'contract' only: rounding as good or better, nothing assumed about NaN or
infinities). ``exact`` compiles without them: each operation rounded on its own, as numpy's
elementwise arithmetic is, for glue that must give the bits of the same steps done on numpy
arrays (the kernels it calls keep their own flags). ``parallel(kernel)`` compiles the same
source again with ``parallel=True``, so that its ``numba.prange`` loops run on several threads
(``prange`` is ``range`` everywhere else). ``NUMBA_DISABLE_JIT=1`` makes all three return the
plain Python function: the same code runs as Python.

The compiled code is cached on disk. Numba stamps a cached kernel with its own source file's
modification time and size: a reinstall of the same sources (a ``colcon build``, a ``pip
install``) would compile everything again, and an edit in a helper it calls from another module
would be served stale. Here each kernel is stamped with the digest of its own file's contents and
of every kernel source (SOURCES: the layout constants, spatial.py, the
argument checks, the algorithms, the command limits and CDR reader that the nodes'
compiled cycles call, and the dry friction of the internal engine's step). The cache sits in
``__pycache__`` beside the sources when that is writable, else in the user's cache directory
(``$XDG_CACHE_HOME/numba``, by default ``~/.cache/numba``); ``NUMBA_CACHE_DIR`` overrides both.
With no writable place the kernels are compiled on every start instead.

Processes share the cache: a process about to compile a kernel takes the kernel's lock file in
the cache directory first, so one that finds another compiling it waits and loads the other's
entry instead of compiling it again (three nodes starting at once on a fresh install compile
each kernel once). ``mark_complete()`` records that every kernel is in the cache for these
sources (``python -m robot_dynamics.compile``); ``complete()`` tells.

``strict(kernel, *types)`` is the kernel for these argument types only, for the public functions'
one-state calls: it refuses any others with a TypeError, checked by numba's dispatch in C, and
compiles nothing more; so the caller checks no types in Python.
"""
import contextlib
import fcntl
import functools
import hashlib
import os
import pathlib
import types
import warnings

import numba
from numba.core import caching, dispatcher, sigutils
from numba.core.types import IntegerLiteral, unliteral
from numba.core.compiler_lock import global_compiler_lock
from numba.core.registry import cpu_target

_CORE = pathlib.Path(__file__).resolve().parent
SOURCES = sorted([_CORE / '_jit.py', _CORE / 'layout.py', _CORE / 'spatial.py',
                  _CORE / 'arguments.py', _CORE / 'limits.py', *(_CORE / 'algorithms').glob('*.py'),
                  _CORE / 'joint_state_cdr.py',
                  _CORE.parent / 'simulation' / 'dry_friction.py'])   # called from elsewhere
_TYPING = cpu_target.typing_context
ENABLED = not numba.config.DISABLE_JIT   # NUMBA_DISABLE_JIT=1: the kernels run as Python
STAMP = hashlib.sha256(b''.join(path.read_bytes() for path in SOURCES)).hexdigest()


@functools.cache
def _digest(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


class _Stamped:
    def get_source_stamp(self):   # the kernel's own file's contents and every kernel source
        return _digest(self._py_file), STAMP


def _locator(name):
    """Numba's cache locator ``name``: public in newer numba, underscored in 0.59-0.61."""
    return getattr(caching, name, None) or getattr(caching, '_' + name)


class _UserProvided(_Stamped, _locator('UserProvidedCacheLocator')):
    pass


class _InTree(_Stamped, _locator('InTreeCacheLocator')):
    pass


class _UserWide(_Stamped, _locator('UserWideCacheLocator')):
    pass


class _CacheImpl(caching.CompileResultCacheImpl):
    _locator_classes = [_UserProvided, _InTree, _UserWide]


class _Cache(caching.FunctionCache):
    _impl_class = _CacheImpl


def _compile(function, contract=True, **options):
    kernel = numba.njit(function, nogil=True, fastmath={'contract'} if contract else False,
                        **options)
    if isinstance(kernel, dispatcher.Dispatcher):  # not under NUMBA_DISABLE_JIT
        try:
            kernel._cache = _Cache(function)   # what Dispatcher.enable_caching() does
        except RuntimeError as error:          # no writable cache directory at all
            warnings.warn(f'robot_dynamics: numba kernels are not cached ({error})',
                          stacklevel=3)
        else:
            kernel.compile = _shared(kernel, kernel.compile)
    return kernel


def _shared(kernel, compile_overload):
    """``kernel.compile`` holding the kernel's lock file of the cache while it compiles.

    Taken inside numba's compiler lock (one compiling thread per process), and only for a
    signature this process has not compiled: a kernel's callees are compiled while it holds its
    own lock, and the call graph has no cycle, so two processes never wait on each other.
    """
    def compile(sig):
        sig = _unliteral_integers(sig)
        with global_compiler_lock:
            if tuple(sigutils.normalize_signature(sig)[0]) in kernel.overloads:
                return compile_overload(sig)
            with _file_lock(kernel._cache._cache_path, kernel._cache._cache_file._index_name):
                return compile_overload(sig)   # loads the other process's entry, if it made one
    return compile


def _unliteral_integers(sig):
    """``sig`` with its integer literals as int64: one specialization for every constant.

    A kernel calling a helper with a constant (an offset into the model's table) would have
    the helper compiled again for each constant, numba typing it ``Literal[int](11)``; LLVM
    inlines the helper into its caller and folds the constant all the same.
    """
    if not isinstance(sig, tuple) or not any(isinstance(t, IntegerLiteral) for t in sig):
        return sig
    return tuple(unliteral(t) if isinstance(t, IntegerLiteral) else t for t in sig)


@contextlib.contextmanager
def _file_lock(directory, name):
    with open(os.path.join(directory, name + '.lock'), 'a') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _marker():
    """The file that says every kernel of these sources is in the cache (None: no cache)."""
    try:
        directory = _Cache(_marker)._cache_path
    except RuntimeError:
        return None
    return pathlib.Path(directory) / f'complete-{STAMP[:16]}-numba-{numba.__version__}'


def complete():
    """Whether the cache is marked complete for these sources and this numba."""
    marker = _marker()
    return marker is not None and marker.exists()


def mark_complete():
    """Record that every kernel is in the cache (``python -m robot_dynamics.compile``)."""
    marker = _marker()
    if marker is not None:
        marker.touch()


def jit(function):
    """Compile ``function`` with numba (lazily, nogil, cached)."""
    return _compile(function)


def exact(function):
    """Compile ``function`` like ``jit`` but with no fused multiply-add (module docstring)."""
    return _compile(function, contract=False)


def _twin(kernel, suffix):
    """A copy of the kernel's Python function, named with ``suffix`` (its own cache entry)."""
    function = getattr(kernel, 'py_func', kernel)
    twin = types.FunctionType(function.__code__, function.__globals__,
                              function.__name__ + suffix, function.__defaults__,
                              function.__closure__)
    twin.__qualname__ = function.__qualname__ + suffix
    twin.__doc__ = function.__doc__
    return twin


def parallel(kernel):
    """The same source as ``kernel``, compiled with ``parallel=True`` (its own cache entry)."""
    return _compile(_twin(kernel, '_parallel'), parallel=True)


def strict(name, namespace, kernel, *argument_types):
    """A stand-in for ``namespace[name]``: its first call puts the strict kernel there.

    That is the kernel compiled for ``argument_types`` only (or loaded from the cache), which
    raises TypeError for other types; under NUMBA_DISABLE_JIT it checks them in Python.
    """
    def compile_and_call(*arguments):
        if isinstance(kernel, dispatcher.Dispatcher):
            compiled = _compile(_twin(kernel, '_strict'))
            compiled.compile(argument_types)
            compiled.disable_compile()
        else:
            compiled = functools.partial(_checked, kernel, argument_types)
        namespace[name] = compiled
        return compiled(*arguments)
    return compile_and_call


def _checked(function, argument_types, *arguments):
    for x, expected in zip(arguments, argument_types):
        try:
            found = numba.typeof(x)
        except ValueError:   # no numba type at all
            found = None
        if found is None or _TYPING.can_convert(found, expected) is None:
            raise TypeError(f'{function.__name__}: {found} where {expected} was expected')
    return function(*arguments)
