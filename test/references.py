"""Independent references several test folders compare against (no robot_dynamics import).

``reference_path``: a trajectory's q, q̇, q̈ from scipy's splines or closed-form quintics;
``two_mass_peak``: the contact force of ISO/TS 15066's driven two-mass model by an ODE solver.
"""
import numpy as np
from scipy.integrate import solve_ivp
from scipy.interpolate import CubicSpline


def reference_path(times, positions, at_rest, t):
    """Independent q, q̇, q̈ at t: scipy's clamped spline, or smoothstep quintics between rests."""
    if not at_rest:
        spline = CubicSpline(times, positions, bc_type='clamped')
        return spline(t), spline(t, 1), spline(t, 2)
    k = np.clip(np.searchsorted(times, t, side='right') - 1, 0, len(times) - 2)
    h = (times[k + 1] - times[k])[:, None]
    s = (t[:, None] - times[k][:, None]) / h
    dq = positions[k + 1] - positions[k]
    return (positions[k] + dq * (10 * s**3 - 15 * s**4 + 6 * s**5),
            dq * (30 * s**2 - 60 * s**3 + 30 * s**4) / h,
            dq * (60 * s - 180 * s**2 + 120 * s**3) / h**2)


def two_mass_peak(m_R, region, K, D, horizon):
    """The peak spring force per unit speed of the driven two-mass model, by scipy's solve_ivp.

    m_R ẍ_R = K (t - x_R) + D (1 - ẋ_R) - F, m_H ẍ_H = F, F = k max(0, x_R - x_H), v = 1;
    the peak over the first contact (until F returns to 0), at most ``horizon`` s.
    """
    k, m_H = region.spring_constant, region.effective_mass

    def rates(t, y):
        force = k * max(0.0, y[0] - y[2])
        return [y[1], (K * (t - y[0]) + D * (1.0 - y[1]) - force) / m_R, y[3], force / m_H]

    def separated(t, y):
        return y[0] - y[2] + (t < 1e-4)   # not at the start, where the spring is at rest
    separated.terminal, separated.direction = True, -1
    sol = solve_ivp(rates, (0.0, horizon), [0.0, 1.0, 0.0, 0.0], events=separated,
                    max_step=horizon / 4000, rtol=1e-10, atol=1e-13)
    return k * np.max(sol.y[0] - sol.y[2])
