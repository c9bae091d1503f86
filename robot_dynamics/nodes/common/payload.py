"""The payload at run time: ``~/payload`` (geometry_msgs/InertiaStamped) and payload identification.

One path: a payload message, like an identified payload, sets the node's own ``payload.*``
parameters, atomically, through rclpy. The on-set callback validates them with the function
that builds the model (``ArmNode``), so a non-physical payload is rejected with its reason, and
``ros2 param get`` always shows the payload in use.

``~/payload`` is Franka's SetLoad: mass m, centre of mass ``com`` and the inertia (ixx..izz,
about the centre of mass) in the axes of ``header.frame_id``; an empty frame_id is the tip
frame. A frame rigidly attached to the tip's body (e.g. the flange under a tool frame) is
transformed into the tip frame; any other frame is rejected with a logged reason.

Identification (the controller's ``~/identify_payload``) fits mass and centre of mass to the
last ``payload_identification.samples`` still joint states (every |q̇| below
``payload_identification.still_velocity``) with ``rd.identify_payload``, on the node's model
WITHOUT its current payload, so the payload is estimated from scratch. The measured efforts
(converted to joint torques by the hardware profile, robot_dynamics.nodes.common.profiles) minus the
model's joint friction at the sample's q̇ are taken as g(q) of the loaded arm. The
mass follows from any non-singular pose; the centre of mass along gravity (in tip axes) only
from poses whose tip orientations differ: at least MIN_TILT between the gravity directions
seen from the tip. Static poses leave the inertia unidentified: an applied estimate is a point
mass (payload.inertia = 0).
"""
import math

import numpy as np
from geometry_msgs.msg import InertiaStamped
from rclpy.parameter import Parameter
from std_srvs.srv import SetBool

import robot_dynamics as rd
from robot_dynamics.core.identification import static_poses, tilt
from robot_dynamics.core.spatial import inertia_from_urdf, inertia_to_urdf

from .joint_states import BadInput
from .parameters import section

PARAMS = section('dynamics_controller', 'payload_identification')
POSE_TOLERANCE = 0.02   # rad (m): still samples farther than this from a pose's first start another
MIN_TILT = 15.0         # degrees between gravity directions in tip axes to fix the whole com
NO_PAYLOAD = 0.01       # kg: an estimate lighter than this is no payload
MAX_CONDITION = 1e8     # of the payload regressor: beyond, the poses are singular


def tip_placement(model, frame):
    """(R, p): the tip frame's placement of ``frame``, which must ride on the tip's body."""
    tip = model.frame_index(model.tip)
    try:
        f = model.frame_index(frame)
    except KeyError:
        f = None
    if f is None or model.frame_body[f] != model.frame_body[tip]:
        body = model.frame_body[tip]
        rigid = [n for n, b in zip(model.frame_names, model.frame_body) if b == body]
        raise BadInput(f"frame_id '{frame}' is not rigidly attached to the tip "
                       f"'{model.tip}'; use one of {rigid} (empty: the tip)")
    T = np.linalg.inv(model.frame_placement[tip]) @ model.frame_placement[f]
    return T[:3, :3], T[:3, 3]


def payload_parameters(model, msg):
    """InertiaStamped -> {payload.*: value} in the tip frame (BadInput for another frame)."""
    if model.tip is None:
        raise BadInput('a payload sits at the tip: the model has no tip (set the tip parameter)')
    i = msg.inertia
    com = np.array([i.com.x, i.com.y, i.com.z])
    inertia = inertia_from_urdf((i.ixx, i.ixy, i.ixz, i.iyy, i.iyz, i.izz))
    if msg.header.frame_id not in ('', model.tip):
        R, p = tip_placement(model, msg.header.frame_id)
        com, inertia = R @ com + p, R @ inertia @ R.T
    return {'payload.mass': float(i.m), 'payload.com': com.tolist(),
            'payload.inertia': inertia_to_urdf(inertia).tolist()}


def set_payload(context, values):
    """Set the payload.* parameters together; returns the rejection reason or None."""
    try:
        result = context.set_parameters([Parameter(k, value=v) for k, v in values.items()])
    except Exception as error:   # rclpy checks types and ranges before the callback
        return str(error)
    return None if result.successful else result.reason


def subscribe(context):
    """~/payload of a node (its Context): each message sets payload.* (or says why not)."""
    logger = context.logger

    def on_payload(msg):
        arm = context.arm()
        if arm is None:
            logger.warning('payload ignored: no model yet')
            return
        try:
            values = payload_parameters(arm.model, msg)
        except BadInput as error:
            logger.warning(f'payload ignored: {error}')
            return
        reason = set_payload(context, values)
        if reason:
            logger.warning(f'payload rejected: {reason}')
        else:
            logger.info(f"payload set from ~/payload: {describe(values)}")
    return context.create_subscription(InertiaStamped, '~/payload', on_payload, 10)


def describe(values):
    com = np.round(values['payload.com'], 4).tolist()
    return f"{values['payload.mass']:.4g} kg, com {com} m (tip frame)"


class StillSamples:
    """The last ``size`` still joint states: q, q̇ and τ in model order (τ NaN where missing).

    τ is recorded as measured, finite or not: ``estimate`` refuses a window with a non-finite
    one (checked there once, not at every state).

    ``speed`` is max |q̇| of the newest joint state (NaN without velocities).
    """

    def __init__(self, nv, size, still_velocity):
        self.q, self.v, self.tau = (np.full((size, nv), np.nan) for _ in range(3))
        self.size, self.still_velocity, self.count, self.speed = size, still_velocity, 0, math.nan

    def record(self, q, v, tau):
        """Record a still state (``tau`` None: efforts missing)."""
        k = self.count % self.size
        self.q[k], self.v[k] = q, v
        self.tau[k] = np.nan if tau is None else tau
        self.count += 1

    def window(self):
        """(q, q̇, τ) of the recorded samples, oldest first."""
        n, start = min(self.count, self.size), self.count if self.count > self.size else 0
        order = (start + np.arange(n)) % self.size
        return self.q[order], self.v[order], self.tau[order]


class Refused(Exception):
    """Identification refused; the message says why (and what was identified, if anything)."""


def estimate(model, samples):
    """(values for payload.*, one-line report) from StillSamples, or Refused.

    ``model``: the arm without the payload.
    """
    if model.tip is None:
        raise Refused('the model has no tip (a whole tree): set the tip parameter')
    needed = samples.size
    if samples.count < needed:
        raise Refused(f'only {samples.count} still joint states (|qdot| < '
                      f'{samples.still_velocity} rad/s on every joint) of the {needed} needed: '
                      'hold the arm still in a few poses with different tip orientations')
    if not samples.speed < samples.still_velocity:
        raise Refused(f'the arm is moving (max |qdot| {samples.speed:.3g} rad/s; still is below '
                      f'{samples.still_velocity}): hold it still')
    q, v, tau = samples.window()
    missing = int((~np.isfinite(tau)).any(axis=1).sum())
    if missing:
        raise Refused(f'{missing} of the last {needed} still joint states carry no or '
                      'non-finite efforts: identification needs measured joint torques')
    labels = static_poses(q, POSE_TOLERANCE)
    means = np.array([q[labels == k].mean(axis=0) for k in range(labels[-1] + 1)])
    angle, along = tilt(model, means)
    found = rd.identify_payload(model, q, tau - rd.joint_friction(model, v))
    m, com = found.mass, found.com
    seen = (f"{len(q)} samples in {len(means)} pose{'s' * (len(means) > 1)}, tilt "
            f'{angle:.0f} deg, residual {found.residual_rms.max():.3g} N m RMS (worst joint)')
    if not (math.isfinite(m) and np.isfinite(com).all()):
        raise Refused(f'the fit failed (non-finite estimate); {seen}')
    if m < -NO_PAYLOAD:
        raise Refused(f'identified mass {m:.3f} kg < 0: the model is heavier than the arm '
                      f'(a tool in the URDF that is not mounted?); {seen}')
    if m < NO_PAYLOAD:
        return ({'payload.mass': 0.0, 'payload.com': [0.0] * 3, 'payload.inertia': [0.0] * 6},
                f'no payload ({m:.4f} kg); {seen}')
    if angle < MIN_TILT:
        across = com - (com @ along) * along
        raise Refused(f'mass {m:.4f} kg and com {np.round(across, 4).tolist()} m across gravity '
                      f'identified, but not the com along {(np.round(along, 3) + 0.0).tolist()} '
                      f'(tip axes): the poses differ by {angle:.0f} deg in tip orientation, at '
                      f'least {MIN_TILT:.0f} needed; {seen}')
    if not found.condition_number < MAX_CONDITION:
        raise Refused(f'ill-conditioned fit (condition number {found.condition_number:.3g}): '
                      f'singular poses? {seen}')
    values = {'payload.mass': m, 'payload.com': com.tolist(), 'payload.inertia': [0.0] * 6}
    return values, f'{describe(values)}, inertia not identified (0); {seen}'


class PayloadService:
    """``~/identify_payload`` (std_srvs/SetBool) of a node's Context: true applies, false reports.

    The node calls ``configure`` when it applies a configuration and ``add`` with every joint
    state it accepts.
    """

    def __init__(self, context):
        self.context, self.samples, self.profile = context, None, None
        context.create_service(SetBool, '~/identify_payload', self.on_request)

    def configure(self, values, arm, profile):
        """The hardware profile and StillSamples for the parameters.

        ``profile`` (robot_dynamics.nodes.common.profiles) turns efforts into joint torques; the
        samples are kept while their parameters do not change.
        """
        self.profile = profile
        size = int(values['payload_identification.samples'])
        still = float(values['payload_identification.still_velocity'])
        s = self.samples
        if s is None or s.size != size or s.still_velocity != still:
            self.samples = StillSamples(arm.model.nv, size, still)

    def add(self, q, v, effort):
        """An accepted joint state (model order): recorded if still, with its joint torques."""
        s = self.samples   # v is finite (JointStateReader): Python's max is numpy's here
        s.speed = math.nan if v is None else max(map(abs, v.tolist()))
        if s.speed < s.still_velocity:
            s.record(q, v, None if effort is None else self.profile.joint_torque(q, effort))

    def on_request(self, request, response):
        context, arm = self.context, self.context.arm()
        try:
            if arm is None:
                raise Refused('no model yet')
            values, report = estimate(arm.unloaded, self.samples)
            if request.data:
                reason = set_payload(context, values)
                if reason:
                    raise Refused(f'identified {report}, but rejected: {reason}')
        except (Refused, ValueError) as error:   # ValueError: numerical trouble in the fit
            response.success, response.message = False, f'payload not identified: {error}'
            context.logger.warning(response.message)
            return response
        response.success = True
        response.message = f"payload {'applied' if request.data else '(dry run)'}: {report}"
        context.logger.info(response.message)
        return response
