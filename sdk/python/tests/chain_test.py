"""DependentChain: ordered ensure-created / ensure-deleted over one reconcile function."""

import unittest

from ctrlhost_sdk import DependentChain, ReconcileError, Request

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

    def test_gone_primary_gets_the_handlers_answer(self):
        result = chain().build()(Request.for_object(None))
        self.assertEqual(result.desired, [])


if __name__ == "__main__":
    unittest.main()
