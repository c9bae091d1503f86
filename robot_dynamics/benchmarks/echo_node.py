"""The reference of the node benchmark: a node that answers every JointState with a constant.

    python -m robot_dynamics.benchmarks.echo_node [raw] [--ros-args ...]

It subscribes to ``joint_states`` (best effort, depth 1, as dynamics_controller does) and
publishes a constant std_msgs/Float64MultiArray of 7 zeros on ``effort_controller/commands``
for each state; with ``raw`` the subscription hands over the serialized bytes and the reply is
published pre-serialized. It runs like the package's nodes
(``robot_dynamics.nodes.common.process.main``: the events executor where available) and logs
'ready: ...' once its topics exist.
"""
import sys

from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from robot_dynamics.nodes.common.cdr import Float64MultiArrayWriter
from robot_dynamics.nodes.common.joint_states import COMMAND_QOS, state_qos
from robot_dynamics.nodes.common.process import main as run_node

JOINTS = 7


class Echo(Node):
    """Answer each joint state with the same Float64MultiArray message."""

    NAME, RAW = 'echo', False

    def __init__(self):
        super().__init__(self.NAME)
        self.reply = self.make_reply()
        self.publisher = self.create_publisher(Float64MultiArray, 'effort_controller/commands',
                                               COMMAND_QOS)
        self.create_subscription(JointState, 'joint_states', self.on_joint_state,
                                 state_qos('best_effort', 1), raw=self.RAW)
        self.get_logger().info(f'ready: {"raw " if self.RAW else ""}echo')

    def make_reply(self):
        return Float64MultiArray(data=[0.0] * JOINTS)

    def on_joint_state(self, msg):
        self.publisher.publish(self.reply)

    def spin(self, executor, stopped):
        """Process callbacks until stopped() (checked at least every 0.1 s)."""
        while not stopped():
            executor.spin_once(timeout_sec=0.1)


class RawEcho(Echo):
    """The same on serialized messages: raw subscription, pre-serialized reply."""

    NAME, RAW = 'raw_echo', True

    def make_reply(self):
        return Float64MultiArrayWriter(JOINTS).serialized()


if __name__ == '__main__':
    raise SystemExit(run_node(RawEcho if sys.argv[1:2] == ['raw'] else Echo))
