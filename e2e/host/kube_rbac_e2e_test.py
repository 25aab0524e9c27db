"""End to end, real Kubernetes 1.20 only: the host under a ServiceAccount token bound to a Role
with only what the WebApp controller needs, in one namespace.

- With the full Role the WebApp scenario works end to end and the API server's audit log has
  no 403 answer for the host's account.
- With the right to patch Services removed, the failure is visible where users look: the
  object's Reconciled condition and a Warning event, and the host's log, name the verb, the
  resource and the namespace; the key is retried with backoff, not in a hot loop; once the
  permission is granted again the object converges without waiting out a long backoff.
- With the right to list Services removed, /readyz?verbose names the forbidden watch.
"""

import json
import os
import re
import tempfile
import time
import unittest

from e2e.host import host_fixture

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

ALL_VERBS = ["get", "list", "watch", "create", "update", "patch", "delete"]


def role(service_verbs):
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": ACCOUNT, "namespace": NAMESPACE},
        "rules": [
            {"apiGroups": ["apps.ctrlhost.dev"], "resources": ["webapps"],
             "verbs": ["get", "list", "watch", "update", "patch"]},
            {"apiGroups": ["apps.ctrlhost.dev"], "resources": ["webapps/status"],
             "verbs": ["get", "update", "patch"]},
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ALL_VERBS},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ALL_VERBS},
            {"apiGroups": [""], "resources": ["services"], "verbs": service_verbs},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "update"]},
        ],
    }


class RestrictedPermissionsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cluster = host_fixture.cluster()
        cls.cluster.kubectl("apply", "-f", host_fixture.runfile("plugins/webapp/deploy/crd.yaml"),
                            check=True)
        cls.kubeconfig = cls.cluster.service_account_kubeconfig(NAMESPACE, ACCOUNT)
        cls.set_role(ALL_VERBS)
        cls.cluster.kubectl("create", "rolebinding", ACCOUNT, "-n", NAMESPACE, "--role", ACCOUNT,
                            "--serviceaccount", "%s:%s" % (NAMESPACE, ACCOUNT), check=True)
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
    def set_role(cls, service_verbs):
        cls.cluster.kubectl("apply", "-f", "-", input_text=json.dumps(role(service_verbs)),
                            check=True)

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
        self.assertGreater(len(self.cluster.audit_events(USER)), 0)

    def test_2_missing_write_permission_is_named(self):
        self.set_role([v for v in ALL_VERBS if v != "patch"])
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
        # Retried with backoff, not in a hot loop.
        before = self.reconciles()
        time.sleep(10)
        self.assertLessEqual(self.reconciles() - before, 6)
        # Granted again: converges soon, without waiting out a long backoff.
        self.set_role(ALL_VERBS)
        self.host.wait_for(lambda: self.get("service", "locked"), "service after the grant",
                           timeout=30)

    def test_3_missing_list_permission_is_named_in_readyz(self):
        self.set_role([v for v in ALL_VERBS if v not in ("list", "watch")])
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
        self.set_role(ALL_VERBS)
        self.host.wait_for(lambda: self.host.endpoint("/readyz")[0] == 200,
                           "ready once granted", timeout=60)


if __name__ == "__main__":
    unittest.main()
