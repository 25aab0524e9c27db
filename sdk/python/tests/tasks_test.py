"""Background tasks (tasks.py): start/stop, enqueue, failure restarts, key validation, and the
Controller/Plugin declarations. No host: TaskRunner's `send` collects the messages."""

import queue
import threading
import unittest

from ctrlhost_sdk import Controller, Plugin, TaskContext, pb
from ctrlhost_sdk.tasks import TaskRunner, check_key
from tools.internal import bazel_unittest


def wait_for(q: "queue.SimpleQueue", predicate, timeout: float = 10.0):
    """The first message on `q` for which predicate holds (bounded wait)."""
    while True:
        msg = q.get(timeout=timeout)
        if predicate(msg):
            return msg


class TasksTest(unittest.TestCase):
    def setUp(self):
        self.sent: "queue.SimpleQueue[pb.ReconcileResponse]" = queue.SimpleQueue()
        self.tasks = {}
        self.runner = TaskRunner(lambda c: self.tasks.get(c, []), self.sent.put, (0.01, 0.05))

    def tearDown(self):
        for t in self.runner.stop(reason="test over"):
            t.join(10)

    def test_task_enqueues_until_stopped(self):
        started = threading.Event()

        def poll(ctx: TaskContext):
            ctx.enqueue("default", "a")
            started.set()
            while not ctx.wait(0.01):
                pass

        self.tasks["web"] = [("poll", poll)]
        self.runner.start("web")
        self.runner.start("web")  # idempotent: one thread
        msg = wait_for(self.sent, lambda m: m.HasField("task_enqueue"))
        self.assertEqual((msg.task_enqueue.controller, msg.task_enqueue.task,
                          msg.task_enqueue.namespace, msg.task_enqueue.name),
                         ("web", "poll", "default", "a"))
        self.assertTrue(started.wait(10))
        self.assertEqual(self.runner.running(), ["web"])
        threads = self.runner.stop("web", "controller stopped")
        self.assertEqual(len(threads), 1)
        for t in threads:
            t.join(10)
            self.assertFalse(t.is_alive())
        stopped = wait_for(self.sent, lambda m: m.HasField("task_status")
                           and m.task_status.state == pb.TASK_STATE_STOPPED)
        self.assertEqual(stopped.task_status.task, "poll")
        self.assertEqual(self.runner.running(), [])

    def test_enqueue_after_stop_sends_nothing(self):
        ctxs = []
        self.tasks["web"] = [("poll", lambda ctx: (ctxs.append(ctx), ctx.wait(30)))]
        self.runner.start("web")
        wait_for(self.sent, lambda m: m.HasField("task_status"))
        for t in self.runner.stop():
            t.join(10)
        ctxs[0].enqueue("default", "late")
        while not self.sent.empty():
            self.assertFalse(self.sent.get().HasField("task_enqueue"))

    def test_raising_task_is_reported_and_restarted(self):
        calls = []

        def flaky(ctx):
            calls.append(1)
            if len(calls) < 3:
                raise RuntimeError("boom %d" % len(calls))
            ctx.wait(30)

        self.tasks["web"] = [("flaky", flaky)]
        self.runner.start("web")
        backoffs = []
        while len(backoffs) < 2:
            m = wait_for(self.sent, lambda m: m.HasField("task_status"))
            if m.task_status.state == pb.TASK_STATE_BACKOFF:
                backoffs.append(m.task_status)
        self.assertEqual([b.restarts for b in backoffs], [1, 2])
        self.assertIn("boom 2", backoffs[1].last_error)
        running = wait_for(self.sent, lambda m: m.HasField("task_status"))
        self.assertEqual(running.task_status.state, pb.TASK_STATE_RUNNING)
        self.assertEqual(running.task_status.restarts, 2)
        self.assertIn("boom 2", running.task_status.last_error)  # why it restarted

    def test_returning_task_is_finished_not_restarted(self):
        self.tasks["web"] = [("once", lambda ctx: None)]
        self.runner.start("web")
        m = wait_for(self.sent, lambda m: m.HasField("task_status")
                     and m.task_status.state != pb.TASK_STATE_RUNNING)
        self.assertEqual(m.task_status.state, pb.TASK_STATE_FINISHED)

    def test_keys_are_checked_like_the_host(self):
        check_key("default", "a.b-c")
        check_key("", "node-1", namespaced=False)
        for ns, name in [("default", ""), ("default", "A"), ("default", "a/b"), ("a.b", "x"),
                         ("default", "-a"), ("default", "a" * 254)]:
            with self.assertRaises(ValueError, msg=(ns, name)):
                check_key(ns, name)
        with self.assertRaises(ValueError):
            check_key("", "a", namespaced=True)
        with self.assertRaises(ValueError):
            check_key("x", "a", namespaced=False)

    def test_declaration(self):
        c = Controller("web").for_("", "v1", "ConfigMap")
        c.reconcile(lambda req: None)

        @c.background_task("poller")
        def poller(ctx):
            pass

        with self.assertRaises(ValueError):
            c.background_task("poller")
        with self.assertRaises(ValueError):
            c.background_task("Bad_Name")
        spec = c.spec()
        self.assertEqual([t.name for t in spec.background_tasks], ["poller"])
        self.assertIn(pb.CAPABILITY_BACKGROUND_TASKS, c.required_capabilities())
        plugin = Plugin("p", "1")
        plugin.add(c)
        self.assertEqual(plugin.tasks_of("web"), [("poller", poller)])
        self.assertEqual(plugin.tasks_of("nope"), [])
        # A host without the capability is refused at Describe.
        from ctrlhost_sdk.protocol import DescribeRefused
        with self.assertRaises(DescribeRefused):
            plugin.describe(pb.DescribeRequest(protocol_versions=["v1alpha1"],
                                               capabilities=[pb.CAPABILITY_CHILDREN]))


if __name__ == "__main__":
    bazel_unittest.main()
