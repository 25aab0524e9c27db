"""ResourceRouter: the same cases as sdk/cpp resource_sets_test."""

import unittest

from ctrlhost_sdk import Request, ResourceRouter, Result
from tools.internal import bazel_unittest


def make(labels):
    return Request.for_object({"apiVersion": "example.com/v1", "kind": "App",
                               "metadata": {"name": "a", "namespace": "n", "labels": labels}})


def reconcile_as(req, ctx):
    result = Result()
    result.status["context"] = ctx
    return result


class ResourceRouterTest(unittest.TestCase):
    def setUp(self):
        self.router = ResourceRouter()
        self.router.add("v1", lambda r: r.labels.get("version") != "v2", reconcile_as)
        self.router.add("v2", lambda r: r.labels.get("version") == "v2", reconcile_as,
                        init_context=lambda r: {"set": "v2", "name": r.name})
        self.router.add("canary", lambda r: r.labels.get("track") == "canary", reconcile_as)

    def test_exactly_one_set_runs_with_its_context(self):
        self.assertEqual(self.router.route(make({})).status["context"], {})
        self.assertEqual(self.router.route(make({"version": "v2"})).status["context"],
                         {"set": "v2", "name": "a"})
        self.assertEqual(self.router.skipped, 0)

    def test_several_sets_are_a_terminal_error_naming_them(self):
        result = self.router.route(make({"track": "canary"}))
        message = 'the object matches 2 resource sets: "v1", "canary"; exactly one must handle it'
        self.assertEqual(result.error, ("terminal", message))
        self.assertEqual(result.conditions, [("Reconciled", "False", "AmbiguousRoute", message)])
        self.assertEqual(result.events, [("Warning", "AmbiguousRoute", message)])
        self.assertFalse(result.has_status)

    def test_no_set_is_skipped_and_counted_gone_is_not(self):
        router = ResourceRouter().add(
            "v2", lambda r: r.labels.get("version") == "v2",
            lambda r, c: Result.terminal_error("must not run"))
        result = router.route(make({"version": "v3"}))
        self.assertIsNone(result.error)
        self.assertFalse(result.has_status)
        self.assertEqual(router.skipped, 1)
        self.assertIsNone(router.route(Request.for_object(None)).error)
        self.assertEqual(router.skipped, 1)

    def test_bad_sets_are_refused(self):
        router = ResourceRouter()
        with self.assertRaisesRegex(ValueError, "needs a name"):
            router.add("", lambda r: True, reconcile_as)
        with self.assertRaisesRegex(ValueError, "needs handles and reconcile"):
            router.add("x", None, reconcile_as)
        router.add("x", lambda r: True, reconcile_as)
        with self.assertRaisesRegex(ValueError, 'resource set "x" is already defined'):
            router.add("x", lambda r: True, reconcile_as)


if __name__ == "__main__":
    bazel_unittest.main()
