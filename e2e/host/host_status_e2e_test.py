"""End to end: a controller opted in to the host-computed standard status
(spec.controllers[].status.conditions: host). The chaos plugin writes no conditions; the host
writes Available/Progressing/Degraded/Ready/Reconciling/Stalled and observedGeneration, so
`kubectl wait --for=condition=Available` succeeds; once converged the host leaves the status
alone (the resourceVersion stays put); a terminal error makes the object Degraded."""

import json
import os
import tempfile
import time
import unittest

from e2e.host import host_fixture

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


class HostStatusTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="hoststatus-", dir=os.environ.get("TEST_TMPDIR"))
        cls.host = host_fixture.start_host(OPERATOR.format(
            chaos=host_fixture.runfile("e2e/host/chaos/chaos"), dir=cls.dir))
        cls.host.kubectl("apply", "-f", host_fixture.runfile("e2e/host/chaos/crd.yaml"),
                         check=True)

    @classmethod
    def tearDownClass(cls):
        code = cls.host.stop()
        assert code == 0, "ctrlhost exited %s\n%s" % (code, cls.host.log()[-4000:])

    def create(self, name, mode):
        body = {"apiVersion": "e2e.ctrlhost.dev/v1", "kind": "Chaos",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"mode": mode, "data": {"k": name}}}
        self.host.kubectl("apply", "-f", "-", input_text=json.dumps(body), check=True)

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
        # Converged: further reconciles (the child's watch event) write nothing.
        rv = obj["metadata"]["resourceVersion"]
        time.sleep(3)
        self.assertEqual(self.chaos("calm")["metadata"]["resourceVersion"], rv)

    def test_terminal_error_is_degraded(self):
        self.create("broken", "terminal")
        result = self.host.kubectl("wait", "--for=condition=Degraded", "--timeout=30s",
                                   "chaos/broken")
        self.assertEqual(result.returncode, 0, result.stderr + self.host.log()[-3000:])
        conditions = self.conditions(self.chaos("broken"))
        self.assertEqual(conditions["Stalled"]["status"], "True")
        self.assertEqual(conditions["Ready"]["status"], "False")
        self.assertEqual(conditions["Degraded"]["reason"], "TerminalError")


if __name__ == "__main__":
    unittest.main()
