"""Benchmark against Pinocchio: ``python -m robot_dynamics.benchmarks [--out DIR] [--quick]``.

Prints markdown tables (one state on the Panda, the control laws' per-state cost, batches of N
states, random chains of n joints with fitted exponents, start-up with a cold and a warm numba
cache, the nodes' CPU per cycle and latency: ``nodes``) and writes them to DIR/benchmark.json
with a log-log plot DIR/complexity.png (default DIR: ./benchmark_results).

Method: medians over rounds in which our call and Pinocchio's alternate, so that drift cancels
in the ratios (the ratio is the median of the per-round ratios). Single-threaded code is timed
in the CPU time of the calling thread, so that time the OS gives to other processes does not
count; the multi-threaded column in wall time. BLAS runs on one thread (see __main__). The load
average before and after is recorded. Pinocchio (``pin``) and matplotlib are needed; numbers are
never asserted in the test suite.
"""
import argparse
import os
import pathlib

from . import report, suites


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m robot_dynamics.benchmarks',
                                     description=__doc__.split('\n\n')[0])
    parser.add_argument('--out', default='benchmark_results', help='output directory')
    parser.add_argument('--quick', action='store_true', help='fewer rounds and states')
    parser.add_argument('--skip-startup', action='store_true',
                        help='skip the start-up measurement (it compiles every kernel cold)')
    parser.add_argument('--skip-nodes', action='store_true',
                        help='skip the node section (node processes on loopback DDS)')
    parser.add_argument('--single-only', action='store_true',
                        help='only the one-state table (about a minute)')
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rounds, states = (7, 1000) if args.quick else (41, 10000)
    results = {'machine': suites.machine()}

    print(f"## One state, 7-dof Panda ({results['machine']['cpu']})\n")
    results['single'] = suites.single_state(rounds)
    print(report.single_table(results['single']), flush=True)
    if args.single_only:
        return finish(results, out)

    print('\n## Control laws, one state per call, Panda\n')
    results['control'] = suites.control_laws(rounds)
    print(report.control_table(results['control']), flush=True)

    print(f'\n## Batches of N = {states} states, Panda\n')
    results['batch'] = suites.batched(states, max(3, rounds // 4))
    print(report.batch_table(results['batch']), flush=True)

    print('\n## Random revolute chains\n')
    results['complexity'] = suites.complexity([2, 4, 8, 16, 32, 64], max(3, rounds // 4))
    fits = results['exponents'] = suites.exponents(results['complexity'])
    print(report.complexity_table(results['complexity'], fits))
    print('\nExponents: single calls fitted on n >= 8, batched per-state times on every n.')
    report.plot(results['complexity'], fits, out / 'complexity.png')

    if not args.skip_startup:
        print('\n## Start-up: fresh interpreter to first result\n')
        results['startup'] = suites.startup()
        print(report.startup_table(results['startup']))

    if not args.skip_nodes:
        from . import nodes   # imports rclpy
        print('\n## Nodes: CPU per cycle and latency at 1 kHz, Panda\n')
        results['nodes'] = nodes.measure(args.quick)
        print(nodes.report(results['nodes']))

    finish(results, out)


def finish(results, out):
    """Save the results with the load average after the run."""
    results['load_average_after'] = os.getloadavg()
    report.save(results, out / 'benchmark.json')
    print(f"\nload average before {results['machine']['load_average']}, after "
          f"{results['load_average_after']}; results in {out.resolve()}/")
