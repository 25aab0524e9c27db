"""Regression: the test cluster's kube-apiserver takes "" in a typed string field of a custom
resource, as upstream Kubernetes does.

The 1.20.2 build of tools/kubernetes recipe r1 (Go 1.19) refused it on every write path with 422
`Invalid value: "null": ... must be of type string`: the vendored kube-openapi validator took any
value equal to reflect.Zero for null, which is true of "" since Go 1.16. Recipe r2 patches it
(tools/kubernetes-patches/0001-kube-openapi-zero-value-is-not-null.patch). Each write here puts
"" (and the other zero values, 0 and false) into typed fields of spec or status, is accepted, and
reads back unchanged. null keeps its 1.20 meaning: dropped from an object field that is not
nullable, refused (422) as an item of a string array.
"""

import time
import unittest

from e2e.kube import kube_fixture

GROUP = "e2e.example.com"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets." + GROUP},
    "spec": {
        "group": GROUP, "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {
                    "note": {"type": "string"},
                    "count": {"type": "integer"},
                    "enabled": {"type": "boolean"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                }},
                "status": {"type": "object", "properties": {
                    "phase": {"type": "string"},
                    "conditions": {"type": "array", "items": {
                        "type": "object", "properties": {
                            "type": {"type": "string"},
                            "status": {"type": "string"},
                            "message": {"type": "string"},
                        }}},
                }},
            }}},
        }],
    },
}
WIDGETS = "/apis/%s/v1/namespaces/default/widgets" % GROUP
ZERO_SPEC = {"note": "", "count": 0, "enabled": False, "tags": [""]}
ZERO_STATUS = {"phase": "", "conditions": [{"type": "Ready", "status": "True", "message": ""}]}
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


class EmptyStringTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cluster = kube_fixture.Cluster.start(controller_manager=False)
        status, body = cls.cluster.request(
            "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
        if status != 201:
            cls.cluster.stop()
            raise AssertionError("creating the CRD: %s %s" % (status, body))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status, _ = cls.cluster.request("GET", WIDGETS)
            if status == 200:
                return
            time.sleep(0.2)
        cls.cluster.stop()
        raise AssertionError("widgets not served after 60 s")

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def write(self, method, path, body, content_type="application/json", expect=(200, 201)):
        status, answer = self.cluster.request(method, path, body, content_type=content_type)
        self.assertIn(status, expect, "%s %s %s: %s" % (method, path, body, answer))
        return answer

    def read(self, name):
        return self.write("GET", "%s/%s" % (WIDGETS, name), None)

    def create(self, name, spec):
        return self.write("POST", WIDGETS, {
            "apiVersion": GROUP + "/v1", "kind": "Widget",
            "metadata": {"name": name}, "spec": spec})

    def test_create(self):
        self.assertEqual(self.create("created", ZERO_SPEC)["spec"], ZERO_SPEC)
        self.assertEqual(self.read("created")["spec"], ZERO_SPEC)

    def test_merge_patch(self):
        self.create("merged", {"note": "x", "count": 1, "enabled": True})
        answer = self.write("PATCH", WIDGETS + "/merged", {"spec": ZERO_SPEC}, MERGE_PATCH)
        self.assertEqual(answer["spec"], ZERO_SPEC)
        self.assertEqual(self.read("merged")["spec"], ZERO_SPEC)

    def test_json_patch(self):
        self.create("json-patched", {"note": "x"})
        answer = self.write("PATCH", WIDGETS + "/json-patched",
                            [{"op": "replace", "path": "/spec/note", "value": ""}], JSON_PATCH)
        self.assertEqual(answer["spec"], {"note": ""})
        self.assertEqual(self.read("json-patched")["spec"], {"note": ""})

    def test_put(self):
        widget = self.create("replaced", {"note": "x"})
        widget["spec"] = dict(ZERO_SPEC)
        self.assertEqual(self.write("PUT", WIDGETS + "/replaced", widget)["spec"], ZERO_SPEC)
        self.assertEqual(self.read("replaced")["spec"], ZERO_SPEC)

    def test_status_subresource(self):
        self.create("status", {"note": "x"})
        answer = self.write("PATCH", WIDGETS + "/status/status", {"status": ZERO_STATUS},
                            MERGE_PATCH)
        self.assertEqual(answer["status"], ZERO_STATUS)
        self.assertEqual(self.read("status")["status"], ZERO_STATUS)
        # PUT to the status subresource, as a controller writing its whole status does.
        widget = self.read("status")
        widget["status"] = {"phase": "", "conditions": [
            {"type": "Ready", "status": "False", "message": ""}]}
        answer = self.write("PUT", WIDGETS + "/status/status", widget)
        self.assertEqual(answer["status"], widget["status"])
        self.assertEqual(self.read("status")["status"], widget["status"])

    def test_null_is_still_not_a_string(self):
        # A null field that is not nullable is pruned before validation (Kubernetes >= 1.20).
        self.assertEqual(self.create("null-note", {"note": None})["spec"], {})
        # Array items are not pruned: the validator sees the null and refuses it.
        status, answer = self.cluster.request("POST", WIDGETS, {
            "apiVersion": GROUP + "/v1", "kind": "Widget",
            "metadata": {"name": "null-tag"}, "spec": {"tags": ["", None]}})
        self.assertEqual(status, 422, answer)
        self.assertIn('Invalid value: "null"', answer["message"])
        self.assertIn("must be of type string", answer["message"])


if __name__ == "__main__":
    unittest.main()
