"""The four measurements: one state, batches, growing chains, start-up.

One state on the Panda, batches of states, random chains of growing length, and start-up. Each
returns a list of table rows (dicts); times in microseconds unless named _s.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import robot_dynamics as rd
from ..core.algorithms import threaded
from .models import closed_form_mass_matrix, pinocchio_model, random_chain_urdf
from .timing import WALL, fit_exponent, interleaved, ratio

US = 1e6
PANDA = ('panda', 'panda_link0', 'panda_hand')


def panda():
    """(model, xml, namespace of the timed statements) for the 7-dof Panda chain."""
    import pinocchio as pin
    with open(rd.robot_urdf(PANDA[0])) as f:
        xml = f.read()
    model = rd.load_urdf(xml, base=PANDA[1], tip=PANDA[2])
    pm, pd, order = pinocchio_model(xml, model)
    assert list(order) == list(range(model.nv)), 'Panda joints in a different order in Pinocchio'
    frame = pm.getFrameId(PANDA[2])

    def task_space_inertia(q):   # what a Pinocchio user writes for Λ
        M_inv = pin.computeMinverse(pm, pd, q)
        J = pin.computeFrameJacobian(pm, pd, q, frame, pin.LOCAL_WORLD_ALIGNED)
        return np.linalg.inv(J @ M_inv @ J.T)

    namespace = dict(rd=rd, pin=pin, model=model, pm=pm, pd=pd, frame=frame, tip=PANDA[2],
                     LWA=pin.LOCAL_WORLD_ALIGNED, pin_task_space_inertia=task_space_inertia,
                     threaded=threaded)
    return model, xml, namespace


# function, our call, Pinocchio's call, target ratio
SINGLE = [
    ('rnea', 'rd.rnea(model, q, v, a)', 'pin.rnea(pm, pd, q, v, a)', 2.0),
    ('gravity', 'rd.gravity(model, q)', 'pin.computeGeneralizedGravity(pm, pd, q)', 2.0),
    ('nonlinear_effects', 'rd.nonlinear_effects(model, q, v)',
     'pin.nonLinearEffects(pm, pd, q, v)', 2.0),
    ('mass_matrix', 'rd.mass_matrix(model, q)', 'pin.crba(pm, pd, q)', 2.0),
    ('coriolis_matrix', 'rd.coriolis_matrix(model, q, v)',
     'pin.computeCoriolisMatrix(pm, pd, q, v)', 2.0),
    ('frame_jacobian', 'rd.frame_jacobian(model, q, tip)',
     'pin.computeFrameJacobian(pm, pd, q, frame, LWA)', 2.0),
    ('forward_dynamics', 'rd.forward_dynamics(model, q, v, a)', 'pin.aba(pm, pd, q, v, a)', 2.0),
    ('task_space_inertia', 'rd.task_space_inertia(model, q, tip)',
     'pin_task_space_inertia(q)', 1.0),
    # into the caller's array, as Pinocchio writes into its Data
    ('rnea, out=', 'rd.rnea(model, q, v, a, out=tau)', 'pin.rnea(pm, pd, q, v, a)', 1.0),
    ('gravity, out=', 'rd.gravity(model, q, out=tau)',
     'pin.computeGeneralizedGravity(pm, pd, q)', 1.0),
    ('mass_matrix, out=', 'rd.mass_matrix(model, q, out=M)', 'pin.crba(pm, pd, q)', 1.0),
    ('frame_jacobian, out=', 'rd.frame_jacobian(model, q, tip, out=J)',
     'pin.computeFrameJacobian(pm, pd, q, frame, LWA)', 1.0),
]


def single_state(rounds):
    """One state per call on the Panda: our function and Pinocchio's, interleaved."""
    model, _, namespace = panda()
    rng = np.random.default_rng(0)
    namespace.update(q=rng.uniform(model.lower, model.upper), v=rng.uniform(-1, 1, model.nv),
                     a=rng.uniform(-1, 1, model.nv), tau=np.empty(model.nv),
                     M=np.empty((model.nv, model.nv)), J=np.empty((6, model.nv)))
    rows = []
    for name, ours, theirs, target in SINGLE:
        t = interleaved({'ours': ours, 'pinocchio': theirs}, namespace, rounds)
        rows.append(dict(function=name, ours_us=float(np.median(t['ours'])) * US,
                         pinocchio_us=float(np.median(t['pinocchio'])) * US,
                         ratio=ratio(t['ours'], t['pinocchio']), target=target,
                         ours_min_us=float(t['ours'].min()) * US,
                         pinocchio_min_us=float(t['pinocchio'].min()) * US,
                         ours_call=ours, pinocchio_call=theirs))
    return rows


# function, our batched call, the threaded one, Pinocchio in a Python loop
BATCH = [
    ('rnea', 'rd.rnea(model, Q, V, A)', 'threaded.rnea(model, Q, V, A)',
     '[pin.rnea(pm, pd, q, v, a) for q, v, a in zip(Q, V, A)]'),
    ('gravity', 'rd.gravity(model, Q)', 'threaded.gravity(model, Q)',
     '[pin.computeGeneralizedGravity(pm, pd, q) for q in Q]'),
    ('nonlinear_effects', 'rd.nonlinear_effects(model, Q, V)',
     'threaded.nonlinear_effects(model, Q, V)',
     '[pin.nonLinearEffects(pm, pd, q, v) for q, v in zip(Q, V)]'),
    ('mass_matrix', 'rd.mass_matrix(model, Q)', 'threaded.mass_matrix(model, Q)',
     '[pin.crba(pm, pd, q) for q in Q]'),
    ('forward_dynamics', 'rd.forward_dynamics(model, Q, V, A)', None,
     '[pin.aba(pm, pd, q, v, a) for q, v, a in zip(Q, V, A)]'),
    ('frame_jacobian', 'rd.frame_jacobian(model, Q, tip)', None,
     '[pin.computeFrameJacobian(pm, pd, q, frame, LWA) for q in Q]'),
]


def batched(states, rounds):
    """N states in one call (serial, and on numba's threads) against Pinocchio in a loop."""
    import numba
    model, _, namespace = panda()
    rng = np.random.default_rng(1)
    namespace.update(Q=rng.uniform(model.lower, model.upper, (states, model.nv)),
                     V=rng.uniform(-1, 1, (states, model.nv)),
                     A=rng.uniform(-1, 1, (states, model.nv)))
    rows = []
    for name, ours, ours_threaded, theirs in BATCH:
        statements = {'ours': ours, 'pinocchio': theirs}
        if ours_threaded:
            statements['threaded'] = ours_threaded
        t = interleaved(statements, namespace, rounds, target=0.0, clocks={'threaded': WALL})
        per_state = {k: float(np.median(v)) * US / states for k, v in t.items()}
        row = dict(function=name, states=states, ours_us=per_state['ours'],
                   pinocchio_us=per_state['pinocchio'],
                   speedup=1.0 / ratio(t['ours'], t['pinocchio']),
                   threaded_us=per_state.get('threaded'), threads=numba.get_num_threads())
        if ours_threaded:
            row['threaded_speedup'] = 1.0 / ratio(t['threaded'], t['pinocchio'])
        rows.append(row)
    return rows


def complexity(sizes, rounds, states=1000):
    """rnea, mass_matrix and the dense closed-form M on random revolute chains of n joints.

    Each is timed per call (what a caller sees: a fixed Python overhead plus the algorithm)
    and per state in a batch of ``states`` (the algorithm alone); Pinocchio's rnea and crba for
    reference.
    """
    import pinocchio as pin
    rows = []
    for n in sizes:
        xml = random_chain_urdf(n, seed=n)
        model = rd.load_urdf(xml)
        pm, pd, order = pinocchio_model(xml, model)
        rng = np.random.default_rng(n)
        q, v, a = rng.uniform(-1, 1, (3, model.nv))
        Q = rng.uniform(-1, 1, (states, model.nv))
        namespace = dict(rd=rd, pin=pin, model=model, pm=pm, pd=pd, q=q, v=v, a=a, Q=Q,
                         closed_form=closed_form_mass_matrix, qp=q[order], vp=v[order],
                         ap=a[order])
        t = interleaved({'rnea': 'rd.rnea(model, q, v, a)',
                         'mass_matrix': 'rd.mass_matrix(model, q)',
                         'closed_form': 'closed_form(model, q)',
                         'rnea_batch': 'rd.rnea(model, Q, Q, Q)',
                         'mass_matrix_batch': 'rd.mass_matrix(model, Q)',
                         'pinocchio_rnea': 'pin.rnea(pm, pd, qp, vp, ap)',
                         'pinocchio_crba': 'pin.crba(pm, pd, qp)'}, namespace, rounds)
        row = {k: float(np.median(x)) * US for k, x in t.items()}
        row['rnea_batch'] /= states
        row['mass_matrix_batch'] /= states
        rows.append(dict(n=n, **row))
    return rows


def exponents(rows, smallest=8):
    """Fitted k of t ~ n^k per column.

    Single calls on n >= smallest (below it the fixed call overhead dominates), per-state batch
    times on every n.
    """
    fits = {}
    for key in rows[0]:
        if key == 'n':
            continue
        use = [r for r in rows if key.endswith('batch') or r['n'] >= smallest]
        fits[key] = fit_exponent([r['n'] for r in use], [r[key] for r in use])
    return fits


def control_laws(rounds):
    """One state per call of each control law (a controller's per-cycle cost), Panda.

    The task-space laws with a posture law in the null space, towards a target 1.7 cm away.
    """
    from ..core.control import ComputedTorque, GravityCompensation
    from ..core.task_control import CartesianImpedance, OperationalSpace
    model, _, namespace = panda()
    rng = np.random.default_rng(2)
    q = rng.uniform(model.lower, model.upper)
    T_d = rd.frame_pose(model, q, PANDA[2])
    T_d[:3, 3] += 0.01
    null, stiffness = dict(nullspace_stiffness=10.0, nullspace_damping=2.0), [60.0] * 3 + [1e3] * 3
    laws = [('gravity compensation', GravityCompensation(model), '(q, v)'),
            ('computed torque', ComputedTorque(model, 100.0, 20.0), '(q, v, q, v, a)'),
            ('cartesian impedance', CartesianImpedance(model, stiffness, **null), '(q, v, T_d)'),
            ('operational space', OperationalSpace(model, [400.0] * 6, **null), '(q, v, T_d)'),
            ('operational space, no inertia shaping',
             OperationalSpace(model, stiffness, inertia_shaping=False, **null), '(q, v, T_d)')]
    namespace.update(q=q, v=rng.uniform(-1, 1, model.nv), a=rng.uniform(-1, 1, model.nv),
                     T_d=T_d, laws=[law for _, law, _ in laws])
    t = interleaved({name: f'laws[{k}]{arguments}' for k, (name, _, arguments) in
                     enumerate(laws)}, namespace, rounds)
    return [dict(law=name, us=float(np.median(x)) * US, min_us=float(x.min()) * US,
                 vs_computed_torque=ratio(x, t['computed torque'])) for name, x in t.items()]


STARTUP = f"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import robot_dynamics as rd
times = {{'import': time.perf_counter() - t0}}
t = time.perf_counter()
model = rd.load_urdf(rd.robot_urdf('{PANDA[0]}'), base='{PANDA[1]}', tip='{PANDA[2]}')
times['load_urdf (M check)'] = time.perf_counter() - t
q = v = a = np.full(model.nv, 0.1)
for name, call in [('rnea', lambda: rd.rnea(model, q, v, a)),
                   ('gravity', lambda: rd.gravity(model, q)),
                   ('nonlinear_effects', lambda: rd.nonlinear_effects(model, q, v)),
                   ('mass_matrix', lambda: rd.mass_matrix(model, q)),
                   ('coriolis_matrix', lambda: rd.coriolis_matrix(model, q, v)),
                   ('frame_jacobian', lambda: rd.frame_jacobian(model, q, model.tip)),
                   ('forward_dynamics', lambda: rd.forward_dynamics(model, q, v, a)),
                   ('task_space_inertia', lambda: rd.task_space_inertia(model, q, model.tip))]:
    t = time.perf_counter()
    call()
    times[name] = time.perf_counter() - t
times['total'] = time.perf_counter() - t0
print(json.dumps(times))
"""


def startup():
    """Seconds from a fresh interpreter to the first result of each function.

    First with a cold numba cache (an empty NUMBA_CACHE_DIR: everything compiles), then warm.
    """
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, 'NUMBA_CACHE_DIR': cache}
        runs = []
        for _ in ('cold', 'warm'):
            out = subprocess.run([sys.executable, '-c', STARTUP], env=env, check=True,
                                 capture_output=True, text=True).stdout
            runs.append(json.loads(out))
    return [dict(stage=k, cold_s=runs[0][k], warm_s=runs[1][k]) for k in runs[0]]


def machine():
    """What the numbers were measured on."""
    import platform
    import numba
    try:
        import pinocchio
        pinocchio_version = pinocchio.__version__
    except ImportError:   # the node benchmark does not need it
        pinocchio_version = None
    cpu = platform.processor()
    try:
        with open('/proc/cpuinfo') as f:
            cpu = next(line.split(':', 1)[1].strip() for line in f if 'model name' in line)
    except (OSError, StopIteration):
        pass
    return dict(cpu=cpu, cores=os.cpu_count(), python=platform.python_version(),
                numpy=np.__version__, numba=numba.__version__, pinocchio=pinocchio_version,
                blas_threads=os.environ.get('OPENBLAS_NUM_THREADS'),
                load_average=os.getloadavg(), date=time.strftime('%Y-%m-%d %H:%M'))
