"""`async def` reconcile functions and handlers, beside plain ones: in process, and served over
gRPC by Plugin.start like any other controller."""

import asyncio
import threading
import unittest

import grpc

from ctrlhost_sdk import (Controller, Handlers, Plugin, ReconcileError, Request, Result,
                          new_object, pb, testing)
from ctrlhost_sdk._proto import pb_grpc
from tools.internal import bazel_unittest

APP = {"apiVersion": "example.com/v1", "kind": "App",
       "metadata": {"name": "web", "namespace": "team-a", "uid": "u-1"}, "spec": {"size": 2}}
DELETING = dict(APP, metadata=dict(APP["metadata"], deletionTimestamp="2026-01-01T00:00:00Z",
                                   finalizers=["example.com/cleanup"]))


def async_controller(name="app"):
    c = Controller(name).for_("example.com", "v1", "App").owns("", "v1", "ConfigMap")

    @c.reconcile
    async def reconcile(req: Request) -> Result:
        await asyncio.sleep(0)  # really suspends: the loop must drive it
        if req.spec.get("fail") == "terminal":
            raise ReconcileError("spec.fail says so", terminal=True)
        if req.spec.get("fail") == "raise":
            raise RuntimeError("boom")
        result = Result()
        result.desire(new_object("v1", "ConfigMap", req.name + "-cfg"))["data"] = {
            "size": str(req.spec.get("size"))}
        result.set_condition("Ready", True, "Configured")
        return result

    return c


class AsyncReconcileTest(unittest.TestCase):
    def test_async_reconcile_answers_like_a_plain_one(self):
        outcome = testing.reconcile(async_controller(), APP)
        self.assertIsNone(outcome.error)
        self.assertEqual(outcome.desired_of_kind("ConfigMap")[0]["data"], {"size": "2"})
        self.assertEqual(outcome.conditions["Ready"]["status"], "True")

    def test_async_errors_keep_their_kind(self):
        terminal = testing.reconcile(async_controller(), dict(APP, spec={"fail": "terminal"}))
        self.assertEqual(terminal.error, ("terminal", "spec.fail says so"))
        raised = testing.reconcile(async_controller(), dict(APP, spec={"fail": "raise"}))
        self.assertEqual(raised.error, ("retryable", "reconcile raised RuntimeError: boom"))

    def test_async_returning_none_is_an_empty_result(self):
        c = Controller("none").for_("example.com", "v1", "App")

        @c.reconcile
        async def reconcile(req: Request) -> None:
            return None

        outcome = testing.reconcile(c, APP)
        self.assertIsNone(outcome.error)
        self.assertEqual(outcome.desired, [])

    def test_each_thread_keeps_one_loop(self):
        loops = []
        c = Controller("loops").for_("example.com", "v1", "App")

        @c.reconcile
        async def reconcile(req: Request) -> Result:
            loops.append((threading.get_ident(), asyncio.get_running_loop()))
            return Result()

        testing.reconcile(c, APP)
        testing.reconcile(c, APP)
        worker = threading.Thread(target=testing.reconcile, args=(c, APP))
        worker.start()
        worker.join()
        (t1, l1), (t2, l2), (t3, l3) = loops
        self.assertEqual(t1, t2)
        self.assertIs(l1, l2)  # reused on one thread
        self.assertNotEqual(t1, t3)
        self.assertIsNot(l1, l3)  # never shared between threads

    def test_inside_a_running_loop_is_a_clear_retryable_error(self):
        async def caller():
            return testing.reconcile(async_controller(), APP)

        outcome = asyncio.run(caller())
        self.assertEqual(outcome.error[0], "retryable")
        self.assertIn("cannot run inside a running event loop", outcome.error[1])

    def test_async_handlers(self):
        seen = []
        handlers = Handlers()

        @handlers.on_upsert
        async def upsert(req: Request) -> Result:
            await asyncio.sleep(0)
            seen.append("upsert")
            return Result()

        @handlers.on_delete
        async def delete(req: Request) -> None:
            await asyncio.sleep(0)
            seen.append("delete")

        c = Controller("handled").for_("example.com", "v1", "App").finalizer("example.com/cleanup")
        c.reconcile(handlers)
        self.assertIsNone(testing.reconcile(c, APP).error)
        finalizing = testing.reconcile(c, DELETING, finalizing=True)
        self.assertIsNone(finalizing.error)
        self.assertTrue(finalizing.finalized)
        self.assertEqual(seen, ["upsert", "delete"])


class AsyncOverGrpcTest(unittest.TestCase):
    def test_plain_and_async_controllers_served_side_by_side(self):
        plain = Controller("plain").for_("example.com", "v1", "App")

        @plain.reconcile
        def reconcile_plain(req: Request) -> Result:
            result = Result()
            result.status["by"] = "plain"
            return result

        plugin = Plugin("mixed", "0.0.1", workers=2)
        plugin.add(plain)
        plugin.add(async_controller("asynchronous"))
        server = plugin.start("127.0.0.1:0")
        try:
            with grpc.insecure_channel(server.address) as channel:
                stub = pb_grpc.ControllerPluginServiceStub(channel)
                calls = [testing.make_call(name, APP) for name in ("plain", "asynchronous")] * 3
                requests = [pb.ReconcileRequest(request_id=i + 1, reconcile=call)
                            for i, call in enumerate(calls)]
                responses = {r.request_id: r for r in stub.Reconcile(iter(requests), timeout=60)}
        finally:
            server.shutdown(5)
        self.assertEqual(sorted(responses), [1, 2, 3, 4, 5, 6])
        for rid, response in responses.items():
            self.assertFalse(response.HasField("error"), response.error.message)
            if rid % 2:  # plain
                self.assertEqual(response.status, b'{"by":"plain"}')
            else:
                self.assertEqual(len(response.desired_objects), 1)
                self.assertEqual(response.conditions[0].type, "Ready")


if __name__ == "__main__":
    bazel_unittest.main()
