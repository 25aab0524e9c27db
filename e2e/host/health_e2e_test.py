"""End to end: a plugin's grpc.health.v1 status after the handshake (docs/protocol.md,
"Liveness"), with the real host and a Python SDK plugin (e2e/host/health/health_plugin.py).

The plugin mirrors labelled ConfigMaps into NAME-mirror children. Once they converged, the test
makes it report NOT_SERVING (PluginServer.set_serving) and changes objects: the host sends it
nothing (the plugin logs the health it reported when each request arrived), says so in the dump,
`ctrlhost plugin list` and /readyz, and keeps the requests waiting; SERVING again and every
change converges, no key lost, the plugin never restarted. Then the plugin process is
SIGSTOPped (it accepts its stream but reads nothing more): the host notices through the request
deadline and HTTP/2 keepalive, kills and restarts it, and the changes made meanwhile converge
(the detection time is printed; only a hang guard is asserted).

Runs against the server host_fixture picks (CTRLHOST_E2E_SERVER): health_e2e_test against the
embedded one, health_kube_e2e_test against real Kubernetes."""

import os
import signal
import sys
import tempfile
import time
import unittest

import yaml  # Debian's python3-yaml, as the other e2e tests

from e2e.host import host_fixture
from tools.internal import bazel_unittest

OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: health
spec:
  plugins:
    - name: mirror
      exec:
        command: {plugin}
        env:
          HEALTH_DIR: {dir}
"""

CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
  namespace: default
  labels: {{health-e2e: "true"}}
data:
  value: {value}
"""


def stopped(pid):
    """True when every thread of `pid` is in state T (stopped)."""
    task_dir = "/proc/%d/task" % pid
    for task in os.listdir(task_dir):
        try:
            with open(os.path.join(task_dir, task, "stat"), encoding="utf-8") as f:
                if f.read().rpartition(")")[2].split()[0] != "T":
                    return False
        except FileNotFoundError:
            continue  # a thread that just exited
    return True


class HealthTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        # Plugin-writable, apart from the host's data directory (Landlock hides that one).
        cls.dir = tempfile.mkdtemp(prefix="health-", dir=os.environ.get("TEST_TMPDIR"))
        os.chmod(cls.dir, 0o777)
        plugin = host_fixture.runfile("e2e/host/health/health_plugin")
        cls.host = host_fixture.Host.start(OPERATOR.format(plugin=plugin, dir=cls.dir))
        cls.host.wait_for(lambda: cls.host.endpoint("/readyz")[0] == 200, "host ready")

    @classmethod
    def tearDownClass(cls):
        code = cls.host.stop()
        assert code == 0, "ctrlhost exited %s\n%s" % (code, cls.host.log()[-4000:])

    def apply(self, name, value):
        self.host.kubectl("apply", "-f", "-", input_text=CONFIGMAP.format(name=name, value=value),
                          check=True)

    def mirror(self, name):
        child = self.host.get("/api/v1/namespaces/default/configmaps/%s-mirror" % name)
        return (child or {}).get("data", {}).get("value")

    def plugin_dump(self):
        status, text = self.host.endpoint("/debug/dump")
        self.assertEqual(status, 200, text)
        return yaml.safe_load(text)["plugins"][0]

    def health(self):
        return self.plugin_dump().get("health") or {}

    def set_health(self, wanted):
        with open(os.path.join(self.dir, "health"), "w", encoding="utf-8") as f:
            f.write(wanted)
        ack = os.path.join(self.dir, "health.ack")

        def acked():
            try:
                with open(ack, encoding="utf-8") as f:
                    return f.read().splitlines()[-1:] == [wanted]
            except FileNotFoundError:
                return False
        self.host.wait_for(acked, "plugin reports " + wanted)

    def arrivals(self):
        """(monotonic seconds, health the plugin reported, name, value) per request received."""
        with open(os.path.join(self.dir, "reconciles.log"), encoding="utf-8") as f:
            lines = [line.split(" ") for line in f.read().splitlines()]
        return [(float(t), health, name, value) for t, health, name, value in lines]

    def converged(self, names, value):
        return all(self.mirror(name) == value for name in names)

    def test_not_serving_holds_requests_and_serving_again_converges(self):
        restarts = self.plugin_dump()["restarts"]
        first = ["a0", "a1", "a2"]
        for name in first:
            self.apply(name, "v1")
        self.host.wait_for(lambda: self.converged(first, "v1"), "mirrors at v1")
        self.assertEqual(self.health().get("status"), "SERVING")

        # NOT_SERVING (the plugin pauses, as while draining): the host sees it within its watch.
        self.set_health("NOT_SERVING")
        self.host.wait_for(lambda: self.health().get("status") == "NOT_SERVING",
                           "dump health NOT_SERVING")
        observed = time.monotonic()
        listed = self.host.ctrlhost("plugin", "list")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        self.assertIn("NOT_SERVING", listed.stdout)
        status, text = self.host.endpoint("/readyz?verbose")
        self.assertEqual(status, 503, text)
        self.assertIn("plugin health/mirror is not serving: it reports NOT_SERVING", text)

        # Objects change meanwhile: updates and new objects.
        second = ["b0", "b1", "b2"]
        for name in first + second:
            self.apply(name, "v2")
        self.host.wait_for(lambda: self.health().get("waitingRequests", 0) >= 1,
                           "requests waiting in the host")
        for name in first:
            self.assertEqual(self.mirror(name), "v1")  # nothing was sent
        for name in second:
            self.assertIsNone(self.mirror(name))
        self.assertEqual(self.plugin_dump()["state"], "READY")

        # SERVING again: everything converges, nothing lost, no restart.
        self.set_health("SERVING")
        self.host.wait_for(lambda: self.converged(first + second, "v2"), "mirrors at v2")
        self.assertEqual(self.health().get("status"), "SERVING")
        self.assertEqual(self.plugin_dump()["restarts"], restarts)
        sent_while_not_serving = [a for a in self.arrivals()
                                  if a[1] == "NOT_SERVING" and a[0] >= observed]
        self.assertEqual(sent_while_not_serving, [])
        log = self.host.log()
        self.assertIn("plugin not serving: new requests wait until it serves again", log)
        self.assertIn("plugin serving again: dispatch resumes", log)
        status, text = self.host.endpoint("/readyz?verbose")
        self.assertNotIn("not serving", text)

    def test_stopped_plugin_is_restarted_and_keys_converge(self):
        names = ["s0", "s1"]
        for name in names:
            self.apply(name, "v1")
        self.host.wait_for(lambda: self.converged(names, "v1"), "mirrors at v1")
        plugin = self.plugin_dump()
        pid, restarts = plugin["pid"], plugin["restarts"]
        os.kill(pid, signal.SIGSTOP)
        # kill() only queues the signal: wait until every thread of the plugin is stopped.
        self.host.wait_for(lambda: stopped(pid), "plugin process stopped")
        stopped_at = time.monotonic()
        try:
            for name in names:
                self.apply(name, "v2")
            # Hang guard only: keepalive (10 s + 5 s) and the request deadline bound it.
            self.host.wait_for(lambda: self.plugin_dump()["restarts"] > restarts,
                               "the stopped plugin restarted", timeout=90)
            noticed = time.monotonic() - stopped_at
        finally:
            try:
                os.kill(pid, signal.SIGCONT)  # if the host did not kill it, let it stop normally
            except ProcessLookupError:
                pass
        self.host.wait_for(lambda: self.converged(names, "v2"), "mirrors at v2 after restart")
        plugin = self.plugin_dump()
        self.assertNotEqual(plugin["pid"], pid)
        sys.stderr.write("figure: SIGSTOPped plugin restarted %.1f s after the stop (%s)\n" %
                         (noticed, plugin.get("lastError", {}).get("message", "")))


if __name__ == "__main__":
    bazel_unittest.main()
