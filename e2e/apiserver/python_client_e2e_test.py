"""End-to-end tests of `ctrlhost apiserver` with the Python kubernetes client.

The client is Debian's python3-kubernetes, run with /usr/bin/python3, configured from the
kubeconfig the server writes, exactly as a user's program would be.
"""

import json
import threading
import unittest

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from e2e.apiserver.apiserver_fixture import ApiServer, pending
from tools.internal import bazel_unittest

GROUP, VERSION, PLURAL = "example.com", "v1", "widgets"
WATCH_SECONDS = 20


def setUpModule():
    global server, api_client
    server = ApiServer.start()
    api_client = config.new_client_from_config(config_file=server.kubeconfig)
    client.ApiextensionsV1Api(api_client).create_custom_resource_definition({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": GROUP, "scope": "Namespaced",
                 "names": {"plural": PLURAL, "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": VERSION, "served": True, "storage": True,
                               "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}]}})


def tearDownModule():
    server.stop()


def cm(**kwargs):
    """A ConfigMap body with apiVersion and kind set (see test_body_without_kind)."""
    return client.V1ConfigMap(api_version="v1", kind="ConfigMap", **kwargs)


def widget(name, labels=None, size=1):
    return {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "Widget",
            "metadata": {"name": name, "labels": labels or {}}, "spec": {"size": size}}


class PythonClientTest(unittest.TestCase):

    def setUp(self):
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.ns = self._testMethodName.replace("_", "-")[:50]
        self.core.create_namespace(client.V1Namespace(
            api_version="v1", kind="Namespace", metadata=client.V1ObjectMeta(name=self.ns)))

    def tearDown(self):
        self.assertTrue(server.alive(), server.stderr()[-3000:])

    def test_create_get_patch_delete(self):
        created = self.core.create_namespaced_config_map(self.ns, cm(
            metadata=client.V1ObjectMeta(name="c1", labels={"app": "x"}), data={"a": "1"}))
        self.assertTrue(created.metadata.uid)
        self.assertTrue(created.metadata.resource_version)
        got = self.core.read_namespaced_config_map("c1", self.ns)
        self.assertEqual(got.data, {"a": "1"})
        self.assertEqual(got.metadata.uid, created.metadata.uid)
        patched = self.core.patch_namespaced_config_map("c1", self.ns, {"data": {"b": "2"}})
        self.assertEqual(patched.data, {"a": "1", "b": "2"})
        self.assertGreater(int(patched.metadata.resource_version),
                           int(created.metadata.resource_version))
        # A custom resource through the dynamic CustomObjectsApi, with the status subresource.
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL,
                                                    widget("w1"))
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, "w1",
                                                   {"spec": {"size": 2}})
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, self.ns, PLURAL, "w1", {"status": {"phase": "Ready"}})
        w1 = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, "w1")
        self.assertEqual(w1["spec"], {"size": 2})
        self.assertEqual(w1["status"], {"phase": "Ready"})
        self.assertEqual(w1["metadata"]["generation"], 2)
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, "w1")
        self.core.delete_namespaced_config_map("c1", self.ns)
        self.assertEqual(self.core.list_namespaced_config_map(self.ns).items, [])

    def test_list_with_label_selector(self):
        for name, labels in [("a", {"tier": "gold"}), ("b", {"tier": "silver"}), ("c", {})]:
            self.core.create_namespaced_config_map(self.ns, cm(
                metadata=client.V1ObjectMeta(name=name, labels=labels)))
        def names(selector):
            return [c.metadata.name for c in self.core.list_namespaced_config_map(
                self.ns, label_selector=selector).items]
        self.assertEqual(names("tier=gold"), ["a"])
        self.assertEqual(names("tier notin (gold)"), ["b", "c"])
        self.assertEqual(names("!tier"), ["c"])
        self.assertEqual(names("tier in (gold, silver)"), ["a", "b"])
        # Field selectors on metadata.name work too.
        self.assertEqual([c.metadata.name for c in self.core.list_namespaced_config_map(
            self.ns, field_selector="metadata.name=b").items], ["b"])

    def test_paginated_list(self):
        names = ["item-%02d" % i for i in range(7)]
        for name in names:
            self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL,
                                                        widget(name))
        seen, pages, token = [], 0, None
        list_rv = None
        while True:
            page = self.custom.list_namespaced_custom_object(
                GROUP, VERSION, self.ns, PLURAL, limit=3, _continue=token)
            pages += 1
            self.assertLessEqual(len(page["items"]), 3)
            seen += [i["metadata"]["name"] for i in page["items"]]
            list_rv = list_rv or page["metadata"]["resourceVersion"]
            if pages == 1:
                # Written after the first page: a consistent snapshot does not show it.
                self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL,
                                                            widget("item-late"))
            token = page["metadata"].get("continue")
            if not token:
                break
            self.assertLess(pages, 10, "pagination does not end")
        self.assertEqual(pages, 3)
        self.assertEqual(seen, names)

    @pending("bool-query-params")  # the client sends watch=True
    def test_watch_from_resource_version(self):
        start = self.core.list_namespaced_config_map(self.ns).metadata.resource_version
        self.core.create_namespaced_config_map(self.ns, cm(
            metadata=client.V1ObjectMeta(name="c1"), data={"v": "1"}))
        self.core.patch_namespaced_config_map("c1", self.ns, {"data": {"v": "2"}})
        self.core.delete_namespaced_config_map("c1", self.ns)

        def write_more():  # written while the watch is open
            self.core.create_namespaced_config_map(self.ns, cm(
                metadata=client.V1ObjectMeta(name="c2")))

        writer = threading.Thread(target=write_more)
        events = []
        w = watch.Watch()
        for event in w.stream(self.core.list_namespaced_config_map, self.ns,
                              resource_version=start, timeout_seconds=WATCH_SECONDS):
            events.append((event["type"], event["object"].metadata.name,
                           (event["object"].data or {}).get("v"),
                           int(event["object"].metadata.resource_version)))
            if len(events) == 3:
                writer.start()
            if len(events) == 4:
                w.stop()
        if writer.is_alive() or len(events) >= 3:
            writer.join(WATCH_SECONDS)
        self.assertEqual([e[:3] for e in events], [("ADDED", "c1", "1"), ("MODIFIED", "c1", "2"),
                                                   ("DELETED", "c1", "2"),
                                                   ("ADDED", "c2", None)])
        revisions = [e[3] for e in events]
        self.assertEqual(revisions, sorted(revisions))
        self.assertEqual(len(set(revisions)), 4)
        self.assertGreater(revisions[0], int(start))

    @pending("defaulted-kind")
    def test_body_without_kind(self):
        # Typed clients often leave apiVersion/kind out; a real server takes them from the URL.
        created = self.core.create_namespaced_config_map(self.ns, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="bare"), data={"a": "1"}))
        self.assertEqual((created.api_version, created.kind), ("v1", "ConfigMap"))
        self.core.replace_namespaced_config_map("bare", self.ns, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="bare",
                                         resource_version=created.metadata.resource_version),
            data={"a": "2"}))
        self.assertEqual(self.core.read_namespaced_config_map("bare", self.ns).data, {"a": "2"})

    def test_errors(self):
        def error(call, *args, **kwargs):
            with self.assertRaises(ApiException) as caught:
                call(*args, **kwargs)
            return caught.exception.status, json.loads(caught.exception.body)

        status, body = error(self.core.read_namespaced_config_map, "missing", self.ns)
        self.assertEqual((status, body["kind"], body["reason"], body["code"]),
                         (404, "Status", "NotFound", 404))
        self.assertEqual(body["details"], {"name": "missing", "kind": "configmaps"})
        self.core.create_namespaced_config_map(self.ns, cm(
            metadata=client.V1ObjectMeta(name="c1")))
        status, body = error(self.core.create_namespaced_config_map, self.ns, cm(
            metadata=client.V1ObjectMeta(name="c1")))
        self.assertEqual((status, body["reason"]), (409, "AlreadyExists"))
        current = self.core.read_namespaced_config_map("c1", self.ns)
        self.core.patch_namespaced_config_map("c1", self.ns, {"data": {"x": "1"}})
        current.data = {"x": "stale"}
        status, body = error(self.core.replace_namespaced_config_map, "c1", self.ns, current)
        self.assertEqual((status, body["reason"]), (409, "Conflict"))
        self.assertIn("the object has been modified", body["message"])
        status, body = error(self.core.create_namespaced_config_map, self.ns, cm(
            metadata=client.V1ObjectMeta(name="Not_A_Name")))
        self.assertEqual((status, body["reason"]), (422, "Invalid"))
        self.assertEqual(body["details"]["causes"][0]["field"], "metadata.name")
        status, body = error(self.custom.get_namespaced_custom_object, GROUP, VERSION, self.ns,
                             "nonexistents", "x")
        self.assertEqual((status, body["reason"]), (404, "NotFound"))
        status, body = error(self.core.list_namespaced_config_map, self.ns,
                             label_selector="a in (b")
        self.assertEqual((status, body["reason"]), (400, "BadRequest"))


if __name__ == "__main__":
    bazel_unittest.main()
