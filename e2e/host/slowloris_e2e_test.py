"""End to end: real `ctrlhost run` with its embedded API server under a connection attack (issue 14
items 6 and 8). While thousands of trickling TLS connections (re-opened as the server closes
them) hit the embedded API server and 64 idle connections sit on the metrics port, the host's
own informers still see changes (the ConfigMap replicator copies a ConfigMap into a new
namespace), kubectl works, and /healthz answers. Embedded server only: the connection limits
are the embedded server's (a real kube-apiserver has its own)."""

import ssl
import unittest
import urllib.parse
import urllib.request

from e2e.apiserver import attack
from e2e.host import host_fixture
from tools.internal import bazel_unittest

OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: replicator
spec:
  plugins:
    - name: configmap-replicator
      exec:
        command: {replicator}
"""


class HostUnderConnectionAttackTest(unittest.TestCase):

    def test_informers_kubectl_and_healthz_work_during_the_attack(self):
        attack.raise_own_open_file_limit()
        host = host_fixture.Host.start(OPERATOR.format(replicator=host_fixture.runfile(
            "plugins/configmap-replicator/configmap-replicator")))
        trickler = None
        idle = []
        try:
            server = urllib.parse.urlparse(host.url)
            metrics = urllib.parse.urlparse(host.metrics_url)  # http://127.0.0.1:PORT/metrics
            healthz = "http://%s:%d/healthz" % (metrics.hostname, metrics.port)
            trickler = attack.Trickler(server.hostname, server.port, 3000, refill=200)
            idle = attack.open_idle_connections(metrics.hostname, metrics.port, 64)
            self.assertEqual(len(idle), 64)
            self.assertGreater(len(trickler.sockets), 2000, "handshaking connections opened")
            with urllib.request.urlopen(healthz, timeout=10) as response:
                self.assertEqual(response.status, 200)
            host.kubectl("--request-timeout=20s", "create", "namespace", "source", check=True)
            host.kubectl("--request-timeout=20s", "apply", "-f", "-", check=True,
                         input_text="""
apiVersion: v1
kind: ConfigMap
metadata:
  name: shared
  namespace: source
  labels: {ctrlhost.dev/replicate: "true"}
  annotations: {ctrlhost.dev/replicate-to: "team=blue"}
data: {motto: be kind}
""")
            host.kubectl("--request-timeout=20s", "apply", "-f", "-", check=True,
                         input_text="""
apiVersion: v1
kind: Namespace
metadata: {name: blue, labels: {team: blue}}
""")
            def replica():
                # The test's own probe opens a new TLS connection each time; under the attack
                # the server may evict it mid-handshake as the oldest of the handshaking ones
                # (by design: the flood refills the pool). That is a retry, not a failure.
                try:
                    return host.get("/api/v1/namespaces/blue/configmaps/shared")
                except (ssl.SSLError, ConnectionError) as error:
                    print("probe connection closed during the attack: %s" % error)
                    return None
            copy = host.wait_for(replica, "replica in blue")
            self.assertEqual(copy["data"], {"motto": "be kind"})
            # The attack was still on: the server kept closing and the client re-opening. The
            # trickler notices closed connections once per round (3,000 sockets, slow on a
            # loaded machine), so the replica can be there before its first re-open: wait.
            self.assertTrue(attack.wait_until(lambda: trickler.reopened > 0, 60),
                            "closed by the server: %d, re-opened: %d" % (
                                trickler.closed_by_server(), trickler.reopened))
            with urllib.request.urlopen(healthz, timeout=10) as response:
                self.assertEqual(response.status, 200)
            # Operators see the attack on /metrics.
            evicted = [line for line in host.metrics().splitlines() if line.startswith(
                'ctrlhost_http_connections_closed_total{server="apiserver",reason="evicted"}')]
            self.assertEqual(len(evicted), 1, host.metrics())
            self.assertGreater(float(evicted[0].split()[-1]), 0)
        finally:
            if trickler is not None:
                trickler.stop()
            attack.close_all(idle)
            code = host.stop()
        self.assertEqual(code, 0, host.log()[-4000:])


if __name__ == "__main__":
    bazel_unittest.main()
