"""End to end: background tasks (docs/protocol.md, "Background tasks") with real processes,
against the embedded API server and real Kubernetes (tasks_kube_e2e_test, where both classes
share one cluster: each works in a namespace of its own).

The plugin e2e/host/tasks/task_plugin.py (Python SDK; its Go port tasks/go/main.go runs the
same test as GoTasksTest) declares a task that polls a file the test
writes and enqueues the ConfigMaps it names; a reconcile of such a ConfigMap creates the child
NAME-poked carrying the plugin instance's version. The test checks that the task runs and
enqueues, that a task which raises is restarted and reported in /debug/dump, that a malformed
enqueue is refused, that the operator file's spec.controllers[].backgroundTasks limit is the one
in effect (/debug/dump) and /metrics counts the enqueues, and that after `ctrlhost plugin swap` the old instance's task was stopped by
the host (its log says "stopped: ..." before the process ended) and never enqueued again, while the new
instance's task serves the names written after the swap."""

import os
import tempfile
import unittest

import yaml  # Debian's python3-yaml, as the other e2e tests

from e2e.host import host_fixture
from tools.internal import bazel_unittest

OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: tasks
spec:
  plugins:
    - name: tasks
      exec:
        command: {plugin}
        env:
          TASK_DIR: {dir}
          TASK_VERSION: v1
  controllers:
    - name: poke
      backgroundTasks: {{enqueueQps: 500, enqueueBurst: 1000}}
"""


def read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


class TasksTest(unittest.TestCase):
    PLUGIN = "e2e/host/tasks/task_plugin"  # the Python SDK's

    @classmethod
    def setUpClass(cls):
        # Plugin-writable, apart from the host's data directory (Landlock hides that one).
        cls.dir = tempfile.mkdtemp(prefix="tasks-", dir=os.environ.get("TEST_TMPDIR"))
        os.chmod(cls.dir, 0o777)
        cls.plugin = host_fixture.runfile(cls.PLUGIN)
        cls.host = host_fixture.start_host(OPERATOR.format(plugin=cls.plugin, dir=cls.dir))
        cls.host.wait_for(lambda: cls.host.endpoint("/readyz")[0] == 200, "controller ready")
        cls.ns = "tasks-" + cls.__name__.lower()
        cls.host.kubectl("create", "namespace", cls.ns, check=True)

    @classmethod
    def tearDownClass(cls):
        code = cls.host.stop()
        assert code == 0, "ctrlhost exited %s\n%s" % (code, cls.host.log()[-4000:])

    def configmap(self, name):
        self.host.kubectl("create", "configmap", name, "-n", self.ns, check=True)
        self.host.kubectl("label", "configmap", name, "-n", self.ns, "tasks-e2e=true",
                          check=True)

    def name_in_file(self, key):
        with open(os.path.join(self.dir, "names"), "a", encoding="utf-8") as f:
            f.write(key + "\n")

    def child_version(self, name):
        child = self.host.get("/api/v1/namespaces/%s/configmaps/%s-poked" % (self.ns, name))
        return (child or {}).get("data", {}).get("version")

    def dump_tasks(self):
        status, text = self.host.endpoint("/debug/dump")
        self.assertEqual(status, 200, text)
        plugin = yaml.safe_load(text)["plugins"][0]
        return plugin.get("backgroundTasks", []), plugin

    def test_tasks_enqueue_restart_and_move_with_a_swap(self):
        for name in ("alpha", "beta", "gamma"):
            self.configmap(name)
        # The task of generation 1 runs and enqueues what the file names.
        self.host.wait_for(lambda: "started" in read(os.path.join(self.dir, "v1.log")),
                           "v1 task started")
        self.name_in_file(self.ns + "/alpha")
        self.host.wait_for(lambda: self.child_version("alpha") == "v1", "alpha poked by v1")
        self.assertIsNone(self.child_version("beta"))  # only what the task enqueued

        # The flaky task raised once: restarted, and the dump says so.
        def flaky_restarted():
            tasks, _ = self.dump_tasks()
            for c in tasks:
                for t in c.get("tasks", []):
                    if (t["name"] == "flaky" and t["restarts"] >= 1
                            and t["state"] == "running"):
                        return c, t
            return None
        controller, flaky = self.host.wait_for(flaky_restarted, "flaky task restarted")
        self.assertIn("flaky task failed on its first run", flaky["lastError"])
        self.assertEqual(controller["controller"], "poke")
        self.assertTrue(controller["running"])
        self.assertGreaterEqual(controller["enqueued"], 1)
        self.assertIn("background task failed", self.host.log())
        # The operator file's limit is the one in effect, and /metrics counts the enqueues
        # (every refusal reason exported from the start).
        self.assertEqual(controller["enqueueLimit"], {"perSecond": 500, "burst": 1000})
        labels = {"operator": "tasks", "plugin": "tasks", "controller": "poke"}
        self.assertGreaterEqual(self.host.metric("ctrlhost_task_enqueues_total", **labels), 1)
        metrics = self.host.metrics()
        for reason in ("rate_limited", "invalid", "not_running"):
            self.assertIn('ctrlhost_task_enqueues_refused_total{operator="tasks",plugin="tasks",'
                          'controller="poke",reason="%s"}' % reason, metrics)

        # A malformed key is refused by the SDK before it leaves (the task logs nothing for
        # it and the host counts nothing invalid); a well-formed key of a missing object is
        # accepted and reconciles nothing.
        self.name_in_file(self.ns + "/does-not-exist")
        self.host.wait_for(lambda: "enqueue %s/does-not-exist" % self.ns
                           in read(os.path.join(self.dir, "v1.log")), "missing key enqueued")

        # Swap to v2: the host stops v1's tasks before it drains, v2's start. v2 declares
        # another maxConcurrentReconciles (another Describe): the host replaces the controllers,
        # and v2's tasks start once, with the new controllers.
        swapped = self.host.ctrlhost("plugin", "swap", "tasks/tasks", "--timeout", "60s",
                                     "--command", self.plugin, "--env", "TASK_DIR=" + self.dir,
                                     "--env", "TASK_VERSION=v2", "--env", "TASK_MAX_CONCURRENT=2")
        self.assertEqual(swapped.returncode, 0, swapped.stdout + swapped.stderr)
        # The host sends StopTasks before the drain; the stream then closes, and the plugin gets
        # SIGTERM, each of which stops the tasks too. Whichever the plugin acts on first ("plugin
        # swapped out", "stream ended" or "plugin shutting down": the drain of an idle plugin
        # is immediate), the task was stopped (cancelled and returned), not killed with its
        # process.
        self.host.wait_for(lambda: any(line.startswith("stopped: ")
                                       for line in read(os.path.join(self.dir, "v1.log"))),
                           "v1 task stopped")
        self.host.wait_for(lambda: "started" in read(os.path.join(self.dir, "v2.log")),
                           "v2 task started")
        v1_lines = read(os.path.join(self.dir, "v1.log"))
        self.name_in_file(self.ns + "/beta")
        self.host.wait_for(lambda: self.child_version("beta") == "v2", "beta poked by v2")
        # v2's task read the whole file again (a new process): alpha is v2's now too.
        self.host.wait_for(lambda: self.child_version("alpha") == "v2", "alpha re-poked by v2")
        # The old task did nothing after it was stopped.
        self.assertEqual(read(os.path.join(self.dir, "v1.log")), v1_lines)
        self.assertNotIn("enqueue %s/beta" % self.ns, v1_lines)
        self.assertIsNone(self.child_version("gamma"))
        self.assertIn("replacing the plugin's controllers", self.host.log())
        v2_lines = read(os.path.join(self.dir, "v2.log"))
        self.assertEqual(v2_lines.count("started"), 1,
                         "v2's poll task started more than once:\n" + "\n".join(v2_lines))
        tasks, plugin = self.dump_tasks()
        self.assertEqual(plugin["generation"], 2)
        self.assertTrue(tasks[0]["running"])
        self.assertEqual(tasks[0]["refused"]["notRunning"], 0, tasks)


class GoTasksTest(TasksTest):
    """The same plugin on the Go SDK."""
    PLUGIN = "e2e/host/tasks/task_plugin-go"


if __name__ == "__main__":
    bazel_unittest.main()
