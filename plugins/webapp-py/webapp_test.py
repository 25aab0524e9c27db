"""webapp-py through the SDK's in-process harness: the cases of plugins/webapp/webapp_test.cc."""

import copy
import os
import shutil
import tempfile
import unittest

import yaml

from ctrlhost_sdk import pb, testing
from tools.internal import bazel_unittest

import webapp

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", "."), "ctrlhost")
SAMPLE = os.path.join(RUNFILES, "plugins", "webapp", "testdata", "webapp.yaml")


def load_sample():
    with open(SAMPLE, encoding="utf-8") as f:
        return yaml.safe_load(f)


class WebAppTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.records = webapp.RecordStore(os.path.join(self.dir, "records"))
        self.controller = webapp.make_controller(self.records)
        self.primary = load_sample()

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def reconcile(self, obj=None, **kwargs):
        return testing.reconcile(self.controller, self.primary if obj is None else obj, **kwargs)

    @staticmethod
    def desired(outcome, kind, name):
        (obj,) = [d for d in outcome.desired_of_kind(kind) if d["metadata"]["name"] == name]
        return obj

    def test_spec_declares_owns_and_finalizer(self):
        spec = self.controller.spec()
        self.assertEqual((spec.primary.group, spec.primary.version, spec.primary.kind),
                         ("apps.ctrlhost.dev", "v1alpha1", "WebApp"))
        self.assertEqual([o.kind.kind for o in spec.owns], ["Deployment", "Service", "ConfigMap"])
        self.assertEqual(spec.finalizer, "apps.ctrlhost.dev/external-record")
        self.assertTrue(spec.request_contents.children)
        self.assertEqual(spec.max_concurrent_reconciles, 4)

    def test_creates_children_and_reports_progress(self):
        out = self.reconcile()
        self.assertIsNone(out.error)
        cm = self.desired(out, "ConfigMap", "shop-config")
        self.assertEqual(cm["data"], {"GREETING": "hello"})
        self.assertEqual(cm["metadata"]["namespace"], "default")
        dep = self.desired(out, "Deployment", "shop")
        self.assertEqual(dep["spec"]["replicas"], 2)
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        self.assertEqual(container["image"], "nginx:1.25")
        self.assertEqual(container["ports"][0]["containerPort"], 8080)
        self.assertEqual(container["env"], [{"name": "LOG_LEVEL", "value": "info"}])
        self.assertEqual(container["envFrom"][0]["configMapRef"]["name"], "shop-config")
        self.assertEqual(dep["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"],
                         "shop")
        svc = self.desired(out, "Service", "shop")
        # `protocol` is required by kube 1.20 server-side apply (the ports list-map key).
        self.assertEqual(svc["spec"]["ports"][0], {"name": "http", "port": 8080,
                                                    "protocol": "TCP", "targetPort": "http"})
        self.assertEqual(out.status, {"observedGeneration": 3, "replicas": 2, "readyReplicas": 0,
                                      "url": "http://shop.default.svc:8080"})
        self.assertEqual(out.conditions["Ready"],
                         {"status": "False", "reason": "ReplicasNotReady",
                          "message": "0/2 replicas ready"})
        self.assertEqual(out.conditions["Progressing"]["reason"], "RollingOut")
        record = self.records.read("default", "shop")
        self.assertEqual(record["image"], "nginx:1.25")
        self.assertEqual(record["uid"], "0b6c2d9e-4a51-4f0e-9a7e-5b1f3c2d1a00")

    def test_ready_once_the_deployment_is_and_stable_across_rounds(self):
        first = self.reconcile()
        second = self.reconcile(children=first.desired)
        self.assertEqual(second.desired, first.desired)  # level-based: same answer
        dep = copy.deepcopy(self.desired(first, "Deployment", "shop"))
        dep["status"] = {"readyReplicas": 2}
        children = [self.desired(first, "ConfigMap", "shop-config"),
                    self.desired(first, "Service", "shop"), dep]
        out = self.reconcile(children=children)
        self.assertEqual(out.status["readyReplicas"], 2)
        self.assertEqual(out.conditions["Ready"]["status"], "True")
        self.assertEqual(out.conditions["Ready"]["reason"], "AllReplicasReady")
        self.assertEqual(out.conditions["Progressing"]["status"], "False")

    def test_config_change_restarts_pods(self):
        def config_hash(outcome):
            dep = self.desired(outcome, "Deployment", "shop")
            return dep["spec"]["template"]["metadata"]["annotations"][
                "apps.ctrlhost.dev/config-hash"]

        before = self.reconcile()
        changed = copy.deepcopy(self.primary)
        changed["spec"]["config"]["GREETING"] = "bonjour"
        self.assertNotEqual(config_hash(before), config_hash(self.reconcile(changed)))
        # The SDK's config hash of {"GREETING": "hello"}: the value the plugins wrote before they
        # used the SDK's builders (FNV-1a of nlohmann's compact dump), so no pod restarts.
        self.assertEqual(config_hash(before), "56d5bfdb2ff2a622")

    def test_invalid_spec_is_terminal_with_a_condition(self):
        for patch, message in [
            ({"image": ""}, "spec.image is required (a container image reference)"),
            ({"replicas": -1}, "spec.replicas must be between 0 and 1000, not -1"),
            ({"replicas": True}, "spec.replicas must be an integer"),
            ({"replicas": 2.5}, "spec.replicas must be an integer"),
            ({"port": 70000}, "spec.port must be between 1 and 65535, not 70000"),
            ({"port": "http"}, "spec.port must be an integer"),
            ({"env": {"A": 1}}, "spec.env.A must be a string"),
            ({"config": [1]}, "spec.config must be a map of strings"),
        ]:
            bad = copy.deepcopy(self.primary)
            bad["spec"].update(patch)
            with self.subTest(patch=patch):
                out = self.reconcile(bad)
                self.assertEqual(out.error, ("terminal", message))
                self.assertEqual(out.desired, [])
                self.assertEqual(out.status, {"observedGeneration": 3})
                self.assertEqual(out.conditions["Ready"]["reason"], "InvalidSpec")
                self.assertEqual(out.conditions["Progressing"]["status"], "False")
                self.assertEqual(out.events, [("Warning", "InvalidSpec", message)])
        no_spec = copy.deepcopy(self.primary)
        del no_spec["spec"]
        self.assertEqual(self.reconcile(no_spec).error[0], "terminal")

    def test_finalizing_removes_the_record_then_releases_the_finalizer(self):
        self.assertIsNone(self.reconcile().error)
        self.assertIsNotNone(self.records.read("default", "shop"))
        out = self.reconcile(finalizing=True)
        self.assertIsNone(out.error)
        self.assertTrue(out.finalized)
        self.assertEqual(out.events, [("Normal", "RecordRemoved", "external record removed")])
        self.assertEqual(out.desired, [])
        self.assertIsNone(self.records.read("default", "shop"))
        self.assertTrue(self.reconcile(finalizing=True).finalized)  # again: still finalized
        gone = testing.reconcile(self.controller, None, reason=pb.REASON_PRIMARY_DELETED)
        self.assertIsNone(gone.error)

    def test_record_problems_are_errors(self):
        unwritable = webapp.make_controller(webapp.RecordStore("/proc/ctrlhost-no-such-dir"))
        out = testing.reconcile(unwritable, self.primary)
        self.assertEqual(out.error[0], "retryable")
        self.assertTrue(
            out.error[1].startswith("external record: mkdir /proc/ctrlhost-no-such-dir"))
        self.assertEqual(len(out.desired), 3)  # children and status are still applied
        for ns, name in (("default", "../etc"), ("Default", "x"), ("", "x")):
            with self.assertRaises(webapp.RecordError):
                self.records.path_for(ns, name)

    def test_record_written_only_on_change(self):
        self.reconcile()
        path = self.records.path_for("default", "shop")
        os.utime(path, (1, 1))
        self.reconcile()
        self.assertEqual(os.stat(path).st_mtime, 1)


if __name__ == "__main__":
    bazel_unittest.main()
