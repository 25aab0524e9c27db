"""End to end: a plugin's shadow (issue 27), against the embedded API server (shadow_e2e_test)
and real Kubernetes 1.20 (shadow_kube_e2e_test). The chaos plugin serves 40 Chaos objects, half
of them with a `port` in their data. `ctrlhost plugin shadow` starts a second release beside it
that writes another port: it differs on exactly the 20 keys with a port, the difference shown is
the port, nothing it answers is written, and `ctrlhost plugin swap --from-shadow` refuses to
promote it. A shadow of the same release agrees on every call and is promoted."""

import json
import os
import re
import tempfile
import unittest

from e2e.host import host_fixture
from tools.internal import bazel_unittest

OBJECTS = 40

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
  controllers:
    - name: chaos
      maxConcurrentReconciles: 4
"""


class ShadowTest(host_fixture.ChaosHostTest):
    OPERATOR = OPERATOR

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.chaos = host_fixture.runfile("e2e/host/chaos/chaos")
        cls.names = ["shadow-%03d" % i for i in range(OBJECTS)]
        for i, name in enumerate(cls.names):
            data = {"port": "80"} if i % 2 == 0 else {"k": name}
            body = {"apiVersion": "e2e.ctrlhost.dev/v1", "kind": "Chaos",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"mode": "ok", "data": data}}
            cls.host.kubectl("apply", "-f", "-", input_text=json.dumps(body), check=True)
        cls.host.wait_for(lambda: all(cls.configmap(n) is not None for n in cls.names),
                          "every ConfigMap")

    @classmethod
    def configmap(cls, name):
        return cls.host.get("/api/v1/namespaces/default/configmaps/%s" % name)

    def shadow(self, *args):
        return self.host.ctrlhost("plugin", "shadow", "chaos/chaos", *args)

    def start_shadow(self, *env, cpu=None):
        """Starts a shadow of the chaos plugin; returns its CHAOS_DIR (which names it)."""
        shadow_dir = tempfile.mkdtemp(prefix="shadow-", dir=os.environ.get("TEST_TMPDIR"))
        args = ["--command", self.chaos, "--env", "CHAOS_DIR=" + shadow_dir]
        for pair in env:
            args += ["--env", pair]
        if cpu is not None:
            args += ["--cpu", cpu]
        started = self.shadow(*args)
        self.assertEqual(started.returncode, 0, started.stdout + started.stderr)
        self.assertIn("nothing it answers is applied", started.stdout)
        return shadow_dir

    @staticmethod
    def scheduling_policies(marker):
        """The scheduling policy (/proc/PID/stat field 41; 5 is SCHED_IDLE) of each process
        whose environment holds `marker`."""
        policies = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/environ" % pid, "rb") as f:
                    if marker.encode() not in f.read().split(b"\0"):
                        continue
                with open("/proc/%s/stat" % pid) as f:
                    stat = f.read()
            except OSError:
                continue  # gone, or not ours
            policies.append(int(stat[stat.rindex(")") + 2:].split()[38]))
        return policies

    def touch_all(self, value):
        """Reconciles every object again (an annotation changes each)."""
        result = self.host.kubectl("annotate", "chaos", "--all", "-n", "default", "--overwrite",
                                   "e2e.ctrlhost.dev/touch=%s" % value, check=True)
        self.assertEqual(result.returncode, 0)

    def comparisons(self, result):
        return self.host.metric("ctrlhost_shadow_comparisons_total", default=0.0,
                                controller="chaos", result=result)

    def wait_compared(self, at_least):
        self.host.wait_for(
            lambda: sum(self.comparisons(r) for r in ("same", "different", "shadow_error"))
            >= at_least, "%d calls compared" % at_least)

    def test_1_a_release_that_writes_otherwise_is_shown_where_it_differs(self):
        shadow_dir = self.start_shadow("CHAOS_CHANGE_DATA_KEY=port",
                                       "CHAOS_CHANGE_DATA_VALUE=8080")
        # By default the shadow's process runs under SCHED_IDLE: it takes no CPU time that the
        # host or the serving plugin wants.
        policies = self.scheduling_policies("CHAOS_DIR=" + shadow_dir)
        self.assertTrue(policies, "no shadow process found")
        self.assertEqual(set(policies), {5}, policies)
        self.touch_all("a")
        self.wait_compared(OBJECTS)
        # Let reconciles that the touch caused after the first round finish as well.
        self.host.wait_for(lambda: self.host.metric("ctrlhost_plugin_in_flight",
                                                    plugin="chaos") == 0, "no call in flight")
        # One reconcile per object (the touch; the serving release writes nothing new, so
        # nothing else queues them): the 20 keys with a port differ, the 20 others do not.
        self.assertEqual(self.comparisons("different"), OBJECTS / 2)
        self.assertEqual(self.comparisons("same"), OBJECTS / 2)
        self.assertEqual(self.comparisons("shadow_error"), 0)

        shown = self.shadow()
        print(shown.stdout)  # what a user sees (docs/hot-swap.md shows it)
        self.assertEqual(shown.returncode, 0, shown.stderr)
        self.assertRegex(shown.stdout, r"shadow generation \d+ READY, 100% of the keys")
        self.assertIn(", cpu idle", shown.stdout)
        self.assertRegex(shown.stdout, r"\nchaos\s+\d+\s+\d+\s+\d+\s+0\s+\d+\s+\d+\.\d\d%")
        # Only the keys with a port differ, and what differs is the port.
        keys = set(re.findall(r" chaos default/(shadow-\d+): applies\n", shown.stdout))
        self.assertTrue(keys, shown.stdout)
        for key in keys:
            self.assertEqual(int(key.split("-")[1]) % 2, 0, key)
        self.assertIn('"path":"/applies/ConfigMap default~1shadow-', shown.stdout)
        self.assertIn('/data/port","value":"8080"', shown.stdout)

        # The shadow wrote nothing: every ConfigMap still has the serving release's port.
        for i, name in enumerate(self.names):
            if i % 2 == 0:
                self.assertEqual(self.configmap(name)["data"]["port"], "80", name)

        status, dump = self.host.endpoint("/debug/dump")
        self.assertEqual(status, 200)
        self.assertIn("shadow:", dump)
        self.assertIn("lastDifferences:", dump)

        refused = self.host.ctrlhost("plugin", "swap", "chaos/chaos", "--from-shadow")
        print(refused.stderr)
        self.assertEqual(refused.returncode, 1, refused.stdout)
        self.assertIn("below the bar", refused.stderr)
        self.assertIn("different", refused.stderr)

        stopped = self.shadow("--stop")
        self.assertEqual(stopped.returncode, 0, stopped.stderr)
        self.assertIn("has no shadow", self.shadow().stdout)

    def test_2_the_same_release_agrees_and_is_promoted(self):
        before = json.loads(self.host.ctrlhost("plugin", "list", "-o", "json").stdout)
        generation = int(before["plugins"][0]["swapGeneration"])
        self.start_shadow()
        self.touch_all("b")
        self.wait_compared(OBJECTS)
        self.assertEqual(self.comparisons("different"), 0)
        self.assertEqual(self.comparisons("shadow_error"), 0)
        self.assertIn("100.00%", self.shadow().stdout)

        promoted = self.host.ctrlhost("plugin", "swap", "chaos/chaos", "--from-shadow",
                                      "--min-compared", str(OBJECTS), "--min-agreement", "1")
        self.assertEqual(promoted.returncode, 0, promoted.stdout + promoted.stderr)
        self.assertIn("the shadow's release promoted", promoted.stdout)
        after = json.loads(self.host.ctrlhost("plugin", "list", "-o", "json").stdout)
        self.assertGreater(int(after["plugins"][0]["swapGeneration"]), generation)
        self.assertNotIn("shadow", after["plugins"][0])
        self.assertIn("has no shadow", self.shadow().stdout)
        # The promoted release serves: a change converges.
        self.host.kubectl("patch", "chaos", self.names[1], "-n", "default", "--type", "merge",
                          "-p", json.dumps({"spec": {"data": {"k": "after"}}}), check=True)
        self.host.wait_for(lambda: self.configmap(self.names[1])["data"].get("k") == "after",
                           "the change written by the promoted release")

    def test_3_bad_requests_are_refused_with_a_reason(self):
        for args, message in [
            (["--percent", "0", "--command", self.chaos], "--percent"),
            (["--stop", "--command", self.chaos], "mutually exclusive"),
            (["--percent", "50"], "--percent needs --command or --endpoint"),
            (["--cpu", "normal"], "--cpu needs --command or --endpoint"),
            (["--cpu", "normal", "--endpoint", "127.0.0.1:9"], "--cpu needs --command"),
            (["--cpu", "low", "--command", self.chaos], "--cpu"),
        ]:
            result = self.shadow(*args)
            self.assertEqual(result.returncode, 2, (args, result.stdout, result.stderr))
            self.assertIn(message, result.stderr, args)
        stop = self.shadow("--stop")
        self.assertEqual(stop.returncode, 1)
        self.assertIn("no shadow is running", stop.stderr)
        missing = self.shadow("--command", "/nonexistent/chaos")
        self.assertEqual(missing.returncode, 1, missing.stdout)
        self.assertIn("did not start", missing.stderr)
        wrong = self.host.ctrlhost("plugin", "swap", "chaos/chaos", "--min-agreement", "0.5",
                                   "--command", self.chaos)
        self.assertEqual(wrong.returncode, 2)
        self.assertIn("--min-agreement needs --from-shadow", wrong.stderr)

    def test_3b_the_same_release_agrees_on_every_call_under_load(self):
        before = {r: self.comparisons(r) for r in ("same", "different", "shadow_error")}
        # At normal CPU priority: an idle one on a machine the test keeps busy would fall behind
        # and drop calls (by design), and this test counts comparisons.
        shadow_dir = self.start_shadow(cpu="normal")
        self.assertIn(", cpu normal", self.shadow().stdout)
        self.assertEqual(set(self.scheduling_policies("CHAOS_DIR=" + shadow_dir)), {0})
        # 40 objects, 15 rounds of changes as fast as kubectl makes them: at least 600 calls.
        for touch in range(15):
            self.touch_all("load-%d" % touch)
        self.host.wait_for(lambda: self.comparisons("same") - before["same"] >= 500,
                           "500 calls compared")
        self.host.wait_for(lambda: self.host.metric("ctrlhost_plugin_in_flight",
                                                    plugin="chaos") == 0, "no call in flight")
        self.assertEqual(self.comparisons("different"), before["different"])
        self.assertEqual(self.comparisons("shadow_error"), before["shadow_error"])
        print(self.shadow().stdout.splitlines()[:3])
        stopped = self.shadow("--stop")
        self.assertEqual(stopped.returncode, 0, stopped.stderr)

    def test_3c_a_crashing_shadow_is_restarted_and_the_serving_instance_serves_on(self):
        errors = self.host.metric("controller_runtime_reconcile_errors_total", default=0.0,
                                  controller="chaos")
        restarts = self.host.metric("ctrlhost_plugin_restarts_total", default=0.0,
                                    plugin="chaos")
        self.start_shadow("CHAOS_CRASH_EVERY=7")
        for i, name in enumerate(self.names):
            self.host.kubectl("patch", "chaos", name, "-n", "default", "--type", "merge",
                              "-p", json.dumps({"spec": {"data": {"k": "crash-%d" % i}}}),
                              check=True)
        # Every change is written by the serving instance, whatever the shadow does.
        self.host.wait_for(lambda: all(self.configmap(n)["data"].get("k") == "crash-%d" % i
                                       for i, n in enumerate(self.names)),
                           "every change written by the serving instance")
        self.host.wait_for(lambda: re.search(r"READY, 100% of the keys, [1-9]\d* restarts?",
                                             self.shadow().stdout), "the shadow restarted")
        self.assertGreater(self.comparisons("shadow_error"), 0)
        self.assertEqual(self.host.metric("controller_runtime_reconcile_errors_total",
                                          default=0.0, controller="chaos"), errors)
        # The serving instance never restarted: the shadow's crashes are the shadow's alone.
        self.assertEqual(self.host.metric("ctrlhost_plugin_restarts_total", default=0.0,
                                          plugin="chaos"), restarts)
        stopped = self.shadow("--stop")
        self.assertEqual(stopped.returncode, 0, stopped.stderr)

    def test_4_a_shadow_in_the_operator_file_follows_live_edits(self):
        path = os.path.join(self.host.data_dir, "operator.yaml")
        shadow_dir = tempfile.mkdtemp(prefix="file-shadow-", dir=os.environ.get("TEST_TMPDIR"))
        base = OPERATOR.format(chaos=self.chaos, dir=self.dir)
        block = """\
      shadow:
        exec:
          command: {chaos}
          env:
            CHAOS_DIR: {dir}
            CHAOS_CHANGE_DATA_KEY: port
            CHAOS_CHANGE_DATA_VALUE: "8080"
        percent: {percent}
"""
        marker = "          CHAOS_DIR: %s\n" % self.dir

        def write(percent=None, command=None):
            text = base
            if percent is not None:
                text = text.replace(marker, marker + block.format(
                    chaos=command or self.chaos, dir=shadow_dir, percent=percent))
            with open(path, "w") as f:
                f.write(text)

        started = self.host.log().count("shadow from the operator file started")
        write(percent=100)
        self.host.wait_for(lambda: self.host.log().count("shadow from the operator file started")
                           > started, "the file's shadow started")
        self.assertRegex(self.shadow().stdout, r"shadow generation \d+ READY, 100% of the keys")
        different = self.comparisons("different")
        self.touch_all("d")
        self.host.wait_for(lambda: self.comparisons("different") >= different + OBJECTS / 2,
                           "the file's shadow differs on the keys with a port")

        # A live edit of the block restarts the shadow with it; the plugin is not swapped.
        generation = json.loads(self.host.ctrlhost("plugin", "list", "-o", "json").stdout)[
            "plugins"][0]["swapGeneration"]
        write(percent=50)
        self.host.wait_for(lambda: "50% of the keys" in self.shadow().stdout,
                           "the edited shadow")
        after = json.loads(self.host.ctrlhost("plugin", "list", "-o", "json").stdout)
        self.assertEqual(after["plugins"][0]["swapGeneration"], generation)

        # A shadow that cannot start is retried and says why, and the serving instance serves.
        write(percent=100, command="/nonexistent/chaos")
        self.host.wait_for(lambda: "shadow from the operator file did not start; retrying"
                           in self.host.log(), "the refusal in the log")
        self.assertIn("has no shadow", self.shadow().stdout)

        # Removing the block stops the shadow.
        write(percent=100)
        self.host.wait_for(lambda: "READY" in self.shadow().stdout, "the shadow again")
        write()
        self.host.wait_for(lambda: "has no shadow" in self.shadow().stdout, "no shadow")
        self.host.kubectl("patch", "chaos", self.names[3], "-n", "default", "--type", "merge",
                          "-p", json.dumps({"spec": {"data": {"k": "file"}}}), check=True)
        self.host.wait_for(lambda: self.configmap(self.names[3])["data"].get("k") == "file",
                           "the serving instance still serves")


if __name__ == "__main__":
    bazel_unittest.main()
