"""wrench_estimator's compiled cycle: a serialized JointState in, both estimates serialized out.

One compiled call per joint state does what the plain path does in several Python steps: read
the state (``cdr.read_state``), advance the momentum observer (``momentum_state``,
``advance_residual``: the kernels of MomentumObserver.update) and take the wrench behind
τ_ext (``frame_jacobian_state``, ``damped_wrench``: those of wrench_from_torques), written into
the pre-serialized ~/external_joint_torques and ~/wrench. The kernels are the plain path's, so
the two give the same bits. Whatever the cycle does not handle (a state it cannot read, no
velocities or efforts, a step that overflows), it leaves to the plain path: see
``EstimatorCycle.run``.
"""
import numpy as np

import robot_dynamics as rd
from robot_dynamics.core._jit import jit
from robot_dynamics.core.algorithms.jacobians import frame_jacobian_state, reference_code
from robot_dynamics.core.algorithms.momentum import (advance_residual, damped_wrench,
                                                     momentum_state)
from robot_dynamics.core.arguments import all_finite

from robot_dynamics.core.joint_state_cdr import COUNTS, OK, read_state

PLAIN, NON_FINITE = -2, -1


@jit
def estimator_cycle(buf, ref, cfg, state, info, table, frames, tip, reference, ws, M, C, J,
                    p0, beta0, r0, bias, gain, dt, damping, step, order, torques, wrench):
    """OK with the estimates written, PLAIN or NON_FINITE (then only scratch is written).

    p0, beta0, r0: p, β and r at the previous state; step: p, β, r and τ_ext = r − bias of this
    one (written); M, C, J: scratch. torques (joints order) and wrench (force, torque) are the
    serialized messages' values; tip < 0: no wrench (a model without a tip).
    """
    if read_state(buf, ref, cfg, state, info) != OK:
        return PLAIN
    if info[COUNTS + 1] == 0 or info[COUNTS + 2] == 0:   # the observer needs q̇ and τ
        return PLAIN
    q, v, nv = state[0], state[1], state.shape[1]
    p, beta, r, tau_ext = step[0], step[1], step[2], step[3]
    momentum_state(table, q, v, state[2], ws, M, C, p, beta)
    advance_residual(p, beta, p0, beta0, dt, gain, r0, r)
    for i in range(nv):
        tau_ext[i] = r[i] - bias[i]
    if not all_finite(tau_ext):
        return NON_FINITE
    if tip >= 0:
        frame_jacobian_state(table, frames, tip, reference, q, ws, J)
        F = damped_wrench(J, tau_ext, damping)
        if not all_finite(F):
            return NON_FINITE
        for k in range(3):
            wrench[k], wrench[3 + k] = F[3 + k], F[k]
    for k in range(nv):
        torques[k] = tau_ext[order[k]]
    return OK


class EstimatorCycle:
    """The compiled cycle's arrays for one configuration of the estimator.

    ``observer`` a MomentumObserver (of a model without mimic joints), ``reader`` the estimator's
    CdrJointStateReader, ``writers`` its (JointStateWriter of efforts, WrenchStampedWriter);
    ``frame`` None (and ``reference`` then ignored): no wrench.
    """

    def __init__(self, observer, reader, writers, frame, reference, damping, order):
        model = observer.model   # frame: the wrench's (the tip); reference: its axes
        if model.mimic:   # the kernels index q by body: they would write past the arrays
            raise ValueError('the compiled cycle serves models without mimic joints')
        nv = model.nv
        self.observer, self.reader, self.order = observer, reader, order
        self.torques, self.wrench = writers[0].fields[0], writers[1].values
        self.table, self.frames = model.table, model.frames
        self.tip = -1 if frame is None else model.frame_index(frame)
        self.reference = reference_code(rd.LOCAL if reference is None else reference)
        self.ws, self.damping = observer.data.ws, float(damping)
        self.M, self.C, self.J = np.zeros((nv, nv)), np.zeros((nv, nv)), np.zeros((6, nv))

    def run(self, data, dt):
        """τ_ext (model order) of the bytes ``data``, dt s after the anchor; None: not served.

        Served, the observer has taken the step and the writers hold the estimates.
        """
        observer = self.observer
        p0, beta0 = observer.anchor
        step = np.empty((4, observer.model.nv))
        ref, cfg, state, info = self.reader.arrays
        status = estimator_cycle(np.frombuffer(data, np.uint8), ref, cfg, state, info,
                                 self.table, self.frames, self.tip, self.reference, self.ws,
                                 self.M, self.C, self.J, p0, beta0, observer.residual,
                                 observer.bias, observer.gain, dt, self.damping, step,
                                 self.order, self.torques, self.wrench)
        if status != OK:
            return None
        observer.take_step(step[0], step[1], step[2])
        return step[3]

    def state(self):
        """(q, q̇, effort) read by the last successful run (copies)."""
        return tuple(self.reader.arrays[2].copy())


def warm_up(observer, joint_names, frame_id, reference, order):
    """Compile (or load) the kernel: a state of zeros, arrays typed as in use."""
    from robot_dynamics.core.observers import MomentumObserver
    from ..common.cdr import (CdrJointStateReader, JointStateWriter, WrenchStampedWriter,
                              serialized_zero_state)
    data, model = serialized_zero_state(joint_names), observer.model
    reader = CdrJointStateReader(joint_names)
    reader.read_cdr(data)   # maps the names (plain read)
    twin, zero = MomentumObserver(model, observer.gain), np.zeros(model.nv)
    twin.update(model.neutral_position, zero, zero, 0.0)
    writers = JointStateWriter(joint_names, ('effort',)), WrenchStampedWriter(frame_id)
    EstimatorCycle(twin, reader, writers, model.tip, reference, 1e-3, order).run(data, 1e-3)
