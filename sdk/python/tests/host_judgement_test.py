"""testing.run / testing.reconcile judge a reconcile as the live host does: every case of
sdk/testdata/host_judgement_cases.json (the cases every SDK's harness passes), and the Python
surface around them (HostWouldRefuse from reconcile, the caller's fixtures left as they were).

First contact: the harness accepted what the live host refuses (a desired kind the controller
does not own; only `ctrlhost test --check` caught it), handed the plugin children without an
owner reference and ignored the label selector."""

import copy
import json
import os
import unittest

from ctrlhost_sdk import Controller, Request, Result, testing
from tools.internal import bazel_unittest


def _cases_path() -> str:
    srcdir = os.environ.get("TEST_SRCDIR")
    if srcdir:
        return os.path.join(srcdir, "ctrlhost", "sdk", "testdata", "host_judgement_cases.json")
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "..", "..", "testdata", "host_judgement_cases.json")


with open(_cases_path()) as f:
    CASES = json.load(f)


def case_controller(case, seen):
    """The case's controller, answering case["answer"] and recording the children it got."""
    decl = case["controller"]
    c = Controller(decl["name"]).for_(*decl["primary"])
    for owned in decl["owns"]:
        c.owns(*owned)
    if decl.get("labelSelector"):
        c.label_selector(decl["labelSelector"])
    if decl.get("namespaces"):
        c.namespaces(*decl["namespaces"])
    answer = case["answer"]

    @c.reconcile
    def reconcile(req: Request) -> Result:
        for child in req.children:
            ref = child.json["metadata"]["ownerReferences"][0]
            seen.append("%s:%s/%s/%s/%s" % (child.name, ref["kind"],
                                            ref["name"], ref.get("uid"),
                                            str(ref["controller"]).lower()))
        result = Result()
        for obj in answer.get("desired", []):
            result.desire(copy.deepcopy(obj))
        if "status" in answer:
            result.merge_status(answer["status"])
        if "condition" in answer:
            type_, status, reason = answer["condition"]
            result.set_condition(type_, status, reason)
        if "statusPatch" in answer:
            result.patch_status(answer["statusPatch"])
        if "ownedPatch" in answer:
            result.patch_owned(*answer["ownedPatch"], patch={})
        if "event" in answer:
            result.event(*answer["event"])
        return result

    return c


def case_primary(case):
    if case["primary"] is None:
        return None
    obj = copy.deepcopy(CASES["primaries"][case["primary"]])
    if "labels" in case:
        obj["metadata"]["labels"] = dict(case["labels"])
    return obj


class SharedCasesTest(unittest.TestCase):
    def test_every_case(self):
        self.assertGreaterEqual(len(CASES["cases"]), 20)
        for case in CASES["cases"]:
            with self.subTest(case["name"]):
                seen = []
                children = case.get("children", [])
                before = copy.deepcopy(children)
                run = lambda: testing.run(case_controller(case, seen), case_primary(case),
                                          children=children, existing=case.get("existing", []))
                if "notSent" in case:
                    with self.assertRaises(testing.HostWouldNotSend) as raised:
                        run()
                    self.assertIn(case["notSent"], str(raised.exception))
                    self.assertTrue(str(raised.exception).startswith(
                        "the host would not send this request: "))
                    continue
                outcome = run()
                self.assertIsNone(outcome.error)
                if case["refused"] is None:
                    self.assertIsNone(outcome.refused)
                else:
                    self.assertIsNotNone(outcome.refused)
                    self.assertIn(case["refused"], outcome.refused)
                if "childrenSeen" in case:
                    self.assertEqual(seen, case["childrenSeen"])
                self.assertEqual(children, before)  # the caller's fixtures are unchanged


class StatusSubresourceTest(unittest.TestCase):
    def test_status_on_every_kind_without_a_status_subresource_is_refused(self):
        self.assertEqual(len(CASES["withoutStatusSubresource"]), 20)
        for group, kind in CASES["withoutStatusSubresource"]:
            with self.subTest(kind=kind, group=group):
                api_version = group + "/v1" if group else "v1"
                c = Controller("statusful").for_(group, "v1", kind)

                @c.reconcile
                def reconcile(req: Request) -> Result:
                    result = Result()
                    result.merge_status({"phase": "Done"})
                    return result

                obj = {"apiVersion": api_version, "kind": kind,
                       "metadata": {"name": "x", "namespace": "prod", "uid": "u-x"}}
                self.assertEqual(testing.run(c, obj).refused,
                                 "status: kind %s %s has no status subresource, so it has no "
                                 "status to write; record the outcome with an event instead"
                                 % (api_version, kind))


class ReconcileFailsTheTestTest(unittest.TestCase):
    def test_a_refused_answer_raises_an_assertion_error_with_the_outcome(self):
        case = CASES["cases"][0]
        with self.assertRaises(AssertionError) as raised:
            testing.reconcile(case_controller(case, []), case_primary(case))
        self.assertEqual(str(raised.exception), "the host would refuse this answer: "
                         "desired_objects[1]: kind v1 Secret is not owned by controller greeter")
        self.assertEqual(len(raised.exception.outcome.desired), 2)

    def test_an_applied_answer_is_returned(self):
        case = CASES["cases"][1]
        outcome = testing.reconcile(case_controller(case, []), case_primary(case))
        self.assertIsNone(outcome.refused)
        self.assertEqual(len(outcome.desired_of_kind("Secret")), 1)


if __name__ == "__main__":
    bazel_unittest.main()
