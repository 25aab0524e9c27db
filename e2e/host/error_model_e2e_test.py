"""End to end, issue 19 (the error model), on the chaos plugin (C++ SDK) with its message limit
lowered to 200000 bytes:

- One key whose answer is larger than the limit fails alone: the SDK answers it with the
  terminal error ResponseTooLarge (Warning event and Reconciled=False with that reason), while
  the other keys reconcile on the same stream and the plugin is never restarted.
- A retryable error with a reason and retry_after: the Warning event carries the reason, and the
  key is not retried within the hour it asked for (a plain retry backs off from 5 ms).
- A NotControlled refusal (a ConfigMap made by hand where the child goes) shows its reason in
  /debug/dump, and deleting that ConfigMap is enough for the child to be created.
"""

import json
import os

from e2e.host import host_fixture
from tools.internal import bazel_unittest

OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: errmodel
spec:
  plugins:
    - name: chaos
      exec:
        command: {chaos}
        env:
          CHAOS_DIR: {dir}
          CHAOS_MAX_MESSAGE_BYTES: "200000"
  controllers:
    - name: chaos
"""

CALM = ["calm-1", "calm-2", "calm-3"]


class ErrorModelTest(host_fixture.ChaosHostTest):
    OPERATOR = OPERATOR

    def chaos(self, name):
        result = self.host.kubectl("get", "-o", "json", "chaos", name)
        return json.loads(result.stdout) if result.returncode == 0 else {}

    def reconciled(self, name):
        """The Reconciled condition of chaos/name, or None."""
        for c in self.chaos(name).get("status", {}).get("conditions", []):
            if c["type"] == "Reconciled":
                return c
        return None

    def events(self, name, reason):
        result = self.host.kubectl(
            "get", "events", "-o", "json", "--field-selector",
            "involvedObject.name=%s,reason=%s" % (name, reason))
        return json.loads(result.stdout)["items"] if result.returncode == 0 else []

    def log_lines(self, name):
        """The chaos plugin's log lines for default/name: [attempt, what, version, pid]."""
        path = os.path.join(self.dir, "log")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [line.split()[1:] for line in f if line.startswith("default/%s " % name)]

    def test_an_oversized_answer_fails_only_its_key(self):
        self.create("big", "huge")
        for name in CALM:
            self.create(name, "ok")
        condition = self.host.wait_for(
            lambda: (self.reconciled("big") or {}).get("reason") == "ResponseTooLarge"
            and self.reconciled("big"), "Reconciled=False ResponseTooLarge on chaos/big")
        self.assertEqual(condition["status"], "False")
        self.assertRegex(condition["message"],
                         r"^response of 4\d{5} bytes exceeds the message limit of 200000$")
        events = self.host.wait_for(lambda: self.events("big", "ResponseTooLarge"),
                                    "the ResponseTooLarge event")
        self.assertEqual(events[0]["type"], "Warning")
        for name in CALM:
            self.host.wait_for(lambda: self.chaos(name).get("status", {}).get("phase") == "Done",
                               "chaos/%s reconciled" % name)
        # Nothing of the oversized answer was written.
        self.assertNotIn("padding", self.chaos("big").get("status", {}))
        # One plugin process served everything: the stream was never broken by the answer.
        pids = {line[3] for name in ["big"] + CALM for line in self.log_lines(name)}
        self.assertEqual(len(pids), 1, pids)

    def test_deleting_the_object_in_the_way_reconciles_again(self):
        # First contact (a Go plugin's author): NotControlled says "delete it or rename the
        # child"; after the deletion the key stayed parked until the primary was edited, and
        # /debug/dump showed FAILED_PRECONDITION without the reason.
        configmap = {"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "blocked", "namespace": "default"},
                     "data": {"made": "by hand"}}
        self.host.kubectl("apply", "-f", "-", input_text=json.dumps(configmap), check=True)
        self.create("blocked", "ok")
        condition = self.host.wait_for(
            lambda: (self.reconciled("blocked") or {}).get("reason") == "NotControlled"
            and self.reconciled("blocked"), "Reconciled=False NotControlled on chaos/blocked")
        self.assertIn("has no controller", condition["message"])
        self.assertIn("delete it (Chaos default/blocked is reconciled again when it is gone)",
                      condition["message"])
        dump = self.host.wait_for(
            lambda: (lambda text: "reason: NotControlled" in text and text)(
                self.host.endpoint("/debug/dump")[1]),
            "the NotControlled reason in /debug/dump")
        self.assertIn("blockedKeys: 1", dump)
        # Deleting it is enough: the child is created, the primary untouched.
        self.host.kubectl("delete", "configmap", "blocked", "-n", "default", check=True)

        def child():
            result = self.host.kubectl("get", "-o", "json", "configmap", "blocked")
            if result.returncode != 0:
                return None
            obj = json.loads(result.stdout)
            owners = obj["metadata"].get("ownerReferences", [])
            return obj if owners and owners[0]["name"] == "blocked" else None
        self.assertEqual(self.host.wait_for(child, "configmap/blocked owned by chaos/blocked")
                         ["data"], {"k": "blocked"})
        self.host.wait_for(
            lambda: (self.reconciled("blocked") or {}).get("status") == "True",
            "Reconciled=True on chaos/blocked")
        self.assertEqual(self.chaos("blocked")["metadata"]["generation"], 1)

    def test_retry_after_and_reason(self):
        self.create("quota", "quota")
        events = self.host.wait_for(lambda: self.events("quota", "QuotaExceeded"),
                                    "the QuotaExceeded event")
        self.assertEqual(events[0]["type"], "Warning")
        self.assertEqual(events[0]["message"], "spec.mode says the quota is used up")
        self.assertEqual(self.events("quota", "ReconcileError"), [])
        # A key reconciled after it (the queue keeps moving) comes and goes while the failed
        # one waits out its hour: without retry_after it would have been retried many times.
        self.create("quota-witness", "ok")
        self.host.wait_for(
            lambda: self.chaos("quota-witness").get("status", {}).get("phase") == "Done",
            "chaos/quota-witness reconciled")
        self.assertEqual([line[1] for line in self.log_lines("quota")], ["start", "end"])
        # Retryable: no Reconciled=False (that is for terminal errors).
        self.assertIsNone(self.reconciled("quota"))


if __name__ == "__main__":
    bazel_unittest.main()
