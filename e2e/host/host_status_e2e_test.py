"""End to end: a controller opted in to the host-computed standard status
(spec.controllers[].status.conditions: host). The chaos plugin writes no conditions; the host
writes Available/Progressing/Degraded/Ready/Reconciling/Stalled and observedGeneration, so
`kubectl wait --for=condition=Available` succeeds; once converged the host leaves the status
alone: after a change that reconciles the object but alters nothing it owns (an annotation), no
write reaches the object or its child over a quiet period (counted on watches opened at the
resourceVersions seen after that change); a terminal error makes the object Degraded.

Runs against the embedded server (host_status_e2e_test) and real Kubernetes 1.20
(host_status_kube_e2e_test), whose server-side apply and status subresource are the reference."""

import json
import time
import urllib.parse

from e2e.host import host_fixture
from tools.internal import bazel_unittest

OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: hoststatus
spec:
  plugins:
    - name: chaos
      exec:
        command: {chaos}
        env:
          CHAOS_DIR: {dir}
  controllers:
    - name: chaos
      status: {{conditions: host}}
"""


# How long a converged object and its child must see no write. Long enough for the host's own
# follow-up (the status write's watch event, the child's) to have come back several times.
QUIET_PERIOD_SECONDS = 4


class HostStatusTest(host_fixture.ChaosHostTest):
    OPERATOR = OPERATOR

    def chaos(self, name):
        result = self.host.kubectl("get", "-o", "json", "chaos", name)
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout)

    @staticmethod
    def conditions(obj):
        return {c["type"]: c for c in obj.get("status", {}).get("conditions", [])}

    def test_available_without_plugin_conditions_and_no_rewrite_when_converged(self):
        self.create("calm", "ok")
        result = self.host.kubectl("wait", "--for=condition=Available", "--timeout=30s",
                                   "chaos/calm")
        self.assertEqual(result.returncode, 0, result.stderr + self.host.log()[-3000:])
        obj = self.chaos("calm")
        conditions = self.conditions(obj)
        for kind, status in [("Available", "True"), ("Progressing", "False"),
                             ("Degraded", "False"), ("Ready", "True"),
                             ("Reconciling", "False"), ("Stalled", "False")]:
            self.assertEqual(conditions[kind]["status"], status, obj)
            self.assertTrue(conditions[kind]["lastTransitionTime"], obj)
        self.assertEqual(obj["status"]["observedGeneration"], obj["metadata"]["generation"])
        self.assert_no_writes_when_reconciled_again("calm")

    def assert_no_writes_when_reconciled_again(self, name):
        """Annotates the object (a write that changes neither spec nor generation, so the host
        reconciles it and has nothing to change), waits for that reconcile, then counts the
        writes to the object and its child ConfigMap over QUIET_PERIOD_SECONDS: zero."""
        reconciles = self.host.metric("controller_runtime_reconcile_total", controller="chaos")
        self.host.kubectl("annotate", "--overwrite", "chaos/" + name, "e2e.ctrlhost.dev/poke=1",
                          check=True)
        self.host.wait_for(
            lambda: self.host.metric("controller_runtime_reconcile_total",
                                     controller="chaos") > reconciles,
            "a reconcile of %s after the annotation" % name)
        paths = {
            "Chaos": "/apis/e2e.ctrlhost.dev/v1/namespaces/default/chaos",
            "ConfigMap": "/api/v1/namespaces/default/configmaps",
        }
        watches = []
        try:
            for kind, path in paths.items():
                current = self.host.get("%s/%s" % (path, name))
                self.assertIsNotNone(current, "%s %s" % (kind, name))
                query = urllib.parse.urlencode({
                    "watch": "1", "resourceVersion": current["metadata"]["resourceVersion"],
                    "fieldSelector": "metadata.name=" + name})
                watches.append((kind, self.host.api.watch(
                    "%s?%s" % (path, query), timeout=QUIET_PERIOD_SECONDS + 10)))
            for kind, watch in watches:
                self.assertEqual(watch.status, 200, "watch %s: %s" % (kind, watch.status))
            deadline = time.monotonic() + QUIET_PERIOD_SECONDS
            writes = []
            for kind, watch in watches:
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    event = watch.next_event(left)
                    if event is None:
                        break
                    if event.get("type") != "BOOKMARK":
                        writes.append((kind, event.get("type"),
                                       event["object"]["metadata"].get("resourceVersion"),
                                       event["object"].get("status")))
            self.assertEqual(writes, [], "writes after convergence\n" + self.host.log()[-3000:])
        finally:
            for _, watch in watches:
                watch.close()

    def test_terminal_error_is_degraded(self):
        self.create("broken", "terminal")
        result = self.host.kubectl("wait", "--for=condition=Degraded", "--timeout=30s",
                                   "chaos/broken")
        self.assertEqual(result.returncode, 0, result.stderr + self.host.log()[-3000:])
        conditions = self.conditions(self.chaos("broken"))
        self.assertEqual(conditions["Stalled"]["status"], "True")
        self.assertEqual(conditions["Ready"]["status"], "False")
        self.assertEqual(conditions["Degraded"]["reason"], "TerminalError")

    def test_terminal_error_reason_is_the_failure_reason(self):
        # The plugin's Error.reason replaces the default TerminalError in the failed conditions.
        self.create("rejected-spec", "terminal-reason")
        result = self.host.kubectl("wait", "--for=condition=Stalled", "--timeout=30s",
                                   "chaos/rejected-spec")
        self.assertEqual(result.returncode, 0, result.stderr + self.host.log()[-3000:])
        conditions = self.conditions(self.chaos("rejected-spec"))
        for kind, status in (("Degraded", "True"), ("Stalled", "True"), ("Ready", "False")):
            self.assertEqual((conditions[kind]["status"], conditions[kind]["reason"]),
                             (status, "SpecRejected"), kind)
        self.assertEqual(conditions["Degraded"]["message"], "spec.mode rejects the spec")


if __name__ == "__main__":
    bazel_unittest.main()
