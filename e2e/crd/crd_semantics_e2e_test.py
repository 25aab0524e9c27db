"""The CRD scenarios of the embedded API server, run against it and against a real server.

The real server is `k8s.io/apiextensions-apiserver` 0.36 (today's CRD semantics), built from
Debian sid by tools/crd-server-sid and started by e2e/crd/crd_server_fixture.py; it serves CRDs
and custom resources only. Every scenario runs once per server (one TestCase class each) with
the same assertions, except where the embedded server deviates from Kubernetes on purpose or
for now: there the test asserts each server's own behaviour, and the deviation is a row of
"Differences from apiextensions-apiserver 0.36" in docs/apiserver.md (the comments name it).

Scenarios: structural-schema defaulting (also of objects stored before a default existed) and
pruning with fieldValidation Warn/Strict/Ignore; "", 0 and false in typed fields; schema
validation errors; server-side apply on custom resources (managers, conflicts, force,
list-type map, the status subresource); the status subresource (each side ignores the other's
changes, generation); x-kubernetes-validations (CEL): enforced by 0.36, accepted with a Warning
header naming the schema paths by the embedded server; kubectl (discovery, apply, scale,
explain) and lists and watches of custom resources.

Without $CTRLHOST_CRD_SERVER_SID (tools/test sets it when tools/crd-server-sid could build the
server) the 0.36 class is skipped with the reason; the embedded server's class always runs.
"""

import json
import os
import re
import shutil
import time
import unittest

from e2e.apiserver import apiserver_fixture
from e2e.crd import crd_server_fixture
from tools.internal import bazel_unittest

WAIT_SECONDS = 60
NAMESPACE = "crd-e2e"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"
CEL_WARNING = ("x-kubernetes-validations (CEL) rules are not enforced by this server; objects "
               "that break them are accepted: ")

# The defaulting and pruning schema: defaults at every level, an array of objects, a
# preserve-unknown-fields subtree, a map, a nullable field with a default.
DEFAULTING_SCHEMA = {"type": "object", "properties": {
    "spec": {"type": "object", "default": {}, "properties": {
        "size": {"type": "integer", "default": 3},
        "mode": {"type": "string", "default": "auto", "enum": ["auto", "manual"]},
        "nested": {"type": "object", "default": {}, "properties": {
            "flag": {"type": "boolean", "default": True}}},
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"},
            "weight": {"type": "integer", "default": 1}}}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "nullable": {"type": "string", "nullable": True, "default": "d"},
    }},
    "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
}}
DEFAULTED_SPEC = {"size": 3, "mode": "auto", "nested": {"flag": True}, "nullable": "d"}

# The zero-value schema of e2e/kube/crd_empty_string_test.py.
TYPED_SCHEMA = {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {
        "note": {"type": "string"},
        "count": {"type": "integer"},
        "enabled": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "required": ["name"], "properties": {
                      "name": {"type": "string"}, "port": {"type": "integer"}}}},
    }},
    "status": {"type": "object", "properties": {
        "phase": {"type": "string"},
        "replicas": {"type": "integer"},
        "conditions": {"type": "array", "items": {"type": "object", "properties": {
            "type": {"type": "string"},
            "status": {"type": "string"},
            "message": {"type": "string"}}}},
    }},
}}
ZERO_SPEC = {"note": "", "count": 0, "enabled": False, "tags": [""]}
ZERO_STATUS = {"phase": "", "conditions": [{"type": "Ready", "status": "True", "message": ""}]}

CEL_SCHEMA = {"type": "object", "properties": {"spec": {
    "type": "object",
    "x-kubernetes-validations": [{"rule": "self.min <= self.max",
                                  "message": "min must not exceed max"}],
    "properties": {
        "min": {"type": "integer"},
        "max": {"type": "integer"},
        "name": {"type": "string", "x-kubernetes-validations": [{
            "rule": "self.startsWith('r-')",
            "messageExpression": "'name must start with r-: ' + self"}]},
        "fixed": {"type": "string", "x-kubernetes-validations": [{
            "rule": "self == oldSelf", "message": "is immutable"}]},
    }}}}
CEL_PATHS = ["spec.versions[0].schema.openAPIV3Schema.properties.spec",
             "spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.fixed",
             "spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.name"]


def crd_for(group, plural, kind, schema, subresources=None):
    """A namespaced CRD with one served storage version v1."""
    version = {"name": "v1", "served": True, "storage": True,
               "schema": {"openAPIV3Schema": schema}}
    version["subresources"] = {"status": {}} if subresources is None else subresources
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "%s.%s" % (plural, group)},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                     "versions": [version]}}


def managers(obj):
    """{(manager, operation, subresource): fieldsV1} of an object's managedFields."""
    return {(m["manager"], m["operation"], m.get("subresource", "")): m.get("fieldsV1")
            for m in obj["metadata"].get("managedFields", [])}


class CrdScenarios:
    """The scenarios; mixed into one unittest.TestCase per server (see the bottom)."""

    EMBEDDED = True  # which server the class runs against; False: apiextensions-apiserver 0.36

    @classmethod
    def start_server(cls):
        raise NotImplementedError

    @classmethod
    def setUpClass(cls):
        cls.server = cls.start_server()
        cls.api = cls.server.api
        if cls.EMBEDDED:
            cls.api.ensure_namespace(NAMESPACE)
        # 0.36 runs without namespaces (no core API, no admission): a custom resource's
        # namespace needs no Namespace object there.

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "server", None):
            cls.server.stop()

    def setUp(self):
        # One API group per test: tests do not see each other's CRDs or objects.
        self.group = "%s.e2e.example.com" % re.sub(
            r"[^a-z0-9]+", "-", self._testMethodName.lower()).strip("-")[:40]

    def tearDown(self):
        self.assertTrue(self.server.alive(), "the server died")

    # Helpers ---------------------------------------------------------------------------------

    def request(self, method, path, body=None, content_type="application/json"):
        """(status, parsed body, [Warning header values])."""
        headers = {"Accept": "application/json",
                   "Authorization": "Bearer " + self.api.token}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        connection = self.api.connect()
        try:
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            raw = response.read()
            warnings = [v for k, v in response.getheaders() if k.lower() == "warning"]
        finally:
            connection.close()
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        return response.status, parsed, warnings

    def ok(self, method, path, body=None, content_type="application/json", expect=(200, 201)):
        status, answer, _ = self.request(method, path, body, content_type)
        self.assertIn(status, expect, "%s %s %s: %s" % (method, path, body, answer))
        return answer

    def make_crd(self, plural, kind, schema, subresources=None):
        """Creates the CRD in this test's group and waits (bounded) until its resource is
        served. Returns (the objects' path, the CRD creation's warnings)."""
        crd = crd_for(self.group, plural, kind, schema, subresources)
        status, answer, warnings = self.request("POST", CRDS, crd)
        self.assertEqual(status, 201, answer)
        path = "/apis/%s/v1/namespaces/%s/%s" % (self.group, NAMESPACE, plural)
        self.wait_served(path)
        return path, warnings

    def wait_served(self, path):
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            if self.request("GET", path)[0] == 200:
                return
            time.sleep(0.1)  # polling an observable condition (the CRD's establishment)
        self.fail("%s not served after %ss" % (path, WAIT_SECONDS))

    def obj(self, kind, name, spec=None, **extra):
        body = {"apiVersion": self.group + "/v1", "kind": kind, "metadata": {"name": name}}
        if spec is not None:
            body["spec"] = spec
        body.update(extra)
        return body

    def unknown_field_warnings(self, warnings):
        return sorted(re.sub(r'^299 - "(.*)"$', r"\1", w).replace('\\"', '"') for w in warnings)

    # Defaulting and pruning --------------------------------------------------------------------

    def test_defaults_fill_absent_and_null_fields(self):
        path, _ = self.make_crd("things", "Thing", DEFAULTING_SCHEMA)
        self.assertEqual(self.ok("POST", path, self.obj("Thing", "empty"))["spec"],
                         DEFAULTED_SPEC)
        # Defaults inside array items; a null that is not nullable takes the default; a
        # nullable null stays null.
        created = self.ok("POST", path, self.obj("Thing", "nulls", {
            "size": None, "nested": None, "nullable": None, "items": [{"name": "a"}]}))
        self.assertEqual(created["spec"], dict(DEFAULTED_SPEC, nullable=None,
                                               items=[{"name": "a", "weight": 1}]))
        self.assertEqual(self.ok("GET", path + "/nulls")["spec"], created["spec"])
        # Given values are kept.
        spec = {"size": 0, "mode": "manual", "nested": {"flag": False}, "nullable": ""}
        self.assertEqual(self.ok("POST", path, self.obj("Thing", "given", spec))["spec"], spec)

    def test_unknown_fields_are_pruned_with_warnings(self):
        path, _ = self.make_crd("things", "Thing", DEFAULTING_SCHEMA)
        body = self.obj("Thing", "pruned", {
            "junk": 1, "items": [{"name": "x", "junk": 2}], "nested": {"junk": 3},
            "free": {"any": {"thing": 1}}, "labels": {"a": "b"}}, topjunk=4)
        body["metadata"]["junkmeta"] = 5
        status, created, warnings = self.request("POST", path, body)
        self.assertEqual(status, 201, created)
        self.assertEqual(created["spec"], dict(DEFAULTED_SPEC, items=[{"name": "x", "weight": 1}],
                                               free={"any": {"thing": 1}}, labels={"a": "b"}))
        self.assertNotIn("topjunk", created)
        expected = ['unknown field "spec.items[0].junk"', 'unknown field "spec.junk"',
                    'unknown field "spec.nested.junk"', 'unknown field "topjunk"']
        if self.EMBEDDED:
            # Deviation "unknown fields in metadata": kept, not reported.
            self.assertEqual(created["metadata"]["junkmeta"], 5)
        else:
            self.assertNotIn("junkmeta", created["metadata"])
            expected.insert(0, 'unknown field "metadata.junkmeta"')
        self.assertEqual(self.unknown_field_warnings(warnings), expected)

    def test_field_validation_strict_and_ignore(self):
        path, _ = self.make_crd("things", "Thing", DEFAULTING_SCHEMA)
        body = self.obj("Thing", "strict", {"junk": 1, "items": [{"junk": 2}]})
        status, answer, _ = self.request("POST", path + "?fieldValidation=Strict", body)
        self.assertEqual((status, answer["reason"]), (400, "BadRequest"), answer)
        detail = ('strict decoding error: unknown field "spec.items[0].junk", '
                  'unknown field "spec.junk"')
        if self.EMBEDDED:
            # Deviation "strict decoding message": without the decoder's prefix.
            self.assertEqual(answer["message"], detail)
        else:
            self.assertEqual(answer["message"],
                             'Thing in version "v1" cannot be handled as a Thing: ' + detail)
        status, answer, warnings = self.request("POST", path + "?fieldValidation=Ignore",
                                                self.obj("Thing", "ignore", {"junk": 1}))
        self.assertEqual((status, warnings, answer["spec"]), (201, [], DEFAULTED_SPEC))
        status, answer, _ = self.request("POST", path + "?fieldValidation=Sometimes",
                                         self.obj("Thing", "bad-mode"))
        if self.EMBEDDED:
            # Deviation "an unknown fieldValidation": 400 with another message.
            self.assertEqual((status, answer["message"]), (
                400, "fieldValidation parameter unsupported: Sometimes, must be one of: Ignore, "
                "Warn or Strict"), answer)
        else:
            self.assertEqual((status, answer["message"]), (
                422, 'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported '
                'value: "Sometimes": supported values: "", "Ignore", "Strict", "Warn"'), answer)

    def test_a_default_added_later_applies_to_stored_objects(self):
        path, _ = self.make_crd("things", "Thing", DEFAULTING_SCHEMA)
        self.ok("POST", path, self.obj("Thing", "before"))
        crd = self.ok("GET", "%s/things.%s" % (CRDS, self.group))
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        schema["properties"]["spec"]["properties"]["added"] = {"type": "string",
                                                               "default": "later"}
        self.ok("PUT", "%s/things.%s" % (CRDS, self.group), crd)
        # A new object gets the new default at once on both servers (bounded poll: 0.36
        # applies a CRD change when its informer sees it).
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            status, created, _ = self.request("POST", path, self.obj("Thing", "probe"))
            if status == 201 and created["spec"].get("added") == "later":
                break
            if status == 201:
                self.ok("DELETE", path + "/probe")
            self.assertLess(time.monotonic(), deadline, "the new default never applied")
            time.sleep(0.1)  # polling an observable condition
        stored = self.ok("GET", path + "/before")["spec"]
        listed = {i["metadata"]["name"]: i["spec"] for i in self.ok("GET", path)["items"]}
        if self.EMBEDDED:
            # Deviation "defaulting on read": objects stored before keep their stored form.
            self.assertNotIn("added", stored)
            self.assertNotIn("added", listed["before"])
        else:
            self.assertEqual(stored["added"], "later")
            self.assertEqual(listed["before"]["added"], "later")

    def test_schema_validation_errors(self):
        path, _ = self.make_crd("things", "Thing", DEFAULTING_SCHEMA)
        status, answer, _ = self.request("POST", path, self.obj("Thing", "bad", {
            "mode": "bad", "size": "x"}))
        self.assertEqual((status, answer["reason"]), (422, "Invalid"), answer)
        # 0.36 orders the causes as it meets the properties (Go map order): either order.
        parts = ['spec.mode: Unsupported value: "bad": supported values: "auto", "manual"',
                 'spec.size: Invalid value: "string": spec.size in body must be of type '
                 'integer: "string"']
        self.assertIn(answer["message"], [
            'Thing.%s "bad" is invalid: [%s]' % (self.group, ", ".join(order))
            for order in (parts, parts[::-1])])
        causes = sorted((c["field"], c["reason"]) for c in answer["details"]["causes"])
        # Deviation "type error causes": FieldValueInvalid where 0.36 says
        # FieldValueTypeInvalid.
        self.assertEqual(causes, [("spec.mode", "FieldValueNotSupported"),
                                  ("spec.size", "FieldValueInvalid" if self.EMBEDDED
                                   else "FieldValueTypeInvalid")])
        status, answer, _ = self.request("POST", path, self.obj("Thing", "fraction",
                                                                  {"size": 1.5}))
        self.assertEqual(status, 422, answer)
        fields = sorted(c["field"] for c in answer["details"]["causes"])
        # Deviation "type error causes": 0.36 adds a cause without a field.
        self.assertEqual(fields, ["spec.size"] if self.EMBEDDED else ["<nil>", "spec.size"])
        # A whole number written as 2.0 is an integer on both; 0.36 stores it as 2.
        status, answer, _ = self.request("POST", path, self.obj("Thing", "whole", {"size": 2.0}))
        self.assertEqual(status, 201, answer)
        raw = self.api.raw_request("GET", path + "/whole")[2].decode()
        # Deviation "integers written as 2.0": kept as written.
        self.assertRegex(raw.replace(" ", ""), r'"size":2\.0[,}]' if self.EMBEDDED
                         else r'"size":2[,}]')

    # "", 0 and false in typed fields (e2e/kube/crd_empty_string_test.py) -------------------------

    def test_zero_values_in_typed_fields(self):
        path, _ = self.make_crd("widgets", "Widget", TYPED_SCHEMA)
        self.assertEqual(self.ok("POST", path, self.obj("Widget", "created", ZERO_SPEC))["spec"],
                         ZERO_SPEC)
        self.assertEqual(self.ok("GET", path + "/created")["spec"], ZERO_SPEC)
        self.ok("POST", path, self.obj("Widget", "merged", {"note": "x", "count": 1,
                                                              "enabled": True}))
        self.assertEqual(self.ok("PATCH", path + "/merged", {"spec": ZERO_SPEC}, MERGE)["spec"],
                         ZERO_SPEC)
        self.ok("POST", path, self.obj("Widget", "json-patched", {"note": "x"}))
        answer = self.ok("PATCH", path + "/json-patched",
                         [{"op": "replace", "path": "/spec/note", "value": ""}], JSON_PATCH)
        self.assertEqual(answer["spec"], {"note": ""})
        replaced = self.ok("POST", path, self.obj("Widget", "replaced", {"note": "x"}))
        replaced["spec"] = dict(ZERO_SPEC)
        self.assertEqual(self.ok("PUT", path + "/replaced", replaced)["spec"], ZERO_SPEC)
        self.assertEqual(self.ok("GET", path + "/replaced")["spec"], ZERO_SPEC)
        applied = self.ok("PATCH", path + "/applied?fieldManager=e2e",
                          self.obj("Widget", "applied", ZERO_SPEC), APPLY)
        self.assertEqual(applied["spec"], ZERO_SPEC)

    def test_zero_values_in_status(self):
        path, _ = self.make_crd("widgets", "Widget", TYPED_SCHEMA)
        self.ok("POST", path, self.obj("Widget", "status", {"note": "x"}))
        answer = self.ok("PATCH", path + "/status/status", {"status": ZERO_STATUS}, MERGE)
        self.assertEqual(answer["status"], ZERO_STATUS)
        widget = self.ok("GET", path + "/status")
        widget["status"] = {"phase": "", "conditions": [
            {"type": "Ready", "status": "False", "message": ""}]}
        self.assertEqual(self.ok("PUT", path + "/status/status", widget)["status"],
                         widget["status"])
        self.assertEqual(self.ok("GET", path + "/status")["status"], widget["status"])

    def test_null_in_typed_fields(self):
        path, _ = self.make_crd("widgets", "Widget", TYPED_SCHEMA)
        # A null field that is not nullable is pruned; a null array item is refused.
        self.assertEqual(self.ok("POST", path, self.obj("Widget", "null-note",
                                                          {"note": None}))["spec"], {})
        status, answer, _ = self.request("POST", path, self.obj("Widget", "null-tag",
                                                                  {"tags": ["", None]}))
        self.assertEqual(status, 422, answer)
        self.assertIn('spec.tags[1]: Invalid value: "null": spec.tags[1] in body must be of '
                      'type string: "null"', answer["message"])

    # Server-side apply -------------------------------------------------------------------------

    def test_apply_managers_conflicts_and_force(self):
        path, _ = self.make_crd("widgets", "Widget", TYPED_SCHEMA)
        status, created, _ = self.request("PATCH", path + "/a?fieldManager=alice", self.obj(
            "Widget", "a", {"count": 1, "note": "red"}), APPLY)
        self.assertEqual(status, 201, created)
        self.assertEqual(managers(created), {("alice", "Apply", ""): {
            "f:spec": {"f:count": {}, "f:note": {}}}})
        # Another manager changing alice's field: 409 naming it, nothing written.
        status, answer, _ = self.request("PATCH", path + "/a?fieldManager=bob", self.obj(
            "Widget", "a", {"note": "blue"}), APPLY)
        self.assertEqual(status, 409, answer)
        self.assertEqual(answer["message"],
                         'Apply failed with 1 conflict: conflict with "alice": .spec.note')
        self.assertEqual(answer["details"]["causes"], [{
            "reason": "FieldManagerConflict", "message": 'conflict with "alice"',
            "field": ".spec.note"}])
        # The same value is shared ownership, no conflict.
        shared = self.ok("PATCH", path + "/a?fieldManager=carol",
                         self.obj("Widget", "a", {"count": 1}), APPLY)
        self.assertEqual(shared["spec"], created["spec"])
        self.assertEqual(managers(shared)[("carol", "Apply", "")], {"f:spec": {"f:count": {}}})
        # force takes the field over.
        forced = self.ok("PATCH", path + "/a?fieldManager=bob&force=true",
                         self.obj("Widget", "a", {"note": "blue"}), APPLY)
        self.assertEqual(forced["spec"], {"count": 1, "note": "blue"})
        self.assertEqual(managers(forced), {
            ("alice", "Apply", ""): {"f:spec": {"f:count": {}}},
            ("bob", "Apply", ""): {"f:spec": {"f:note": {}}},
            ("carol", "Apply", ""): {"f:spec": {"f:count": {}}}})
        # A field alice no longer applies is removed unless someone else owns it.
        self.ok("PATCH", path + "/a?fieldManager=alice", self.obj("Widget", "a", {}), APPLY)
        self.assertEqual(self.ok("GET", path + "/a")["spec"], {"count": 1, "note": "blue"})
        self.ok("PATCH", path + "/a?fieldManager=carol", self.obj("Widget", "a", {}), APPLY)
        self.assertEqual(self.ok("GET", path + "/a")["spec"], {"note": "blue"})
        # An update (merge patch) is recorded as an Update manager.
        patched = self.ok("PATCH", path + "/a?fieldManager=dave", {"spec": {"count": 7}}, MERGE)
        self.assertEqual(managers(patched)[("dave", "Update", "")],
                         {"f:spec": {"f:count": {}}})
        status, answer, _ = self.request("PATCH", path + "/a", self.obj("Widget", "a", {}),
                                         APPLY)
        self.assertEqual(status, 422, answer)
        self.assertIn("fieldManager: Required value: is required for apply patch",
                      answer["message"])

    def test_apply_to_a_list_type_map(self):
        path, _ = self.make_crd("widgets", "Widget", TYPED_SCHEMA)
        self.ok("PATCH", path + "/m?fieldManager=alice", self.obj(
            "Widget", "m", {"ports": [{"name": "http", "port": 80}]}), APPLY)
        status, answer, _ = self.request("PATCH", path + "/m?fieldManager=bob", self.obj(
            "Widget", "m", {"ports": [{"name": "grpc", "port": 90}]}), APPLY)
        if self.EMBEDDED:
            # Deviation "server-side apply to a list-type map or set": the list is atomic, so
            # bob's item conflicts with alice's list; forced, it replaces the list.
            self.assertEqual(status, 409, answer)
            self.assertEqual(answer["message"],
                             'Apply failed with 1 conflict: conflict with "alice": .spec.ports')
            forced = self.ok("PATCH", path + "/m?fieldManager=bob&force=true", self.obj(
                "Widget", "m", {"ports": [{"name": "grpc", "port": 90}]}), APPLY)
            self.assertEqual(forced["spec"]["ports"], [{"name": "grpc", "port": 90}])
            self.assertEqual(managers(forced)[("bob", "Apply", "")], {"f:spec": {"f:ports": {}}})
        else:
            # Merged item by item, each manager owning its items.
            self.assertEqual(status, 200, answer)
            self.assertEqual(answer["spec"]["ports"], [{"name": "http", "port": 80},
                                                       {"name": "grpc", "port": 90}])
            self.assertEqual(managers(answer)[("bob", "Apply", "")], {"f:spec": {"f:ports": {
                'k:{"name":"grpc"}': {".": {}, "f:name": {}, "f:port": {}}}}})
            # An item without its key, or two with the same key, cannot be applied.
            for ports, message in [([{"port": 1}], "omits all key fields"),
                                   ([{"name": "a"}, {"name": "a"}], "duplicate entries for key")]:
                status, answer, _ = self.request("PATCH", path + "/m?fieldManager=carol",
                                                 self.obj("Widget", "m", {"ports": ports}), APPLY)
                self.assertEqual(status, 500, answer)
                self.assertIn(message, answer["message"])

    def test_apply_of_unknown_or_mistyped_fields(self):
        path, _ = self.make_crd("widgets", "Widget", TYPED_SCHEMA)
        self.ok("PATCH", path + "/u?fieldManager=alice", self.obj("Widget", "u", {"count": 1}),
                APPLY)
        status, unknown, _ = self.request("PATCH", path + "/u?fieldManager=alice", self.obj(
            "Widget", "u", {"count": 2, "junk": 1}), APPLY)
        status_mistyped, mistyped, _ = self.request("PATCH", path + "/u?fieldManager=alice",
                                                    self.obj("Widget", "u", {"count": "x"}), APPLY)
        if self.EMBEDDED:
            # Deviation "server-side apply with unknown or mistyped fields": the unknown field
            # is pruned (and listed in the manager's fields), a wrong type is the validation's
            # 422.
            self.assertEqual(status, 200, unknown)
            self.assertEqual(unknown["spec"], {"count": 2})
            self.assertEqual(managers(unknown)[("alice", "Apply", "")],
                             {"f:spec": {"f:count": {}, "f:junk": {}}})
            self.assertEqual(status_mistyped, 422, mistyped)
            self.assertIn("spec.count in body must be of type integer", mistyped["message"])
        else:
            self.assertEqual(status, 500, unknown)
            self.assertIn(".spec.junk: field not declared in schema", unknown["message"])
            self.assertEqual(status_mistyped, 500, mistyped)
            self.assertIn(".spec.count: expected numeric (int or float), got string",
                          mistyped["message"])

    def test_apply_to_the_status_subresource(self):
        path, _ = self.make_crd("widgets", "Widget", TYPED_SCHEMA)
        self.ok("PATCH", path + "/s?fieldManager=alice", self.obj(
            "Widget", "s", {"count": 1}, status={"phase": "ignored"}), APPLY)
        self.assertNotIn("status", self.ok("GET", path + "/s"))
        applied = self.ok("PATCH", path + "/s/status?fieldManager=ctl", self.obj(
            "Widget", "s", {"count": 9}, status={"phase": "Ready"}), APPLY)
        self.assertEqual((applied["spec"], applied["status"]), ({"count": 1}, {"phase": "Ready"}))
        self.assertEqual(managers(applied)[("ctl", "Apply", "status")],
                         {"f:status": {"f:phase": {}}})
        self.assertEqual(applied["metadata"]["generation"], 1)

    # The status subresource --------------------------------------------------------------------

    def test_writes_to_the_object_ignore_status(self):
        path, _ = self.make_crd("widgets", "Widget", TYPED_SCHEMA)
        created = self.ok("POST", path, self.obj("Widget", "w", {"note": "x"},
                                                 status={"phase": "ignored"}))
        self.assertNotIn("status", created)
        self.ok("PATCH", path + "/w/status", {"status": {"phase": "Ready"}}, MERGE)
        patched = self.ok("PATCH", path + "/w", {"spec": {"note": "y"},
                                                 "status": {"phase": "nope"}}, MERGE)
        self.assertEqual((patched["spec"], patched["status"], patched["metadata"]["generation"]),
                         ({"note": "y"}, {"phase": "Ready"}, 2))
        patched["spec"]["note"] = "z"
        patched["status"]["phase"] = "nope"
        put = self.ok("PUT", path + "/w", patched)
        self.assertEqual((put["spec"], put["status"], put["metadata"]["generation"]),
                         ({"note": "z"}, {"phase": "Ready"}, 3))
        put["metadata"]["labels"] = {"only": "metadata"}
        relabelled = self.ok("PUT", path + "/w", put)
        self.assertEqual(relabelled["metadata"]["generation"], 3)

    def test_writes_to_status_ignore_spec_and_metadata(self):
        path, _ = self.make_crd("widgets", "Widget", TYPED_SCHEMA)
        self.ok("POST", path, self.obj("Widget", "w", {"note": "x"}))
        patched = self.ok("PATCH", path + "/w/status", {
            "spec": {"note": "from-status"}, "status": {"phase": "Ready"},
            "metadata": {"labels": {"a": "b"}, "annotations": {"c": "d"},
                         "finalizers": ["e2e.example.com/f"]}}, MERGE)
        self.assertEqual((patched["spec"], patched["status"]), ({"note": "x"}, {"phase": "Ready"}))
        for field in ("labels", "annotations", "finalizers"):
            self.assertNotIn(field, patched["metadata"])
        self.assertEqual(patched["metadata"]["generation"], 1)
        patched = self.ok("PATCH", path + "/w/status",
                          [{"op": "replace", "path": "/status/phase", "value": "Done"}],
                          JSON_PATCH)
        self.assertEqual(patched["status"], {"phase": "Done"})
        patched["spec"]["note"] = "from-status-put"
        patched["status"]["phase"] = "Put"
        put = self.ok("PUT", path + "/w/status", patched)
        self.assertEqual((put["spec"], put["status"], put["metadata"]["generation"]),
                         ({"note": "x"}, {"phase": "Put"}, 1))
        for method, body, content_type in [
                ("GET", None, "application/json"),
                ("PUT", self.obj("Widget", "missing", status={"phase": "a"}), "application/json"),
                ("PATCH", {"status": {"phase": "a"}}, MERGE)]:
            status, answer, _ = self.request(method, path + "/missing/status", body, content_type)
            self.assertEqual((status, answer["message"]),
                             (404, 'widgets.%s "missing" not found' % self.group), answer)
        status, answer, _ = self.request("POST", path + "/w/status", self.obj("Widget", "w"))
        # Deviation "create on a subresource": the same 405, another message.
        self.assertEqual((status, answer["message"]), (
            405, "create is not allowed on a named object or subresource" if self.EMBEDDED
            else 'create is not supported on resources of kind "widgets.%s"' % self.group))

    def test_stale_resource_version_is_a_conflict(self):
        path, _ = self.make_crd("widgets", "Widget", TYPED_SCHEMA)
        created = self.ok("POST", path, self.obj("Widget", "w", {"note": "x"}))
        self.ok("PATCH", path + "/w", {"spec": {"note": "y"}}, MERGE)
        created["spec"]["note"] = "stale"
        for suffix in ("", "/status"):
            status, answer, _ = self.request("PUT", path + "/w" + suffix, created)
            self.assertEqual((status, answer["reason"]), (409, "Conflict"), answer)
            self.assertIn("the object has been modified; please apply your changes to the "
                          "latest version and try again", answer["message"])

    # x-kubernetes-validations (CEL) ------------------------------------------------------------

    def test_cel_rules(self):
        path, warnings = self.make_crd("rules", "Rule", CEL_SCHEMA)
        if self.EMBEDDED:
            # Deviation "CEL rules": accepted with a Warning naming where the rules are.
            self.assertEqual(len(warnings), 1, warnings)
            self.assertIn(CEL_WARNING + ", ".join(CEL_PATHS), warnings[0])
        else:
            self.assertEqual(warnings, [])
        self.ok("POST", path, self.obj("Rule", "ok", {"min": 1, "max": 2, "name": "r-a",
                                                      "fixed": "x"}))
        status, answer, _ = self.request("POST", path, self.obj("Rule", "bad", {
            "min": 3, "max": 2, "name": "q", "fixed": "x"}))
        status_changed, changed, _ = self.request("PATCH", path + "/ok",
                                                  {"spec": {"fixed": "y"}}, MERGE)
        if self.EMBEDDED:
            # Not enforced: objects that break the rules are stored.
            self.assertEqual(status, 201, answer)
            self.assertEqual(status_changed, 200, changed)
        else:
            self.assertEqual(status, 422, answer)
            self.assertTrue(answer["message"].startswith('Rule.%s "bad" is invalid: [' %
                                                         self.group), answer)
            self.assertEqual(sorted((c["field"], c["message"])
                                    for c in answer["details"]["causes"]),
                             [("spec", "Invalid value: min must not exceed max"),
                              ("spec.name", 'Invalid value: "q": name must start with r-: q')])
            self.assertEqual(status_changed, 422, changed)
            self.assertEqual([(c["field"], c["message"]) for c in changed["details"]["causes"]],
                             [("spec.fixed", 'Invalid value: "y": is immutable')])

    def test_a_cel_rule_that_does_not_compile(self):
        crd = crd_for(self.group, "bads", "Bad", {"type": "object", "properties": {"spec": {
            "type": "object", "properties": {"min": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.nosuch > 1"}]}}})
        status, answer, warnings = self.request("POST", CRDS, crd)
        if self.EMBEDDED:
            # Deviation "CEL rules": not compiled either, so accepted with the same Warning.
            self.assertEqual(status, 201, answer)
            self.assertIn(CEL_WARNING + CEL_PATHS[0], warnings[0])
        else:
            self.assertEqual(status, 422, answer)
            self.assertIn("x-kubernetes-validations[0].rule", answer["message"])
            self.assertIn("compilation failed: ERROR: <input>:1:5: undefined field 'nosuch'",
                          answer["message"])

    # Lists and watches of custom resources ----------------------------------------------------

    def test_list_pages_selectors_and_watch(self):
        path, _ = self.make_crd("widgets", "Widget", TYPED_SCHEMA)
        for i in range(5):
            body = self.obj("Widget", "w%d" % i, {"count": i})
            body["metadata"]["labels"] = {"parity": "even" if i % 2 == 0 else "odd"}
            self.ok("POST", path, body)
        selected = self.ok("GET", path + "?labelSelector=parity%3Deven")
        self.assertEqual([i["metadata"]["name"] for i in selected["items"]], ["w0", "w2", "w4"])
        names, token = [], ""
        for _ in range(10):
            page = self.ok("GET", path + "?limit=2" + ("&continue=" + token if token else ""))
            self.assertLessEqual(len(page["items"]), 2)
            names += [i["metadata"]["name"] for i in page["items"]]
            token = page["metadata"].get("continue", "")
            if not token:
                break
        self.assertEqual(names, ["w0", "w1", "w2", "w3", "w4"])
        version = page["metadata"]["resourceVersion"]
        stream = self.api.watch(path + "?watch=true&resourceVersion=%s" % version)
        try:
            self.assertEqual(stream.status, 200)
            self.ok("PATCH", path + "/w1", {"spec": {"count": 10}}, MERGE)
            self.ok("DELETE", path + "/w3")
            events = stream.events_until(lambda e: e["type"] == "DELETED")
        finally:
            stream.close()
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in events],
                         [("MODIFIED", "w1"), ("DELETED", "w3")])
        self.assertEqual(events[0]["object"]["spec"], {"count": 10})

    # kubectl -----------------------------------------------------------------------------------

    def kubectl(self, *args, input_text=None, ok=True):
        binary = shutil.which("kubectl")
        if not binary:
            self.fail("no kubectl on PATH (tools/setup installs one)")
        result = apiserver_fixture.kubectl(binary, self.server.kubeconfig, *args,
                                           input_text=input_text)
        if ok:
            self.assertEqual(result.returncode, 0, "kubectl %s\nstdout: %s\nstderr: %s" %
                             (" ".join(args), result.stdout, result.stderr))
        return result

    def test_kubectl_with_custom_resources(self):
        crd = crd_for(self.group, "pools", "Pool", CEL_SCHEMA, subresources={
            "status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                    "statusReplicasPath": ".status.replicas"}})
        spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        spec["properties"]["replicas"] = {"type": "integer",
                                          "description": "How many pools there are."}
        result = self.kubectl("apply", "-f", "-", input_text=json.dumps(crd))
        self.assertIn("customresourcedefinition.apiextensions.k8s.io/pools.%s created" %
                      self.group, result.stdout)
        if self.EMBEDDED:
            # Deviation "CEL rules": kubectl shows the server's Warning.
            self.assertIn("Warning: " + CEL_WARNING, result.stderr)
        else:
            self.assertNotIn("Warning", result.stderr)
        self.wait_served("/apis/%s/v1/namespaces/%s/pools" % (self.group, NAMESPACE))
        out = self.kubectl("api-resources", "--api-group=" + self.group).stdout
        self.assertRegex(out, r"(?m)^pools\s+%s/v1\s+true\s+Pool\s*$" % re.escape(self.group))
        pool = {"apiVersion": self.group + "/v1", "kind": "Pool",
                "metadata": {"name": "p1", "namespace": NAMESPACE},
                "spec": {"min": 1, "max": 2, "name": "r-p", "replicas": 1}}
        self.assertEqual(self.kubectl("apply", "-f", "-", input_text=json.dumps(pool))
                         .stdout.strip(), "pool.%s/p1 created" % self.group)
        # Server-side apply after client-side apply, changing a field the last-applied
        # configuration holds.
        pool["spec"]["max"] = 3
        # Both servers let kubectl take what its client-side apply set (the last-applied
        # manager): no conflict with kubectl-client-side-apply.
        result = self.kubectl("apply", "--server-side", "-f", "-", input_text=json.dumps(pool))
        self.assertEqual(result.stdout.strip(), "pool.%s/p1 serverside-applied" % self.group)
        got = json.loads(self.kubectl("get", "-n", NAMESPACE, "pools." + self.group, "p1",
                                      "-o", "json", "--show-managed-fields").stdout)
        self.assertEqual(got["spec"]["max"], 3)
        # kubectl owns the field now, and nobody else does.
        owners = sorted(e["manager"] for e in got["metadata"]["managedFields"]
                        if "f:max" in e.get("fieldsV1", {}).get("f:spec", {}))
        self.assertEqual(owners, ["kubectl"], got["metadata"]["managedFields"])
        # An object that breaks a CEL rule.
        pool["spec"]["min"] = 5
        result = self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                              input_text=json.dumps(pool), ok=self.EMBEDDED)
        if not self.EMBEDDED:
            self.assertIn("min must not exceed max", result.stderr)
        self.kubectl("scale", "-n", NAMESPACE, "pools." + self.group, "p1", "--replicas=4")
        got = json.loads(self.kubectl("get", "-n", NAMESPACE, "pools." + self.group, "p1",
                                      "-o", "json").stdout)
        self.assertEqual(got["spec"]["replicas"], 4)
        out = self.kubectl("explain", "pools.spec.replicas").stdout
        self.assertIn("How many pools there are.", out)
        self.kubectl("delete", "crd", "pools." + self.group)


class DeviationsTest(unittest.TestCase):
    """Each deviation a scenario names ("Deviation "NAME"") is a row of docs/apiserver.md."""

    def test_deviations_are_documented(self):
        # A declared input (data = //docs:apiserver.md): Bazel reruns this when the docs change.
        here = os.path.abspath(__file__)
        docs = os.path.join(os.path.dirname(here), "..", "..", "docs", "apiserver.md")
        with open(docs, encoding="utf-8") as f:
            text = f.read()
        section = text[text.index("## Differences from apiextensions-apiserver 0.36"):]
        with open(here, encoding="utf-8") as f:
            names = set(re.findall(r'# Deviation "([A-Za-z][^"]*)"', f.read()))
        self.assertGreaterEqual(len(names), 10)
        for name in sorted(names):
            self.assertIn("| **%s**" % name, section, "docs/apiserver.md has no row for it")


class EmbeddedServerTest(CrdScenarios, unittest.TestCase):
    """The scenarios against `ctrlhost apiserver`."""

    EMBEDDED = True

    @classmethod
    def start_server(cls):
        return apiserver_fixture.ApiServer.start()


class ApiextensionsApiserver036Test(CrdScenarios, unittest.TestCase):
    """The same scenarios against k8s.io/apiextensions-apiserver 0.36 (Debian sid)."""

    EMBEDDED = False

    @classmethod
    def start_server(cls):
        binary = crd_server_fixture.binary_path()
        if binary is None:
            raise unittest.SkipTest(crd_server_fixture.SKIP_REASON)
        if not os.access(binary, os.X_OK):
            raise AssertionError("$%s=%s is not an executable (tools/crd-server-sid --path)" %
                                 (crd_server_fixture.ENV, binary))
        server = crd_server_fixture.CrdServer.start(binary)
        if not server.version["gitVersion"].startswith("v1.36."):
            server.stop()
            raise AssertionError("not apiextensions-apiserver 1.36: %s" % server.version)
        return server


if __name__ == "__main__":
    bazel_unittest.main()
