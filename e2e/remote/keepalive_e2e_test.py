"""HTTP/2 keepalive on the host's plugin channels (docs/protocol.md, "Liveness").

The C++ WebApp plugin runs as its own process on 127.0.0.1 (plaintext, loopback), and the host
dials it through a loopback TCP proxy this test controls (e2e/kube/tcp_proxy.py). Once the
plugin is up, the proxy blackholes: it keeps both sockets open and forwards nothing, as a
partitioned network or a dead proxy would. No request is in flight, so only the host's
keepalive pings can notice. The host must end the instance within a bound generous for a loaded
machine (the figure is logged; the design target is keepalive time 10 s + timeout 5 s), with the
reason in its log and /debug/dump, and come back once the proxy forwards again.
"""

import os
import socket
import sys
import time
import unittest

from e2e.host import host_fixture
from e2e.kube import tcp_proxy
from e2e.remote import remote_mtls_e2e_test as remote
from tools.internal import bazel_unittest

OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: keepalive
spec:
  plugins:
    - name: webapp
      startupTimeout: 5s
      endpoint:
        address: 127.0.0.1:{port}
"""

# Upper bound on noticing a blackholed connection (10 s ping interval + 5 s ping timeout,
# with a wide margin for a machine shared by several builds).
DETECT_SECONDS = 60


class KeepaliveTest(unittest.TestCase):

    def setUp(self):
        self.port = remote.free_port()
        self.plugin = remote.PluginProcess(
            remote.plugin_env(CTRLHOST_PLUGIN_ADDRESS="127.0.0.1:%d" % self.port),
            os.path.join(host_fixture.apiserver_fixture.temp_root(),
                         "keepalive-plugin-%d.log" % self.port))
        deadline = time.monotonic() + remote.WAIT_SECONDS
        while True:
            self.assertTrue(self.plugin.alive(), self.plugin.log())
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                self.assertLess(time.monotonic(), deadline, self.plugin.log())
                time.sleep(0.1)
        self.proxy = tcp_proxy.TcpProxy(self.port)

    def tearDown(self):
        self.proxy.close()
        code = self.plugin.stop()
        self.assertEqual(code, 0, self.plugin.log())

    def test_blackholed_remote_plugin_is_noticed(self):
        host = host_fixture.start_host(OPERATOR.format(port=self.proxy.port))
        try:
            host.wait_for(lambda: host.metric("ctrlhost_plugin_up") == 1, "the plugin up")
            ended_before = host.log().count("plugin instance ended; restarting")

            self.proxy.blackhole()
            started = time.monotonic()
            host.wait_for(lambda: host.metric("ctrlhost_plugin_up") == 0,
                          "the blackholed plugin down", timeout=DETECT_SECONDS)
            elapsed = time.monotonic() - started
            sys.stderr.write("blackholed remote plugin noticed after %.1f s\n" % elapsed)

            log = host.log()
            self.assertGreater(log.count("plugin instance ended; restarting"), ended_before,
                               log[-4000:])
            tail = log[log.rfind("plugin instance ended; restarting"):][:2000]
            self.assertIn("keepalive", tail.lower(), tail)
            status, dump = host.endpoint("/debug/dump")
            self.assertEqual(status, 200, dump)
            self.assertIn("keepalive", dump.lower(), dump[:4000])
            self.assertNotEqual(host.endpoint("/readyz")[0], 200)

            # Forwarding again, the supervisor's redial reaches the plugin.
            self.proxy.restore()
            host.wait_for(lambda: host.metric("ctrlhost_plugin_up") == 1, "the plugin up again")
        finally:
            self.assertEqual(host.stop(), 0, host.log()[-4000:])


if __name__ == "__main__":
    bazel_unittest.main()
