"""The task-space modes' bound follows the loop's delay: the stiffness asked for, where it can be.

The simulated Panda (lock step, 1 kHz, the controller on /clock) in cartesian_impedance with
800 N/m along each axis and 300 N m/rad about each: at the fixed 50 rad/s bound of before, the
fast wrist modes this stiffness makes took the x stiffness down with them (a 20 N push moved the
tip about 30.6 mm, not 25). With the bound at 0.65 / (2 T) for the delay T the controller
measures (states 0-1 ms late at 1 kHz), a 20 N push along x moves the tip F/k within 5 %.
With the states 15 ms late (the simulator's ``faults.delay``), the bound drops to about
20 rad/s: the controller logs the lowered axes (asked, applied) and /diagnostics lists them.
"""
import numpy as np

from robot_dynamics.nodes.common.joint_states import wrench_message
from test_timing_fault_stability import Arm

STIFFNESS = [800.0, 800.0, 800.0, 300.0, 300.0, 300.0]   # translation first, as the parameter
PUSH = 20.0   # N along x of the base


def values(status):
    return {kv.key: kv.value for kv in status.values}


def bring_up(ros, faults):
    arm = Arm(ros, 'panda', 'cartesian_impedance', faults=faults,
              controller={'cartesian.stiffness': STIFFNESS})
    arm.launch.ready()
    assert arm.commands.wait(1, timeout=30), arm.launch.logs()
    arm.probe.stop_recording(arm.commands)
    arm.probe.wait_for_subscribers(arm.wrench)
    return arm


def test_a_push_at_1khz_moves_the_tip_f_over_k(ros):
    arm = bring_up(ros, {})
    try:
        arm.wait(3.0)   # two /diagnostics reports: the delay measured, the bound set from it
        rest = arm.tip_at(arm.now())
        pushed = arm.now()
        arm.wrench.publish(wrench_message(arm.model.base, [0, 0, 0, PUSH, 0, 0]))
        moved = arm.tip_at(pushed + 2.0) - rest
        arm.wrench.publish(wrench_message(arm.model.base, [0, 0, 0, 0, 0, 0]))
        status = values(arm.controller_status())
        expected = PUSH / STIFFNESS[0]
        assert abs(moved[0] - expected) < 0.05 * expected, \
            f'moved {1e3 * moved[0]:.2f} mm along x, F/k {1e3 * expected:.1f} mm; {status}'
        assert status['task_stiffness_lowered'] == 'none', status
        assert float(status['task_max_frequency']) > 100.0, status
        print(f'moved {1e3 * moved[0]:.2f} mm (F/k {1e3 * expected:.1f}); {status}')
    finally:
        arm.close()


def test_late_states_lower_the_mode_and_say_so(ros):
    arm = bring_up(ros, {'faults.delay': 0.015})
    try:
        arm.wait(3.0)
        lowered = [values(s) for _, s in arm.controller_reports()
                   if 'x' in values(s).get('task_stiffness_lowered', '').split()]
        assert lowered, arm.launch.log('dynamics_controller')
        bound = float(lowered[-1]['task_max_frequency'])
        assert 15.0 < bound < 25.0, lowered[-1]   # 0.65 / (2 (15 + 1.5) ms) = 19.7 rad/s
        applied = np.array(lowered[-1]['task_stiffness_applied'].split(), dtype=float)
        assert applied[0] < 0.99 * STIFFNESS[0], lowered[-1]
        log = arm.launch.log('dynamics_controller')
        assert 'stiffness lowered by the' in log and 'x: asked 800, applied' in log, log
    finally:
        arm.close()
