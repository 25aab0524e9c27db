"""DependentChain: ordered ensure-created / ensure-deleted over one reconcile function."""

import unittest

from ctrlhost_sdk import (PRE_CREATE, UPDATE_ALLOWED, UPDATE_NECESSARY, DependentChain,
                          PassContext, ReconcileError, Request, StageCallbacks, freeze_onto)
from ctrlhost_sdk.stage_callbacks import STAGES
from tools.internal import bazel_unittest

PRIMARY = {"apiVersion": "example.com/v1", "kind": "App",
           "metadata": {"name": "web", "namespace": "team-a", "uid": "u-1", "generation": 2},
           "spec": {"cache": True}}


def chain(cache_wanted=True):
    return (DependentChain()
            .add("db", "apps/v1", "StatefulSet",
                 desired=lambda req: {"metadata": {"name": req.name + "-db"}},
                 ready=lambda sts: (sts.get("status", {}).get("readyReplicas") or 0) >= 1)
            .add("cache", "v1", "ConfigMap",
                 desired=lambda req: {"metadata": {"name": req.name + "-cache"}},
                 when=lambda req: cache_wanted)
            .add("web", "apps/v1", "Deployment",
                 desired=lambda req: {"metadata": {"name": req.name}}))


def condition(result):
    return {c[0]: c for c in result.conditions}["DependentsReady"]


class DependentChainTest(unittest.TestCase):
    def test_later_dependents_wait_for_earlier_ones(self):
        result = chain().build()(Request.for_object(PRIMARY))
        self.assertEqual([d["metadata"]["name"] for d in result.desired], ["web-db"])
        self.assertEqual(condition(result)[1:3], ("False", "Waiting"))

    def test_all_created_once_ready(self):
        children = [
            {"apiVersion": "apps/v1", "kind": "StatefulSet",
             "metadata": {"name": "web-db"}, "status": {"readyReplicas": 1}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-cache"}},
        ]
        result = chain().build()(Request.for_object(PRIMARY, children=children))
        self.assertEqual([d["metadata"]["name"] for d in result.desired],
                         ["web-db", "web-cache", "web"])
        self.assertEqual(condition(result)[1:3], ("False", "Waiting"))  # web not there yet
        children.append({"apiVersion": "apps/v1", "kind": "Deployment",
                         "metadata": {"name": "web"}})
        result = chain().build()(Request.for_object(PRIMARY, children=children))
        self.assertEqual(condition(result)[1:3], ("True", "AllReady"))

    def test_unwanted_dependent_is_dropped(self):
        children = [
            {"apiVersion": "apps/v1", "kind": "StatefulSet",
             "metadata": {"name": "web-db"}, "status": {"readyReplicas": 1}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-cache"}},
        ]
        result = chain(cache_wanted=False).build()(
            Request.for_object(PRIMARY, children=children))
        self.assertNotIn("web-cache", [d["metadata"]["name"] for d in result.desired])
        self.assertIn("cache", condition(result)[3])

    def test_raising_desired_is_an_error(self):
        def boom(req):
            raise ReconcileError("bad spec", terminal=True)

        result = DependentChain().add("x", "v1", "ConfigMap", desired=boom).build()(
            Request.for_object(PRIMARY))
        self.assertEqual(result.error[0], "terminal")
        self.assertIn("dependent x: bad spec", result.error[1])
        result = DependentChain().add("x", "v1", "ConfigMap",
                                      desired=lambda req: 1 / 0).build()(
            Request.for_object(PRIMARY))
        self.assertEqual(result.error[0], "retryable")

    def test_state_after_a_failure_is_not_ready(self):
        def boom(req):
            raise ReconcileError("bad spec", terminal=True)

        seen = []
        DependentChain().add("x", "v1", "ConfigMap", desired=boom).build(
            then=lambda req, state, result: seen.append(state))(Request.for_object(PRIMARY))
        self.assertEqual(len(seen), 1)
        self.assertEqual(seen[0].failed_at, "x")
        self.assertEqual(seen[0].pending, [])
        self.assertFalse(seen[0].all_ready)

    def test_gone_primary_gets_the_handlers_answer(self):
        result = chain().build()(Request.for_object(None))
        self.assertEqual(result.desired, [])


def existing(name, value):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "team-a", "resourceVersion": "7",
                         "labels": {"owner": "someone"}},
            "data": {"v": value, "extra": "x"}}


def flag_chain(step_of, step):
    """ConfigMaps a, b, c; `step_of` runs `step`, the others set the flag seen-<name>."""
    def seen(name):
        return lambda req, desired, current, ctx: ctx.set_flag("seen-" + name)

    chain = DependentChain()
    for name in ("a", "b", "c"):
        chain.add(name, "v1", "ConfigMap",
                  desired=lambda req, name=name: {"metadata": {"name": name},
                                                  "data": {"v": "2"}},
                  on_pass=step if name == step_of else seen(name))
    return chain


def by_name(result):
    return {d["metadata"]["name"]: d for d in result.desired}


class PassContextTest(unittest.TestCase):
    def test_cancel_pass_skips_later_dependents_and_keeps_those_that_exist(self):
        chain = flag_chain("b", lambda req, desired, current, ctx:
                           ctx.cancel_pass("waiting for a migration"))
        result = chain.build()(Request.for_object(
            PRIMARY, children=[existing("a", "1"), existing("c", "1")]))
        self.assertIsNone(result.error)
        desired = by_name(result)
        self.assertEqual(desired["a"]["data"], {"v": "2"})
        self.assertEqual(desired["b"]["data"], {"v": "2"})  # the canceller's own
        self.assertEqual(desired["c"]["data"], {"v": "1"})  # kept as it is
        self.assertNotIn("resourceVersion", desired["c"]["metadata"])
        self.assertEqual(condition(result)[1:], (
            "False", "Cancelled",
            "b cancelled the pass: waiting for a migration; skipped: c; waiting for b"))
        # c absent: not created.
        result = chain.build()(Request.for_object(
            PRIMARY, children=[existing("a", "1"), existing("b", "1")]))
        self.assertNotIn("c", by_name(result))

    def test_cancel_resource_skips_only_that_dependent(self):
        def step(req, desired, current, ctx):
            if current is not None:
                ctx.cancel_resource("updates are paused")

        chain = flag_chain("b", step)
        request = Request.for_object(PRIMARY, children=[
            existing("a", "2"), existing("b", "1"), existing("c", "1")])
        from ctrlhost_sdk import Result
        state = chain.reconcile(request, Result())
        self.assertEqual(state.cancelled, ["b"])
        self.assertEqual(state.cancel_reasons, {"b": "updates are paused"})
        self.assertEqual(state.pass_cancelled_by, "")
        self.assertEqual(state.flags, {"seen-a": True, "seen-c": True})
        self.assertFalse(state.all_ready)
        result = chain.build()(request)
        self.assertEqual(by_name(result)["b"]["data"], {"v": "1"})
        self.assertEqual(by_name(result)["c"]["data"], {"v": "2"})
        self.assertEqual(condition(result)[3], "skipped: b (updates are paused)")

    def test_flags_set_earlier_are_seen_later(self):
        seen = []

        def first(req, desired, current, ctx):
            ctx.set_flag(UPDATE_ALLOWED, bool(req.spec.get("cache")))
            ctx.set_flag(UPDATE_NECESSARY, current is not None and current.get("data") !=
                         desired.get("data"))

        def second(req, desired, current, ctx):
            seen.append((ctx.flag(UPDATE_ALLOWED), ctx.flag(UPDATE_NECESSARY)))
            if not ctx.flag(UPDATE_ALLOWED):
                ctx.cancel_resource("updates not allowed")

        chain = (DependentChain()
                 .add("first", "v1", "ConfigMap",
                      desired=lambda req: {"metadata": {"name": "first"}, "data": {"v": "2"}},
                      on_pass=first)
                 .add("second", "v1", "ConfigMap",
                      desired=lambda req: {"metadata": {"name": "second"}}, on_pass=second))
        result = chain.build()(Request.for_object(PRIMARY, children=[existing("first", "1")]))
        self.assertIn("second", by_name(result))
        off = dict(PRIMARY, spec={"cache": False})
        result = chain.build()(Request.for_object(off, children=[existing("first", "1")]))
        self.assertNotIn("second", by_name(result))
        self.assertEqual(seen, [(True, True), (False, True)])

    def test_step_error_names_the_dependent(self):
        def bad(req, desired, current, ctx):
            raise ReconcileError("no such mode", terminal=True)

        result = flag_chain("a", bad).build()(Request.for_object(PRIMARY))
        self.assertEqual(result.error, ("terminal", "dependent a: no such mode"))
        self.assertEqual(result.desired, [])

    def test_freeze_onto_keeps_current_values_of_desired_fields(self):
        desired = {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "x", "labels": {"a": "1"}},
                   "data": {"k": "new", "gone": "y"}}
        current = {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "x", "uid": "u", "labels": {"a": "0"}},
                   "data": {"k": "old", "other": "z"}}
        self.assertEqual(freeze_onto(desired, current), {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "labels": {"a": "0"}}, "data": {"k": "old"}})

    def test_first_cancel_reason_wins(self):
        ctx = PassContext()
        ctx.cancel_pass("one")
        ctx.cancel_pass("two")
        self.assertEqual(ctx.pass_cancel_reason, "one")
        self.assertFalse(ctx.flag("unset"))


def recording_callbacks(log):
    """Records "<callback>:<stage>:<name>"; "label" labels the desired object."""
    callbacks = StageCallbacks()
    for stage in STAGES:
        for cb in ("label", "record"):
            def fn(req, stage, desired, current, cb=cb):
                obj = desired if desired is not None else current
                log.append("%s:%s:%s" % (cb, stage, obj["metadata"]["name"]))
                if cb == "label" and desired is not None:
                    desired["metadata"].setdefault("labels", {})["stage"] = stage
            callbacks.on("v1", "ConfigMap", stage, cb, fn)
    return callbacks


class StageCallbacksTest(unittest.TestCase):
    def test_chain_runs_callbacks_per_stage_in_registration_order(self):
        log = []
        chain = DependentChain()
        for name in ("a", "b", "same", "c"):
            chain.add(name, "v1", "ConfigMap",
                      desired=lambda req, name=name: {"metadata": {"name": name},
                                                      "data": {"v": "2"}},
                      when=(lambda req: False) if name == "c" else None)
        chain.with_callbacks(recording_callbacks(log))
        same = existing("same", "2")
        del same["data"]["extra"]
        result = chain.build()(Request.for_object(
            PRIMARY, children=[existing("a", "1"), same, existing("c", "1")]))
        self.assertIsNone(result.error)
        self.assertEqual(log, [
            "label:pre-update:a", "record:pre-update:a", "label:post-update:a",
            "record:post-update:a", "label:pre-create:b", "record:pre-create:b",
            "label:post-create:b", "record:post-create:b", "label:pre-delete:c",
            "record:pre-delete:c", "label:post-delete:c", "record:post-delete:c"])
        desired = by_name(result)
        self.assertEqual(desired["a"]["metadata"]["labels"]["stage"], "pre-update")
        self.assertEqual(desired["b"]["metadata"]["labels"]["stage"], "pre-create")
        self.assertNotIn("labels", desired["same"]["metadata"])
        self.assertNotIn("c", desired)

    def test_an_error_stops_the_step_and_names_the_callback(self):
        later = []

        def quota(req, stage, desired, current):
            if desired["metadata"]["name"] == "b":
                raise ReconcileError("over quota", terminal=True)

        callbacks = (StageCallbacks()
                     .on("v1", "ConfigMap", PRE_CREATE, "quota", quota)
                     .on("v1", "ConfigMap", PRE_CREATE, "after",
                         lambda req, stage, desired, current: later.append(1)))
        chain = (DependentChain()
                 .add("a", "v1", "ConfigMap", desired=lambda req: {"metadata": {"name": "a"}})
                 .add("b", "v1", "ConfigMap", desired=lambda req: {"metadata": {"name": "b"}})
                 .with_callbacks(callbacks))
        result = chain.build()(Request.for_object(PRIMARY, children=[
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}]))
        self.assertEqual(result.error,
                         ("terminal", "dependent b: callback quota at pre-create: over quota"))
        self.assertNotIn("b", by_name(result))
        self.assertEqual(later, [])
        with self.assertRaises(ValueError):
            StageCallbacks().on("v1", "ConfigMap", "pre-create-ish", "x", quota)


if __name__ == "__main__":
    bazel_unittest.main()
