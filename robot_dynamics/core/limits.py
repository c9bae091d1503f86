"""An effort command's limits in one compiled pass: rate limit, then clamp (a controller's cycle).

``limit_command`` does for a whole vector what ``np.clip`` twice and the checks around it do,
without a numpy call per step: τ moves from the previous command by at most ``step`` per joint
(the rate limit: step = rate · Δt), then is clipped to ±limits (``clamp_effort``'s rule).
"""
from ._jit import jit

NON_FINITE = -1                  # τ has a NaN or Inf: nothing written
RATE_LIMITED, CLAMPED = 1, 2     # bits of the status: some joint was rate limited, clamped


@jit
def limit_command(tau, previous, step, limits, order, out, clamped):
    """Rate limit and clamp τ; the status (NON_FINITE, or the bits RATE_LIMITED | CLAMPED).

    previous (model order) becomes the command: clip(clip(τ, previous ± step), ±limits);
    out[k] = command[order[k]] (the order of the published vector); clamped[i] whether joint i
    hit its limit. step = inf: no rate limit (the first command). Nothing is written when τ
    is not finite.
    """
    for i in range(tau.size):
        if not tau[i] - tau[i] == 0.0:
            return NON_FINITE
    status = 0
    for i in range(tau.size):
        x = min(max(tau[i], previous[i] - step), previous[i] + step)
        if x != tau[i]:
            status |= RATE_LIMITED
        clamped[i] = abs(x) > limits[i]
        if clamped[i]:
            status |= CLAMPED
        previous[i] = min(max(x, -limits[i]), limits[i])
    for k in range(order.size):
        out[k] = previous[order[k]]
    return status
