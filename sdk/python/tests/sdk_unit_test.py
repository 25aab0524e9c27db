"""Unit tests of the Python SDK: Request, Result validation, Handlers, Controller, Describe."""

import ast
import datetime
import json
import os
import threading
import unittest

from ctrlhost_sdk import log
from ctrlhost_sdk import (Controller, Handlers, InvalidResult, Plugin, ReconcileError, Request,
                          Result, new_object, parse_address, pb, testing)
from ctrlhost_sdk.plugin import DescribeRefused
from ctrlhost_sdk.result import ALL_CAPABILITIES
from tools.internal import bazel_unittest

PRIMARY = {
    "apiVersion": "example.com/v1", "kind": "App",
    "metadata": {"name": "web", "namespace": "team-a", "uid": "u-1", "generation": 4,
                 "resourceVersion": "17", "labels": {"tier": "front", "bad": 3},
                 "annotations": {"note": "x"}},
    "spec": {"replicas": 2}, "status": {"ready": 1},
}
DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "web", "namespace": "team-a"}, "status": {"readyReplicas": 2}}


def request(obj=PRIMARY, **kwargs):
    return Request.from_call(testing.make_call("app", obj, **kwargs))


class RequestTest(unittest.TestCase):
    def test_accessors(self):
        req = request(children=[DEPLOYMENT], related=[{"apiVersion": "v1", "kind": "Secret",
                                                        "metadata": {"name": "s"}}])
        self.assertEqual((req.namespace, req.name, req.uid), ("team-a", "web", "u-1"))
        self.assertEqual(req.generation, 4)
        self.assertEqual(req.resource_version, "17")
        self.assertEqual(req.labels, {"tier": "front"})  # non-string values are skipped
        self.assertEqual(req.label("tier"), "front")
        self.assertIsNone(req.label("nope"))
        self.assertEqual(req.annotation("note"), "x")
        self.assertEqual(req.spec, {"replicas": 2})
        self.assertEqual(req.status, {"ready": 1})
        self.assertEqual(req.api_version, "example.com/v1")
        self.assertTrue(req.exists)
        self.assertFalse(req.deleting)
        self.assertFalse(req.finalizing)
        self.assertEqual(req.reason_name, "PrimaryChanged")
        self.assertEqual(req.attempt, 1)
        self.assertIsNone(req.deadline)
        self.assertEqual(req.child("Deployment", "web")["status"]["readyReplicas"], 2)
        self.assertIsNone(req.child("Deployment", "other"))
        self.assertEqual(len(req.children_of_kind("Deployment", "apps/v1")), 1)
        self.assertEqual(req.children_of_kind("Deployment", "extensions/v1beta1"), [])
        self.assertEqual(req.related_of_kind("Secret")[0].name, "s")
        self.assertEqual(req.related_object("Secret", "s")["kind"], "Secret")
        self.assertFalse(req.cancelled)

    def test_mistyped_fields_read_as_empty(self):
        obj = {"metadata": {"generation": "4", "labels": ["a"]}, "spec": "text", "status": 3}
        req = request(obj)
        self.assertEqual(req.generation, 0)
        self.assertEqual(req.labels, {})
        self.assertEqual(req.spec, {})
        self.assertEqual(req.status, {})
        self.assertEqual(req.kind, "")

    def test_gone_primary(self):
        req = request(None, reason=pb.REASON_PRIMARY_DELETED)
        self.assertFalse(req.exists)
        self.assertEqual(req.spec, {})
        self.assertEqual(req.reason_name, "PrimaryDeleted")

    def test_deleting_and_unknown_reason(self):
        obj = dict(PRIMARY, metadata=dict(PRIMARY["metadata"], deletionTimestamp="2026-01-01"))
        req = request(obj, reason=99)
        self.assertTrue(req.deleting)
        self.assertEqual(req.reason_name, "Unspecified")

    def test_deadline(self):
        call = testing.make_call("app", PRIMARY)
        call.deadline.seconds = 1700000000
        req = Request.from_call(call)
        self.assertEqual(req.deadline, datetime.datetime(2023, 11, 14, 22, 13, 20,
                                                         tzinfo=datetime.timezone.utc))

    def test_malformed_objects_are_errors(self):
        for data in (b"{", b"[1]", b"\xff\xfe", b'"text"'):
            call = testing.make_call("app", PRIMARY)
            call.object = data
            with self.subTest(data=data), self.assertRaises(ValueError):
                Request.from_call(call)
        call = testing.make_call("app", PRIMARY, children=[DEPLOYMENT])
        call.children[0].object = b"nope"
        with self.assertRaisesRegex(ValueError, "child Deployment"):
            Request.from_call(call)

    def test_cancellation_flag(self):
        flag = threading.Event()
        req = Request.from_call(testing.make_call("app", PRIMARY), flag)
        self.assertFalse(req.wait_cancelled(0))
        flag.set()
        self.assertTrue(req.cancelled)
        self.assertTrue(req.wait_cancelled(0))


class ForObjectAndLogTest(unittest.TestCase):
    def test_for_object(self):
        req = Request.for_object(PRIMARY, controller="app", children=[DEPLOYMENT],
                                 finalizing=True)
        self.assertEqual((req.controller, req.namespace, req.name), ("app", "team-a", "web"))
        self.assertTrue(req.finalizing)
        self.assertEqual(req.children_of_kind("Deployment")[0].api_version, "apps/v1")
        self.assertFalse(Request.for_object(None).exists)

    def test_log_lines_are_key_value(self):
        line = log.format_record("info", "plugin serving", {"plugin": "x y", "n": 3,
                                                             "q": 'say "hi"\n', "e": ""})
        self.assertRegex(line, r'^ts=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=info ')
        self.assertTrue(line.endswith(
            'msg="plugin serving" plugin="x y" n=3 q="say \\"hi\\"\\n" e=""'), line)
        self.assertNotIn("\n", line)
        with self.assertRaises(ValueError):
            log.set_level("loud")


class ResultTest(unittest.TestCase):
    def test_desired_defaults_from_primary(self):
        result = Result()
        result.desire(new_object("v1", "ConfigMap"))
        result.desire({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "s", "namespace": "other", "labels": {}}})
        result.desire({"apiVersion": "example.com/v1", "kind": "App", "metadata": None})
        resp = result.to_response(request(), 7)
        self.assertEqual(resp.request_id, 7)
        cm, secret, primary = [json.loads(d) for d in resp.desired_objects]
        self.assertEqual(cm["metadata"], {"name": "web", "namespace": "team-a",
                                          "labels": {"tier": "front"}})
        self.assertEqual(secret["metadata"], {"name": "s", "namespace": "other", "labels": {}})
        self.assertNotIn("labels", primary["metadata"])  # the primary keeps its own labels

    def test_regression_children_of_the_primarys_kind_get_no_default_labels(self):
        # First contact (a Go plugin's author): a label-selected ConfigMap controller that owns
        # ConfigMaps gave its children the primary's labels, so each became a primary itself.
        # Objects of the primary's own kind get no default labels; other kinds still do.
        cm = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "cm", "namespace": "team-a", "labels": {"hello": "true"}}}
        result = Result()
        result.desire(new_object("v1", "ConfigMap", "cm-hello"))
        result.desire(new_object("v1", "Secret", "cm-secret"))
        result.desire(new_object("v1", "ConfigMap", "cm-explicit"))["metadata"]["labels"] = {
            "hello-copy": "true"}
        child, secret, explicit = [json.loads(d) for d in
                                   result.to_response(request(cm), 1).desired_objects]
        self.assertEqual(child["metadata"], {"name": "cm-hello", "namespace": "team-a"})
        self.assertEqual(secret["metadata"]["labels"], {"hello": "true"})
        self.assertEqual(explicit["metadata"]["labels"], {"hello-copy": "true"})

    def test_desired_object_errors(self):
        cases = [("not a dict", "is not an object"),
                 ({"kind": "X"}, "needs apiVersion and kind"),
                 ({"apiVersion": "v1", "kind": "X", "metadata": []}, "metadata is not an object"),
                 ({"apiVersion": "v1", "kind": "X", "metadata": {"name": ""}}, "has no name"),
                 ({"apiVersion": "v1", "kind": "X", "data": {1, 2}}, "cannot be written as JSON")]
        for obj, message in cases:
            result = Result()
            result.desire(obj)
            with self.subTest(obj=obj), self.assertRaisesRegex(InvalidResult, message):
                result.to_response(request(), 1)

    def test_everything_on_the_wire(self):
        result = Result()
        result.status["phase"] = "Ready"
        result.merge_status({"nested": {"a": 1}})
        result.merge_status({"nested": {"b": 2}})
        result.set_condition("Ready", False, "Waiting", "first")
        result.set_condition("Ready", True, "AllGood", "second")  # replaces by type
        result.set_condition("Degraded", "Unknown", "NotChecked")
        result.event("Warning", "Slow", "took long")
        result.patch_primary({"metadata": {"annotations": {"a": "b"}}}, resource_version="17")
        result.patch_status([{"op": "add", "path": "/status/x", "value": 1}], type_="json")
        result.patch_owned("v1", "ConfigMap", "cm", {"data": {"k": "v"}})
        result.requeue_after = datetime.timedelta(seconds=90, milliseconds=250)
        resp = result.to_response(request(), 3)
        self.assertEqual(json.loads(resp.status),
                         {"phase": "Ready", "nested": {"a": 1, "b": 2}})
        self.assertEqual([(c.type, c.status, c.reason, c.message) for c in resp.conditions],
                         [("Ready", pb.CONDITION_STATUS_TRUE, "AllGood", "second"),
                          ("Degraded", pb.CONDITION_STATUS_UNKNOWN, "NotChecked", "")])
        self.assertEqual(resp.events[0].type, pb.EVENT_TYPE_WARNING)
        self.assertEqual([p.target for p in resp.patches],
                         [pb.PATCH_TARGET_PRIMARY, pb.PATCH_TARGET_PRIMARY_STATUS,
                          pb.PATCH_TARGET_OWNED])
        self.assertEqual(resp.patches[0].resource_version, "17")
        self.assertEqual(resp.patches[1].type, pb.PATCH_TYPE_JSON_PATCH)
        self.assertEqual(resp.patches[2].type, pb.PATCH_TYPE_MERGE_PATCH)
        self.assertEqual(resp.patches[2].name, "cm")
        self.assertEqual((resp.requeue_after.seconds, resp.requeue_after.nanos), (90, 250000000))
        self.assertFalse(resp.HasField("error"))
        self.assertFalse(resp.finalized)

    def test_empty_result_is_empty_response(self):
        resp = Result().to_response(request(), 1)
        self.assertEqual(resp, pb.ReconcileResponse(request_id=1))
        r = Result()
        r.status  # touched but empty: no status sent
        self.assertEqual(r.to_response(request(), 1).status, b"")

    def test_errors(self):
        resp = Result.terminal_error("bad spec").to_response(request(), 1)
        self.assertEqual((resp.error.kind, resp.error.message),
                         (pb.ERROR_KIND_TERMINAL, "bad spec"))
        resp = Result.retryable_error("later").to_response(request(), 1)
        self.assertEqual(resp.error.kind, pb.ERROR_KIND_RETRYABLE)
        with self.assertRaises(ValueError):
            Result().set_error("fatal", "x")

    def test_error_reason_and_retry_after(self):
        resp = Result.retryable_error("quota used up", reason="QuotaExceeded",
                                      retry_after=datetime.timedelta(seconds=30.5)
                                      ).to_response(request(), 1)
        self.assertEqual((resp.error.kind, resp.error.reason), (pb.ERROR_KIND_RETRYABLE,
                                                                "QuotaExceeded"))
        self.assertEqual((resp.error.retry_after.seconds, resp.error.retry_after.nanos),
                         (30, 500000000))
        resp = Result.terminal_error("no region", reason="UnknownRegion").to_response(request(), 1)
        self.assertEqual(resp.error.reason, "UnknownRegion")
        self.assertFalse(resp.error.HasField("retry_after"))
        # Unset: no reason, no retry_after (the host's defaults).
        resp = Result.retryable_error("later").to_response(request(), 1)
        self.assertEqual(resp.error.reason, "")
        self.assertFalse(resp.error.HasField("retry_after"))
        # Validated as the host does.
        with self.assertRaisesRegex(ValueError, 'reason "quota exceeded" must be CamelCase'):
            Result.retryable_error("x", reason="quota exceeded")
        with self.assertRaisesRegex(ValueError, "at most 128"):
            Result.terminal_error("x", reason="A" * 129)
        with self.assertRaisesRegex(ValueError, "between 0 and"):
            Result.retryable_error("x", retry_after=-1)
        with self.assertRaisesRegex(ValueError, "only allowed on a retryable error"):
            Result().set_error("terminal", "x", retry_after=5)
        with self.assertRaisesRegex(ValueError, "only allowed on a retryable error"):
            ReconcileError("x", terminal=True, retry_after=5)
        # Set directly on the attributes: refused when the answer is built.
        r = Result.retryable_error("x")
        r.error_reason = "not ok"
        with self.assertRaisesRegex(InvalidResult, "must be CamelCase"):
            r.to_response(request(), 1)

    def test_invalid_results(self):
        def with_(fn):
            r = Result()
            fn(r)
            return r

        cases = [
            (with_(lambda r: r.set_condition("Ready", True, "not camel")), request(), "CamelCase"),
            (with_(lambda r: r.set_condition("Ready", "Maybe", "Why")), request(), "True, False"),
            (with_(lambda r: r.set_condition("", True, "Why")), request(), "without type"),
            (with_(lambda r: r.event("Info", "Why")), request(), "Normal or Warning"),
            (with_(lambda r: r.event("Normal", "")), request(), "without reason"),
            (with_(lambda r: r.patch_primary([1])), request(), "merge patch"),
            (with_(lambda r: r.patch_primary({}, type_="json")), request(), "JSON patch"),
            (with_(lambda r: r.patch_primary({}, type_="strategic")), request(), "patch type"),
            (with_(lambda r: r.patch_owned("v1", "", "x", {})), request(), "owned object"),
            (with_(lambda r: setattr(r, "requeue_after", -1)), request(), "requeue_after"),
            (with_(lambda r: setattr(r, "requeue_after", "soon")), request(), "requeue_after"),
            (with_(lambda r: setattr(r, "status", [1])), request(), "status is not"),
            (Result.done_finalizing(), request(), "not finalizing"),
            (with_(lambda r: (setattr(r, "finalized", True), r.set_error("retryable", "x"))),
             request(finalizing=True), "together with an error"),
            (with_(lambda r: r.status.update(a=1)), request(None), "primary is gone"),
        ]
        for result, req, message in cases:
            with self.subTest(message=message), self.assertRaisesRegex(InvalidResult, message):
                result.to_response(req, 1)

    def test_gone_primary_may_answer_events_and_requeue(self):
        r = Result.requeue(5)
        r.event("Normal", "Forgotten", "bye")
        resp = r.to_response(request(None), 1)
        self.assertEqual(resp.requeue_after.seconds, 5)

    def test_capabilities_are_enforced(self):
        r = Result()
        r.desire(new_object("v1", "ConfigMap", "x"))
        with self.assertRaisesRegex(InvalidResult, "CAPABILITY_SERVER_SIDE_APPLY"):
            r.to_response(request(), 1, capabilities=frozenset())
        r = Result()
        r.set_condition("Ready", True, "Ok")
        with self.assertRaisesRegex(InvalidResult, "CAPABILITY_CONDITIONS"):
            r.to_response(request(), 1, capabilities=frozenset())

    def test_merge(self):
        a = Result.requeue(60)
        a.status["a"] = 1
        b = Result.requeue(5)
        b.status["b"] = 2
        b.set_error("terminal", "first")
        b.event("Normal", "E")
        a.merge(b)
        self.assertEqual(a.status, {"a": 1, "b": 2})
        self.assertEqual(a.requeue_after, 5)
        self.assertEqual(a.error, ("terminal", "first"))
        self.assertEqual(len(a.events), 1)


class HandlersTest(unittest.TestCase):
    def setUp(self):
        self.calls = []
        self.handlers = Handlers(on_upsert=lambda r: self.calls.append("upsert") or Result(),
                                 on_delete=lambda r: self.calls.append("delete"))

    def test_upsert(self):
        self.assertFalse(self.handlers(request()).finalized)
        self.assertEqual(self.calls, ["upsert"])

    def test_finalizing_sets_finalized(self):
        self.assertTrue(self.handlers(request(finalizing=True)).finalized)
        self.assertEqual(self.calls, ["delete"])

    def test_failed_delete_is_not_finalized(self):
        h = Handlers(on_delete=lambda r: Result.retryable_error("busy"))
        result = h(request(finalizing=True))
        self.assertFalse(result.finalized)
        self.assertEqual(result.error, ("retryable", "busy"))

    def test_deleting_without_finalizer_and_gone(self):
        obj = dict(PRIMARY, metadata=dict(PRIMARY["metadata"], deletionTimestamp="t"))
        self.handlers(request(obj))
        self.assertEqual(self.calls, [])
        self.handlers(request(None))
        self.assertEqual(self.calls, ["delete"])

    def test_decorators(self):
        h = Handlers()

        @h.on_upsert
        def up(req):
            return Result.requeue(1)

        self.assertEqual(h(request()).requeue_after, 1)


def make_controller(fn):
    c = (Controller("app").for_("example.com", "v1", "App")
         .owns("apps", "v1", "Deployment").owns("", "v1", "Service", delete_absent=True))
    c.reconcile(fn)
    return c


class ControllerTest(unittest.TestCase):
    def test_spec(self):
        c = make_controller(lambda r: Result())
        c.watches("", "v1", "ConfigMap", field_path="spec.configMapName", include_in_requests=True)
        c.watches("", "v1", "Pod", primary_selector_path="spec.selector")
        c.watches("", "v1", "Secret", name_label="example.com/app")
        c.watches("", "v1", "Node", enqueue_all=True)
        c.watches("", "v1", "Event", owner_reference="controller")
        c.finalizer("example.com/cleanup").max_concurrent(3).resync(300.5)
        c.namespaces("a", "b").label_selector("tier=front")
        c.predicates(primary_status_changes=True)
        c.request_contents(children=True, metadata_only_kinds=[("", "v1", "Secret")])
        c.schedule("*/5 * * * *", "UTC")
        spec = c.spec()
        self.assertEqual(spec.primary, pb.GroupVersionKind(group="example.com", version="v1",
                                                           kind="App"))
        self.assertTrue(spec.owns[1].delete_absent)
        self.assertEqual([w.WhichOneof("mapping") for w in spec.watches],
                         ["field_path", "label", "label", "enqueue_all", "owner_reference"])
        self.assertTrue(spec.watches[4].owner_reference.controller_only)
        self.assertFalse(spec.watches[3].enqueue_all.same_namespace_only)
        self.assertTrue(spec.request_contents.related_objects)
        self.assertTrue(spec.request_contents.children)
        self.assertFalse(Controller("x").for_("g", "v1", "K").reconcile(len) and False)
        bare = Controller("x").for_("g", "v1", "K")
        bare.reconcile(len)
        self.assertFalse(bare.spec().request_contents.children)  # owns nothing
        bare.owns("", "v1", "Pod")
        self.assertTrue(bare.spec().request_contents.children)
        bare.request_contents(children=False)
        self.assertFalse(bare.spec().request_contents.children)
        self.assertEqual((spec.resync_period.seconds, spec.resync_period.nanos), (300, 500000000))
        self.assertEqual(list(spec.namespaces), ["a", "b"])
        self.assertEqual(spec.max_concurrent_reconciles, 3)
        self.assertEqual(
            c.required_capabilities(),
            {pb.CAPABILITY_SERVER_SIDE_APPLY, pb.CAPABILITY_SCHEDULES, pb.CAPABILITY_CHILDREN,
             pb.CAPABILITY_RELATED_OBJECTS, pb.CAPABILITY_METADATA_ONLY})

    def test_invalid_declarations(self):
        with self.assertRaisesRegex(ValueError, "RFC 1123"):
            Controller("Bad_Name").for_("g", "v1", "K").reconcile(lambda r: None) and None
            Controller("Bad_Name").spec()
        with self.assertRaisesRegex(ValueError, "exactly one mapping"):
            Controller("a").watches("", "v1", "Pod")
        c = Controller("a").for_("g", "v1", "K")
        with self.assertRaisesRegex(ValueError, "no reconcile function"):
            c.spec()
        c.reconcile(lambda r: None)
        c.finalizer("nodomain")
        with self.assertRaisesRegex(ValueError, "qualified"):
            c.spec()
        with self.assertRaisesRegex(ValueError, "for_"):
            Controller("b").spec()

    def test_user_exceptions_become_retryable_errors(self):
        def boom(req):
            raise KeyError("replicas")

        outcome = testing.reconcile(make_controller(boom), PRIMARY)
        self.assertEqual(outcome.error[0], "retryable")
        self.assertIn("KeyError", outcome.error[1])

    def test_reconcile_error_kinds(self):
        def fail(req):
            raise ReconcileError("no image", terminal=True)

        self.assertEqual(testing.reconcile(make_controller(fail), PRIMARY).error,
                         ("terminal", "no image"))

    def test_reconcile_error_reason_and_retry_after_reach_the_answer(self):
        def fail(req):
            raise ReconcileError("bucket quota used up", reason="QuotaExceeded", retry_after=45)

        resp = make_controller(fail).invoke_request(7, request())
        self.assertEqual((resp.error.kind, resp.error.reason, resp.error.retry_after.seconds),
                         (pb.ERROR_KIND_RETRYABLE, "QuotaExceeded", 45))

    def test_invalid_results_and_wrong_types(self):
        def bad(req):
            r = Result()
            r.set_condition("Ready", True, "has space")
            return r

        outcome = testing.reconcile(make_controller(bad), PRIMARY)
        self.assertEqual(outcome.error[0], "retryable")
        self.assertIn("invalid reconcile result", outcome.error[1])
        outcome = testing.reconcile(make_controller(lambda r: {"status": 1}), PRIMARY)
        self.assertIn("not a Result", outcome.error[1])
        self.assertIsNone(testing.reconcile(make_controller(lambda r: None), PRIMARY).error)

    def test_malformed_request_is_retryable(self):
        call = testing.make_call("app", PRIMARY)
        call.object = b"{broken"
        resp = make_controller(lambda r: Result()).invoke(5, call)
        self.assertEqual(resp.request_id, 5)
        self.assertEqual(resp.error.kind, pb.ERROR_KIND_RETRYABLE)
        self.assertIn("cannot read the request", resp.error.message)


class ImportGraphTest(unittest.TestCase):
    def test_the_package_imports_form_no_cycle(self):
        """plugin.py starts server.py's server; server.py knows the plugin only through
        protocol.PluginHandler. Imports inside functions count: they hide a cycle, not break it."""
        import ctrlhost_sdk

        package = os.path.dirname(ctrlhost_sdk.__file__)
        graph = {}
        for filename in sorted(os.listdir(package)):
            if not filename.endswith(".py") or filename == "__init__.py":
                continue
            with open(os.path.join(package, filename)) as f:
                tree = ast.parse(f.read())
            deps = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module:
                    if node.module == "ctrlhost_sdk":
                        deps.update(a.name for a in node.names)
                    elif node.module.startswith("ctrlhost_sdk."):
                        deps.add(node.module.split(".")[1])
                elif isinstance(node, ast.Import):
                    deps.update(a.name.split(".")[1] for a in node.names
                                if a.name.startswith("ctrlhost_sdk."))
            graph[filename[:-3]] = deps
        self.assertIn("server", graph["plugin"])
        self.assertNotIn("plugin", graph["server"])

        def visit(module, path):
            for dep in sorted(graph.get(module, ())):
                if dep in path:
                    self.fail("import cycle: " + " -> ".join(path[path.index(dep):] + [dep]))
                visit(dep, path + [dep])

        for module in graph:
            visit(module, [module])


class PluginTest(unittest.TestCase):
    def setUp(self):
        self.plugin = Plugin("demo", "1.2.3")
        self.plugin.add(make_controller(lambda r: Result()))

    def describe(self, versions=("v1alpha1",), caps=tuple(ALL_CAPABILITIES)):
        return self.plugin.describe(pb.DescribeRequest(protocol_versions=versions,
                                                       capabilities=caps))

    def test_describe(self):
        resp = self.describe(versions=("v2", "v1alpha1"), caps=(pb.CAPABILITY_SERVER_SIDE_APPLY,
                                                                  pb.CAPABILITY_CHILDREN, 0, 77))
        self.assertEqual(resp.protocol_version, "v1alpha1")
        self.assertEqual((resp.plugin_name, resp.plugin_version), ("demo", "1.2.3"))
        self.assertEqual(set(resp.capabilities), set(ALL_CAPABILITIES))
        self.assertEqual([c.name for c in resp.controllers], ["app"])
        self.assertEqual(self.plugin.capabilities,
                         {pb.CAPABILITY_SERVER_SIDE_APPLY, pb.CAPABILITY_CHILDREN})

    def test_describe_refusals(self):
        with self.assertRaisesRegex(DescribeRefused, r"offered \[v2\]"):
            self.describe(versions=("v2",))
        with self.assertRaisesRegex(DescribeRefused, "CAPABILITY_SERVER_SIDE_APPLY"):
            self.describe(caps=(pb.CAPABILITY_CHILDREN,))  # delete_absent needs SSA
        with self.assertRaisesRegex(DescribeRefused, "CAPABILITY_CHILDREN"):
            self.describe(caps=(pb.CAPABILITY_SERVER_SIDE_APPLY,))  # owns: children sent

    def test_unknown_controller_is_terminal(self):
        resp = self.plugin.handle(4, testing.make_call("nope", PRIMARY))
        self.assertEqual(resp.error.kind, pb.ERROR_KIND_TERMINAL)
        self.assertIn('no controller "nope"', resp.error.message)

    def test_duplicate_and_invalid_controllers(self):
        with self.assertRaisesRegex(ValueError, "duplicate"):
            self.plugin.add(make_controller(lambda r: None))
        with self.assertRaises(ValueError):
            Plugin("x", "1").add(Controller("y"))

    def test_parse_address(self):
        self.assertEqual(parse_address("unix:///tmp/p.sock"), ("unix:/tmp/p.sock", "/tmp/p.sock"))
        self.assertEqual(parse_address("unix:rel.sock"), ("unix:rel.sock", "rel.sock"))
        self.assertEqual(parse_address("127.0.0.1:0"), ("127.0.0.1:0", None))
        self.assertEqual(parse_address("[::1]:50051")[0], "[::1]:50051")
        for bad in ("", "unix:", "unix://", "localhost", ":80", "host:http", "host:99999",
                    "unix:///" + "x" * 200):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                parse_address(bad)

    def test_run_with_bad_address_returns_2(self):
        self.assertEqual(self.plugin.run(address="nonsense", install_signals=False), 2)


if __name__ == "__main__":
    bazel_unittest.main()
