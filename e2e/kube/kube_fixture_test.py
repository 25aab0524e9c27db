"""The real-Kubernetes fixture itself: the cluster serves 1.20.2, kubectl works with the admin
kubeconfig, a ServiceAccount kubeconfig is refused until RBAC grants it, the garbage collector
runs, and the API server survives kill -9 with its data (etcd keeps it)."""

import unittest

from e2e.kube import kube_fixture
from tools.internal import bazel_unittest


class ClusterTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cluster = kube_fixture.Cluster.start()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def test_version_and_kubectl(self):
        self.assertEqual(self.cluster.version["gitVersion"], "v1.20.2")
        result = self.cluster.kubectl("get", "namespaces", "-o", "name", check=True)
        self.assertIn("namespace/kube-system", result.stdout)

    def test_service_account_is_bound_by_rbac(self):
        kubeconfig = self.cluster.service_account_kubeconfig("limited", "reader")
        denied = self.cluster.kubectl("get", "configmaps", "-n", "limited", kubeconfig=kubeconfig)
        self.assertNotEqual(denied.returncode, 0)
        self.assertIn("forbidden", denied.stderr)
        self.cluster.kubectl("create", "role", "read-cm", "-n", "limited", "--verb=get,list",
                             "--resource=configmaps", check=True)
        self.cluster.kubectl("create", "rolebinding", "read-cm", "-n", "limited",
                             "--role=read-cm", "--serviceaccount=limited:reader", check=True)
        allowed = self.cluster.kubectl("get", "configmaps", "-n", "limited",
                                       kubeconfig=kubeconfig)
        self.assertEqual(allowed.returncode, 0, allowed.stderr)

    def test_garbage_collector_runs(self):
        self.cluster.ensure_namespace("gc")
        status, owner = self.cluster.request("POST", "/api/v1/namespaces/gc/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}})
        self.assertEqual(status, 201, owner)
        status, _ = self.cluster.request("POST", "/api/v1/namespaces/gc/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                "name": "dependent", "ownerReferences": [{
                    "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                    "uid": owner["metadata"]["uid"]}]}})
        self.assertEqual(status, 201)
        self.cluster.kubectl("delete", "configmap", "owner", "-n", "gc", check=True)
        self.cluster.kubectl("wait", "--for=delete", "configmap/dependent", "-n", "gc",
                             "--timeout=60s", check=True, timeout=90)

    def test_zz_apiserver_restart_keeps_data(self):
        self.cluster.ensure_namespace("durable")
        self.cluster.kill_apiserver()
        self.cluster.start_apiserver()
        status, _ = self.cluster.request("GET", "/api/v1/namespaces/durable")
        self.assertEqual(status, 200)
        revision = self.cluster.compact_etcd()
        self.assertGreater(revision, 1)
        status, body = self.cluster.request(
            "GET", "/api/v1/namespaces?resourceVersion=1&resourceVersionMatch=Exact")
        self.assertEqual(status, 410, body)


if __name__ == "__main__":
    bazel_unittest.main()
