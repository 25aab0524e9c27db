"""End to end: a host restarted with a backlog of existing objects reconciles a newly created one
before the backlog is done (docs/operations.md, "Scheduling"), against the embedded API server
(scheduling_e2e_test) and real Kubernetes (scheduling_kube_e2e_test).

A first host run creates the chaos CRD and BACKLOG Chaos objects with the controller disabled,
so nothing reconciles them; the second run, on the same data directory (the embedded server's
storage) or the same cluster, starts the controller with one worker and a plugin that takes
about 10 ms per reconcile. Its initial list queues the backlog at low priority. Once it is
working through it, the test creates one object: a change after the sync, high priority, so the
next free worker takes it. The chaos plugin's record log gives the order."""

import json
import os
import tempfile
import unittest

from e2e.host import host_fixture
from tools.internal import bazel_unittest

BACKLOG = 5000
NAMESPACE = "scheduling"

OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: scheduling
spec:
  plugins:
    - name: chaos
      exec:
        command: {chaos}
        env:
          CHAOS_DIR: {dir}
  controllers:
    - name: chaos
      maxConcurrentReconciles: 1
      disabled: {disabled}
"""


def chaos(name, mode="slow"):
    return {"apiVersion": "e2e.ctrlhost.dev/v1", "kind": "Chaos",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"mode": mode, "sleepMs": 10}}


class SchedulingTest(unittest.TestCase):

    def setUp(self):
        # Plugin-writable, apart from the host's data directory (Landlock hides that one).
        self.dir = tempfile.mkdtemp(prefix="scheduling-", dir=os.environ.get("TEST_TMPDIR"))
        os.chmod(self.dir, 0o777)
        self.log = os.path.join(self.dir, "log")
        self.plugin = host_fixture.runfile("e2e/host/chaos/chaos")

    def operator(self, disabled):
        return OPERATOR.format(chaos=self.plugin, dir=self.dir,
                               disabled="true" if disabled else "false")

    def started(self):
        """Names whose reconcile started, in order."""
        return [key.split("/", 1)[1]
                for key, what, _ in host_fixture.chaos_records(self.dir, NAMESPACE)
                if what == "start"]

    def test_a_new_object_does_not_wait_behind_the_restart_backlog(self):
        # First run: the objects exist, nothing reconciles them.
        first = host_fixture.start_host(self.operator(disabled=True))
        data_dir = first.data_dir
        first.kubectl("apply", "-f", host_fixture.runfile("e2e/host/chaos/crd.yaml"), check=True)
        first.wait_for(lambda: first.kubectl("get", "chaos").returncode == 0, "the Chaos kind")
        first.kubectl("create", "namespace", NAMESPACE)
        items = {"apiVersion": "v1", "kind": "List",
                 "items": [chaos("backlog-%05d" % i) for i in range(BACKLOG)]}
        path = os.path.join(self.dir, "backlog.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(items, f)
        # 5,000 creates: against a real API server on a loaded 2-core machine this took over
        # 30 s (the kubectl default here), so a generous bound.
        first.kubectl("create", "-f", path, check=True, timeout=600)
        self.assertEqual(self.started(), [])
        code = first.stop()
        self.assertEqual(code, 0, first.log()[-4000:])

        # Restart: the initial list queues the backlog at low priority.
        host = host_fixture.start_host(self.operator(disabled=False), data_dir=data_dir)
        try:
            host.wait_for(lambda: len(self.started()) >= 20, "the backlog being worked on",
                          timeout=120)
            self.assertGreater(
                host.metric("workqueue_depth", priority="low"), 0)
            before = len(self.started())
            # "ok": it writes a ConfigMap and a status, charged to this operator's API share.
            host.kubectl("create", "-f", "-", input_text=json.dumps(chaos("fresh", "ok")),
                         check=True)
            host.wait_for(lambda: "fresh" in self.started(), "the new object reconciled",
                          timeout=120)
            order = self.started()
            position = order.index("fresh")
            backlog_done = sum(1 for name in order[:position] if name.startswith("backlog-"))
            print("fresh was reconciled after %d backlog keys (%d when it was created, of %d)"
                  % (backlog_done, before, BACKLOG))
            # Not behind the backlog: at most what the worker took while the create event was
            # on its way (FIFO would put it after all of them).
            self.assertLess(backlog_done, BACKLOG)
            self.assertLess(backlog_done - before, BACKLOG // 4)
            # The dump shows the queue by priority; the backlog is still there.
            status, dump = host.endpoint("/debug/dump")
            self.assertEqual(status, 200, dump)
            print("\n".join(line.strip() for line in dump.splitlines() if "queue:" in line))
            print(dump[dump.index("apiBudget:"):])
            self.assertIn("low: {depth:", dump)
            self.assertIn("oldestKey: %s/backlog-" % NAMESPACE, dump)
            # Its writes went through the host's API budget as this operator's controller.
            host.wait_for(lambda: host.kubectl("get", "configmap", "-n", NAMESPACE,
                                               "fresh").returncode == 0, "fresh's ConfigMap")
            self.assertGreaterEqual(host.metric("ctrlhost_api_requests_total",
                                                operator="scheduling", controller="chaos"), 1)
            self.assertGreater(host.metric("ctrlhost_api_requests_total", operator="-"), 0)
            self.assertIn("{operator: scheduling, controller: chaos, operatorWeight: 1", dump)
        finally:
            code = host.stop()
        self.assertEqual(code, 0, host.log()[-4000:])


if __name__ == "__main__":
    bazel_unittest.main()
