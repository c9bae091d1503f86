"""The probe: one rclpy node that watches and talks to the package's nodes from outside.

The demos, the tools that drive an arm (identification_loop, excitation_run) and the tests'
harness use it. It records topics (a ``Recorder`` each, taken by the ``Poller``'s thread, not an
executor: rclpy's SingleThreadedExecutor spends about 150 µs of CPU on each message it delivers,
a take about 35 µs, and a probe records several 1 kHz topics beside the nodes on two cores),
publishes, and calls the nodes' services, sending a request again until it is answered.
``spinning`` runs one in a thread of its own; ``ArmView`` reads a simulated arm's clock from
its recorded joint states. A wait that runs out raises TimeoutError saying what did not come.
"""
import bisect
import contextlib
import threading
import time

import numpy as np
import rclpy
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.srv import GetParameters, ListParameters, SetParameters
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy

from robot_dynamics.nodes.common.joint_states import stamp_of

# depth: what a reader holds between the poller's takes while the probe's process is held up
# (a 1 kHz topic's 1 s; an unpaced simulated arm's states come a few times faster)
RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
BEST_EFFORT = QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT)


def expect(condition, what):
    """TimeoutError(what) unless the awaited condition came true."""
    if not condition:
        raise TimeoutError(what)


class Recorder:
    """Every message received on a topic, with its receipt time (time.time())."""

    def __init__(self):
        self.messages, self.times = [], []
        self.event = threading.Condition()
        self.subscription = None

    def __call__(self, msg):
        self.extend([msg])

    def extend(self, messages):
        with self.event:
            self.messages.extend(messages)
            self.times.extend([time.time()] * len(messages))
            self.event.notify_all()

    def take(self):
        """Record what the subscription has received since the poller last looked."""
        subscription, taken = self.subscription, []
        handle, msg_type = subscription.handle, subscription.msg_type
        with handle:
            while (received := handle.take_message(msg_type, False)) is not None:
                taken.append(received[0])
        if taken:
            self.extend(taken)

    def __len__(self):
        return len(self.messages)

    def wait(self, count, timeout=5.0):
        """Block until ``count`` messages in all; returns whether they came."""
        with self.event:
            return self.event.wait_for(lambda: len(self.messages) >= count, timeout)

    def wait_for_more(self, n=1, timeout=5.0):
        return self.wait(len(self) + n, timeout)

    def last(self, timeout=10.0):
        """The newest message (waiting for a first one)."""
        expect(self.wait(1, timeout), f'no message on {self.subscription.topic_name} in '
                                      f'{timeout} s')
        return self.messages[-1]

    def wait_for_stamp(self, t, timeout=10.0):
        """Block until a message stamped at or after t (s) has arrived; returns it."""
        with self.event:
            expect(self.event.wait_for(
                lambda: self.messages and stamp_of(self.messages[-1]) >= t, timeout),
                f'no message stamped after {t} on {self.subscription.topic_name}')
            return self.messages[-1]


def window(recorder, since, until=float('inf')):
    """The recorded messages stamped in [since, until] (bisected: they arrive in order)."""
    messages = list(recorder.messages)
    first = bisect.bisect_left(messages, since, key=stamp_of)
    return messages[first:bisect.bisect_right(messages, until, key=stamp_of)]


class Poller:
    """Takes the messages of the recorders' subscriptions every PERIOD s, in a thread of its own.

    The subscriptions are on a node of its own that no executor spins.
    """

    PERIOD = 0.002   # s

    def __init__(self, name):
        self.node = rclpy.create_node(name)
        self.recorders, self.lock = [], threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def record(self, msg_type, topic, qos):
        recorder = Recorder()   # the callback rclpy asks for; no executor calls it
        recorder.subscription = self.node.create_subscription(msg_type, topic, recorder, qos)
        with self.lock:
            self.recorders.append(recorder)
        return recorder

    def run(self):
        while not self.stopped.wait(self.PERIOD):
            with self.lock:
                for recorder in self.recorders:
                    recorder.take()

    def stop_recording(self, recorder):
        """No more messages for ``recorder``; its subscription is destroyed."""
        with self.lock:
            if recorder in self.recorders:
                self.recorders.remove(recorder)
                recorder.take()
                self.node.destroy_subscription(recorder.subscription)

    def stop_all(self):
        """Stop every recorder; the topics they were on (read before their subscriptions go)."""
        with self.lock:
            left = list(self.recorders)
        topics = [r.subscription.topic_name for r in left]
        for recorder in left:
            self.stop_recording(recorder)
        return topics

    def close(self):
        self.stop_all()
        self.stopped.set()
        self.thread.join(5.0)
        self.node.destroy_node()


class Probe(Node):
    """Records topics (its poller), publishes, calls the nodes' services."""

    def __init__(self, name):
        super().__init__(name)
        self.clients_ = {}
        self.poller = Poller(f'{name}_recorder')

    def record(self, msg_type, topic, qos=RELIABLE):
        return self.poller.record(msg_type, topic, qos)

    def stop_all_recording(self):
        """Stop every recorder; the topics they were on."""
        return self.poller.stop_all()

    def clear(self):
        """Destroy what a user left: recorders (their topics returned) and clients."""
        left = self.stop_all_recording()
        for client in self.clients_.values():
            self.in_executor(self.destroy_client, client)
        self.clients_.clear()
        return left

    def stop_recording(self, *recorders):
        """No more messages for the recorders (the probe keeps up with a few 1 kHz topics)."""
        for recorder in recorders:
            self.poller.stop_recording(recorder)

    def remove_publishers(self, *publishers):
        for publisher in publishers:
            self.in_executor(self.destroy_publisher, publisher)

    def in_executor(self, function, *args, timeout=5.0):
        done = threading.Event()
        task = self.executor.create_task(function, *args)
        task.add_done_callback(lambda _: done.set())
        self.executor.wake()
        expect(done.wait(timeout), f'the executor did not run {function}')
        return task.result()

    def wait_for_subscribers(self, publisher, count=1, timeout=10.0):
        """Until ``count`` subscriptions are matched with the publisher."""
        deadline = time.monotonic() + timeout
        while publisher.get_subscription_count() < count:
            expect(time.monotonic() < deadline, f'no subscriber on {publisher.topic_name}')
            time.sleep(0.02)

    def wait_for_publishers(self, recorder, count=1, timeout=10.0):
        """Until ``count`` publishers are matched with the recorder's subscription."""
        deadline = time.monotonic() + timeout
        while recorder.subscription.get_publisher_count() < count:
            expect(time.monotonic() < deadline,
                   f'no publisher on {recorder.subscription.topic_name}')
            time.sleep(0.02)

    def until_answered(self, publisher, make_message, recorder, timeout=30.0):
        """Publish make_message() until the recorder hears an answer: matched on both sides.

        A publisher sees the subscription before the subscriber has matched the publisher, and
        what it sends until then is lost; on a loaded machine that can take seconds. The
        error says which side had matched.
        """
        count, deadline = len(recorder), time.monotonic() + timeout
        while time.monotonic() < deadline:
            publisher.publish(make_message())
            if recorder.wait(count + 1, timeout=0.05):
                return
        raise TimeoutError(
            f'no answer on {recorder.subscription.topic_name} in {timeout} s of publishing on '
            f'{publisher.topic_name}: the publisher has '
            f'{publisher.get_subscription_count()} subscriptions, the recorder '
            f'{recorder.subscription.get_publisher_count()} publishers')

    def call(self, srv_type, service, request, timeout=30.0, retry=2.0):
        """The service's response, the request sent again every ``retry`` s until ``timeout``.

        A client made for an earlier node of the same name sees the service as available while
        that node's ghost is still discovered, and a request sent before the new server has
        matched the client's response reader is lost; the parameter services are idempotent.
        Late in the whole suite a new node took 11.2 s to answer its first call (discovery
        repaired at Fast DDS's 3 s heartbeats), against milliseconds in a fresh process.
        """
        client = self.clients_.get(service)
        if client is None:
            client = self.clients_[service] = self.create_client(srv_type, service)
        expect(client.wait_for_service(timeout),
               f'service {service} not available: is its node running (and in this '
               'ROS_DOMAIN_ID)?')
        deadline = time.monotonic() + timeout
        while True:
            future = client.call_async(request)
            done = threading.Event()
            future.add_done_callback(lambda _: done.set())
            if done.wait(min(retry, max(0.0, deadline - time.monotonic()))):
                return future.result()
            client.remove_pending_request(future)
            expect(time.monotonic() < deadline, f'no answer from {service}')

    def set_parameters(self, node, values, timeout=30.0):
        """Set {name: value} one by one through the node's service; returns the results."""
        params = [Parameter(k, value=v).to_parameter_msg() for k, v in values.items()]
        return self.call(SetParameters, f'/{node}/set_parameters',
                         SetParameters.Request(parameters=params), timeout).results

    def apply_parameters(self, node, values, timeout=30.0):
        """set_parameters, and ParametersRefused naming each refused value with the reason."""
        results = self.set_parameters(node, values, timeout)
        refused = [f'{k}: {r.reason}' for k, r in zip(values, results) if not r.successful]
        if refused:
            raise ParametersRefused(f'{node} refused ' + '; '.join(refused))

    def get_parameters(self, node, *names):
        values = self.call(GetParameters, f'/{node}/get_parameters',
                           GetParameters.Request(names=list(names))).values
        return {n: Parameter.from_parameter_msg(ParameterMsg(name=n, value=v)).value
                for n, v in zip(names, values)}

    def list_parameters(self, node):
        return list(self.call(ListParameters, f'/{node}/list_parameters',
                              ListParameters.Request()).result.names)

    def close(self):
        self.poller.close()
        self.destroy_node()


class ParametersRefused(RuntimeError):
    """A node refused parameter values; the message names each with the node's reason."""


@contextlib.contextmanager
def spinning(name):
    """A Probe named ``name``, spun in a thread of its own; closed at exit (rclpy initialised)."""
    probe = Probe(name)
    executor = SingleThreadedExecutor()
    executor.add_node(probe)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        yield probe
    finally:
        executor.shutdown()
        thread.join(5.0)
        probe.close()


class ArmView:
    """A view of one simulated arm: ``self.states`` records its joint_states.

    The arm's clock is the newest state's stamp (a simulator may run slower than real time,
    so users wait on it, never on the wall clock). ``self.launch``, when set, gives the logs
    a failure shows (its ``logs()``).
    """

    states = launch = None

    def now(self):
        """Stamp of the newest joint state: the simulated arm's clock."""
        return stamp_of(self.states.last(timeout=30.0))

    def wait_until(self, t, timeout=60.0):
        """Until a state stamped ``t`` or later has been recorded."""
        deadline = time.monotonic() + timeout
        while self.now() < t:
            expect(time.monotonic() < deadline,
                   f'the simulated arm is stuck before t = {t:.3f} s\n{self.logs()}')
            time.sleep(0.01)

    def wait(self, seconds, timeout=60.0):
        """Until the arm's clock has advanced by ``seconds``."""
        self.wait_until(self.now() + seconds, timeout)

    def logs(self):
        return self.launch.logs() if self.launch is not None else ''

    def joint_arrays(self, joints, since, until=float('inf'), fields=('position',), least=1):
        """States stamped in [since, until]: (stamps, one (k, len(joints)) array per field).

        The probe may miss states on a loaded machine: at least ``least`` of them.
        """
        picked = window(self.states, since, until)
        if len(picked) < least:
            raise ValueError(f'{len(picked)} joint states in [{since}, {until}]')
        index = [list(picked[0].name).index(j) for j in joints]
        return (np.array([stamp_of(m) for m in picked]),
                *(np.array([np.asarray(getattr(m, f))[index] for m in picked]) for f in fields))
