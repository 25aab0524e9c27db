"""End to end: two operators of one host share its API budget by weight (docs/operations.md,
"The API budget, shared by weight"), against the embedded API server (budget_e2e_test) and real
Kubernetes (budget_kube_e2e_test).

The host runs with a small client-side budget (--kube-api-qps 10, burst 10). Operator `busy` has
a backlog of BACKLOG Chaos objects whose reconciles each write a ConfigMap and a status, far more
than the budget serves at once, so its requests wait for tokens all the time. Operator `light`
then gets a few objects, one at a time (it asks for less than its half of the budget). With
first-come-first-served tokens, each of light's writes would queue behind busy's waiting ones;
with the shares (and light's reserve) it goes through at the next token or at once. The test compares the mean time each operator's
requests waited for the budget (ctrlhost_api_throttle_seconds_total over
ctrlhost_api_requests_total), then checks that busy's backlog still completes: nothing is lost."""

import json
import os
import tempfile
import unittest

from e2e.host import host_fixture
from tools.internal import bazel_unittest

BACKLOG = 150
LIGHT = 6

OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: {name}
spec:
  plugins:
    - name: chaos-{name}
      exec:
        command: {chaos}
        env:
          CHAOS_DIR: {dir}
          CHAOS_CONTROLLER: {name}
  controllers:
    - name: {name}
      plugin: chaos-{name}
      namespaces: [{name}]
"""


def chaos(name, namespace):
    return {"apiVersion": "e2e.ctrlhost.dev/v1", "kind": "Chaos",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"mode": "ok", "data": {"k": name}}}


class BudgetTest(unittest.TestCase):

    def test_a_light_operator_does_not_wait_behind_a_busy_ones_writes(self):
        # Plugin-writable, apart from the host's data directory (Landlock hides that one).
        directory = tempfile.mkdtemp(prefix="budget-", dir=os.environ.get("TEST_TMPDIR"))
        os.chmod(directory, 0o777)
        plugin = host_fixture.runfile("e2e/host/chaos/chaos")
        operators = "---\n".join(OPERATOR.format(name=name, chaos=plugin, dir=directory)
                                 for name in ("busy", "light"))
        host = host_fixture.start_host(
            operators, extra_args=["--kube-api-qps", "10", "--kube-api-burst", "10"])
        try:
            host.kubectl("apply", "-f", host_fixture.runfile("e2e/host/chaos/crd.yaml"),
                         check=True)
            host.wait_for(lambda: host.kubectl("get", "chaos").returncode == 0, "the Chaos kind")
            for namespace in ("busy", "light"):
                host.kubectl("create", "namespace", namespace, check=True)
            backlog = {"apiVersion": "v1", "kind": "List",
                       "items": [chaos("backlog-%04d" % i, "busy") for i in range(BACKLOG)]}
            host.kubectl("create", "-f", "-", input_text=json.dumps(backlog), check=True,
                         timeout=300)

            def written(namespace):
                listed = host.kubectl("get", "configmaps", "-n", namespace, "-o", "json")
                if listed.returncode != 0:
                    return 0
                return sum(1 for item in json.loads(listed.stdout)["items"]
                           if item["metadata"]["name"] != "kube-root-ca.crt")

            host.wait_for(lambda: host.metric("ctrlhost_api_waiting_requests", default=0.0,
                                              operator="busy") > 0,
                          "busy's requests waiting for the budget", timeout=120)
            # Light asks for less than its share (5/s): one object at a time, each created once
            # the previous one's ConfigMap is written.
            for i in range(LIGHT):
                host.kubectl("create", "-f", "-", check=True,
                             input_text=json.dumps(chaos("light-%d" % i, "light")))
                host.wait_for(lambda: written("light") == i + 1, "light's ConfigMap %d" % i,
                              timeout=300)
            busy_written = written("busy")
            print("light done with %d of busy's %d ConfigMaps written" % (busy_written, BACKLOG))
            # Light was not served after busy's backlog.
            self.assertLess(busy_written, BACKLOG)

            def mean_wait(operator):
                requests = host.metric("ctrlhost_api_requests_total", operator=operator)
                waited = host.metric("ctrlhost_api_throttle_seconds_total", default=0.0,
                                     operator=operator)
                return waited / requests

            busy_wait, light_wait = mean_wait("busy"), mean_wait("light")
            print("mean wait for the budget: busy %.3f s, light %.3f s" % (busy_wait, light_wait))
            # Busy's requests queue for tokens (it wants far more than 10/s). Light's draw on its
            # reserve (it fills at the assured rate: 10/s over three tenants, busy, light and the
            # host's own) and, beyond it, get every other token. First come first served, each
            # light request would wait behind the busy requests queued before it, as long as
            # they do (a ratio near 1); measured 0.17-0.35 with the shares.
            self.assertGreater(busy_wait, 0.1)
            self.assertLess(light_wait, busy_wait / 2)

            status, dump = host.endpoint("/debug/dump")
            self.assertEqual(status, 200, dump)
            print(dump[dump.index("apiBudget:"):])
            self.assertIn("{operator: busy, controller: busy, operatorWeight: 1", dump)
            self.assertIn("{operator: light, controller: light, operatorWeight: 1", dump)

            # Nothing is lost: busy's backlog completes.
            host.wait_for(lambda: written("busy") == BACKLOG, "busy's ConfigMaps", timeout=600)
        finally:
            code = host.stop()
        self.assertEqual(code, 0, host.log()[-4000:])


if __name__ == "__main__":
    bazel_unittest.main()
