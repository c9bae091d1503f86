"""Markdown tables, the JSON record and the log-log plot of a benchmark run."""
import json


def table(header, rows):
    """A markdown table of ``rows`` (lists of cells) under ``header``."""
    lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
    return '\n'.join(lines + ['| ' + ' | '.join(str(c) for c in row) + ' |' for row in rows])


def _us(x):
    return '–' if x is None else f'{x:.2f}' if x < 100 else f'{x:.0f}'


def single_table(rows):
    return table(['function', 'ours µs', 'Pinocchio µs', 'ratio', 'target'],
                 [[r['function'], _us(r['ours_us']), _us(r['pinocchio_us']),
                   f"{r['ratio']:.2f}", f"≤ {r['target']:.1f}"] for r in rows])


def control_table(rows):
    return table(['control law', 'µs per state', 'min µs', 'vs computed torque'],
                 [[r['law'], _us(r['us']), _us(r['min_us']), f"{r['vs_computed_torque']:.1f}x"]
                  for r in rows])


def batch_table(rows):
    threads = rows[0]['threads']
    return table(['function', 'N', 'ours µs/state', f'ours, {threads} threads µs/state',
                  'Pinocchio loop µs/state', 'speed-up', f'speed-up, {threads} threads'],
                 [[r['function'], r['states'], _us(r['ours_us']), _us(r['threaded_us']),
                   _us(r['pinocchio_us']), f"{r['speedup']:.1f}x",
                   f"{r['threaded_speedup']:.1f}x" if 'threaded_speedup' in r else '–']
                  for r in rows])


COMPLEXITY = [('rnea', 'rnea'), ('rnea_batch', 'rnea, batched'),
              ('mass_matrix', 'mass_matrix'), ('mass_matrix_batch', 'mass_matrix, batched'),
              ('closed_form', 'AᵀLᵀGLA (numpy)'), ('pinocchio_rnea', 'Pinocchio rnea'),
              ('pinocchio_crba', 'Pinocchio crba')]


def complexity_table(rows, fits):
    body = [[r['n'], *(_us(r[k]) for k, _ in COMPLEXITY)] for r in rows]
    body.append(['**exponent k**', *(f'**{fits[k]:.2f}**' for k, _ in COMPLEXITY)])
    return table(['n', *(f'{label} µs' for _, label in COMPLEXITY)], body)


def startup_table(rows):
    return table(['first call of', 'cold cache s', 'warm cache s'],
                 [[r['stage'], f"{r['cold_s']:.2f}", f"{r['warm_s']:.3f}"] for r in rows])


def starts_table(results):
    """make bench-start: each node's process start to its first output, cold and warm."""
    rows = [[r['case'], f"{r['cold_s']:.1f}", f"{r['warm_s']:.2f}"] for r in results['starts']]
    rows.append(['python -m robot_dynamics.compile (every node, every mode)',
                 f"{results['compile_s']:.0f}", ''])
    return table([f"to the first output, on {results['arm']}", 'cold s', 'warm s'], rows)


def tail_table(results):
    """benchmarks.tail_latency: per setting and node, state -> reply latency and late cycles."""
    rows = [[setting, LABELS.get(label, label), f"{f['median_us']:.0f}", f"{f['p99_us']:.0f}",
             f"{f['p999_us']:.0f}", f"{f['worst_us']:.0f}", f"{f['late']} of {f['cycles']}",
             f"{f['lost']}", f"{f['cpu_us']:.0f}"]
            for setting, per_node in results['settings'].items() for label, f in per_node.items()]
    return table(['setting', 'node', 'median µs', 'p99 µs', 'p99.9 µs', 'worst µs',
                  'cycles > 2 ms', 'lost', 'CPU µs/cycle'], rows)


# the node benchmark's tables (robot_dynamics.benchmarks.nodes), here so that the manual
# renders them without importing rclpy
LABELS = {'minimal': 'minimal rclpy node (a)', 'minimal_raw': 'raw minimal node (b)',
          'computed_torque': 'dynamics_controller, computed_torque',
          'gravity_compensation': 'dynamics_controller, gravity_compensation',
          'cartesian_impedance': 'dynamics_controller, cartesian_impedance',
          'operational_space': 'dynamics_controller, operational_space',
          'computed_torque_plain': 'dynamics_controller, computed_torque, fast_path false',
          'wrench_estimator': 'wrench_estimator (reply ~/wrench)',
          'arm_simulator': 'arm_simulator (answered by the benchmark)'}


def _ratio(s):
    return f"{s['median']:.2f} ({s['min']:.2f}–{s['max']:.2f})"


def node_table(summary_):
    rows = [[LABELS[label], f"{s['cpu_us']['median']:.0f}", _ratio(s['vs_minimal']['cpu_us']),
             _ratio(s['vs_minimal_raw']['cpu_us']),
             f"{s['median_us']['median']:.0f} / {s['p99_us']['median']:.0f}",
             _ratio(s['vs_minimal']['median_us']), _ratio(s['vs_minimal']['p99_us'])]
            for label, s in summary_.items()]
    return table(['process', 'CPU µs per cycle', 'CPU vs (a)', 'CPU vs (b)',
                  'latency median / p99 µs', 'median vs (a)', 'p99 vs (a)'], rows)


def reader_table(readers):
    return table(['per message, in process', 'µs (median)', 'min µs'],
                 [[name, f"{r['us']:.2f}", f"{r['min_us']:.2f}"] for name, r in readers.items()])


def callback_table(callbacks):
    return table(['dynamics_controller callback, in process', 'fast µs', 'plain µs'],
                 [[mode, f"{c['fast']:.1f}", f"{c['plain']:.1f}"]
                  for mode, c in callbacks.items()])


def plot(rows, fits, path):
    """Log-log time vs n of the complexity rows, with the fitted exponents in the legend."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    n = [r['n'] for r in rows]
    figure, axes = plt.subplots(figsize=(7, 5))
    for key, label in COMPLEXITY:
        style = '--' if key.startswith('pinocchio') else ':' if key.endswith('batch') else '-'
        axes.loglog(n, [r[key] for r in rows], style, marker='o',
                    label=f'{label} (k = {fits[key]:.2f})')
    axes.set_xlabel('revolute joints n (random chain)')
    axes.set_ylabel('time per call or per state, µs')
    axes.set_title('robot_dynamics complexity (t ~ n^k)')
    axes.grid(True, which='both', alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def save(results, path):
    path.write_text(json.dumps(results, indent=1))
