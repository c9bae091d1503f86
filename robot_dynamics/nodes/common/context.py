"""What a feature of a node may use of the node: the context a component is built with.

A component (the task-space modes, power and force limiting, ...) gets a ``Context``, never the
node: the node's name and parameter values, its logger and clock, factories for the
component's own topics, timers, services and action servers, the node's counters, and the
newest accepted joint state. So a component cannot reach into the node, and a test builds one
without a node.
"""
import dataclasses
from typing import Any, Callable


@dataclasses.dataclass(frozen=True)
class Context:
    name: str                        # the node's name
    values: Callable[[], dict]       # the parameter values in force
    logger: Any                      # rclpy logger
    warn: Callable[[str], None]      # a warning, throttled per text
    clock: Any                       # the node's rclpy Clock (/clock under use_sim_time)
    monotonic_time: Callable[[], float]   # the node's time for intervals, s
    newest_state: Callable[[], Any]  # q of the newest accepted joint state (None: none yet)
    diagnostics: Any                 # the node's counters (Diagnostics.count)
    create_publisher: Callable
    create_subscription: Callable
    create_timer: Callable
    destroy_timer: Callable
    create_service: Callable = None
    arm: Callable[[], Any] = None             # the Arm in use (nodes.common.arm; None: no model)
    set_parameters: Callable[[list], Any] = None   # atomically, as rclpy's Node does
    # rclpy.action.ActionServer(node, *args, **kwargs) of the node (it needs the node itself)
    create_action_server: Callable = None
