"""End to end, real Kubernetes 1.20 only: the host under a ServiceAccount token bound to the Role
that `ctrlhost rbac` derives from the operator file (what the WebApp plugin declares), in one
namespace.

- With the generated Role the WebApp scenario works end to end and the API server's audit log
  has no 403 answer for the host's account.
- With the right to patch Services removed, the failure is visible where users look: the
  object's Reconciled condition and a Warning event, and the host's log, name the verb, the
  resource and the namespace; the key is retried with backoff, not in a hot loop; once the
  permission is granted again the object converges without waiting out a long backoff.
- With the right to list Services removed, /readyz?verbose names the forbidden watch.
"""

import copy
import json
import os
import re
import subprocess
import tempfile
import time
import unittest

import yaml

from e2e.apiserver import apiserver_fixture

from e2e.host import host_fixture
from tools.internal import bazel_unittest

NAMESPACE = "shop"
ACCOUNT = "webapp-operator"
USER = "system:serviceaccount:%s:%s" % (NAMESPACE, ACCOUNT)

OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: limited
spec:
  plugins:
    - name: webapp
      exec:
        command: {webapp}
        env:
          WEBAPP_RECORD_DIR: {records}
  controllers:
    - name: webapp
      namespaces: [{namespace}]
"""

def generated_rbac(operator_yaml):
    """The documents `ctrlhost rbac` prints for `operator_yaml` and the host's ServiceAccount."""
    path = os.path.join(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")), "operator.yaml")
    with open(path, "w") as f:
        f.write(operator_yaml)
    result = subprocess.run([apiserver_fixture.binary_path(), "rbac", "-f", path,
                             "--name", ACCOUNT, "--service-account", ACCOUNT,
                             "--namespace", NAMESPACE],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return list(yaml.safe_load_all(result.stdout))


def without_service_verbs(role, removed):
    """`role` with `removed` verbs taken from its rule on Services (split out of a shared rule)."""
    role = copy.deepcopy(role)
    rules = []
    for rule in role["rules"]:
        if rule["apiGroups"] == [""] and "services" in rule["resources"]:
            rest = [r for r in rule["resources"] if r != "services"]
            if rest:
                rules.append(dict(rule, resources=rest))
            rules.append({"apiGroups": [""], "resources": ["services"],
                          "verbs": [v for v in rule["verbs"] if v not in removed]})
        else:
            rules.append(rule)
    role["rules"] = rules
    return role


class RestrictedPermissionsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cluster = host_fixture.cluster()
        cls.cluster.kubectl("apply", "-f", host_fixture.runfile("plugins/webapp/deploy/crd.yaml"),
                            check=True)
        cls.kubeconfig = cls.cluster.service_account_kubeconfig(NAMESPACE, ACCOUNT)
        documents = generated_rbac(OPERATOR.format(
            webapp=host_fixture.runfile("plugins/webapp/webapp"), records="/nonexistent",
            namespace=NAMESPACE))
        # One namespace: a Role and its RoleBinding there, nothing cluster-wide.
        assert [d["kind"] for d in documents] == ["Role", "RoleBinding"], documents
        cls.generated_role = documents[0]
        cls.set_role(())
        cls.cluster.kubectl("apply", "-f", "-", input_text=json.dumps(documents[1]), check=True)
        records = tempfile.mkdtemp(prefix="records-", dir=os.environ.get("TEST_TMPDIR"))
        cls.host = host_fixture.start_host(
            OPERATOR.format(webapp=host_fixture.runfile("plugins/webapp/webapp"),
                            records=records, namespace=NAMESPACE),
            kubeconfig=cls.kubeconfig)

    @classmethod
    def tearDownClass(cls):
        code = cls.host.stop()
        assert code == 0, "ctrlhost exited %s\n%s" % (code, cls.host.log()[-4000:])

    @classmethod
    def set_role(cls, removed_service_verbs):
        role = without_service_verbs(cls.generated_role, removed_service_verbs)
        cls.cluster.kubectl("apply", "-f", "-", input_text=json.dumps(role), check=True)

    def get(self, *args):
        result = self.cluster.kubectl("get", "-o", "json", "-n", NAMESPACE, *args)
        return json.loads(result.stdout) if result.returncode == 0 else None

    def create_webapp(self, name, replicas=1):
        self.cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", check=True, input_text="""
apiVersion: apps.ctrlhost.dev/v1alpha1
kind: WebApp
metadata: {name: %s}
spec: {image: nginx:1.25, replicas: %d, config: {A: b}}
""" % (name, replicas))

    def forbidden_answers(self):
        return [e for e in self.cluster.audit_events(USER)
                if e.get("responseStatus", {}).get("code") == 403]

    def reconciles(self):
        return self.host.metric("controller_runtime_reconcile_total", controller="webapp")

    def test_1_least_privilege_role_is_enough(self):
        self.create_webapp("store", 2)
        web = self.host.wait_for(lambda: (lambda w: w if w and w.get("status", {}).get(
            "observedGeneration") == 1 else None)(self.get("webapp", "store")), "status")
        for kind, name in (("deployment", "store"), ("service", "store"),
                           ("configmap", "store-config")):
            child = self.host.wait_for(lambda: self.get(kind, name), kind)
            self.assertEqual(child["metadata"]["ownerReferences"][0]["uid"],
                             web["metadata"]["uid"])
        self.cluster.kubectl("delete", "webapp", "store", "-n", NAMESPACE, "--wait=true",
                             "--timeout=60s", check=True, timeout=90)
        self.assertEqual(self.host.endpoint("/readyz")[0], 200)
        self.assertEqual(self.forbidden_answers(), [])
        requests = len(self.cluster.audit_events(USER))
        self.assertGreater(requests, 0)
        print("generated role: %d requests by %s, 0 answered 403" % (requests, USER))

    def test_2_missing_write_permission_is_named(self):
        self.set_role(["patch"])
        self.create_webapp("locked")
        message = re.compile(r'cannot patch resource \\?"services\\?".*namespace \\?"%s' % NAMESPACE)

        def refused_condition():
            web = self.get("webapp", "locked") or {}
            for c in web.get("status", {}).get("conditions", []):
                if c["type"] == "Reconciled" and c["status"] == "False" and \
                        message.search(c.get("message", "")):
                    return c
            return None
        condition = self.host.wait_for(refused_condition, "a Reconciled=False condition naming "
                                       "patch services in %s" % NAMESPACE, timeout=90)
        self.assertEqual(condition["reason"], "Forbidden", condition)
        events = self.get("events", "--field-selector", "involvedObject.name=locked") or {}
        self.assertTrue(any(e["type"] == "Warning" and message.search(e["message"])
                            for e in events.get("items", [])), events)
        self.assertRegex(self.host.log(), message)
        # Retried with backoff, not in a hot loop. The backoff doubles from 5 ms, so any 10 s
        # window holds at most 12 retries even if it opens at the first failure (the condition
        # may be seen that early on a quick machine); a hot loop would be hundreds.
        before = self.reconciles()
        time.sleep(10)
        self.assertLessEqual(self.reconciles() - before, 12)
        # Granted again: converges soon, without waiting out a long backoff.
        self.set_role(())
        self.host.wait_for(lambda: self.get("service", "locked"), "service after the grant",
                           timeout=30)

    def test_3_missing_list_permission_is_named_in_readyz(self):
        self.set_role(["list", "watch"])
        # The watch breaks at its next reconnect; restart the host so it lists now.
        self.host.stop()
        type(self).host = host_fixture.start_host(
            OPERATOR.format(webapp=host_fixture.runfile("plugins/webapp/webapp"),
                            records=tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")),
                            namespace=NAMESPACE),
            kubeconfig=self.kubeconfig, wait_ready=False)
        status, text = self.host.wait_for(
            lambda: (lambda r: r if r[0] == 503 and "forbidden" in r[1] else None)(
                self.host.endpoint("/readyz?verbose")), "/readyz naming the forbidden watch")
        self.assertRegex(text, r'cannot list resource \\?"services\\?"')
        self.assertIn(NAMESPACE, text)
        self.set_role(())
        self.host.wait_for(lambda: self.host.endpoint("/readyz")[0] == 200,
                           "ready once granted", timeout=60)


if __name__ == "__main__":
    bazel_unittest.main()
