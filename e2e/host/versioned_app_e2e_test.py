"""End to end: the VersionedApp reference plugin (plugins/versioned-app; the Python and Node
ports when $CTRLHOST_E2E_VERSIONED_APP is py or node) under the real `ctrlhost run`, driven with
kubectl against the embedded API server and real Kubernetes 1.20 (the `_kube_` targets: the
same golden file once the real cluster's defaults are taken out, see without_server_defaults).
Every piece of the controller model shows:

- resource sets: version 1.x objects are reconciled by the set v1, 2.x by v2 (status.resourceSet,
  the ServiceAccount and metrics port only v2 adds);
- resource builders: the children and their labels, selectors and config-hash annotation;
- stage callbacks on the Deployment: post-create records the event DeploymentCreated, pre-update
  refuses a downgrade (terminal error, event DowngradeRefused, the Deployment untouched);
- the standard status: `kubectl wait --for=condition=Available`, phase, versions,
  observedGeneration, Degraded for the refused downgrade and not during the upgrade;
- context flags: an object listed in the hold file gets its ConfigMap only (the ConfigMap step
  cancels the pass: DependentsReady False Cancelled);
- the background task: taking the object off the hold file gets it reconciled with no other
  trigger (the task enqueues it), a malformed line in the file is logged once, and
  /debug/dump shows the task running.

At the end the children and status of both objects, with server-set fields removed, must equal
testdata/versioned_app.golden.json: the same file for the three languages, so they behave
identically."""

import json
import os
import tempfile
import unittest

import yaml  # Debian's python3-yaml, as the other e2e tests

from e2e.apiserver import apiserver_fixture
from e2e.host import host_fixture
from tools.internal import bazel_unittest

OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: versioned-app
spec:
  plugins:
    - name: versioned-app
      exec:
        command: {plugin}
        env:
          VERSIONED_APP_HOLD_FILE: {hold}
"""

PLUGINS = {
    "cpp": "plugins/versioned-app/versioned-app",
    "py": "plugins/versioned-app-py/versioned-app-py",
    "node": "plugins/versioned-app-node/versioned-app-node",
}
GOLDEN = "e2e/host/testdata/versioned_app.golden.json"
APP = {"apiVersion": "ref.ctrlhost.dev/v1alpha1", "kind": "VersionedApp",
       "metadata": {"name": "app", "namespace": "default"},
       "spec": {"version": "1.4.0", "replicas": 2, "config": {"GREETING": "hello"}}}
# Set by the API server, not by the plugin.
SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
                   "selfLink")


# What kube-apiserver's defaulting and kube-controller-manager add to the children on a real
# cluster and the embedded server does not (it stores built-in kinds as written): removed only
# when the value is the default, so that a plugin which set another value still differs.
POD_DEFAULTS = {"dnsPolicy": "ClusterFirst", "restartPolicy": "Always",
                "schedulerName": "default-scheduler", "securityContext": {},
                "terminationGracePeriodSeconds": 30}
CONTAINER_DEFAULTS = {"imagePullPolicy": "IfNotPresent", "resources": {},
                      "terminationMessagePath": "/dev/termination-log",
                      "terminationMessagePolicy": "File"}
DEPLOYMENT_DEFAULTS = {"progressDeadlineSeconds": 600, "revisionHistoryLimit": 10,
                       "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
                                    "type": "RollingUpdate"}}


def drop_defaults(mapping, defaults):
    for key, value in defaults.items():
        if key in mapping and mapping[key] == value:
            del mapping[key]


def without_server_defaults(obj):
    """`obj` without the fields a real cluster defaults (see POD_DEFAULTS and the others)."""
    meta = obj.get("metadata", {})
    if obj.get("kind") == "ServiceAccount":
        obj.pop("secrets", None)  # the token controller's
    if obj.get("kind") == "Deployment":
        annotations = meta.get("annotations", {})
        annotations.pop("deployment.kubernetes.io/revision", None)
        if not annotations:
            meta.pop("annotations", None)
        spec = obj.get("spec", {})
        drop_defaults(spec, DEPLOYMENT_DEFAULTS)
        template = spec.get("template", {})
        if template.get("metadata", {}).get("creationTimestamp", "") is None:
            del template["metadata"]["creationTimestamp"]
        pod = template.get("spec", {})
        drop_defaults(pod, POD_DEFAULTS)
        if pod.get("serviceAccount") == pod.get("serviceAccountName"):
            pod.pop("serviceAccount", None)  # the deprecated alias, copied by defaulting
        for container in pod.get("containers", []):
            drop_defaults(container, CONTAINER_DEFAULTS)
            for port in container.get("ports", []):
                drop_defaults(port, {"protocol": "TCP"})
    return obj


def normalized(obj):
    """`obj` without what the server sets (ids, times, Service IPs, children's status, and on
    a real cluster its defaults)."""
    obj = json.loads(json.dumps(obj))
    if host_fixture.real_kube():
        obj = without_server_defaults(obj)
    meta = obj.get("metadata", {})
    for key in SERVER_METADATA:
        meta.pop(key, None)
    for owner in meta.get("ownerReferences", []):
        owner.pop("uid", None)
    if obj.get("kind") == "Service":
        for key in ("clusterIP", "clusterIPs", "sessionAffinity", "ipFamilies", "ipFamilyPolicy",
                    "type"):
            obj.get("spec", {}).pop(key, None)
    if obj.get("kind") == "VersionedApp":
        status = obj.get("status", {})
        status["conditions"] = sorted(
            ({k: v for k, v in c.items() if k != "lastTransitionTime"}
             for c in status.get("conditions", [])), key=lambda c: c["type"])
    else:
        obj.pop("status", None)
    return obj


class VersionedAppTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.language = os.environ.get("CTRLHOST_E2E_VERSIONED_APP", "cpp")
        # Plugin-readable, apart from the host's data directory (Landlock hides that one).
        cls.dir = tempfile.mkdtemp(prefix="versioned-app-", dir=os.environ.get("TEST_TMPDIR"))
        os.chmod(cls.dir, 0o755)
        cls.hold = os.path.join(cls.dir, "hold")
        cls.write_hold("# objects whose Deployment and Service are left alone\ndefault/held\n")
        cls.host = host_fixture.start_host(OPERATOR.format(
            plugin=host_fixture.runfile(PLUGINS[cls.language]), hold=cls.hold))
        cls.host.kubectl("apply", "-f",
                         host_fixture.runfile("plugins/versioned-app/deploy/crd.yaml"),
                         check=True)
        cls.host.wait_for(lambda: cls.host.endpoint("/readyz")[0] == 200, "controller ready")

    @classmethod
    def tearDownClass(cls):
        code = cls.host.stop()
        assert code == 0, "ctrlhost exited %s\n%s" % (code, cls.host.log()[-4000:])

    @classmethod
    def write_hold(cls, text):
        with open(cls.hold + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(cls.hold + ".tmp", 0o644)
        os.rename(cls.hold + ".tmp", cls.hold)

    def kubectl_ok(self, *args, input_text=None):
        result = self.host.kubectl(*args, input_text=input_text)
        self.assertEqual(result.returncode, 0, "kubectl %s: %s%s\n%s" % (
            " ".join(args), result.stdout, result.stderr, self.host.log()[-3000:]))
        return result.stdout

    def kubectl_wait(self, condition, obj, timeout=60):
        """`kubectl wait` with its own bound (kubectl's default subprocess bound is 30 s)."""
        result = apiserver_fixture.kubectl(
            host_fixture.kubectl_binary(), self.host.kubeconfig, "wait", condition, obj,
            "--timeout=%ds" % timeout, timeout=timeout + 15)
        if result.returncode != 0:
            now = self.host.kubectl("get", "-n", "default", "-o", "yaml", obj)
            self.fail("kubectl wait %s %s: %s%s\n%s%s\n%s" % (
                condition, obj, result.stdout, result.stderr, now.stdout, now.stderr,
                self.host.log()[-3000:]))

    def get(self, kind, name):
        result = self.host.kubectl("get", "-n", "default", "-o", "json", kind, name)
        return json.loads(result.stdout) if result.returncode == 0 else None

    def status(self, name):
        return (self.get("versionedapp", name) or {}).get("status", {})

    def conditions(self, name):
        return {c["type"]: c for c in self.status(name).get("conditions", [])}

    def event_reasons(self, name):
        events = json.loads(self.kubectl_ok(
            "get", "events", "-n", "default", "-o", "json",
            "--field-selector", "involvedObject.name=%s,involvedObject.kind=VersionedApp" % name))
        return {(e["type"], e["reason"]): e["message"] for e in events["items"]}

    def patch_version(self, name, version):
        self.kubectl_ok("patch", "versionedapp", name, "--type=merge", "-p",
                        json.dumps({"spec": {"version": version}}))

    def test_every_piece_and_the_golden_children_and_status(self):
        self.check_v1_create_upgrade_to_v2_and_refused_downgrade()
        self.check_hold_and_the_background_task()
        self.check_golden()

    def check_v1_create_upgrade_to_v2_and_refused_downgrade(self):
        self.kubectl_ok("apply", "-f", "-", input_text=json.dumps(APP))
        self.kubectl_wait("--for=condition=Available", "versionedapp/app")
        status = self.status("app")
        self.assertEqual((status["phase"], status["resourceSet"], status["observedVersion"],
                          status["targetVersion"], status["observedGeneration"]),
                         ("Deployed", "v1", "1.4.0", "1.4.0", 1), status)
        deployment = self.get("deployment", "app")
        self.assertEqual(deployment["metadata"]["labels"]["app.kubernetes.io/version"], "1.4.0")
        self.assertIn("ctrlhost.dev/config-hash",
                      deployment["spec"]["template"]["metadata"]["annotations"])
        self.assertEqual(deployment["spec"]["template"]["spec"]["containers"][0]["image"],
                         "registry.example/app:1.4.0")
        self.assertEqual(len(self.get("service", "app")["spec"]["ports"]), 1)
        self.assertEqual(self.get("configmap", "app-config")["data"], {"GREETING": "hello"})
        self.assertIsNone(self.get("serviceaccount", "app"))  # v2 only
        self.assertIn(("Normal", "DeploymentCreated"), self.event_reasons("app"))

        # Upgrade to 2.0.0: the set v2 takes over; never Degraded on the way.
        self.patch_version("app", "2.0.0")
        self.kubectl_wait("--for=jsonpath={.status.observedVersion}=2.0.0", "versionedapp/app")
        status = self.status("app")
        self.assertEqual((status["phase"], status["resourceSet"], status["observedGeneration"]),
                         ("Deployed", "v2", 2), status)
        self.assertEqual(self.conditions("app")["Degraded"]["status"], "False")
        self.assertIsNotNone(self.get("serviceaccount", "app"))
        self.assertEqual([p["name"] for p in self.get("service", "app")["spec"]["ports"]],
                         ["http", "metrics"])
        deployment = self.get("deployment", "app")
        self.assertEqual(deployment["metadata"]["labels"]["app.kubernetes.io/version"], "2.0.0")
        self.assertEqual(deployment["spec"]["template"]["spec"]["serviceAccountName"], "app")

        # A downgrade is refused by the Deployment's pre-update callback.
        self.patch_version("app", "1.5.0")
        self.kubectl_wait("--for=condition=Degraded", "versionedapp/app")
        status = self.status("app")
        degraded = self.conditions("app")["Degraded"]
        self.assertEqual((status["phase"], degraded["reason"]), ("Error", "DowngradeRefused"))
        self.assertIn("callback refuse-downgrade at pre-update: downgrade from 2.0.0 to 1.5.0 "
                      "refused", degraded["message"])
        self.assertEqual(self.event_reasons("app").get(("Warning", "DowngradeRefused")),
                         "downgrade from 2.0.0 to 1.5.0 refused")
        self.assertEqual(self.get("deployment", "app")["metadata"]["labels"]
                         ["app.kubernetes.io/version"], "2.0.0")
        # Forward again: healthy.
        self.patch_version("app", "2.0.1")
        self.kubectl_wait("--for=condition=Degraded=False", "versionedapp/app")
        self.kubectl_wait("--for=jsonpath={.status.observedVersion}=2.0.1", "versionedapp/app")
        self.assertEqual(self.status("app")["phase"], "Deployed")

    def check_hold_and_the_background_task(self):
        held = json.loads(json.dumps(APP))
        held["metadata"]["name"] = "held"
        held["spec"]["version"] = "1.0.0"
        self.kubectl_ok("apply", "-f", "-", input_text=json.dumps(held))

        def cancelled():
            ready = self.conditions("held").get("DependentsReady", {})
            return ready if ready.get("reason") == "Cancelled" else None
        ready = self.host.wait_for(cancelled, "held: the pass cancelled")
        self.assertIn("config cancelled the pass: on hold in the hold file", ready["message"])
        self.assertIsNotNone(self.get("configmap", "held-config"))  # the step's own resource
        self.assertIsNone(self.get("deployment", "held"))
        self.assertIsNone(self.get("service", "held"))
        status = self.status("held")
        self.assertEqual(status["phase"], "Deploying")
        self.assertEqual(self.conditions("held")["Available"]["status"], "False")

        # Off hold: nothing but the task's enqueue reconciles it again. A line that is not
        # namespace/name is ignored and said once in the host's log.
        self.write_hold("# nothing on hold\nnot a key\n")
        self.kubectl_wait("--for=condition=Available", "versionedapp/held")
        self.assertIsNotNone(self.get("deployment", "held"))
        self.host.wait_for(lambda: "not namespace/name, ignored: not a key" in self.host.log(),
                           "the malformed hold line logged")
        self.assertEqual(self.host.log().count("not namespace/name, ignored: not a key"), 1)
        _, text = self.host.endpoint("/debug/dump")
        tasks = yaml.safe_load(text)["plugins"][0]["backgroundTasks"]
        self.assertEqual(tasks[0]["controller"], "versioned-app", tasks)
        self.assertTrue(tasks[0]["running"], tasks)
        self.assertGreaterEqual(tasks[0]["enqueued"], 2, tasks)  # listed, then released
        self.assertEqual([(t["name"], t["state"]) for t in tasks[0]["tasks"]],
                         [("hold-file", "running")], tasks)

    def check_golden(self):
        snapshot = {}
        for name, children in (("app", [("configmap", "app-config"), ("serviceaccount", "app"),
                                        ("deployment", "app"), ("service", "app")]),
                               ("held", [("configmap", "held-config"), ("deployment", "held"),
                                         ("service", "held")])):
            snapshot[name] = [normalized(self.get("versionedapp", name))] + [
                normalized(self.get(kind, child)) for kind, child in children]
        with open(host_fixture.runfile(GOLDEN), encoding="utf-8") as f:
            golden = json.load(f)
        self.assertEqual(snapshot, golden,
                         "%s differs from %s; this run's:\n%s" % (
                             self.language, GOLDEN, json.dumps(snapshot, indent=2,
                                                               sort_keys=True)))


if __name__ == "__main__":
    bazel_unittest.main()
