"""`async def` reconcile functions and handlers, beside plain ones: in process, and served over
gRPC by Plugin.start like any other controller."""

import asyncio
import threading
import unittest

import grpc

from ctrlhost_sdk import (Controller, Handlers, Plugin, ReconcileError, Request, Result,
                          new_object, pb, testing)
from ctrlhost_sdk._awaitable import SharedLoop, shared_loop
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

    def test_reconciles_on_different_threads_share_one_loop(self):
        # A future is bound to the loop that made it: awaiting it from another loop raises
        # "attached to a different loop". With one loop per worker thread the second reconcile
        # (another thread) would fail; on the plugin's shared loop it completes the first's.
        made = {}
        c = Controller("shared").for_("example.com", "v1", "App")

        @c.reconcile
        async def reconcile(req: Request) -> Result:
            loop = asyncio.get_running_loop()
            if req.name == "first":
                made["future"] = loop.create_future()
                made["lock"] = asyncio.Lock()
                await made["lock"].acquire()  # held across reconciles, released by "second"
                return Result()
            loop.call_soon(made["future"].set_result, "set on the shared loop")
            result = Result()
            result.status["got"] = await made["future"]
            made["lock"].release()
            async with made["lock"]:
                result.status["lock"] = "taken again"
            return result

        first = dict(APP, metadata=dict(APP["metadata"], name="first"))
        second = dict(APP, metadata=dict(APP["metadata"], name="second"))
        outcomes = {}
        for key, obj in (("first", first), ("second", second)):
            worker = threading.Thread(
                target=lambda k=key, o=obj: outcomes.__setitem__(k, testing.reconcile(c, o)))
            worker.start()
            worker.join()
        self.assertIsNone(outcomes["first"].error)
        self.assertIsNone(outcomes["second"].error, outcomes["second"].error)
        self.assertEqual(outcomes["second"].status,
                         {"got": "set on the shared loop", "lock": "taken again"})

    def test_a_blocking_plain_reconcile_runs_beside_async_ones(self):
        # "waiter" (async) suspends on the shared loop until "blocker" (plain) wakes it; blocker
        # blocks its worker thread until "runner" (async) has run on the loop. All three are in
        # flight at once: were plain reconciles run on the loop (or async ones serialized behind
        # them), blocker would stall the loop and runner never run.
        waiter_started = threading.Event()
        runner_ran = threading.Event()
        box = {}
        c = Controller("mixed").for_("example.com", "v1", "App")

        @c.reconcile
        def reconcile(req: Request):
            if req.name == "blocker":
                return blocker(req)
            return on_loop(req)

        async def on_loop(req: Request) -> Result:
            result = Result()
            if req.name == "waiter":
                box["loop"] = asyncio.get_running_loop()
                box["future"] = box["loop"].create_future()
                waiter_started.set()
                result.status["woken_by"] = await box["future"]
            else:
                runner_ran.set()
            return result

        def blocker(req: Request) -> Result:
            # The timeouts only end a broken run; a healthy one never waits for them.
            if not waiter_started.wait(30) or not runner_ran.wait(30):
                raise RuntimeError("the async reconciles did not run beside this one")
            box["loop"].call_soon_threadsafe(box["future"].set_result, "blocker")
            return Result()

        plugin = Plugin("parallel", "0.0.1", workers=3)
        plugin.add(c.max_concurrent(3))
        server = plugin.start("127.0.0.1:0")
        try:
            with grpc.insecure_channel(server.address) as channel:
                stub = pb_grpc.ControllerPluginServiceStub(channel)
                names = ["waiter", "blocker", "runner"]
                requests = [pb.ReconcileRequest(
                    request_id=i + 1,
                    reconcile=testing.make_call(
                        "mixed", dict(APP, metadata=dict(APP["metadata"], name=name))))
                    for i, name in enumerate(names)]
                responses = {names[r.request_id - 1]: r
                             for r in stub.Reconcile(iter(requests), timeout=60)}
        finally:
            server.shutdown(5)
        for name in names:
            self.assertFalse(responses[name].HasField("error"), responses[name].error.message)
        self.assertEqual(responses["waiter"].status, b'{"woken_by":"blocker"}')

    def test_server_shutdown_stops_the_loop(self):
        c = Controller("app").for_("example.com", "v1", "App")
        loops = []

        @c.reconcile
        async def reconcile(req: Request) -> Result:
            loops.append(asyncio.get_running_loop())
            return Result()

        plugin = Plugin("stopping", "0.0.1", workers=1)
        plugin.add(c)
        server = plugin.start("127.0.0.1:0")
        try:
            response = plugin.handle(1, testing.make_call("app", APP))
            self.assertFalse(response.HasField("error"), response.error.message)
        finally:
            server.shutdown(5)
        self.assertTrue(loops[0].is_closed())
        self.assertIsNone(shared_loop.running_loop())

    def test_a_coroutine_submitted_as_the_loop_stops_is_an_error_not_a_hang(self):
        # The instant between a worker taking the loop and submitting to it, in which the loop
        # stops: a loop that nothing runs and that then closes. The worker must not wait forever.
        idle = asyncio.new_event_loop()
        loop = SharedLoop()
        loop.loop = lambda: idle
        closer = threading.Timer(0.2, idle.close)
        closer.start()
        try:
            with self.assertRaisesRegex(RuntimeError, "stopped before this async reconcile ran"):
                loop.run(asyncio.sleep(0))
        finally:
            closer.join()

    def test_from_an_async_test_it_works(self):
        async def caller():
            return testing.reconcile(async_controller(), APP)

        outcome = asyncio.run(caller())
        self.assertIsNone(outcome.error)

    def test_synchronously_on_the_plugins_loop_is_a_clear_retryable_error(self):
        inner = async_controller("inner")
        c = Controller("outer").for_("example.com", "v1", "App")

        @c.reconcile
        async def reconcile(req: Request) -> Result:
            nested = testing.reconcile(inner, APP)  # blocks the loop it would need: refused
            result = Result()
            result.status["nested"] = list(nested.error)
            return result

        outcome = testing.reconcile(c, APP)
        self.assertIsNone(outcome.error)
        self.assertEqual(outcome.status["nested"][0], "retryable")
        self.assertIn("cannot be run synchronously from a coroutine on the plugin's event loop",
                      outcome.status["nested"][1])

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
