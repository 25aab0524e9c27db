"""End to end: real `ctrlhost run`, the real reference plugins as processes, and kubectl, against
the embedded API server (webapp_e2e_test) and against real Kubernetes 1.20 (webapp_kube_e2e_test,
e2e/kube). Create, update and delete of WebApps converge (children created, updated,
garbage-collected; the finalizer's external record removed); the ConfigMap replicator follows
namespaces as they come; a converged state makes no more reconciles and no writes; /metrics,
/readyz and /debug/dump answer. The WebApp plugin is the C++, Python or Node one
($CTRLHOST_E2E_WEBAPP: cpp, py, node)."""

import json
import os
import subprocess
import tempfile
import time
import unittest

from e2e.apiserver import apiserver_fixture
from e2e.host import host_fixture
from tools.internal import bazel_unittest

OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: examples
spec:
  plugins:
    - name: webapp
      exec:
        command: {webapp}
        env:
          WEBAPP_RECORD_DIR: {records}
    - name: configmap-replicator
      exec:
        command: {replicator}
"""


STEADY_SECONDS = 8

WEBAPP_PLUGINS = {
    "cpp": "plugins/webapp/webapp",
    "py": "plugins/webapp-py/webapp-py",
    "node": "plugins/webapp-node/webapp-node",
}


def webapp_command():
    language = os.environ.get("CTRLHOST_E2E_WEBAPP", "cpp")
    return host_fixture.runfile(WEBAPP_PLUGINS[language])


class ReferencePluginsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.records = tempfile.mkdtemp(prefix="records-", dir=os.environ.get("TEST_TMPDIR"))
        cls.host = host_fixture.start_host(OPERATOR.format(
            webapp=webapp_command(),
            replicator=host_fixture.runfile(
                "plugins/configmap-replicator/configmap-replicator"),
            records=cls.records))
        cls.host.kubectl("apply", "-f", host_fixture.runfile("plugins/webapp/deploy/crd.yaml"),
                         check=True)

    @classmethod
    def tearDownClass(cls):
        code = cls.host.stop()
        assert code == 0, "ctrlhost exited %s\n%s" % (code, cls.host.log()[-4000:])

    def get(self, *args):
        result = self.host.kubectl("get", "-o", "json", *args)
        return json.loads(result.stdout) if result.returncode == 0 else None

    def test_webapp_lifecycle(self):
        h = self.host
        h.kubectl("create", "namespace", "shop", check=True)
        h.kubectl("apply", "-f", "-", check=True, input_text="""
apiVersion: apps.ctrlhost.dev/v1alpha1
kind: WebApp
metadata: {name: store, namespace: shop}
spec:
  image: nginx:1.25
  replicas: 2
  config: {GREETING: hello}
""")
        web = h.wait_for(lambda: (lambda w: w if w and w.get("status", {}).get(
            "observedGeneration") == 1 else None)(self.get("-n", "shop", "webapp", "store")),
            "WebApp status")
        conditions = {c["type"]: c for c in web["status"]["conditions"]}
        self.assertEqual(conditions["Ready"]["status"], "False")  # no kubelet: 0 ready pods
        self.assertEqual(web["metadata"]["finalizers"], ["apps.ctrlhost.dev/external-record"])
        for kind, name in (("deployment", "store"), ("service", "store"),
                           ("configmap", "store-config")):
            child = h.wait_for(lambda: self.get("-n", "shop", kind, name), kind)
            owners = child["metadata"]["ownerReferences"]
            self.assertEqual([o["uid"] for o in owners], [web["metadata"]["uid"]], kind)
        self.assertTrue(os.path.exists(os.path.join(self.records, "shop_store.json")))

        # A spec change reaches the children and the status.
        h.kubectl("-n", "shop", "patch", "webapp", "store", "--type=merge",
                  "-p", '{"spec":{"replicas":4,"config":{"GREETING":"bye"}}}', check=True)
        h.wait_for(lambda: (self.get("-n", "shop", "deployment", "store") or {})
                   .get("spec", {}).get("replicas") == 4, "deployment scaled to 4")
        h.wait_for(lambda: (self.get("-n", "shop", "configmap", "store-config") or {})
                   .get("data", {}).get("GREETING") == "bye", "config updated")
        h.wait_for(lambda: (self.get("-n", "shop", "webapp", "store") or {})
                   .get("status", {}).get("observedGeneration") == 2, "observedGeneration 2")

        # A child deleted behind the controller's back comes back.
        h.kubectl("-n", "shop", "delete", "service", "store", check=True)
        h.wait_for(lambda: self.get("-n", "shop", "service", "store"), "service recreated")

        # Delete: the finalizer runs (the record goes), then everything is collected.
        h.kubectl("-n", "shop", "delete", "webapp", "store", "--wait=true", "--timeout=60s",
                  check=True)
        self.assertFalse(os.path.exists(os.path.join(self.records, "shop_store.json")))
        for kind, name in (("deployment", "store"), ("service", "store"),
                           ("configmap", "store-config")):
            h.wait_for(lambda: self.get("-n", "shop", kind, name) is None,
                       "%s garbage-collected" % kind)

    def test_configmap_replicator_follows_namespaces(self):
        h = self.host
        h.kubectl("create", "namespace", "source", check=True)
        h.kubectl("apply", "-f", "-", check=True, input_text="""
apiVersion: v1
kind: ConfigMap
metadata:
  name: shared
  namespace: source
  labels: {ctrlhost.dev/replicate: "true"}
  annotations: {ctrlhost.dev/replicate-to: "team=blue"}
data: {motto: be kind}
""")
        h.kubectl("create", "namespace", "blue-a", check=True)
        h.kubectl("label", "namespace", "blue-a", "team=blue", check=True)
        h.kubectl("create", "namespace", "red", check=True)
        copy = h.wait_for(lambda: self.get("-n", "blue-a", "configmap", "shared"),
                          "replica in blue-a")
        self.assertEqual(copy["data"], {"motto": "be kind"})
        # A namespace created later gets its copy too; a non-matching one does not.
        h.kubectl("apply", "-f", "-", check=True, input_text="""
apiVersion: v1
kind: Namespace
metadata: {name: blue-b, labels: {team: blue}}
""")
        h.wait_for(lambda: self.get("-n", "blue-b", "configmap", "shared"), "replica in blue-b")
        self.assertIsNone(self.get("-n", "red", "configmap", "shared"))
        # The source changes: the copies follow.
        h.kubectl("-n", "source", "patch", "configmap", "shared", "--type=merge",
                  "-p", '{"data":{"motto":"be brave"}}', check=True)
        for ns in ("blue-a", "blue-b"):
            h.wait_for(lambda: (self.get("-n", ns, "configmap", "shared") or {})
                       .get("data", {}).get("motto") == "be brave", "copy updated in " + ns)

    def resource_versions(self, namespace):
        """{kind/name: resourceVersion} of everything the WebApp controller reads or writes."""
        listing = self.get("-n", namespace, "webapps,deployments,services,configmaps")
        return {"%s/%s" % (o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
                for o in listing["items"]}

    def test_steady_state_makes_no_writes(self):
        """Converged means quiet: no reconciles and no writes (every resourceVersion stays).
        One WebApp without spec.config: its ConfigMap has `data: {}`, which real Kubernetes
        drops, so an apply of it is a write that changes nothing but managedFields."""
        h = self.host
        h.kubectl("create", "namespace", "quiet", check=True)
        h.kubectl("apply", "-f", "-", check=True, input_text="""
apiVersion: apps.ctrlhost.dev/v1alpha1
kind: WebApp
metadata: {name: plain, namespace: quiet}
spec: {image: nginx:1.25, replicas: 1}
---
apiVersion: apps.ctrlhost.dev/v1alpha1
kind: WebApp
metadata: {name: configured, namespace: quiet}
spec: {image: nginx:1.25, replicas: 2, config: {MODE: calm}}
""")
        for name in ("plain", "configured"):
            h.wait_for(lambda: (self.get("-n", "quiet", "webapp", name) or {}).get(
                "status", {}).get("observedGeneration") == 1, "%s status" % name)
            for kind, child in (("deployment", name), ("service", name),
                                ("configmap", name + "-config")):
                h.wait_for(lambda: self.get("-n", "quiet", kind, child), kind)

        def settled():
            before = (self.resource_versions("quiet"),
                      h.metric("controller_runtime_reconcile_total", controller="webapp"))
            time.sleep(2)
            after = (self.resource_versions("quiet"),
                     h.metric("controller_runtime_reconcile_total", controller="webapp"))
            return before == after
        h.wait_for(settled, "the WebApps to settle", timeout=60)

        versions = self.resource_versions("quiet")
        reconciles = h.metric("controller_runtime_reconcile_total", controller="webapp")
        time.sleep(STEADY_SECONDS)
        self.assertEqual(self.resource_versions("quiet"), versions,
                         "objects were written in the steady state")
        self.assertEqual(h.metric("controller_runtime_reconcile_total", controller="webapp"),
                         reconciles, "reconciles in the steady state")

    def test_ctrlhost_test_on_objects_taken_from_the_server(self):
        """`ctrlhost test` fixtures exported from the server (kubectl get -o json, with
        everything the server adds: managedFields, uid, status) give the answer the host
        applied: the same children, the same status."""
        h = self.host
        h.kubectl("create", "namespace", "fixtures", check=True)
        h.kubectl("apply", "-f", "-", check=True, input_text="""
apiVersion: apps.ctrlhost.dev/v1alpha1
kind: WebApp
metadata: {name: exported, namespace: fixtures}
spec: {image: nginx:1.25, replicas: 3, config: {LEVEL: debug}}
""")
        web = h.wait_for(lambda: (lambda w: w if w and w.get("status", {}).get(
            "observedGeneration") == 1 else None)(self.get("-n", "fixtures", "webapp",
                                                           "exported")), "WebApp status")
        directory = tempfile.mkdtemp(prefix="fixtures-", dir=os.environ.get("TEST_TMPDIR"))
        children = os.path.join(directory, "children")
        os.makedirs(children)
        for kind, name in (("deployment", "exported"), ("service", "exported"),
                           ("configmap", "exported-config")):
            live = h.wait_for(lambda: self.get("-n", "fixtures", kind, name), kind)
            with open(os.path.join(children, kind + ".json"), "w") as f:
                json.dump(live, f)
        with open(os.path.join(directory, "webapp.json"), "w") as f:
            json.dump(web, f)
        result = subprocess.run(
            [apiserver_fixture.binary_path(), "test", "--log-level=warning",
             "--plugin", webapp_command(), "--object", os.path.join(directory, "webapp.json"),
             "--children", children, "-o", "json", "--check"],
            capture_output=True, text=True, timeout=120,
            env=dict(os.environ, WEBAPP_RECORD_DIR=os.path.join(directory, "records")))
        self.assertEqual(result.returncode, 0, result.stderr)
        answer = json.loads(result.stdout)
        desired = {o["kind"]: o for o in answer["desired_objects"]}
        self.assertEqual(sorted(desired), ["ConfigMap", "Deployment", "Service"])
        live_deployment = self.get("-n", "fixtures", "deployment", "exported")
        self.assertEqual(desired["Deployment"]["spec"]["replicas"],
                         live_deployment["spec"]["replicas"])
        self.assertEqual(desired["ConfigMap"]["data"],
                         self.get("-n", "fixtures", "configmap", "exported-config")["data"])
        self.assertEqual(answer["status"]["observedGeneration"], 1)
        conditions = {c["type"]: c["status"] for c in answer.get("conditions", [])}
        live_conditions = {c["type"]: c["status"] for c in
                           self.get("-n", "fixtures", "webapp", "exported")["status"]
                           ["conditions"]}
        self.assertEqual(conditions.get("Ready") == "CONDITION_STATUS_TRUE",
                         live_conditions.get("Ready") == "True")

    def test_observability_endpoints(self):
        h = self.host
        status, text = h.endpoint("/readyz?verbose")
        self.assertEqual(status, 200, text)
        status, dump = h.endpoint("/debug/dump")
        self.assertEqual(status, 200, dump)
        self.assertIn("plugin: webapp", dump)
        self.assertIn("plugin: configmap-replicator", dump)
        metrics = h.metrics()
        for name in ("controller_runtime_reconcile_total", "workqueue_depth",
                     "workqueue_adds_total", "ctrlhost_plugin_up", "ctrlhost_watch_objects"):
            self.assertIn(name, metrics)
        self.assertEqual(h.metric("ctrlhost_plugin_up", plugin="webapp"), 1)
        # Cache memory per kind and per plugin (the replicator's caches hold at least the
        # namespaces): heap bytes at least the JSON they keep, and in the dump.
        memory = h.metric("ctrlhost_watch_memory_bytes")
        self.assertGreater(memory, 0, metrics)
        self.assertGreaterEqual(memory, h.metric("ctrlhost_watch_bytes"))
        self.assertGreater(h.metric("ctrlhost_plugin_cache_bytes", plugin="configmap-replicator"),
                           0, metrics)
        self.assertRegex(dump, r"cacheBytes: [1-9]")
        self.assertIn("memoryBytes: ", dump)

    def test_a_plugin_over_its_cache_cap_is_stopped_and_reported(self):
        # A second host whose replicator may keep 1 byte of cache: the namespaces it watches
        # always exist, so its controllers are stopped at once, and /readyz says why.
        capped = host_fixture.start_host(CAPPED_OPERATOR.format(
            replicator=host_fixture.runfile("plugins/configmap-replicator/configmap-replicator")),
            wait_ready=False)
        try:
            deadline = time.monotonic() + 60
            status, text = capped.endpoint("/readyz?verbose")
            while "over its maxCacheBytes 1" not in text and time.monotonic() < deadline:
                time.sleep(0.2)
                status, text = capped.endpoint("/readyz?verbose")
            self.assertEqual(status, 503, text)
            self.assertIn("plugin capped/configmap-replicator: the caches its controllers read "
                          "hold ", text)
            status, dump = capped.endpoint("/debug/dump")
            self.assertIn("cacheError: the caches its controllers read", dump)
            self.assertIn("state: stopped", dump)
            self.assertIn("plugin over its cache cap: controllers stopped", capped.log())
            self.assertEqual(capped.metric("ctrlhost_plugin_up", plugin="configmap-replicator"),
                             1)
        finally:
            self.assertEqual(capped.stop(), 0, capped.log()[-4000:])


CAPPED_OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: capped
spec:
  plugins:
    - name: configmap-replicator
      maxCacheBytes: 1
      exec:
        command: {replicator}
"""


if __name__ == "__main__":
    bazel_unittest.main()
