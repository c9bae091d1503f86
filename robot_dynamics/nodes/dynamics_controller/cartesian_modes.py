"""The task-space modes of dynamics_controller: cartesian_impedance and operational_space.

Glue only: parameters -> robot_dynamics.core.task_control laws, messages -> their targets. This
module owns the ``cartesian.*`` parameters, ``~/target_pose`` (single poses and stamped streams,
played back on the speed limiter's clock under ``pfl.enable``), ``~/target_wrench`` and
``~/tip_pose``. The task is the pose of the ``tip`` frame in the base frame; both laws return the
whole joint torque, so the command takes the node's one output path. Parameters are given
translation first, as ROS messages order poses; the core's vectors are angular first, and the
conversion is here only. Behaviour: doc/guides/task_space.md.

The bound on the modes' natural frequency follows the loop's delay (``follow_delay``): once the
controller has measured how late its states are (loop_health's delay T), every mode is held at
most at ω_max = 0.65 / (m T), m = ``cartesian.delay_margin`` (default 2: the loop would take
twice the delay it has); ``cartesian.max_frequency`` is the bound until then (and always with
m = 0). Where the bound lowers the stiffness the user asked for along an axis, the node logs it
as it happens and /diagnostics shows the stiffness applied along each axis.
"""
import bisect
import functools

import numpy as np
from geometry_msgs.msg import PoseStamped, WrenchStamped
from scipy.spatial.transform import Rotation

import robot_dynamics as rd
from robot_dynamics.core.algorithms.task_law import modal_gains
from robot_dynamics.core.task_control import (CartesianImpedance, OperationalSpace,
                                              pose_interpolation)

from ..common.joint_states import BadInput, all_finite, to_seconds, to_time
from ..common.parameters import ConfigError, section, vector
from .loop_health import CRITICAL

CARTESIAN_IMPEDANCE, OPERATIONAL_SPACE = 'cartesian_impedance', 'operational_space'
MODES = (CARTESIAN_IMPEDANCE, OPERATIONAL_SPACE)
TIP_POSE_PERIOD = 0.01   # s of the states' clock between ~/tip_pose messages (100 Hz at most)
CONDITION_WARNING = 1e6  # κ(J M⁻¹ Jᵀ) above: /diagnostics warns of a near-singular pose
STREAM_PERIOD = 0.1      # s: stamped targets at most this far apart are a stream (ẋ_d)
LOWERED = 0.99           # an axis whose applied stiffness is below this share of K is lowered
AXES = ('x', 'y', 'z', 'rx', 'ry', 'rz')   # translation first, as the parameters
INF = float('inf')
ZERO = np.zeros(6)
ZERO.flags.writeable = False

PARAMS = section('dynamics_controller', 'cartesian', 'operational_space', 'nullspace')


def stiffness(values, name):
    """A stiffness parameter (translation first; the schema: >= 0) in the core's order."""
    k = vector(values, name, 6, 'values (x, y, z, then about x, y, z)')
    return np.concatenate([k[3:], k[:3]])


def limits(values, name):
    """[translation, rotation] limits, each > 0 (inf: none)."""
    x = np.asarray(values[name], dtype=float)
    if x.shape != (2,) or np.isnan(x).any() or (x <= 0).any():
        raise ConfigError(f'{name} needs 2 values > 0 (translation, rotation; .inf for no '
                          f'limit), got {x.tolist()}')
    return x


def configure(values, arm):
    """The law of ``mode`` on the arm's model (None for a joint mode); ConfigError with a reason.

    The Cartesian parameters are checked in every mode: a bad value is rejected when it is set.
    Only a task-space mode needs the ``tip`` (the task frame): a whole tree serves the others.
    """
    kwargs = dict(damping_ratio=values['cartesian.damping_ratio'],
                  nullspace_stiffness=values['nullspace.stiffness'],
                  nullspace_damping=values['nullspace.damping'],
                  posture=(arm.per_joint(values, 'nullspace.posture')
                           if len(values['nullspace.posture']) else None),
                  max_error=limits(values, 'cartesian.max_error'),
                  max_velocity=limits(values, 'cartesian.max_velocity'),
                  max_frequency=values['cartesian.max_frequency'])
    shaping = values['operational_space.inertia_shaping']
    K = stiffness(values, 'cartesian.stiffness')
    K_shaped = stiffness(values, 'operational_space.stiffness')
    if arm.model.tip is None:
        if values['mode'] in MODES:
            raise ConfigError(f"mode {values['mode']} needs the tip parameter (the task frame; "
                              f"read-only: set it at start): the model is the whole tree below "
                              f"'{arm.model.base}'")
        return None
    try:
        laws = {CARTESIAN_IMPEDANCE: CartesianImpedance(
                    arm.model, K, coriolis_compensation=values[
                        'cartesian.coriolis_compensation'], **kwargs),
                OPERATIONAL_SPACE: OperationalSpace(
                    arm.model, K_shaped if shaping else K, inertia_shaping=shaping, **kwargs)}
    except (ValueError, KeyError) as error:
        raise ConfigError(f'task space: {error}') from None
    return laws.get(values['mode'])


def warm_up(model):
    """Run both laws once at the neutral pose, and the pose error of streams and /diagnostics.

    numba compiles or loads their kernels now; not for a model without a tip (no task frame,
    no task-space mode).
    """
    if model.tip is None:
        return
    q, zero = model.neutral_position, np.zeros(model.nv)
    for law in (CartesianImpedance(model, np.ones(6), max_velocity=(1.0, 1.0)),
                OperationalSpace(model, np.ones(6))):
        pose = rd.frame_pose(model, q, law.frame)
        law(q, zero, pose)
        applied_stiffness(law, q)
    rd.pose_error(pose, pose)


def applied_stiffness(law, q):
    """(applied, asked): the law's stiffness per axis as its bound leaves it at q, force first."""
    if getattr(law, 'inertia_shaping', False):
        lam, U = np.ones(6), np.eye(6)
    else:
        lam, U = np.linalg.eigh(rd.task_space_inertia(law.model, q, law.frame))
    K, _ = modal_gains(lam, U, law.stiffness, law.damping_ratio, law.max_frequency)
    applied = np.diag(K)
    return np.concatenate([applied[3:], applied[:3]]), np.concatenate(
        [law.stiffness[3:], law.stiffness[:3]])


def pose_matrix(pose):
    """geometry_msgs/Pose -> 4x4 (BadInput for non-finite values or a zero quaternion)."""
    p, o = pose.position, pose.orientation
    xyz, quaternion = np.array([p.x, p.y, p.z]), np.array([o.x, o.y, o.z, o.w])
    scale = np.abs(quaternion).max()   # |q| of 1e200s would overflow: scaled first
    if not (all_finite(xyz) and all_finite(quaternion)) \
            or scale * np.linalg.norm(quaternion / max(scale, 1e-300)) < 1e-6:
        raise BadInput(f'needs a finite position and a non-zero quaternion, got {xyz.tolist()}, '
                       f'{quaternion.tolist()}')
    T = np.eye(4)
    T[:3, :3] = Rotation.from_quat(quaternion / scale).as_matrix()   # normalised
    T[:3, 3] = xyz
    return T


def _rotation_from_valid_matrix():
    """Rotation.from_matrix for a rotation orthonormal to rounding.

    assume_valid skips scipy's projection onto a rotation (a cost at ~/tip_pose's 100 Hz); older
    scipy (Ubuntu 24.04's 1.11) has no such keyword and always projects.
    """
    try:
        Rotation.from_matrix(np.eye(3), assume_valid=True)
    except TypeError:
        return Rotation.from_matrix
    return functools.partial(Rotation.from_matrix, assume_valid=True)


rotation_from_valid_matrix = _rotation_from_valid_matrix()


def fill_pose(pose, T):
    """Write the 4x4 pose T (its rotation orthonormal to rounding) into a geometry_msgs/Pose."""
    p, o = pose.position, pose.orientation
    p.x, p.y, p.z = T[:3, 3].tolist()
    o.x, o.y, o.z, o.w = rotation_from_valid_matrix(T[:3, :3]).as_quat().tolist()


class TaskSpace:
    """Runtime state of the task-space modes on a DynamicsController: law, target, topics.

    Built with the controller's Context and its SpeedLimiter (which scales the streams).
    """

    def __init__(self, context, limiter):
        self.context, self.limiter, self.law = context, limiter, None
        self.pose_d, self.wrench_d = None, np.zeros(6)   # base frame; (moment, force) base axes
        self.twist_d, self.twist_until = np.zeros(6), -INF   # (ω, ṗ) base axes; monotonic s
        self.stamp_d = None   # stamp of the last target pose (None: unstamped or held)
        self.path, self.tau = [], None   # the stream's [(stamp, pose)], the target's stamp τ
        self.t_state = None   # the last state's stamp (the scaled clock's time)
        self.posture = None   # the pose at the switch: the default nullspace.posture
        self.tip_pose = context.create_publisher(PoseStamped, '~/tip_pose', 10)
        self.tip_msg, self.tip_published = PoseStamped(), -INF
        context.create_subscription(PoseStamped, '~/target_pose', self.on_target_pose, 10)
        context.create_subscription(WrenchStamped, '~/target_wrench', self.on_target_wrench, 10)

    def apply(self, law):
        """Use a newly configured law; the target, wrench and default posture carry over."""
        if law is not None and law.posture is None and self.posture is not None:
            law.posture = self.posture
        self.law, self.lowered = law, ()

    lowered = ()   # the axes the bound lowers, as last logged

    def follow_delay(self, delay):
        """Bound the modes by the measured delay T, s (None: not measured yet; module doc)."""
        margin = self.context.values()['cartesian.delay_margin']
        if self.law is None or delay is None or not margin > 0:
            return
        self.law.max_frequency = CRITICAL / (margin * max(delay, 1e-4))

    def bound_health(self, q):
        """(warning or None, /diagnostics values) of the bound at q; logs a newly lowered axis."""
        applied, asked = applied_stiffness(self.law, q)
        lowered = tuple(i for i in range(6) if applied[i] < LOWERED * asked[i])
        text = ', '.join(f'{AXES[i]}: asked {asked[i]:.4g}, applied {applied[i]:.4g}'
                         for i in lowered)
        bound = self.law.max_frequency
        warning = (f'stiffness lowered by the {bound:.0f} rad/s bound on the modes ({text})'
                   if lowered else None)
        if lowered != self.lowered:
            self.lowered = lowered
            if lowered:
                self.context.logger.warning(f'{warning}: the states\' delay allows no faster '
                                            f'mode (cartesian.delay_margin, max_frequency)')
            else:
                self.context.logger.info(f'stiffness as asked on every axis (modes bounded '
                                         f'at {bound:.0f} rad/s)')
        values = {'task_max_frequency': round(bound, 1),
                  'task_stiffness_applied': ' '.join(f'{k:.4g}' for k in applied),
                  'task_stiffness_lowered': ' '.join(AXES[i] for i in lowered) or 'none'}
        return warning, values

    def hold(self, q):
        """Hold the tip pose at q (None: at the next state) and the posture q; no feed-forward."""
        self.pose_d = self.posture = self.stamp_d = None
        self.wrench_d, self.twist_until = np.zeros(6), -INF
        self.path, self.tau = [], None
        if q is not None and self.law is not None:
            self._hold(q)

    def _hold(self, q):
        self.pose_d = rd.frame_pose(self.law.model, q, self.law.frame)
        self.posture = q.copy()
        if not len(self.context.values()['nullspace.posture']):
            self.law.posture = q

    def control(self, q, v, t):
        """τ of the active law at (q, q̇), g(q) included; g(q) and a hold if it is not finite.

        q, q̇ come from the node's reader, finite; the targets are checked when they arrive: the
        law's unchecked ``torque`` (core/task_control.py) serves them in one compiled call.
        """
        if v is None:
            raise BadInput(f"{self.context.values()['mode']} needs joint velocities")
        if self.pose_d is None:
            self._hold(q)
        try:
            pose_d, twist_d, accel_d = self.target(q, v, t)
            if accel_d is None or not isinstance(self.law, OperationalSpace):
                accel_d = ZERO
            tau = self.law.torque(q, v, pose_d, ZERO if twist_d is None else twist_d, accel_d,
                                  self.wrench_d)
        except ValueError as error:
            raise BadInput(str(error)) from None
        if not all_finite(tau):
            self.context.diagnostics.count('non_finite_commands')
            self.context.logger.error('non-finite task-space torque: holding the measured '
                                      'pose, publishing g(q)', throttle_duration_sec=1.0)
            self.hold(q)
            tau = rd.gravity(self.law.model, q)
        self.publish_tip(q, t)
        return tau

    def cycle_target(self):
        """(T_d, ẋ_d, ẍ_d, F_d) for the compiled cycle (command_cycle.TASK).

        What ``control`` would give the law; None where the state needs ``control``: no target
        held yet, a posture to take, a target on the scaled clock.
        """
        if self.pose_d is None or self.law.posture is None or self.scaled():
            return None
        twist_d = self.target_twist()
        return self.pose_d, ZERO if twist_d is None else twist_d, ZERO, self.wrench_d

    def served(self, q, v, t, condition):
        """Do what ``control`` does besides the law, for a state the compiled cycle served.

        ``condition``: the law's κ(Φ), as the cycle computed it.
        """
        self.t_state = t
        self.limiter.observe(q, v)
        self.law.condition = float(condition)
        self.publish_tip(q, t)

    def publish_tip(self, q, t):
        if t - self.tip_published < TIP_POSE_PERIOD and t >= self.tip_published:
            return
        self.tip_published = t
        msg = self.tip_msg
        msg.header.frame_id = self.law.model.base
        msg.header.stamp = to_time(t)
        fill_pose(msg.pose, rd.frame_pose(self.law.model, q, self.law.frame))
        self.tip_pose.publish(msg)

    # -- targets -------------------------------------------------------------------------------
    def frame_transform(self, frame_id):
        """T_base_frame of a message's frame_id at the newest measured pose (BadInput if none)."""
        model, q = self.law.model, self.context.newest_state()
        if frame_id in ('', model.base):
            return np.eye(4)
        if frame_id not in model.frame_names:
            raise BadInput(f"unknown frame_id '{frame_id}'; frames of the model: "
                           f"{', '.join(model.frame_names)}")
        if q is None:
            raise BadInput(f"frame_id '{frame_id}' moves with the arm: needs a joint state first")
        return rd.frame_pose(model, q, frame_id)

    def accepting(self, what):
        if self.law is None or self.context.newest_state() is None:
            raise BadInput(f'{what} needs mode {" or ".join(MODES)} and joint states')

    def on_target_pose(self, msg):
        try:
            self.accepting('target_pose')
            pose_d = self.frame_transform(msg.header.frame_id) @ pose_matrix(msg.pose)
        except BadInput as error:
            self.reject(f'target_pose ignored: {error}')
            return
        self.stream(pose_d, to_seconds(msg.header.stamp) or None)
        p = np.round(pose_d[:3, 3], 4).tolist()
        self.context.logger.info(f'target_pose: tip to {p} m (base frame)',
                                 throttle_duration_sec=1.0)

    def stream(self, pose_d, stamp):
        """A new target: ẋ_d of a stream of stamped targets (module docstring), else a jump."""
        dt = None if stamp is None or self.stamp_d is None else stamp - self.stamp_d
        limiter = self.limiter
        on_time = not limiter.enabled and limiter.s == 1.0 and self.tau is not None and \
            bool(self.path) and self.tau >= self.path[-1][0]
        if dt == 0.0 and self.path:   # the same instant again: the stream's velocity stands
            self.path[-1] = (stamp, pose_d)
        elif dt is None or not 0.0 < dt <= STREAM_PERIOD or self.pose_d is None or not self.path:
            self.twist_until, on_time = -INF, True
            self.path = [(stamp, pose_d)]
        else:
            self.twist_d = rd.pose_error(pose_d, self.path[-1][1]) / dt
            self.twist_until = self.context.monotonic_time() + 2.0 * dt
            self.path.append((stamp, pose_d))
        self.stamp_d = stamp
        if on_time:   # the newest pose is the target (else target() moves it on the clock)
            self.tau, self.pose_d = stamp, pose_d
            del self.path[:-2]

    def target(self, q, v, t):
        """(T_d, ẋ_d, ẍ_d) at the state stamped t: the stream on the scaled clock.

        Module docstring; ẍ_d (None: not scaled) = s² ẍ_n + ṡ ẋ_n of the nominal ẋ_n, ẍ_n.
        """
        dt, self.t_state = (0.0 if self.t_state is None else max(t - self.t_state, 0.0)), t
        limiter = self.limiter
        late = self.late()
        if not self.scaled():
            limiter.observe(q, v)
            return self.pose_d, self.target_twist(), None
        streaming = self.context.monotonic_time() < self.twist_until
        s_before = limiter.s
        nominal = self.nominal_twist() if streaming or late else np.zeros(6)
        s = limiter.task_scale(q, v, self.law.frame, nominal, dt)
        if late:
            self.tau = min(self.tau + s * dt, self.path[-1][0])
        del self.path[:max(self.segment(self.tau) - 2, 0)]   # keep the previous segment
        k = self.segment(self.tau)
        (t0, T0), (t1, T1) = self.path[k - 1], self.path[k]
        self.pose_d = pose_interpolation(T0, T1, min(max((self.tau - t0) / (t1 - t0), 0.0), 1.0))
        if not (streaming or self.tau < self.path[-1][0]):
            return self.pose_d, None, None
        twist = self.segment_twist(self.tau)
        accel = np.zeros(6) if k < 2 else (twist - self.segment_twist(t0)) / (t1 - t0)
        s_dot = (s - s_before) / dt if dt > 0.0 else 0.0
        return self.pose_d, s * twist, s ** 2 * accel + s_dot * twist

    def late(self):
        """Whether the stream's target time τ is behind its newest pose."""
        return len(self.path) > 1 and self.tau < self.path[-1][0]

    def scaled(self):
        """Whether the target moves on PFL's scaled clock: a stream behind, or PFL on for one."""
        return self.late() or (self.limiter.enabled and len(self.path) > 1)

    def nominal_twist(self):
        """The faster of ẋ_n at τ and the next segment's (ẍ_d carries the target towards it)."""
        ahead = self.path[min(self.segment(self.tau) + 1, len(self.path) - 1)][0]
        return max(self.segment_twist(self.tau), self.segment_twist(ahead),
                   key=lambda twist: np.linalg.norm(twist[3:]))

    def segment(self, tau):
        """k: the stream's poses k − 1 and k enclose the stream time τ (k >= 1)."""
        k = bisect.bisect_left(self.path, tau, key=lambda pose: pose[0])
        return min(max(k, 1), len(self.path) - 1)

    def segment_twist(self, tau):
        """ẋ_n of the stream's segment at τ: pose_error(T_k, T_k−1) / (t_k − t_k−1)."""
        k = self.segment(tau)
        (t0, T0), (t1, T1) = self.path[k - 1], self.path[k]
        return rd.pose_error(T1, T0) / (t1 - t0)

    def target_twist(self):
        """ẋ_d while a stream of targets lasts, else None (zero)."""
        return self.twist_d if self.context.monotonic_time() < self.twist_until else None

    def on_target_wrench(self, msg):
        w = msg.wrench
        wrench = np.array([w.torque.x, w.torque.y, w.torque.z, w.force.x, w.force.y, w.force.z])
        try:
            self.accepting('target_wrench')
            if not all_finite(wrench):
                raise BadInput(f'non-finite wrench {wrench.tolist()}')
            R = self.frame_transform(msg.header.frame_id)[:3, :3]
        except BadInput as error:
            self.reject(f'target_wrench ignored: {error}')
            return
        self.wrench_d = np.concatenate([R @ wrench[:3], R @ wrench[3:]])

    def reject(self, text):
        self.context.diagnostics.count('rejected_references')
        self.context.warn(text)

    def health(self):
        """(warning or None, /diagnostics values): κ(J M⁻¹ Jᵀ) and the pose error at q_last."""
        q = self.context.newest_state()
        if self.law is None or self.pose_d is None or q is None:
            return None, {}
        condition = self.law.condition
        tip = rd.frame_pose(self.law.model, q, self.law.frame)
        error = rd.pose_error(self.pose_d, tip)
        values = {'task_condition_number': f'{condition:.4g}',
                  'task_position_error_mm': round(1e3 * float(np.linalg.norm(error[3:])), 4),
                  'task_rotation_error_mrad': round(1e3 * float(np.linalg.norm(error[:3])), 4)}
        warning = (f'near a singular pose: condition number {condition:.3g}'
                   if not condition < CONDITION_WARNING else None)
        lowered, bound = self.bound_health(q)
        return warning or lowered, {**values, **bound}
