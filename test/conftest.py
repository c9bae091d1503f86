"""Generic pytest configuration: marker registration, single-threaded BLAS."""
import os

# Multi-threaded OpenBLAS is hundreds of times slower on the small matrices of arm dynamics on
# a 2-core machine; set before numpy is imported by any test module (children inherit it).
os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')


def pytest_configure(config):
    config.addinivalue_line(
        'markers', 'nojit: also run with NUMBA_DISABLE_JIT=1 (make test-nojit)')
    config.addinivalue_line('markers', 'linter: static checks of the sources')
    config.addinivalue_line('markers', 'flake8: flake8 compliance (ament_flake8)')
    config.addinivalue_line('markers', 'pep257: docstring style (ament_pep257)')
