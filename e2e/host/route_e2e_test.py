"""End to end: routing one controller's objects to two plugins by label selector (the operator
file's spec.routes, issue 18 piece 1), against the embedded API server (route_e2e_test) and real
Kubernetes 1.20 (route_kube_e2e_test).

Two instances of the chaos plugin (CHAOS_VERSION v1 and v2) declare the same controller; objects
labelled version=v2 go to v2, the others to v1. Objects are relabelled while a stream of updates
runs: from the plugins' shared record log, every reconcile of a key ran at the plugin its labels
chose, a key moved once and never back, and no key was ever at both plugins at once. An object
two routes match is not reconciled (Warning event and Reconciled=False AmbiguousRoute naming both
routes) until its labels match one. A swap of a target plugin keeps its routes. An edit of the
routes applies live; an overlapping one is refused at load with its position."""

import os
import re
import tempfile
import threading
import unittest

from e2e.host import host_fixture
from tools.internal import bazel_unittest

OBJECTS = 24

OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: shop
spec:
  plugins:
    - name: chaos-v1
      exec:
        command: {chaos}
        env: {{CHAOS_DIR: {dir}, CHAOS_VERSION: v1}}
    - name: chaos-v2
      exec:
        command: {chaos}
        env: {{CHAOS_DIR: {dir}, CHAOS_VERSION: v2}}
  routes:
    - controller: chaos
      to:
        - name: v1
          plugin: chaos-v1
          labelSelector: "{v1}"
        - name: v2
          plugin: chaos-v2
          labelSelector: "{v2}"
        - name: canary
          plugin: chaos-v2
          labelSelector: "track=canary"
"""


class RouteTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        # The plugins write their log here: a directory apart from the host's data dir (the
        # host hides that one from plugins).
        cls.dir = tempfile.mkdtemp(prefix="route-", dir=os.environ.get("TEST_TMPDIR"))
        cls.chaos = host_fixture.runfile("e2e/host/chaos/chaos")
        cls.host = host_fixture.start_host(cls.operator("version!=v2", "version=v2"))
        cls.host.kubectl("apply", "-f", host_fixture.runfile("e2e/host/chaos/crd.yaml"),
                         check=True)
        cls.host.wait_for(lambda: cls.host.endpoint("/readyz")[0] == 200, "controller ready")

    @classmethod
    def tearDownClass(cls):
        code = cls.host.stop()
        assert code == 0, "ctrlhost exited %s\n%s" % (code, cls.host.log()[-4000:])

    @classmethod
    def operator(cls, v1, v2):
        return OPERATOR.format(chaos=cls.chaos, dir=cls.dir, v1=v1, v2=v2)

    def put(self, name, value, labels):
        body = {"apiVersion": "e2e.ctrlhost.dev/v1", "kind": "Chaos",
                "metadata": {"name": name, "namespace": "default", "labels": labels},
                "spec": {"mode": "ok", "data": {"value": str(value)}}}
        status, _ = self.host.api.request(
            "PATCH", "/apis/e2e.ctrlhost.dev/v1/namespaces/default/chaos/%s"
            "?fieldManager=e2e&force=true" % name, body, "application/apply-patch+yaml")
        self.assertIn(status, (200, 201), name)

    def converged(self, name, value):
        self.host.wait_for(
            lambda: (self.host.get("/api/v1/namespaces/default/configmaps/" + name) or {})
            .get("data", {}).get("value") == str(value), "%s converged to %s" % (name, value),
            timeout=90)

    def log(self):
        """[(key, what, version)] of every reconcile, in the order the plugins wrote them."""
        path = os.path.join(self.dir, "log")
        if not os.path.exists(path):  # nothing reconciled yet
            return []
        with open(path) as f:
            return [tuple(line.split(" ")[i] for i in (0, 2, 3))
                    for line in f.read().splitlines()]

    def object(self, name):
        return self.host.get("/apis/e2e.ctrlhost.dev/v1/namespaces/default/chaos/" + name) or {}

    def condition(self, name, kind="Reconciled"):
        for c in self.object(name).get("status", {}).get("conditions", []):
            if c.get("type") == kind:
                return c
        return None

    def test_relabelled_keys_move_once_and_never_run_at_both(self):
        names = ["obj-%02d" % i for i in range(OBJECTS)]
        version = {n: ("v2" if i % 2 else "v1") for i, n in enumerate(names)}
        for n in names:
            self.put(n, 0, {"version": version[n]})
        for n in names:
            self.converged(n, 0)
        # Half of each side moves to the other while every object keeps being updated.
        movers = names[:OBJECTS // 2]
        stop = threading.Event()
        last = {n: 0 for n in names}
        labels = {n: {"version": version[n]} for n in names}
        lock = threading.Lock()
        rounds = [0]
        failures = []

        # The only writer of the objects, so that their labels change once and never back.
        def updater():
            value = 0
            while not stop.is_set():
                value += 1
                for n in names:
                    with lock:
                        current = dict(labels[n])
                        last[n] = value
                    try:
                        self.put(n, value, current)
                    except AssertionError as e:  # reported below, not lost in the thread
                        failures.append(str(e))
                with lock:
                    rounds[0] += 1

        def a_round_later():
            with lock:
                start = rounds[0]
            self.host.wait_for(lambda: rounds[0] >= start + 2 or not thread.is_alive(),
                               "the updater wrote every object")

        thread = threading.Thread(target=updater)
        thread.start()
        try:
            a_round_later()
            # Half of each side moves to the other, in three batches, while every object keeps
            # being updated.
            for batch in (movers[0::3], movers[1::3], movers[2::3]):
                with lock:
                    for n in batch:
                        version[n] = "v1" if version[n] == "v2" else "v2"
                        labels[n] = {"version": version[n]}
                a_round_later()
        finally:
            stop.set()
            thread.join(120)
        self.assertEqual(failures, [])
        for n in names:
            self.converged(n, last[n])
        # Each key: its reconciles ran at the plugin its labels chose, with one move at most,
        # and never at both plugins at once.
        running = {}
        served = {}
        for key, what, plugin in self.log():
            name = key[len("default/"):]
            if name not in version:
                continue
            if what == "start":
                self.assertIsNone(running.get(key), "%s started at %s while at %s" %
                                  (key, plugin, running.get(key)))
                running[key] = plugin
                if not served.get(key) or served[key][-1] != plugin:
                    served.setdefault(key, []).append(plugin)
            elif what == "end":
                self.assertEqual(running.get(key), plugin, key)
                running[key] = None
        for n in names:
            sequence = served["default/" + n]
            if n in movers:
                first = "v1" if version[n] == "v2" else "v2"
                self.assertEqual(sequence, [first, version[n]], n)
            else:
                self.assertEqual(sequence, [version[n]], n)
        moved = re.search(r"moved: (\d+)", self.host.endpoint("/debug/dump")[1])
        self.assertGreaterEqual(int(moved.group(1)), len(movers))
        self.assertGreaterEqual(self.host.metric("ctrlhost_plugin_requests_total",
                                                 plugin="chaos-v2", result="ok"), OBJECTS // 2)

    def test_ambiguous_object_is_not_reconciled_until_one_route_matches(self):
        # track=canary and no version label: routes v1 (version!=v2) and canary both match.
        self.put("twofold", 1, {"track": "canary"})
        reconciled = self.host.wait_for(
            lambda: (self.condition("twofold") or {}).get("reason") == "AmbiguousRoute"
            and self.condition("twofold"), "Reconciled=False AmbiguousRoute")
        self.assertEqual(reconciled["status"], "False")
        self.assertIn('"v1" (plugin chaos-v1', reconciled["message"])
        self.assertIn('"canary" (plugin chaos-v2', reconciled["message"])
        events = self.host.wait_for(
            lambda: [e for e in (self.host.get("/api/v1/namespaces/default/events") or {})
                     .get("items", []) if e.get("reason") == "AmbiguousRoute"
                     and e["involvedObject"]["name"] == "twofold"], "AmbiguousRoute event")
        self.assertEqual(events[0]["type"], "Warning")
        self.assertIn('"canary"', events[0]["message"])
        self.assertFalse([k for k, _, _ in self.log() if k == "default/twofold"],
                         "an ambiguous object reached a plugin")
        self.assertIsNone(self.host.get("/api/v1/namespaces/default/configmaps/twofold"))
        # Counted in the dump, under the plugin that runs the routed controller.
        self.assertRegex(self.host.endpoint("/debug/dump")[1], r"ambiguous: [1-9]")
        # One route left: reconciled by it, and Reconciled back to True.
        self.put("twofold", 2, {"version": "v2"})
        self.converged("twofold", 2)
        self.host.wait_for(lambda: (self.condition("twofold") or {}).get("status") == "True",
                           "Reconciled=True again")
        self.assertEqual({p for k, _, p in self.log() if k == "default/twofold"}, {"v2"})

    def test_swap_of_a_target_plugin_keeps_its_routes(self):
        result = self.host.ctrlhost("plugin", "swap", "shop/chaos-v2", "--timeout", "60s",
                                    "--command", self.chaos, "--env", "CHAOS_DIR=" + self.dir,
                                    "--env", "CHAOS_VERSION=v2b")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.put("swapped-v2", 1, {"version": "v2"})
        self.put("swapped-v1", 1, {"version": "v1"})
        self.converged("swapped-v2", 1)
        self.converged("swapped-v1", 1)
        served = {k: {p for kk, _, p in self.log() if kk == k}
                  for k in ("default/swapped-v2", "default/swapped-v1")}
        self.assertEqual(served, {"default/swapped-v2": {"v2b"}, "default/swapped-v1": {"v1"}})

    def test_zz_route_edits_apply_live_and_overlaps_are_refused(self):
        path = os.path.join(self.host.data_dir, "operator.yaml")
        updates = self.host.log().count("operator updated")
        # An overlap the file proves (the same selector twice) is refused with its position.
        with open(path, "w") as f:
            f.write(self.operator("version=v2", "version==v2"))
        self.host.wait_for(
            lambda: re.search(r"operator\.yaml:\d+:\d+: spec\.routes\[0\]\.to\[1\]\.labelSelector:"
                              r" the same selector as route \\?\"v1\\?\"", self.host.log()),
            "the refusal in the log")
        # A valid edit: version=v3 objects go to v2 from now on.
        with open(path, "w") as f:
            f.write(self.operator("version notin (v2,v3)", "version in (v2,v3)"))
        self.host.wait_for(lambda: self.host.log().count("operator updated") > updates,
                           "the new routes applied")
        self.put("three", 1, {"version": "v3"})
        self.converged("three", 1)
        # Served by chaos-v2: its first instance, or v2b after test_swap_of_a_target_plugin (the
        # operator file does not undo a swap it did not change).
        served = {p for k, _, p in self.log() if k == "default/three"}
        self.assertTrue(served and served <= {"v2", "v2b"}, served)


if __name__ == "__main__":
    bazel_unittest.main()
