"""Today's client-go against ctrlhost (issue 29): a client-go 0.32 program (e2e/clientgo/modern,
built from Debian trixie's packages by tools/clientgo-modern) runs what today's controllers do,
scenario by scenario, against the embedded API server with client-go's WatchListClient feature
on (the default from client-go 1.35) and off (clientgo_modern_e2e_test), and against real
Kubernetes 1.20 as the reference (clientgo_modern_kube_e2e_test: WatchList off, as 1.20 has no
streaming lists). Each scenario is its own test case, so a failure names it."""

import os
import subprocess
import unittest

from e2e.apiserver import apiserver_fixture
from e2e.host import host_fixture
from tools.internal import bazel_unittest

SCENARIOS = ["informer", "dynamic", "metadata", "protobuf", "apply", "leaderelection", "list",
             "events", "watchlist", "status", "scale"]


def program():
    """The built program, or an AssertionError saying how to build it."""
    candidates = [os.environ.get("CTRLHOST_CLIENTGO_MODERN", ""),
                  os.path.join(os.path.expanduser("~"), ".cache", "ctrlhost", "clientgo-0.32",
                               "bin", "current")]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    raise AssertionError("the client-go 0.32 program is not built (looked in "
                         "$CTRLHOST_CLIENTGO_MODERN=%r and %s): build it once with "
                         "tools/clientgo-modern (tools/test does it for you)" %
                         (candidates[0], candidates[1]))


class ClientGoModernTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.program = program()
        if host_fixture.real_kube():
            cls.server = host_fixture.cluster()
        else:
            cls.server = apiserver_fixture.ApiServer.start()

    @classmethod
    def tearDownClass(cls):
        if not host_fixture.real_kube():
            cls.server.stop()

    def test_relist_after_a_compacted_resource_version(self):
        """An informer whose watch starts from a compacted resourceVersion gets 410 and relists.
        Each server gets a short compaction window of its own: the embedded one compacts within
        100 ms with --compaction-retain-revisions=5; for real Kubernetes, a cluster of this test's
        own whose kube-apiserver compacts etcd every 2 s (--etcd-compaction-interval; 5 minutes by
        default) and serves watches from etcd (--watch-cache=false: its watch cache would serve a
        watch from any revision it still holds, compacted in etcd or not)."""
        if host_fixture.real_kube():
            from e2e.kube import kube_fixture  # pylint: disable=import-outside-toplevel
            server = kube_fixture.Cluster.start(
                extra_apiserver_args=["--etcd-compaction-interval=2s", "--watch-cache=false"],
                controller_manager=False)
        else:
            server = apiserver_fixture.ApiServer.start(
                extra_args=["--compaction-retain-revisions", "5", "--compaction-interval",
                            "100ms"])
        try:
            self.run_scenario("relist", False, server)
        finally:
            server.stop()

    def run_scenario(self, scenario, watch_list, server=None):
        server = server or self.server
        env = dict(os.environ)
        env["KUBE_FEATURE_WatchListClient"] = "true" if watch_list else "false"
        namespace = "modern-%s-%s" % (scenario, "wl" if watch_list else "lw")
        result = subprocess.run(
            [self.program, "-kubeconfig", server.kubeconfig, "-namespace", namespace,
             "-scenario", scenario, "-timeout", "60s"],
            capture_output=True, text=True, timeout=300, env=env)
        print(result.stdout.strip())
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr[-4000:])
        self.assertIn("PASS %s:" % scenario, result.stdout)
        # client-go falls back silently (a warning in its log) when the server gets WatchList
        # or a metadata watch wrong: the scenario passing is not enough.
        for sign in ("watchlist request ended with an error", "falling back to the standard LIST",
                     "unable to decode an event from the watch stream"):
            self.assertNotIn(sign, result.stderr, result.stderr[-4000:])


def add_cases():
    variants = [False] if host_fixture.real_kube() else [False, True]
    for scenario in SCENARIOS:
        # The raw WatchList request needs the feature on: kube 1.20 serves no streaming lists.
        wanted = [True] if scenario == "watchlist" else variants
        for watch_list in wanted:
            def case(self, scenario=scenario, watch_list=watch_list):
                if watch_list and host_fixture.real_kube():
                    self.skipTest("kube 1.20 serves no streaming lists (sendInitialEvents came in "
                                  "1.27); the embedded server's are checked by the embedded twin")
                self.run_scenario(scenario, watch_list)
            name = "test_%s_watchlist_%s" % (scenario, "on" if watch_list else "off")
            setattr(ClientGoModernTest, name, case)


add_cases()

if __name__ == "__main__":
    bazel_unittest.main()
