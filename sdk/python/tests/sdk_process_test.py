"""The SDK over a real Unix socket: tests/example_plugin.py runs as a subprocess and this test is
the host: Describe, health, a multiplexed Reconcile stream (answers in completion order,
cancel notices, exceptions), SIGTERM during in-flight work, and bad addresses."""

import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import unittest

import grpc

from ctrlhost_sdk._proto import HealthCheckRequest, HealthCheckResponse, HealthStub, pb, pb_grpc
from tools.internal import bazel_unittest

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", "."), "ctrlhost")
PLUGIN = os.path.join(RUNFILES, "sdk", "python", "example_plugin")
TIMEOUT = 30
MAX = 64 << 20
SERVICE = "ctrlhost.plugin.v1alpha1.ControllerPluginService"


def call(request_id, **spec):
    obj = {"apiVersion": "example.com/v1", "kind": "Echo",
           "metadata": {"name": "e%d" % request_id, "namespace": "default"}, "spec": spec}
    return pb.ReconcileRequest(request_id=request_id, reconcile=pb.ReconcileCall(
        controller="echo", namespace="default", name="e%d" % request_id,
        object=json.dumps(obj).encode()))


class Stream:
    """A host-side Reconcile stream fed from a queue."""

    def __init__(self, stub):
        self._q = queue.Queue()
        self._responses = stub.Reconcile(iter(self._q.get, None), timeout=TIMEOUT)

    def send(self, request):
        self._q.put(request)

    def recv(self):
        return next(self._responses)

    def close(self):
        self._q.put(None)
        return list(self._responses)


class PluginProcessTest(unittest.TestCase):
    def setUp(self):
        base = os.environ.get("TEST_TMPDIR", "")
        self.dir = tempfile.mkdtemp(prefix="py-", dir=base if base and len(base) < 70 else None)
        self.sock = os.path.join(self.dir, "plugin.sock")
        self.stderr = open(os.path.join(self.dir, "stderr.log"), "w+")
        self.proc = None
        self.channel = None

    def tearDown(self):
        if self.channel is not None:
            self.channel.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(TIMEOUT)
        self.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def start(self, **env):
        full = dict(os.environ, CTRLHOST_PLUGIN_ADDRESS="unix://" + self.sock, **env)
        self.proc = subprocess.Popen([PLUGIN], env=full, stderr=self.stderr)
        opts = [("grpc.max_receive_message_length", MAX), ("grpc.max_send_message_length", MAX)]
        self.channel = grpc.insecure_channel("unix:" + self.sock, options=opts)
        grpc.channel_ready_future(self.channel).result(timeout=TIMEOUT)
        self.stub = pb_grpc.ControllerPluginServiceStub(self.channel)
        self.health = HealthStub(self.channel)

    def gate(self, name):
        return os.path.join(self.dir, name)

    def log(self):
        self.stderr.flush()
        self.stderr.seek(0)
        return self.stderr.read()

    def test_describe_and_health(self):
        self.start()
        H = HealthCheckResponse
        for service in ("", SERVICE):
            resp = self.health.Check(HealthCheckRequest(service=service), timeout=TIMEOUT)
            self.assertEqual(resp.status, H.SERVING)
        with self.assertRaises(grpc.RpcError) as e:
            self.health.Check(HealthCheckRequest(service="other"), timeout=TIMEOUT)
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)

        resp = self.stub.Describe(pb.DescribeRequest(
            protocol_versions=["v1alpha1"], capabilities=[pb.CAPABILITY_CANCELLATION],
            host_version="test", max_message_bytes=MAX, max_in_flight=64,
            instance_name="echo-1"), timeout=TIMEOUT)
        self.assertEqual((resp.protocol_version, resp.plugin_name), ("v1alpha1", "echo"))
        self.assertEqual(resp.controllers[0].primary.kind, "Echo")
        self.assertEqual(resp.controllers[0].max_concurrent_reconciles, 8)
        with self.assertRaises(grpc.RpcError) as e:
            self.stub.Describe(pb.DescribeRequest(protocol_versions=["v9"]), timeout=TIMEOUT)
        self.assertEqual(e.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        self.assertIn("msg=\"plugin described\" plugin=echo", self.log())

    def test_stream_answers_in_completion_order_and_honours_cancel(self):
        self.start()
        stream = Stream(self.stub)
        stream.send(call(1, gate=self.gate("one"), message="first"))
        stream.send(call(2, message="second"))
        second = stream.recv()
        self.assertEqual(second.request_id, 2)  # 1 is still blocked
        self.assertEqual(json.loads(second.status), {"echo": "second"})

        stream.send(call(3, gate=self.gate("never")))
        stream.send(pb.ReconcileRequest(request_id=3, cancel=pb.CancelNotice(reason="deadline")))
        stream.send(call(4, **{"raise": "kaboom"}))
        failed = stream.recv()
        self.assertEqual(failed.request_id, 4)
        self.assertEqual(failed.error.kind, pb.ERROR_KIND_RETRYABLE)
        self.assertIn("RuntimeError: kaboom", failed.error.message)

        stream.send(pb.ReconcileRequest(request_id=5))  # no payload: ignored
        stream.send(pb.ReconcileRequest(request_id=6, reconcile=pb.ReconcileCall(
            controller="echo", object=b"{not json")))
        stream.send(pb.ReconcileRequest(request_id=7, reconcile=pb.ReconcileCall(controller="x")))
        got = {stream.recv().request_id: None for _ in range(2)}
        self.assertEqual(set(got), {6, 7})
        open(self.gate("one"), "w").close()
        first = stream.recv()
        self.assertEqual(first.request_id, 1)
        self.assertEqual(json.loads(first.status), {"echo": "first"})
        self.assertEqual(stream.close(), [])  # the cancelled 3 is never answered
        self.assertEqual(self.proc.poll(), None)  # nothing crashed

    def test_an_oversized_answer_fails_only_its_request(self):
        self.start(MAX_MESSAGE_BYTES="100000")
        stream = Stream(self.stub)
        stream.send(call(1, gate=self.gate("slow"), message="kept"))
        stream.send(call(2, pad=200000))
        huge = stream.recv()
        self.assertEqual(huge.request_id, 2)
        self.assertEqual(huge.error.kind, pb.ERROR_KIND_TERMINAL)
        self.assertEqual(huge.error.reason, "ResponseTooLarge")
        self.assertRegex(huge.error.message,
                         r"^response of 2000\d\d bytes exceeds the message limit of 100000$")
        # The stream goes on: the request in flight and a new one are answered.
        stream.send(call(3, message="after"))
        self.assertEqual(json.loads(stream.recv().status), {"echo": "after"})
        open(self.gate("slow"), "w").close()
        self.assertEqual(json.loads(stream.recv().status), {"echo": "kept"})
        self.assertEqual(stream.close(), [])

    def test_sigterm_finishes_in_flight_work_then_exits_0(self):
        self.start()
        stream = Stream(self.stub)
        stream.send(call(1, gate=self.gate("release"), message="late"))
        stream.send(call(2))
        self.assertEqual(stream.recv().request_id, 2)  # so 1 is in flight

        watch = self.health.Watch(HealthCheckRequest(service=SERVICE), timeout=TIMEOUT)
        self.assertEqual(next(watch).status, HealthCheckResponse.SERVING)
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(next(watch).status, HealthCheckResponse.NOT_SERVING)

        stream.send(call(3))
        refused = stream.recv()
        self.assertEqual(refused.request_id, 3)
        self.assertEqual(refused.error.kind, pb.ERROR_KIND_RETRYABLE)
        self.assertEqual(refused.error.message, "plugin shutting down")

        open(self.gate("release"), "w").close()
        done = stream.recv()
        self.assertEqual(done.request_id, 1)
        self.assertEqual(json.loads(done.status), {"echo": "late"})
        self.assertEqual(self.proc.wait(TIMEOUT), 0)
        self.assertIn("msg=\"plugin stopped\" plugin=echo abandoned=0", self.log())

    def test_drain_is_bounded(self):
        self.start(DRAIN_SECONDS="0.2")
        stream = Stream(self.stub)
        stream.send(call(1, gate=self.gate("never")))
        stream.send(call(2))
        self.assertEqual(stream.recv().request_id, 2)
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(TIMEOUT), 0)
        self.assertIn("abandoned=1", self.log())

    def test_bad_address_exits_2(self):
        for value in (None, "", "unix://", "nowhere"):
            env = dict(os.environ)
            env.pop("CTRLHOST_PLUGIN_ADDRESS", None)
            if value is not None:
                env["CTRLHOST_PLUGIN_ADDRESS"] = value
            with self.subTest(value=value):
                proc = subprocess.run([PLUGIN], env=env, capture_output=True, text=True,
                                      timeout=TIMEOUT)
                self.assertEqual(proc.returncode, 2)
                self.assertIn("CTRLHOST_PLUGIN_ADDRESS", proc.stderr)


if __name__ == "__main__":
    bazel_unittest.main()
