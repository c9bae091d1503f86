"""The loopback DDS profile (config/fastdds_loopback.xml) lets every participant find every other.

Discovery there is by unicast to the initial peer 127.0.0.1, whose ports Fast DDS derives from
participant ids. With its default range (ids 0..4) the sixth and seventh participants of a domain
each find the first five but never each other: a two-arm bring-up and its probe are seven. Nine
processes here, each publishing on a topic of its own and listening to all the others.
"""
import subprocess
import sys
import tempfile

import pytest

from robot_dynamics import run

pytestmark = pytest.mark.dds   # starts node processes (robot_dynamics.run or a script)

PARTICIPANTS = 9

PARTICIPANT = r'''
import sys, time
import rclpy
from std_msgs.msg import String
i, n = int(sys.argv[1]), int(sys.argv[2])
rclpy.init()
node = rclpy.create_node(f'participant_{i}')
publisher = node.create_publisher(String, f'topic_{i}', 10)
heard = set()
subscriptions = [node.create_subscription(String, f'topic_{j}', lambda _, j=j: heard.add(j), 10)
                 for j in range(n) if j != i]
end = time.monotonic() + 60.0
while time.monotonic() < end:
    publisher.publish(String(data='here'))
    rclpy.spin_once(node, timeout_sec=0.05)
    if len(heard) == n - 1:   # heard them all: 2 s more for those still listening for this one
        end = min(end, time.monotonic() + 2.0)
print(len(heard), flush=True)
'''


def test_nine_participants_all_discover_each_other():
    domain, lock = run.allocate_domain_id()
    try:
        with tempfile.TemporaryDirectory() as work:
            env = run.loopback_environment(domain, work)
            processes = [subprocess.Popen([sys.executable, '-c', PARTICIPANT, str(i),
                                           str(PARTICIPANTS)], env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True)
                         for i in range(PARTICIPANTS)]
            outputs = [p.communicate(timeout=120)[0] for p in processes]
    finally:
        lock.close()
    heard = [out.split()[-1] if out.split() else '' for out in outputs]   # how many each heard
    assert heard == [str(PARTICIPANTS - 1)] * PARTICIPANTS, outputs
