"""Limits only a configuration can raise: the controller's ceiling on run-time parameter changes.

Any node on the domain can call ``set_parameters``. At run time a change may lower the command
limits (``effort_limits``, ``max_effort_rate``), the task-space speed limits
(``cartesian.max_velocity``, ``cartesian.max_error``), the trajectories' acceleration limits
and power and force limiting, but never raise any of them past its value at the lifecycle's
configure. PFL on at configure stays on, with its contact points and body regions (they set its
speed limits) fixed until the next configure; PFL off at configure set no ceiling of its own, so
it may be turned on, set up and off again at run time. Raising takes a reconfigure (cleanup,
configure), which the lifecycle services, not the parameter services, do.
"""
import numpy as np

from ..common.parameters import ConfigError

VECTORS = ('cartesian.max_velocity', 'cartesian.max_error')
FIXED = ('pfl.frames', 'pfl.offsets', 'pfl.body_regions', 'pfl.region_overrides')
RAISE = 'may only be lowered at run time; a higher value takes a reconfigure (lifecycle ' \
    'cleanup and configure)'


def acceleration_limits(values, n):
    """trajectory.acceleration_limits per joint, inf where unchecked (empty: every joint)."""
    limits = values['trajectory.acceleration_limits']
    return np.asarray(limits, float) if len(limits) else np.full(n, np.inf)


def shown(x):
    return np.asarray(x, float).tolist()


class Ceiling:
    """The limits of the configuration made at configure; ``check`` refuses higher ones."""

    def __init__(self, config, values):
        self.effort_limits, self.max_effort_rate = config.effort_limits, config.max_effort_rate
        n = len(config.effort_limits)
        self.vectors = {name: np.asarray(values[name], float) for name in VECTORS}
        self.vectors['trajectory.acceleration_limits'] = acceleration_limits(values, n)
        self.pfl = bool(values['pfl.enable'])
        self.fixed = {name: values[name] for name in FIXED}

    def check(self, config, values):
        """ConfigError naming the first limit the Config (of ``values``) raises."""
        if np.any(config.effort_limits > self.effort_limits):
            raise ConfigError(f'effort_limits {RAISE}: at configure '
                              f'{shown(self.effort_limits)} (model order), asked '
                              f'{shown(config.effort_limits)}')
        if config.max_effort_rate > self.max_effort_rate:
            raise ConfigError(f'max_effort_rate {RAISE}: at configure {self.max_effort_rate}, '
                              f'asked {config.max_effort_rate}')
        n = len(self.effort_limits)
        for name, ceiling in self.vectors.items():
            asked = acceleration_limits(values, n) if name.startswith('trajectory.') \
                else np.asarray(values[name], float)
            if asked.shape == ceiling.shape and np.any(asked > ceiling):
                raise ConfigError(f'{name} {RAISE}: at configure {shown(ceiling)}, asked '
                                  f'{shown(asked)}')
        if not self.pfl:
            return
        if not values['pfl.enable']:
            raise ConfigError('pfl.enable was on at configure: it stays on until the next '
                              'configure (lifecycle cleanup and configure)')
        for name, value in self.fixed.items():
            if list(np.atleast_1d(values[name])) != list(np.atleast_1d(value)):
                raise ConfigError(f'{name} sets the PFL speed limits: fixed until the next '
                                  'configure (lifecycle cleanup and configure)')
