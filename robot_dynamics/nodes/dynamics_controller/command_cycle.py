"""dynamics_controller's compiled cycle: a serialized JointState in, the limited command out.

One compiled call per joint state does what the plain path does in several Python steps for
the common case: read the state (``cdr.read_state``), compute gravity compensation τ = g(q),
computed torque τ = rnea(q, q̇, q̈_d + K_p e + K_d ė + z) (``commanded_acceleration``) or a
task-space law (``task_law_kernel``, in ``task_cycle``), then rate limit and clamp it into the
serialized command (``limit_command``). The kernels are the ones the plain path calls, so the
two give the same bits. Whatever the cycle does not handle (a
state it cannot read, a torque that is not finite), it leaves untouched for the plain path:
see ``CommandCycle.run``.
"""
import numpy as np

from robot_dynamics.core._jit import jit
from robot_dynamics.core.algorithms.computed_torque import commanded_acceleration
from robot_dynamics.core.algorithms.rnea import gravity_state, rnea_state
from robot_dynamics.core.algorithms.task_law import (ACCEL, TARGET, TWIST, WRENCH,
                                                     task_law_kernel)
from robot_dynamics.core.arguments import workspace
from robot_dynamics.core.limits import limit_command

from robot_dynamics.core.joint_state_cdr import COUNTS, OK, read_state

GRAVITY, COMPUTED_TORQUE, TASK = 0, 1, 2   # the law
PLAIN = -2                                 # the state is the plain path's to read
#: the law of each mode
LAWS = {'gravity_compensation': GRAVITY, 'computed_torque': COMPUTED_TORQUE,
        'cartesian_impedance': TASK, 'operational_space': TASK}


@jit
def command_cycle(buf, ref, cfg, state, info, law, table, ws, reference, gains, z, continuous,
                  acceleration, tau, previous, step, limits, order, out, clamped):
    """PLAIN, NON_FINITE, or limit_command's status with the command in ``out``.

    buf: the message's bytes; ref, cfg, state, info: the reader's arrays (state: q, q̇, effort
    in model order after the call); reference: q_d, q̇_d, q̈_d; gains: K_p, K_d. Nothing but
    the reader's arrays and scratch is written unless the command is.
    """
    if read_state(buf, ref, cfg, state, info) != OK:
        return PLAIN
    q, v = state[0], state[1]
    if law == GRAVITY:
        gravity_state(table, q, ws, tau)
    else:
        if info[COUNTS + 1] == 0:   # no velocities: the plain path says why it cannot
            return PLAIN
        commanded_acceleration(q, v, reference[0], reference[1], reference[2], gains[0],
                               gains[1], z, continuous, acceleration)
        rnea_state(table, q, v, acceleration, None, ws, tau)
    return limit_command(tau, previous, step, limits, order, out, clamped)


@jit
def task_cycle(buf, ref, cfg, state, info, table, frames, frame, kind, ws, target, gains,
               joint_gains, tau, condition, previous, step, limits, order, out, clamped):
    """command_cycle for a task-space law: τ of ``task_law_kernel``, κ(Φ) in condition[0].

    kind, target, gains, joint_gains: the law's (``TaskSpaceLaw.kind``, ``.constants``).
    """
    if read_state(buf, ref, cfg, state, info) != OK or info[COUNTS + 1] == 0:
        return PLAIN
    condition[0] = task_law_kernel(table, frames, frame, kind, state[0], state[1], ws, target,
                                   gains, joint_gains, tau)
    return limit_command(tau, previous, step, limits, order, out, clamped)


class CommandCycle:
    """The compiled cycle's arrays for one configuration of the controller.

    ``law`` GRAVITY (a GravityCompensation without friction compensation), COMPUTED_TORQUE
    (a ComputedTorque, whose integral z it reads) or TASK (a TaskSpaceLaw of
    core/task_control.py, whose constants and posture it reads); ``reader`` the controller's
    CdrJointStateReader; ``previous``, ``out``, ``clamped``: the controller's last command, its
    serialized data and clamped mask (limit_command's).
    """

    def __init__(self, law, control, reader, effort_limits, order, previous, out, clamped):
        model = control.model
        if model.mimic:   # the kernels index q by body: they would write past the arrays
            raise ValueError('the compiled cycle serves models without mimic joints')
        self.law, self.control, self.reader = law, control, reader
        self.table, self.ws = model.table, workspace(model, control._data)
        self.reference, self.gains = np.zeros((3, model.nv)), np.zeros((2, model.nv))
        if law == COMPUTED_TORQUE:
            self.gains[:] = control.kp, control.kd
        self.continuous = model.continuous
        self.acceleration, self.tau = np.zeros(model.nv), np.zeros(model.nv)
        self.limits, self.order = effort_limits, order
        self.previous, self.out, self.clamped = previous, out, clamped
        self.target, self.condition = np.zeros(TARGET), np.zeros(1)   # TASK: the law's

    def run(self, data, reference, step):
        """The status of the cycle on the bytes ``data``.

        reference: (q_d, q̇_d, q̈_d) in computed torque; for TASK (T_d, ẋ_d, ẍ_d, F_d), packed
        as ``TaskSpaceLaw.torque`` packs them.
        """
        if self.law == TASK:
            return self._run_task(np.frombuffer(data, np.uint8), reference, step)
        if self.law == COMPUTED_TORQUE:
            self.reference[0], self.reference[1], self.reference[2] = reference
            z = self.control._z
        else:
            z = self.acceleration
        ref, cfg, state, info = self.reader.arrays
        return command_cycle(np.frombuffer(data, np.uint8), ref, cfg, state, info, self.law,
                             self.table, self.ws, self.reference, self.gains, z,
                             self.continuous, self.acceleration, self.tau, self.previous, step,
                             self.limits, self.order, self.out, self.clamped)

    def _run_task(self, buf, reference, step):
        law, target = self.control, self.target
        gains, joint_gains, frame = law.constants()
        pose_d, target[TWIST:ACCEL], target[ACCEL:WRENCH], target[WRENCH:] = reference
        target[:TWIST] = pose_d.reshape(16)
        ref, cfg, state, info = self.reader.arrays
        return task_cycle(buf, ref, cfg, state, info, self.table, law.model.frames, frame,
                          law.kind, self.ws, target, gains, joint_gains, self.tau,
                          self.condition, self.previous, step, self.limits, self.order,
                          self.out, self.clamped)

    def state(self):
        """(q, q̇, effort) read by the last successful run: rows of one copy.

        q̇ or effort None if absent (a state the cycle serves always has q).
        """
        _, _, state, info = self.reader.arrays
        q, v, effort = state.copy()
        return q, v if info[COUNTS + 1] else None, effort if info[COUNTS + 2] else None


def choose(config, model, reader, output, order):
    """The CommandCycle of a controller's Config (configuration.py), None where it cannot serve.

    It serves gravity compensation (without friction compensation), computed torque (without
    the integral term) and the task-space modes (a law that does not refuse singular poses) on
    a model without mimic joints, on an arm that does not add its own gravity compensation.
    ``reader`` is the node's CdrJointStateReader, ``output`` its CommandOutput (the buffers).
    """
    if model.mimic or config.profile.compensates_gravity:
        return None
    gravity, ct, task = config.gravity_compensation, config.computed_torque, config.task
    if task is not None:
        if not (task.singular_damping > 0.0 or task.singular_cutoff > 0.0):
            return None
        law, control = TASK, task
    elif config.mode == 'gravity_compensation' and not gravity.friction_compensation:
        law, control = GRAVITY, gravity
    elif config.mode == 'computed_torque' and not ct.ki.any():
        law, control = COMPUTED_TORQUE, ct
    else:
        return None
    return CommandCycle(law, control, reader, config.effort_limits, order, output.tau_last,
                        output.writer.data, output.clamped)


def warm_up(model, joint_names, effort_limits, order, modes):
    """Compile (or load) the kernels of the laws of ``modes``: a state of zeros, typed as in use."""
    from robot_dynamics.core.control import ComputedTorque, GravityCompensation
    from robot_dynamics.core.task_control import CartesianImpedance
    from ..common.cdr import CdrJointStateReader, Float64MultiArrayWriter, serialized_zero_state
    data, n = serialized_zero_state(joint_names), model.nv
    reader = CdrJointStateReader(joint_names)
    reader.read_cdr(data)   # maps the names (plain read)
    zero, six = np.zeros(n), np.zeros(6)
    wanted = {LAWS[mode] for mode in modes}
    laws = [(GRAVITY, lambda: GravityCompensation(model), None),
            (COMPUTED_TORQUE, lambda: ComputedTorque(model, 1.0, 1.0), (zero, zero, zero))]
    if model.tip is not None:   # no tip: no task frame, no task-space mode
        laws.append((TASK, lambda: CartesianImpedance(model, np.ones(6), posture=zero),
                     (np.eye(4), six, six, six)))
    for law, control, reference in laws:
        if law in wanted:
            cycle = CommandCycle(law, control(), reader, effort_limits, order, zero.copy(),
                                 Float64MultiArrayWriter(n).data, np.zeros(n, bool))
            cycle.run(data, reference, np.inf)
