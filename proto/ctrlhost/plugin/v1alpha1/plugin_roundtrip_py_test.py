"""Round trip of ctrlhost.plugin.v1alpha1 through the generated Python code and grpcio.

A plugin server on a Unix socket in a temporary directory; a host-side client that calls Describe,
then sends several reconciles and a cancel notice on one Reconcile stream. The server answers the
reconciles in reverse order; the client matches them by request_id and checks that every field
survived, including raw JSON bytes, Durations, Timestamps and enums.
"""

import concurrent.futures
import os
import shutil
import tempfile
import threading
import unittest

import grpc
from google.protobuf import duration_pb2

from ctrlhost.plugin.v1alpha1 import plugin_pb2 as pb
from ctrlhost.plugin.v1alpha1 import plugin_pb2_grpc as pb_grpc
from tools.internal import bazel_unittest

MAX_MESSAGE_BYTES = 64 << 20  # The limit the protocol documents.
TIMEOUT_SECONDS = 20


def object_json(request_id):
    return (
        '{"apiVersion":"example.com/v1","kind":"WebApp","metadata":{"name":"app-%d",'
        '"namespace":"team-a"},"spec":{"note":"caf\u00e9 \u2603"}}' % request_id
    ).encode("utf-8")


def make_reconcile(request_id):
    """The request the host would send; every field set."""
    return pb.ReconcileRequest(
        request_id=request_id,
        reconcile=pb.ReconcileCall(
            controller="webapp",
            namespace="team-a",
            name="app-%d" % request_id,
            uid="uid-%d" % request_id,
            reason=pb.REASON_CHILD_CHANGED if request_id % 2 == 0 else pb.REASON_RESYNC,
            object=object_json(request_id),
            children=[
                pb.RawObject(
                    api_version="apps/v1",
                    kind="Deployment",
                    object=b'{"kind":"Deployment","metadata":{"name":"c%d"}}' % request_id,
                )
            ],
            related_objects=[
                pb.RawObject(api_version="v1", kind="ConfigMap", object=b'{"data":{}}\x00\xff')
            ],
            finalizing=request_id == 3,
            attempt=request_id + 1,
            deadline={"seconds": 1700000000 + request_id, "nanos": 123456789},
            trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        ),
    )


def make_response(request_id, call):
    """The fake plugin's answer; every outcome set, derived from the request."""
    return pb.ReconcileResponse(
        request_id=request_id,
        desired_objects=[
            b'{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"%s"}}'
            % call.name.encode()
        ],
        patches=[
            pb.Patch(
                target=pb.PATCH_TARGET_OWNED,
                api_version="v1",
                kind="ConfigMap",
                name="cm-%d" % request_id,
                type=pb.PATCH_TYPE_JSON_PATCH,
                patch=b'[{"op":"test","path":"/data/a","value":"1"}]',
                resource_version=str(1000 + request_id),
            ),
            pb.Patch(
                target=pb.PATCH_TARGET_PRIMARY_STATUS,
                type=pb.PATCH_TYPE_MERGE_PATCH,
                patch=b'{"status":{"phase":"Ready"}}',
            ),
        ],
        status=b'{"observedReplicas":%d}' % request_id,
        conditions=[
            pb.Condition(
                type="Ready",
                status=pb.CONDITION_STATUS_TRUE,
                reason="AllGood",
                message="ready: " + call.name,
            )
        ],
        events=[pb.Event(type=pb.EVENT_TYPE_NORMAL, reason="Scaled", message="scaled")],
        requeue_after=duration_pb2.Duration(seconds=request_id * 60, nanos=250000000),
        error=pb.Error(
            message="retry %d" % request_id,
            kind=pb.ERROR_KIND_TERMINAL if request_id % 2 == 0 else pb.ERROR_KIND_RETRYABLE,
        ),
        finalized=call.finalizing,
    )


class FakePlugin(pb_grpc.ControllerPluginServiceServicer):
    """Records what it receives; answers a stream's reconciles in reverse order once the host
    half-closes. Thread-safe: grpcio calls it from its pool; `_lock` guards the records."""

    def __init__(self):
        self._lock = threading.Lock()
        self.describe_request = None
        self.stream_requests = []

    def Describe(self, request, context):
        with self._lock:
            self.describe_request = request
        return pb.DescribeResponse(
            protocol_version="v1alpha1",
            plugin_name="webapp-operator",
            plugin_version="1.4.0",
            capabilities=[pb.CAPABILITY_CONDITIONS, pb.CAPABILITY_RELATED_OBJECTS],
            controllers=[
                pb.ControllerSpec(
                    name="webapp",
                    primary=pb.GroupVersionKind(group="example.com", version="v1", kind="WebApp"),
                    owns=[
                        pb.OwnedKind(
                            kind=pb.GroupVersionKind(group="apps", version="v1", kind="Deployment")
                        )
                    ],
                    watches=[
                        pb.WatchedKind(
                            kind=pb.GroupVersionKind(version="v1", kind="Pod"),
                            label=pb.LabelMapping(primary_selector_path="spec.selector"),
                        ),
                        pb.WatchedKind(
                            kind=pb.GroupVersionKind(version="v1", kind="ConfigMap"),
                            enqueue_all=pb.EnqueueAllMapping(same_namespace_only=True),
                            include_in_requests=True,
                        ),
                    ],
                    finalizer="example.com/cleanup",
                    resync_period=duration_pb2.Duration(seconds=300),
                    schedules=[pb.Schedule(cron="*/5 * * * *", time_zone="Europe/Paris")],
                    predicates=pb.Predicates(primary_status_changes=True),
                    request_contents=pb.RequestContents(
                        related_objects=True,
                        metadata_only_kinds=[pb.GroupVersionKind(version="v1", kind="Secret")],
                    ),
                )
            ],
        )

    def Reconcile(self, request_iterator, context):
        received = list(request_iterator)  # Until the host half-closes.
        with self._lock:
            self.stream_requests = received
        for req in reversed(received):
            if req.WhichOneof("payload") == "reconcile":  # Cancel notices get no answer.
                yield make_response(req.request_id, req.reconcile)


class PluginRoundTripTest(unittest.TestCase):
    def setUp(self):
        # Unix socket paths are limited to 107 bytes; TEST_TMPDIR can leave too little room.
        base = os.environ.get("TEST_TMPDIR", "")
        if not base or len(base) >= 70:
            base = None
        self.dir = tempfile.mkdtemp(prefix="rt-", dir=base)
        self.address = "unix:" + os.path.join(self.dir, "plugin.sock")
        options = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ]
        self.plugin = FakePlugin()
        self.server = grpc.server(
            concurrent.futures.ThreadPoolExecutor(max_workers=4), options=options
        )
        pb_grpc.add_ControllerPluginServiceServicer_to_server(self.plugin, self.server)
        self.assertNotEqual(self.server.add_insecure_port(self.address), 0)
        self.server.start()
        self.channel = grpc.insecure_channel(self.address, options=options)
        self.stub = pb_grpc.ControllerPluginServiceStub(self.channel)

    def tearDown(self):
        self.channel.close()
        self.server.stop(grace=None).wait(TIMEOUT_SECONDS)
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_describe_negotiates_both_ways(self):
        resp = self.stub.Describe(
            pb.DescribeRequest(
                protocol_versions=["v1alpha1"],
                capabilities=[pb.CAPABILITY_CONDITIONS, pb.CAPABILITY_METADATA_ONLY],
                host_version="0.1.0",
                max_message_bytes=MAX_MESSAGE_BYTES,
                max_in_flight=64,
                instance_name="webapp-3",
            ),
            timeout=TIMEOUT_SECONDS,
        )
        seen = self.plugin.describe_request
        self.assertEqual(list(seen.protocol_versions), ["v1alpha1"])
        self.assertEqual(
            list(seen.capabilities), [pb.CAPABILITY_CONDITIONS, pb.CAPABILITY_METADATA_ONLY]
        )
        self.assertEqual(seen.max_message_bytes, MAX_MESSAGE_BYTES)
        self.assertEqual(seen.max_in_flight, 64)
        self.assertEqual(seen.instance_name, "webapp-3")

        self.assertEqual(resp.protocol_version, "v1alpha1")
        self.assertEqual(resp.plugin_version, "1.4.0")
        self.assertEqual(list(resp.capabilities), [pb.CAPABILITY_CONDITIONS, pb.CAPABILITY_RELATED_OBJECTS])
        (spec,) = resp.controllers
        self.assertEqual(spec.primary.kind, "WebApp")
        self.assertEqual(spec.owns[0].kind.group, "apps")
        self.assertFalse(spec.owns[0].delete_absent)
        self.assertEqual(spec.watches[0].WhichOneof("mapping"), "label")
        self.assertEqual(spec.watches[0].label.WhichOneof("source"), "primary_selector_path")
        self.assertEqual(spec.watches[0].label.primary_selector_path, "spec.selector")
        self.assertEqual(spec.watches[1].WhichOneof("mapping"), "enqueue_all")
        self.assertTrue(spec.watches[1].enqueue_all.same_namespace_only)
        self.assertTrue(spec.watches[1].include_in_requests)
        self.assertEqual(spec.resync_period.ToSeconds(), 300)
        self.assertEqual(spec.schedules[0].time_zone, "Europe/Paris")
        self.assertTrue(spec.predicates.primary_status_changes)
        self.assertFalse(spec.predicates.ignore_child_status_changes)
        self.assertEqual(spec.request_contents.metadata_only_kinds[0].kind, "Secret")
        self.assertEqual(spec.max_concurrent_reconciles, 0)  # Unset: the host's default.
        self.assertEqual(spec.label_selector, "")

    def test_reconcile_stream_matches_responses_by_request_id(self):
        ids = [1, 2, 3]
        requests = [make_reconcile(i) for i in ids]
        requests.append(
            pb.ReconcileRequest(request_id=9, cancel=pb.CancelNotice(reason="plugin draining"))
        )
        responses = list(self.stub.Reconcile(iter(requests), timeout=TIMEOUT_SECONDS))

        self.assertEqual([r.request_id for r in responses], [3, 2, 1])  # Reverse order.
        by_id = {r.request_id: r for r in responses}
        for i in ids:
            with self.subTest(request_id=i):
                got = by_id[i]
                want = make_response(i, make_reconcile(i).reconcile)
                self.assertEqual(got, want)
                self.assertEqual(got.desired_objects[0], want.desired_objects[0])
                self.assertEqual(got.patches[0].target, pb.PATCH_TARGET_OWNED)
                self.assertEqual(got.patches[0].type, pb.PATCH_TYPE_JSON_PATCH)
                self.assertEqual(got.patches[0].resource_version, str(1000 + i))
                self.assertEqual(got.patches[1].target, pb.PATCH_TARGET_PRIMARY_STATUS)
                self.assertEqual(got.patches[1].name, "")
                self.assertEqual(got.status, b'{"observedReplicas":%d}' % i)
                self.assertEqual(got.conditions[0].status, pb.CONDITION_STATUS_TRUE)
                self.assertEqual(got.conditions[0].message, "ready: app-%d" % i)
                self.assertEqual(got.events[0].type, pb.EVENT_TYPE_NORMAL)
                self.assertTrue(got.HasField("requeue_after"))
                self.assertEqual(got.requeue_after.seconds, i * 60)
                self.assertEqual(got.requeue_after.nanos, 250000000)
                self.assertEqual(
                    got.error.kind,
                    pb.ERROR_KIND_TERMINAL if i % 2 == 0 else pb.ERROR_KIND_RETRYABLE,
                )
                self.assertEqual(got.finalized, i == 3)

        seen = self.plugin.stream_requests
        self.assertEqual(len(seen), 4)
        for req, i in zip(seen, ids):
            with self.subTest(request_id=i):
                self.assertEqual(req, make_reconcile(i))
                call = req.reconcile
                self.assertEqual(call.object, object_json(i))  # Raw bytes, UTF-8 intact.
                self.assertEqual(call.related_objects[0].object, b'{"data":{}}\x00\xff')
                self.assertEqual(call.deadline.nanos, 123456789)
                self.assertEqual(call.deadline.seconds, 1700000000 + i)
                self.assertEqual(call.attempt, i + 1)
        self.assertEqual(seen[3].WhichOneof("payload"), "cancel")
        self.assertEqual(seen[3].cancel.reason, "plugin draining")

    def test_unset_fields_read_as_zero(self):
        parsed = pb.ReconcileResponse.FromString(pb.ReconcileResponse().SerializeToString())
        self.assertEqual(parsed.error.kind, pb.ERROR_KIND_UNSPECIFIED)
        self.assertEqual(pb.ERROR_KIND_UNSPECIFIED, 0)
        self.assertFalse(parsed.HasField("error"))
        self.assertFalse(parsed.HasField("requeue_after"))
        self.assertEqual(pb.Patch().target, pb.PATCH_TARGET_UNSPECIFIED)
        self.assertEqual(pb.Patch().type, pb.PATCH_TYPE_UNSPECIFIED)
        self.assertEqual(pb.Condition().status, pb.CONDITION_STATUS_UNSPECIFIED)
        self.assertEqual(pb.Event().type, pb.EVENT_TYPE_UNSPECIFIED)
        self.assertEqual(pb.ReconcileCall().reason, pb.REASON_UNSPECIFIED)
        self.assertIsNone(pb.ReconcileRequest().WhichOneof("payload"))
        self.assertIsNone(pb.WatchedKind().WhichOneof("mapping"))
        self.assertEqual(pb.Capability.Name(0), "CAPABILITY_UNSPECIFIED")
        # A value from a later version survives as its number (proto3 enums are open).
        future = pb.Event.FromString(pb.Event(type=42).SerializeToString())
        self.assertEqual(future.type, 42)


if __name__ == "__main__":
    bazel_unittest.main()
