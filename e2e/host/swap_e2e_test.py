"""End to end: hot swap under load, against the embedded API server (swap_e2e_test) and real
Kubernetes 1.20 (swap_kube_e2e_test). A steady stream of updates to 2,000 (real: 300) Chaos objects
while the plugin is swapped v1 -> v2 -> v1 ten times with `ctrlhost plugin swap`: every object
converges to its last update, no key is reconciled by two instances at once, no watch relists.
Broken releases (bad protocol version, crash at start) are refused and the serving instance keeps
serving. An edit of the operator file is applied live; an invalid one is refused."""

import json
import os
import re
import tempfile
import threading
import time
import unittest

from e2e.apiserver import apiserver_fixture
from e2e.host import host_fixture
from tools.internal import bazel_unittest

# Real Kubernetes (swap_kube_e2e_test) gets fewer objects: the host's client is held to the
# default 50 requests/s there, as client-go's is.
OBJECTS = 300 if host_fixture.real_kube() else 2000
SWAPS = 10

OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: chaos
spec:
  plugins:
    - name: chaos
      exec:
        command: {chaos}
        env:
          CHAOS_DIR: {dir}
          CHAOS_VERSION: v1
  controllers:
    - name: chaos
      maxConcurrentReconciles: {concurrency}
"""


class SwapTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="swap-", dir=os.environ.get("TEST_TMPDIR"))
        cls.chaos = host_fixture.runfile("e2e/host/chaos/chaos")
        cls.host = host_fixture.start_host(OPERATOR.format(chaos=cls.chaos, dir=cls.dir,
                                                           concurrency=8))
        cls.host.kubectl("apply", "-f", host_fixture.runfile("e2e/host/chaos/crd.yaml"),
                         check=True)
        cls.host.wait_for(lambda: cls.host.endpoint("/readyz")[0] == 200, "controller ready")

    @classmethod
    def tearDownClass(cls):
        code = cls.host.stop()
        assert code == 0, "ctrlhost exited %s\n%s" % (code, cls.host.log()[-4000:])

    def put_chaos(self, name, value):
        body = {"apiVersion": "e2e.ctrlhost.dev/v1", "kind": "Chaos",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"mode": "ok", "data": {"value": str(value)}}}
        status, _ = self.host.api.request(
            "PATCH", "/apis/e2e.ctrlhost.dev/v1/namespaces/default/chaos/%s"
            "?fieldManager=e2e&force=true" % name, body, "application/apply-patch+yaml")
        return status

    def swap(self, *args):
        result = self.host.ctrlhost("plugin", "swap", "chaos/chaos", "--timeout", "60s", *args)
        return result

    def generation(self):
        listing = self.host.ctrlhost("plugin", "list", "-o", "json")
        self.assertEqual(listing.returncode, 0, listing.stderr)
        return int(json.loads(listing.stdout)["plugins"][0]["swapGeneration"])

    def test_swaps_under_load_lose_nothing(self):
        names = ["obj-%03d" % i for i in range(OBJECTS)]
        first_generation = self.generation()
        last = {}
        for name in names:
            self.assertIn(self.put_chaos(name, 0), (200, 201))
            last[name] = 0
        stop = threading.Event()
        errors = []

        def updater(part):
            value = 0
            while not stop.is_set():
                value += 1
                for name in part:
                    status = self.put_chaos(name, value)
                    if status not in (200, 201):
                        errors.append((name, status))
                    last[name] = value
                    if stop.is_set():
                        return

        threads = [threading.Thread(target=updater, args=(names[i::3],)) for i in range(3)]
        for t in threads:
            t.start()
        try:
            for i in range(SWAPS):
                version = "v2" if i % 2 == 0 else "v1"
                result = self.swap("--command", self.chaos, "--env", "CHAOS_DIR=" + self.dir,
                                   "--env", "CHAOS_VERSION=" + version)
                self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
                time.sleep(0.3)
        finally:
            stop.set()
            for t in threads:
                t.join(60)
        self.assertEqual(errors, [])
        # Every object converges to its last update: the child ConfigMap carries it.
        for name in names:
            want = str(last[name])
            self.host.wait_for(
                lambda: (self.host.get("/api/v1/namespaces/default/configmaps/" + name) or {})
                .get("data", {}).get("value") == want, "%s converged to %s" % (name, want),
                timeout=90)
        # No key was reconciled twice at once, across all the instances.
        with open(os.path.join(self.dir, "log")) as f:
            lines = f.read().splitlines()
        running = {}
        for line in lines:
            key, _, what = line.split(" ")[:3]
            if what == "start":
                self.assertFalse(running.get(key), "%s reconciled twice at once" % key)
                running[key] = True
            else:
                running[key] = False
        # The host's caches never relisted: swapping changes only the plugin.
        self.assertEqual(self.host.metric("ctrlhost_watch_relists_total"), 0)
        listing = self.host.ctrlhost("plugin", "list", "-o", "json")
        self.assertEqual(listing.returncode, 0, listing.stderr)
        plugin = json.loads(listing.stdout)["plugins"][0]
        # Generations also count refused and aborted attempts: at least one per swap.
        self.assertGreaterEqual(int(plugin["swapGeneration"]), first_generation + SWAPS, plugin)
        self.assertEqual(plugin["state"], "PLUGIN_STATE_READY")

    def test_canary_routes_a_stable_share_then_promotes(self):
        names = ["canary-%03d" % i for i in range(60)]
        result = self.swap("--command", self.chaos, "--env", "CHAOS_DIR=" + self.dir,
                           "--env", "CHAOS_VERSION=canary", "--canary", "30")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        listing = json.loads(self.host.ctrlhost("plugin", "list", "-o", "json").stdout)
        self.assertEqual(listing["plugins"][0]["canary"]["percent"], 30, listing)
        for round_ in (1, 2):
            for name in names:
                self.assertIn(self.put_chaos(name, round_), (200, 201))
            for name in names:
                self.host.wait_for(
                    lambda: (self.host.get("/api/v1/namespaces/default/configmaps/" + name) or {})
                    .get("data", {}).get("value") == str(round_), name + " converged")
        # Each key stays on one side; about 30% go to the canary.
        with open(os.path.join(self.dir, "log")) as f:
            served = {}
            for line in f.read().splitlines():
                key, _, what, version = line.split(" ")[:4]
                if key[len("default/"):] in names and what == "start":
                    served.setdefault(key, set()).add(version)
        self.assertEqual(len(served), len(names))
        self.assertTrue(all(len(v) == 1 for v in served.values()), served)
        on_canary = sum(1 for v in served.values() if "canary" in v)
        self.assertGreater(on_canary, 5)
        self.assertLess(on_canary, 40)
        # Promote: the canary serves everything.
        result = self.swap("--promote-canary")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        listing = json.loads(self.host.ctrlhost("plugin", "list", "-o", "json").stdout)
        self.assertNotIn("canary", listing["plugins"][0])
        self.assertIn(self.put_chaos(names[0], 99), (200, 201))
        self.host.wait_for(
            lambda: (self.host.get("/api/v1/namespaces/default/configmaps/" + names[0]) or {})
            .get("data", {}).get("value") == "99", "promoted canary serves")
        # A canary that is aborted serves nothing afterwards.
        result = self.swap("--command", self.chaos, "--env", "CHAOS_DIR=" + self.dir,
                           "--env", "CHAOS_VERSION=aborted", "--canary", "50")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        result = self.swap("--abort-canary")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        with open(os.path.join(self.dir, "log")) as f:
            before = f.read().count(" aborted")
        for name in names:
            self.assertIn(self.put_chaos(name, 3), (200, 201))
        for name in names:
            self.host.wait_for(
                lambda: (self.host.get("/api/v1/namespaces/default/configmaps/" + name) or {})
                .get("data", {}).get("value") == "3", name + " converged after abort")
        with open(os.path.join(self.dir, "log")) as f:
            self.assertEqual(f.read().count(" aborted"), before)

    def test_zz_broken_releases_are_refused(self):
        before = self.host.ctrlhost("plugin", "list", "-o", "json")
        generation = json.loads(before.stdout)["plugins"][0]["swapGeneration"]
        failures = self.host.metric("ctrlhost_plugin_swaps_total", result="failure")
        successes = self.host.metric("ctrlhost_plugin_swaps_total", result="success")
        test_plugin = host_fixture.runfile("runtime/plugin/testing/test_plugin_main")
        for args in (["--arg", "--describe=bad-version"], ["--arg", "--exit-at-start=3"]):
            result = self.swap("--command", test_plugin, "--ready-timeout", "20s", *args)
            self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        after = json.loads(self.host.ctrlhost("plugin", "list", "-o", "json").stdout)
        self.assertEqual(after["plugins"][0]["swapGeneration"], generation)
        self.assertEqual(after["plugins"][0]["state"], "PLUGIN_STATE_READY")
        # Counted for the CtrlhostPluginSwapFailed alert (deploy/monitoring/alerts.yaml).
        self.assertEqual(
            self.host.metric("ctrlhost_plugin_swaps_total", result="failure"), failures + 2)
        self.assertEqual(
            self.host.metric("ctrlhost_plugin_swaps_total", result="success"), successes)
        # v1 keeps serving.
        self.assertIn(self.put_chaos("after-refusal", 7), (200, 201))
        self.host.wait_for(
            lambda: (self.host.get("/api/v1/namespaces/default/configmaps/after-refusal") or {})
            .get("data", {}).get("value") == "7", "after-refusal converged")

    def test_zz_operator_file_edits_apply_live(self):
        path = os.path.join(self.host.data_dir, "operator.yaml")
        with open(path, "w") as f:
            f.write(OPERATOR.format(chaos=self.chaos, dir=self.dir, concurrency=3))
        self.host.wait_for(lambda: "max: 3" in self.host.endpoint("/debug/dump")[1],
                           "concurrency 3 applied")
        # An invalid edit is refused with its error; nothing changes.
        with open(path, "w") as f:
            f.write(OPERATOR.format(chaos=self.chaos, dir=self.dir, concurrency=-1))
        self.host.wait_for(lambda: re.search(r"operator\.yaml:\d+:\d+: .*maxConcurrentReconciles",
                                             self.host.log()), "the refusal in the log")
        self.assertIn("max: 3", self.host.endpoint("/debug/dump")[1])
        with open(path, "w") as f:
            f.write(OPERATOR.format(chaos=self.chaos, dir=self.dir, concurrency=8))
        self.host.wait_for(lambda: "max: 8" in self.host.endpoint("/debug/dump")[1],
                           "concurrency 8 applied")


if __name__ == "__main__":
    bazel_unittest.main()
