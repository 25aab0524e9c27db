"""CrudResource: plans, steps (PassContext) and stage callbacks (the same cases as sdk/cpp
handlers_test and sdk/node's chain, pass_context and stage_callbacks tests)."""

import unittest

from ctrlhost_sdk import CrudResource, ReconcileError, Request, StageCallbacks
from ctrlhost_sdk.stage_callbacks import STAGES
from tools.internal import bazel_unittest

PRIMARY = {"apiVersion": "example.com/v1", "kind": "App",
           "metadata": {"name": "web", "namespace": "team-a", "uid": "u-1", "generation": 2}}


def existing(name, value):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "team-a", "resourceVersion": "7"},
            "data": {"v": value}}


def copies(*names):
    return CrudResource("v1", "ConfigMap", lambda req: [
        {"metadata": {"name": n}, "data": {"v": "2"}} for n in names])


def by_name(result):
    return {d["metadata"]["name"]: d for d in result.desired}


def reasons(result):
    return [e[1] for e in result.events]


class CrudResourceTest(unittest.TestCase):
    def test_plans_create_update_delete(self):
        request = Request.for_object(PRIMARY, children=[
            existing("same", "2"), existing("changed", "1"), existing("old", "1")])
        plan = copies("new", "same", "changed").plan(request)
        self.assertEqual([o["metadata"]["name"] for o in plan.create], ["new"])
        self.assertEqual([o["metadata"]["name"] for o in plan.update], ["changed"])
        self.assertEqual([o["metadata"]["name"] for o in plan.unchanged], ["same"])
        self.assertEqual([o["metadata"]["name"] for o in plan.remove], ["old"])
        result = copies("new", "same", "changed").build()(request)
        self.assertEqual([d["metadata"]["name"] for d in result.desired],
                         ["new", "changed", "same"])
        self.assertEqual(reasons(result), ["Created", "Updated", "Deleted"])

    def test_refuses_nameless_and_duplicate_objects(self):
        nameless = CrudResource("v1", "ConfigMap", lambda req: [{"metadata": {}}])
        self.assertEqual(nameless.build()(Request.for_object(PRIMARY)).error[0], "terminal")
        self.assertEqual(copies("x", "x").build()(Request.for_object(PRIMARY)).error[0],
                         "terminal")

    def test_steps_skip_objects_and_the_rest_of_the_pass(self):
        stepped = []

        def step(req, desired, current, ctx):
            name = desired["metadata"]["name"]
            stepped.append(name)
            if name == "a":
                ctx.cancel_resource("frozen by policy")
            if name == "b":
                ctx.cancel_pass("budget spent")

        resource = copies("a", "b", "c", "d").on_pass(step)
        request = Request.for_object(PRIMARY, children=[existing("a", "1"), existing("c", "1")])
        result = resource.build()(request)
        self.assertIsNone(result.error)
        self.assertEqual(stepped, ["a", "b"])
        desired = by_name(result)
        self.assertEqual(desired["a"]["data"], {"v": "1"})
        self.assertEqual(desired["b"]["data"], {"v": "2"})
        self.assertEqual(desired["c"]["data"], {"v": "1"})
        self.assertNotIn("d", desired)
        self.assertIn("Skipped", reasons(result))
        plan = resource.plan(request)
        self.assertEqual([r for _, r in plan.skipped], [
            "frozen by policy", "pass cancelled: budget spent", "pass cancelled: budget spent"])
        self.assertTrue(plan.pass_cancelled)

    def test_callbacks_around_creates_updates_and_removals(self):
        log = []
        callbacks = StageCallbacks()
        for stage in STAGES:
            for cb in ("label", "record"):
                def fn(req, stage, desired, current, cb=cb):
                    obj = desired if desired is not None else current
                    log.append("%s:%s:%s" % (cb, stage, obj["metadata"]["name"]))
                    if cb == "label" and desired is not None:
                        desired["metadata"].setdefault("labels", {})["stage"] = stage
                callbacks.on("v1", "ConfigMap", stage, cb, fn)
        result = copies("a", "b").with_callbacks(callbacks).build()(Request.for_object(
            PRIMARY, children=[existing("a", "1"), existing("old", "1")]))
        self.assertIsNone(result.error)
        self.assertEqual(log, [
            "label:pre-update:a", "record:pre-update:a", "label:post-update:a",
            "record:post-update:a", "label:pre-create:b", "record:pre-create:b",
            "label:post-create:b", "record:post-create:b", "label:pre-delete:old",
            "record:pre-delete:old", "label:post-delete:old", "record:post-delete:old"])
        self.assertEqual(by_name(result)["b"]["metadata"]["labels"]["stage"], "pre-create")

    def test_a_failing_callback_names_the_object_and_the_callback(self):
        def quota(req, stage, desired, current):
            raise ReconcileError("over quota", terminal=True)

        callbacks = StageCallbacks().on("v1", "ConfigMap", "pre-create", "quota", quota)
        result = copies("a").with_callbacks(callbacks).build()(Request.for_object(PRIMARY))
        self.assertEqual(result.error, (
            "terminal", "ConfigMap team-a/a: callback quota at pre-create: over quota"))


if __name__ == "__main__":
    bazel_unittest.main()
