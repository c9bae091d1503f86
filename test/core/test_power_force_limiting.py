"""Power and force limiting: reflected mass at a point, permissible speed, speed scaling.

Reflected masses against Pinocchio (a frame added at the offset, crba), against the RP arm's
closed form and against a URDF with the payload lumped into the tip; permissible speeds against
hand-worked numbers; the speed scaling in a closed loop (forward dynamics, computed torque).
"""
import math

import numpy as np
import pytest
import scipy.linalg

import robot_dynamics as rd
from random_trees import PinocchioReference, assert_close, make_case
from references import two_mass_peak
from robot_dynamics.core import power_force_limiting as pfl
from robot_dynamics.core.control import ComputedTorque
from robot_dynamics.core.trajectory import JointTrajectory
from test_core_closed_forms import inertial, planar_urdf

ARMS = ("panda/panda_link0/panda_hand_tcp", "ur5e/base_link/tool0")


def parent_joint(frame):
    """The joint a Pinocchio frame hangs on: parentJoint since Pinocchio 3, parent before."""
    return frame.parentJoint if hasattr(frame, "parentJoint") else frame.parent


def pinocchio_mobility(ref, q, tip, offset):
    """J_v M^-1 J_v^T of a frame Pinocchio places at ``offset`` from ``tip`` (tip axes)."""
    pin = ref.pin
    name = f"contact_{len(ref.model.frames)}"
    f = ref.model.frames[ref.model.getFrameId(tip, pin.FrameType.BODY)]
    placement = f.placement * pin.SE3(np.eye(3), np.asarray(offset, float))
    ref.model.addFrame(pin.Frame(name, parent_joint(f), ref.model.getFrameId(tip), placement,
                                 pin.FrameType.BODY))
    ref.data = ref.model.createData()
    Jv = ref.frame_jacobian(q, name, "LOCAL_WORLD_ALIGNED")[3:]
    return Jv @ np.linalg.solve(ref.mass_matrix(q), Jv.T)


@pytest.mark.parametrize("arm", ARMS)
def test_reflected_mass_against_pinocchio(arm):
    case = make_case(arm)
    model = case.load()
    ref = PinocchioReference(case.xml, model.joint_names, case.base, case.gravity)
    rng = np.random.default_rng(3)
    for _ in range(4):
        q = rng.uniform(np.maximum(model.lower, -3), np.minimum(model.upper, 3))
        offset, u = rng.normal(scale=0.1, size=3), rng.normal(size=3)
        Phi = pinocchio_mobility(ref, q, case.tip, offset)
        assert_close(pfl.point_mobility(model, q, case.tip, offset), Phi, 1e-9)
        u_hat = u / np.linalg.norm(u)
        assert_close(pfl.reflected_mass(model, q, case.tip, u, offset),
                     1.0 / (u_hat @ Phi @ u_hat), 1e-9)
        # along Lambda_v's eigenvectors, m_R is its eigenvalue (Khatib's belted ellipsoid)
        assert_close(pfl.reflected_mass(model, q, case.tip, u),
                     rd.effective_mass(model, q, case.tip, u), 1e-12)   # no offset: the origin
        masses, axes = np.linalg.eigh(np.linalg.inv(Phi))
        assert_close([pfl.reflected_mass(model, q, case.tip, a, offset) for a in axes.T],
                     masses, 1e-9)


@pytest.mark.parametrize("arm", ARMS)
def test_twist_joint_velocity_is_the_least_kinetic_energy_motion(arm):
    """J q̇ = ẋ, and ½ q̇ᵀ M q̇ against the solutions q̇ + null vectors (Pinocchio's J and M)."""
    case = make_case(arm)
    model = case.load()
    ref = PinocchioReference(case.xml, model.joint_names, case.base, case.gravity)
    rng = np.random.default_rng(11)
    q = rng.uniform(np.maximum(model.lower, -2), np.minimum(model.upper, 2))
    twist = rng.normal(size=6)
    v = pfl.twist_joint_velocity(model, q, case.tip, twist)
    J = ref.frame_jacobian(q, case.tip, "LOCAL_WORLD_ALIGNED")   # angular rows first
    M = ref.mass_matrix(q)
    assert_close(J @ v, twist, 1e-9)
    null = scipy.linalg.null_space(J)   # the Panda's one null direction; none for the UR5e
    assert null.shape[1] == model.nv - 6
    for n in null.T:
        for step in (-0.1, 0.1):
            assert (v + step * n) @ M @ (v + step * n) > v @ M @ v
    with pytest.raises(ValueError, match="6 finite numbers"):
        pfl.twist_joint_velocity(model, q, case.tip, [0.0, np.nan, 0, 0, 0, 0])


def rp_arm(L1=0.4, L2=0.5, m1=3.0, m2=1.5):
    """A revolute joint, then a prismatic one along the link: two uniform rods in the plane."""
    xml = planar_urdf(["revolute", "prismatic"],
                      [inertial(m1, (L1 / 2, 0), m1 * L1**2 / 12),
                       inertial(m2, (L2 / 2, 0), m2 * L2**2 / 12)], [L1, 0.0])
    return rd.load_urdf(xml), L1, L2, m1, m2


@pytest.mark.parametrize("seed", range(3))
def test_reflected_mass_rp_arm_closed_form(seed):
    """Point (d, h) in link 2's axes, link 2's origin at s = L1 + r along e = (cos th, sin th).

    The point moves at r' e + th' ((s + d) t - h e), t = (-sin th, cos th); rod 2's centre at
    (s + L2/2) e, so K = (I th'^2 + m2 r'^2) / 2 with
    I = m1 L1^2 / 3 + m2 L2^2 / 12 + m2 (s + L2/2)^2, M = diag(I, m2) and
    J_v M^-1 J_v^T = c c^T / I + e e^T / m2, c = (s + d) t - h e (Lynch & Park §8.6).
    """
    model, L1, L2, m1, m2 = rp_arm()
    rng = np.random.default_rng(seed)
    th, r, d, h = rng.uniform(-1, 1), rng.uniform(0, 0.5), rng.uniform(0, 0.5), rng.uniform(-.1, .1)
    u = np.append(rng.normal(size=2), 0.0)
    s = L1 + r
    e, t = np.array([np.cos(th), np.sin(th), 0]), np.array([-np.sin(th), np.cos(th), 0])
    c = (s + d) * t - h * e
    inertia = m1 * L1**2 / 3 + m2 * L2**2 / 12 + m2 * (s + L2 / 2) ** 2
    u_hat = u / np.linalg.norm(u)
    expected = 1.0 / ((u_hat @ c) ** 2 / inertia + (u_hat @ e) ** 2 / m2)
    got = pfl.reflected_mass(model, [th, r], "link2", u, (d, h, 0.0))
    assert_close(got, expected, 1e-12)
    assert_close(pfl.reflected_mass(model, [th, r], "link2", e, (d, 0, 0)), m2, 1e-12)
    # out of the plane the point cannot move: no mass resists, none is reflected
    assert pfl.reflected_mass(model, [th, r], "link2", [0, 0, 1]) == math.inf


def lumped_payload_urdf(xml, tip, mass, com, inertia):
    """The URDF with a payload link fixed to ``tip``: the loader lumps it into the tip's body."""
    i = inertia
    payload = (f'<link name="payload"><inertial><origin xyz="0 0 0"/><mass value="{mass}"/>'
               f'<inertia ixx="{i[0, 0]}" ixy="{i[0, 1]}" ixz="{i[0, 2]}" iyy="{i[1, 1]}" '
               f'iyz="{i[1, 2]}" izz="{i[2, 2]}"/></inertial></link>'
               f'<joint name="payload_joint" type="fixed"><parent link="{tip}"/>'
               f'<child link="payload"/><origin xyz="{com[0]} {com[1]} {com[2]}"/></joint>')
    return xml.replace("</robot>", payload + "</robot>")


@pytest.mark.parametrize("arm", ARMS)
def test_reflected_mass_with_payload(arm):
    """rd.with_payload against the payload lumped by the URDF loader, and by Pinocchio."""
    case = make_case(arm)
    mass, com, inertia = 2.5, np.array([0.01, -0.02, 0.08]), np.diag([0.004, 0.005, 0.003])
    model = rd.with_payload(case.load(), mass, com, inertia)
    xml = lumped_payload_urdf(case.xml, case.tip, mass, com, inertia)
    lumped = rd.load_urdf(xml, case.base, case.tip)
    ref = PinocchioReference(xml, lumped.joint_names, case.base, case.gravity)
    rng = np.random.default_rng(5)
    for _ in range(3):
        q = rng.uniform(np.maximum(model.lower, -3), np.minimum(model.upper, 3))
        offset, u = rng.normal(scale=0.1, size=3), rng.normal(size=3)
        u_hat = u / np.linalg.norm(u)
        expected = pfl.reflected_mass(lumped, q, case.tip, u, offset)
        assert_close(pfl.reflected_mass(model, q, case.tip, u, offset), expected, 1e-9)
        Phi = pinocchio_mobility(ref, q, case.tip, offset)
        assert_close(expected, 1.0 / (u_hat @ Phi @ u_hat), 1e-9)
        assert pfl.reflected_mass(case.load(), q, case.tip, u, offset) < expected
    assert_close(pfl.moving_mass(model), pfl.moving_mass(case.load()) + mass, 1e-12)


def test_permissible_speed_hand_worked():
    """Hand: F_T = 2 x 140 N, k = 75 N/mm, m_H = 0.6 kg; robot 2 kg.

    mu = 1 / (1/2 + 1/0.6) = 0.461538 kg, v = 280 / sqrt(0.461538 x 75000) = 1.50495 m/s.
    Chest (280 N, 25 N/mm, 40 kg) with 4.2 kg: mu = 3.80090 kg, v = 280 / 308.257 = 0.908332 m/s.
    """
    hand, chest = pfl.BODY_REGIONS["hand"], pfl.BODY_REGIONS["chest"]
    assert pfl.reduced_mass(2.0, 0.6) == pytest.approx(0.4615385, rel=1e-6)
    assert pfl.permissible_speed(2.0, hand) == pytest.approx(1.504955, rel=1e-6)
    assert pfl.permissible_speed(4.2, chest) == pytest.approx(0.908332, rel=1e-6)
    # a body of infinite mass reflects no more than m_H: v = F_T / sqrt(m_H k) = 1.3199 m/s
    assert pfl.permissible_speed(math.inf, hand) == pytest.approx(1.319933, rel=1e-6)
    # the energy form: mu v_max^2 / 2 == F_T^2 / (2 k) = 280^2 / 150000 J
    for m_R in (0.5, 2.0, 30.0):
        mu, v = pfl.reduced_mass(m_R, 0.6), pfl.permissible_speed(m_R, hand)
        assert mu * v**2 / 2 == pytest.approx(280.0**2 / 150e3, rel=1e-12)
    assert hand.energy_limit == pytest.approx(0.522667, rel=1e-6)
    assert pfl.permissible_speed(2.0, pfl.BODY_REGIONS["face"]) == 0.0


def test_standard_robot_mass():
    model = rd.load_urdf(rd.robot_urdf("panda"), "panda_link0", "panda_hand_tcp")
    masses = _urdf_masses(rd.robot_urdf("panda"))
    total = sum(masses.values()) - masses["panda_link0"]   # all but the base: fingers too
    assert pfl.standard_robot_mass(model, 1.5) == pytest.approx(total / 2 + 1.5, rel=1e-12)


def _urdf_masses(path):
    import xml.etree.ElementTree as ET
    root = ET.parse(path).getroot()
    return {link.get("name"): float(link.find("inertial/mass").get("value"))
            for link in root.iter("link") if link.find("inertial/mass") is not None}


def test_body_regions_overrides(tmp_path):
    regions = pfl.body_regions({"hand": {"spring_constant": 50e3},
                                "tool_side": {"quasi_static_force": 100, "transient_force": 150,
                                              "spring_constant": 20e3, "effective_mass": 1.0}})
    assert regions["hand"].spring_constant == 50e3
    assert regions["hand"].effective_mass == pfl.BODY_REGIONS["hand"].effective_mass
    assert regions["tool_side"].transient_force == 150.0
    path = tmp_path / "regions.yaml"
    path.write_text("chest:\n  transient_force: 200.0\n")
    assert pfl.body_regions(str(path))["chest"].transient_force == 200.0
    with pytest.raises(ValueError, match="needs effective_mass"):
        pfl.body_regions({"new": {"quasi_static_force": 1, "transient_force": 2,
                                  "spring_constant": 3}})
    with pytest.raises(ValueError, match="spring_constant must be a finite number > 0"):
        pfl.body_regions({"hand": {"spring_constant": -1}})
    with pytest.raises(ValueError, match="expected a mapping"):
        pfl.body_regions({"hand": {"stiffness": 1}})


def test_bad_arguments():
    model, *_ = rp_arm()
    with pytest.raises(ValueError, match="direction must be a non-zero"):
        pfl.reflected_mass(model, [0, 0.1], "link2", [0, 0, 0])
    with pytest.raises(ValueError, match="offset must be 3 finite numbers"):
        pfl.reflected_mass(model, [0, 0.1], "link2", [1, 0, 0], offset=(1, 2))
    with pytest.raises(KeyError, match="unknown frame 'nope'"):
        pfl.SpeedScaling(model, [("nope",)], pfl.BODY_REGIONS)
    with pytest.raises(ValueError, match="dt must be"):
        pfl.SpeedScaling(model, [("link2",)], [pfl.BODY_REGIONS["hand"]]).update(
            [0, 0], [1, 0], 0.0)


def scaling_case(**options):
    """The RP arm, its tip the contact point, against the chest."""
    model, L1, L2, *_ = rp_arm()
    point = pfl.ContactPoint("link2", (L2, 0.0, 0.0))
    return model, pfl.SpeedScaling(model, [point], [pfl.BODY_REGIONS["chest"]], **options)


def test_speed_scaling_slow_motion_is_not_scaled():
    model, scaling = scaling_case()
    q, v = np.array([0.3, 0.2]), np.array([0.5, 0.1])   # tip at ~0.6 m/s
    assert scaling.update(q, v, 0.01) == 1.0
    status, = scaling.points
    assert status.speed < status.permissible_speed
    J = pfl.point_jacobian(model, q, "link2", (0.5, 0, 0))
    assert_close(status.speed, np.linalg.norm(J @ v), 1e-12)
    assert_close(status.reflected_mass, pfl.reflected_mass(model, q, "link2", J @ v,
                                                           (0.5, 0, 0)), 1e-12)
    assert status.region == "chest"
    rest = pfl.SpeedScaling(model, [("link2",)], pfl.BODY_REGIONS)
    assert rest.update(q, np.zeros(2), 0.01) == 1.0 and rest.points[0].region is None


def test_speed_scaling_converges_rate_limited_with_hysteresis():
    model, scaling = scaling_case(rise_rate=0.5, fall_rate=5.0, hysteresis=0.05)
    q, fast = np.array([0.3, 0.2]), np.array([4.0, 0.5])
    target = scaling.target(q, fast)
    assert 0.1 < target < 0.5
    dt, history = 0.01, []
    for _ in range(100):
        history.append(scaling.update(q, fast, dt))
    assert np.all(np.diff([1.0] + history) >= -5.0 * dt - 1e-12)   # fall rate
    assert history[-1] == pytest.approx(target, rel=1e-12)
    status, = scaling.points
    assert history[-1] * status.speed <= status.permissible_speed * (1 + 1e-12)
    # a slightly slower nominal motion: within the hysteresis band s holds
    slower = fast * 0.97
    assert scaling.target(q, slower) < target + 0.05
    assert scaling.update(q, slower, dt) == history[-1]
    # much slower: s rises at the rise rate, back to 1
    s = [scaling.update(q, fast * 0.1, dt) for _ in range(300)]
    assert np.max(np.diff([history[-1]] + s)) == pytest.approx(0.5 * dt, rel=1e-9)
    assert s[-1] == 1.0


def test_speed_scaling_follows_a_slowly_rising_target_without_steps():
    """Once rising, s follows a target rising slower than rise_rate every step (no staircase).

    Before the latch, s stopped one hysteresis band below such a target and climbed it in
    single rise_rate steps with pauses between: ṡ (and the scaled q̈) chattered.
    """
    model, scaling = scaling_case(rise_rate=1.0, fall_rate=20.0, hysteresis=0.02)
    q, fast = np.array([0.3, 0.2]), np.array([4.0, 0.5])
    dt = 1e-3
    for _ in range(200):
        scaling.update(q, fast, dt)
    low = scaling.s
    assert low == pytest.approx(scaling.target(q, fast), rel=1e-12)
    # the nominal speed falls by 0.01 %/step: the target rises ~0.1/s, slower than rise_rate
    s = [scaling.update(q, fast / (1 + 1e-4) ** k, dt) for k in range(1, 1000)]
    targets = [low * (1 + 1e-4) ** k for k in range(1, 1000)]
    steps = np.diff([low] + s)
    start = np.argmax(steps > 0)       # rising starts once the target is a band above s
    assert targets[start] > low + 0.02 - 1e-9
    assert np.all(steps[start:] > 0)   # then every step
    assert s[-1] == pytest.approx(targets[-1], rel=1e-9)   # caught up: on the target


def test_scaled_clock_chain_rule():
    """q(t) = q_d(tau(t)), dtau/dt = s(t): finite differences of q(t) match the clock's q', q''."""
    traj = JointTrajectory([0.0, 1.0, 2.0], [[0.0, 0.0], [1.0, -0.5], [0.2, 0.4]])
    dt = 1e-4
    clock = pfl.ScaledClock()
    qs, samples = [], []
    for k in range(12000):
        t = k * dt
        s = 0.6 + 0.3 * np.sin(3 * t)
        clock.advance(s, dt)
        q, v, a = clock.sample(traj)
        qs.append(q)
        samples.append((v, a))
    qs = np.array(qs)
    for k in (3000, 7000, 11000):
        v_fd = (qs[k + 1] - qs[k - 1]) / (2 * dt)
        a_fd = (qs[k + 1] - 2 * qs[k] + qs[k - 1]) / dt**2
        assert_close(samples[k][0], v_fd, 1e-3)
        assert_close(samples[k][1], a_fd, 1e-2)


def simulate(model, traj, scaling, region, point, duration, dt=1e-3):
    """Computed torque on the exact model, forward dynamics, semi-implicit Euler.

    Returns per step (speed of the point, its v_max, mu v^2 / 2) at the measured state, and the
    final q.
    """
    control = ComputedTorque(model, 400.0, 40.0)
    clock = pfl.ScaledClock()
    q, v = traj.sample(0.0)[0], np.zeros(model.nv)
    log = []
    for _ in range(int(duration / dt)):
        q_d, v_nominal, _ = traj.sample(clock.tau)
        s = scaling.update(q_d, v_nominal, dt) if scaling else 1.0
        clock.advance(s, dt)
        q_d, v_d, a_d = clock.sample(traj)
        tau = control(q, v, q_d, v_d, a_d)
        v = v + dt * rd.forward_dynamics(model, q, v, tau)
        q = q + dt * v
        velocity = pfl.point_jacobian(model, q, point.frame, point.offset) @ v
        speed = np.linalg.norm(velocity)
        if speed > 1e-3:
            m_R = pfl.reflected_mass(model, q, point.frame, velocity, point.offset)
            mu = pfl.reduced_mass(m_R, region.effective_mass)
            log.append((speed, pfl.permissible_speed(m_R, region), mu * speed**2 / 2))
    return np.array(log), q


def test_closed_loop_speed_scaling_panda_hand():
    """A Panda with a 3 kg payload swings its tool tip past 1.5 m/s; against the hand.

    Scaled, the tip's measured speed stays <= v_max (+2 %) and the energy mu v^2 / 2 under the
    region's F_T^2 / (2 k); unscaled, both are exceeded.
    """
    model = rd.with_payload(rd.load_urdf(rd.robot_urdf("panda"), "panda_link0",
                                         "panda_hand_tcp"), 3.0, (0, 0, 0.05))
    hand = pfl.BODY_REGIONS["hand"]
    point = pfl.ContactPoint("panda_hand_tcp", (0.0, 0.0, 0.05))
    q0 = np.array([-1.2, -0.3, 0.0, -2.0, 0.0, 1.8, 0.8])
    q1 = np.array([1.2, 0.3, 0.0, -1.6, 0.0, 2.0, 0.8])
    traj = JointTrajectory([0.0, 1.4], [q0, q1], np.zeros((2, 7)), np.zeros((2, 7)))
    scaling = pfl.SpeedScaling(model, [point], [hand])
    limited, q_end = simulate(model, traj, scaling, hand, point, 3.0)
    free, _ = simulate(model, traj, None, hand, point, 1.6)
    assert_close(q_end, q1, 1e-3)   # the scaled motion got there
    speed, v_max, energy = free.T
    assert speed.max() > 1.5 and np.any(speed > v_max * 1.02)
    assert energy.max() > hand.energy_limit * 1.02**2
    speed, v_max, energy = limited.T
    assert np.all(speed <= v_max * 1.02), (speed / v_max).max()
    assert np.all(energy <= hand.energy_limit * 1.02**2)
    assert speed.max() > 0.9 * v_max.min()   # slowed, not stopped


@pytest.mark.parametrize("name", ["hand", "chest", "thigh_knee", "upper_arm_elbow", "neck"])
@pytest.mark.parametrize("m_R", [0.7, 4.7, 30.0])
def test_contact_force_per_speed_against_an_ode_solver(name, m_R):
    region = pfl.BODY_REGIONS[name]
    mu = pfl.reduced_mass(m_R, region.effective_mass)
    T0 = math.pi * math.sqrt(mu / region.spring_constant)   # the free contact's duration
    # no drive: the standard's v sqrt(mu k), which the solver confirms
    assert pfl.contact_force_per_speed(m_R, region) == pytest.approx(
        math.sqrt(mu * region.spring_constant), rel=1e-12)
    assert two_mass_peak(m_R, region, 0.0, 0.0, 4 * T0) == pytest.approx(
        math.sqrt(mu * region.spring_constant), rel=1e-4)
    for drive in (pfl.Drive(400.0, 40.0), pfl.Drive(100.0, 5.0),
                  pfl.Drive(stiffness=1000.0, damping_ratio=1.0)):
        K, D = drive.gains(m_R)
        assert D == pytest.approx(m_R * drive.kd + 2 * drive.damping_ratio * math.sqrt(
            m_R * drive.stiffness))
        exact = two_mass_peak(m_R, region, K, D, 4 * T0)
        assert pfl.contact_force_per_speed(m_R, region, drive) == pytest.approx(exact, rel=1e-4)
        factor = pfl.drive_factor(m_R, region, drive)
        assert factor == pytest.approx(exact / math.sqrt(mu * region.spring_constant), rel=2e-3)
        assert factor >= 1.0
        # v_max with the drive: the speed whose driven first contact peaks at F_T
        v_max = pfl.permissible_speed(m_R, region, drive)
        assert v_max * exact == pytest.approx(region.transient_force, rel=2e-3)


def test_the_drive_adds_force_chest_worked():
    """Chest, 4.7 kg, computed torque's default 400/s², 40/s: the pull adds ~12 %.

    The free v sqrt(mu k) is 324.3 N per m/s; the controller, still pulling towards its
    reference, adds ~12 % (the rig in MuJoCo saw 310.9 N at the free-mass v_max, +11 %:
    test_pfl_contact_mujoco).
    """
    chest = pfl.BODY_REGIONS["chest"]
    assert pfl.contact_force_per_speed(4.7, chest) == pytest.approx(324.26, rel=1e-4)
    assert pfl.drive_factor(4.7, chest, pfl.Drive(400.0, 40.0)) == pytest.approx(1.118, abs=2e-3)
    assert pfl.drive_factor(math.inf, chest, pfl.Drive(400.0, 40.0)) == 1.0
    assert pfl.permissible_speed(4.7, chest, pfl.FREE) == pfl.permissible_speed(4.7, chest)
    for bad in (dict(kp=-1.0), dict(kd=math.nan), dict(stiffness=math.inf)):
        with pytest.raises(ValueError, match="Drive"):
            pfl.Drive(**bad)
    model = rd.load_urdf(rd.robot_urdf("ur5e"), "base_link", "tool0")
    with pytest.raises(ValueError, match="drive must be a Drive"):
        pfl.SpeedScaling(model, [pfl.ContactPoint("tool0")], [chest], drive=(400.0, 40.0))
