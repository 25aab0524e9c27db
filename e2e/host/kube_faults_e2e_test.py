"""End to end, real Kubernetes 1.20 only: the data plane under the faults a real cluster has.

- kube-apiserver killed (kill -9) mid-watch and restarted 10 s later;
- the host started while the API server is down;
- etcd compacted while the host is cut off (through a TCP proxy), so its next watch gets
  410 Gone: it relists and misses nothing;
- the WebApp CRD deleted and re-created while the host runs.

In every case the host never exits, `/readyz` says what is wrong while it is wrong, and every
object converges afterwards. The cluster runs without the watch cache (--watch-cache=false),
so a watch from a compacted resourceVersion reaches etcd and is answered 410, as it is on a
busy cluster whose watch cache has moved on.
"""

import json
import os
import tempfile
import time
import unittest

from e2e.host import host_fixture
from e2e.kube import kube_fixture
from e2e.kube import tcp_proxy
from tools.internal import bazel_unittest

OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: faults
spec:
  plugins:
    - name: webapp
      exec:
        command: {webapp}
        env:
          WEBAPP_RECORD_DIR: {records}
"""

# How long a failing watch may be stale before /readyz says so (a short grace for the test).
STALE_ARGS = ["--watch-stale-after", "3s"]
WEBAPPS = "/apis/apps.ctrlhost.dev/v1alpha1/namespaces/%s/webapps"


class KubeFaultsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cluster = kube_fixture.Cluster.start(extra_apiserver_args=["--watch-cache=false"])
        cls.cluster.kubectl("apply", "-f", host_fixture.runfile("plugins/webapp/deploy/crd.yaml"),
                            check=True)
        cls.records = tempfile.mkdtemp(prefix="records-", dir=os.environ.get("TEST_TMPDIR"))
        cls.operator = OPERATOR.format(webapp=host_fixture.runfile("plugins/webapp/webapp"),
                                       records=cls.records)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    # --- helpers ----------------------------------------------------------------------------

    def apply_webapp(self, namespace, name, replicas):
        self.cluster.ensure_namespace(namespace)
        status, body = self.cluster.request(
            "PATCH", WEBAPPS % namespace + "/%s?fieldManager=e2e&force=true" % name, {
                "apiVersion": "apps.ctrlhost.dev/v1alpha1", "kind": "WebApp",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"image": "nginx:1.25", "replicas": replicas}},
            "application/apply-patch+yaml")
        self.assertIn(status, (200, 201), body)

    def replicas(self, namespace, name):
        status, body = self.cluster.request(
            "GET", "/apis/apps/v1/namespaces/%s/deployments/%s" % (namespace, name))
        return body.get("spec", {}).get("replicas") if status == 200 else None

    def wait_converged(self, host, namespace, wanted, timeout=120):
        """wanted: {name: replicas}; each Deployment and WebApp status follows its WebApp."""
        for name, replicas in wanted.items():
            host.wait_for(lambda: self.replicas(namespace, name) == replicas,
                          "%s/%s at %s replicas" % (namespace, name, replicas), timeout=timeout)
            host.wait_for(lambda: self.observed(namespace, name), "%s/%s status" %
                          (namespace, name), timeout=timeout)

    def observed(self, namespace, name):
        status, body = self.cluster.request("GET", WEBAPPS % namespace + "/" + name)
        return status == 200 and body.get("status", {}).get("observedGeneration") == \
            body["metadata"]["generation"]

    def readyz(self, host):
        return host.endpoint("/readyz?verbose")

    def wait_not_ready(self, host, *needles, timeout=60):
        def check():
            status, text = self.readyz(host)
            return (status, text) if status == 503 and all(n in text for n in needles) else None
        return host.wait_for(check, "/readyz 503 naming %s" % (needles,), timeout=timeout)

    def wait_ready(self, host, timeout=120):
        host.wait_for(lambda: self.readyz(host)[0] == 200, "/readyz 200", timeout=timeout)

    # --- the faults -------------------------------------------------------------------------

    def test_apiserver_killed_mid_watch(self):
        host = host_fixture.start_host(self.operator, kubeconfig=self.cluster.kubeconfig,
                                       extra_args=STALE_ARGS)
        try:
            self.apply_webapp("killed", "a", 1)
            self.wait_converged(host, "killed", {"a": 1})
            self.cluster.kill_apiserver()
            _, text = self.wait_not_ready(host, "WebApp")
            time.sleep(10)
            self.assertTrue(host.alive(), host.log()[-4000:])
            status, later = self.readyz(host)
            self.assertEqual(status, 503, later + host.log()[-4000:])
            self.cluster.start_apiserver()
            self.wait_ready(host)
            # The watches resumed: changes made after the restart are seen and reconciled.
            self.apply_webapp("killed", "a", 3)
            self.apply_webapp("killed", "b", 2)
            self.wait_converged(host, "killed", {"a": 3, "b": 2})
            self.assertIn("WebApp", text)
        finally:
            self.assertEqual(host.stop(), 0, host.log()[-4000:])

    def test_host_starts_while_apiserver_is_down(self):
        self.apply_webapp("early", "a", 2)
        self.cluster.kill_apiserver()
        try:
            host = host_fixture.start_host(self.operator, kubeconfig=self.cluster.kubeconfig,
                                           extra_args=STALE_ARGS, wait_ready=False)
        except BaseException:
            self.cluster.start_apiserver()
            raise
        try:
            status, text = self.wait_not_ready(host, self.cluster.url)
            time.sleep(3)
            self.assertTrue(host.alive(), host.log()[-4000:])
            self.cluster.start_apiserver()
            self.wait_ready(host)
            self.wait_converged(host, "early", {"a": 2})
            self.apply_webapp("early", "a", 4)
            self.wait_converged(host, "early", {"a": 4})
        finally:
            if not self.cluster.apiserver.alive():
                self.cluster.start_apiserver()
            self.assertEqual(host.stop(), 0, host.log()[-4000:])

    def test_compaction_while_cut_off_relists_and_misses_nothing(self):
        proxy = tcp_proxy.TcpProxy(self.cluster.port)
        kubeconfig = kube_fixture.write_kubeconfig(
            os.path.join(self.cluster.dir, "proxied.kubeconfig"),
            "https://127.0.0.1:%d" % proxy.port, os.path.join(self.cluster.pki, "ca.crt"),
            kube_fixture.ADMIN_TOKEN)
        host = host_fixture.start_host(self.operator, kubeconfig=kubeconfig,
                                       extra_args=STALE_ARGS)
        try:
            wanted = {"w%d" % i: 1 for i in range(5)}
            for name, replicas in wanted.items():
                self.apply_webapp("compacted", name, replicas)
            self.wait_converged(host, "compacted", wanted)
            relists = host.metric("ctrlhost_watch_relists_total")
            proxy.cut()
            # While the host is cut off: updates, a new object, a deletion, then compaction.
            for name in ("w0", "w1"):
                wanted[name] = 4
                self.apply_webapp("compacted", name, 4)
            wanted["w5"] = 2
            self.apply_webapp("compacted", "w5", 2)
            status, _ = self.cluster.request("DELETE", WEBAPPS % "compacted" + "/w4")
            self.assertEqual(status, 200)
            del wanted["w4"]
            self.cluster.compact_etcd()
            self.wait_not_ready(host, "WebApp")
            proxy.restore()
            self.wait_ready(host)
            self.wait_converged(host, "compacted", wanted)
            # w4 was deleted while unseen: the finalizer still ran and it is gone.
            host.wait_for(lambda: self.cluster.request(
                "GET", WEBAPPS % "compacted" + "/w4")[0] == 404, "w4 finalized and gone")
            self.assertGreater(host.metric("ctrlhost_watch_relists_total"), relists)
            self.assertIn("410", host.log())
        finally:
            proxy.close()
            self.assertEqual(host.stop(), 0, host.log()[-4000:])

    def test_crd_deleted_and_recreated(self):
        crd = host_fixture.runfile("plugins/webapp/deploy/crd.yaml")
        host = host_fixture.start_host(self.operator, kubeconfig=self.cluster.kubeconfig,
                                       extra_args=STALE_ARGS)
        try:
            self.apply_webapp("recreated", "a", 1)
            self.wait_converged(host, "recreated", {"a": 1})
            # The CRD goes (and its objects with it: the finalizer is released first).
            self.cluster.kubectl("delete", "-f", crd, "--wait=true", "--timeout=90s", check=True,
                                 timeout=120)
            time.sleep(3)
            self.assertTrue(host.alive(), host.log()[-4000:])
            self.cluster.kubectl("apply", "-f", crd, check=True)
            self.cluster.kubectl("wait", "--for=condition=Established", "crd/webapps.apps.ctrlhost.dev",
                                 "--timeout=60s", check=True, timeout=90)
            self.apply_webapp("recreated", "b", 2)
            self.wait_converged(host, "recreated", {"b": 2})
            self.wait_ready(host)
        finally:
            self.assertEqual(host.stop(), 0, host.log()[-4000:])


if __name__ == "__main__":
    bazel_unittest.main()
