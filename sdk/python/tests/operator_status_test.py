"""set_operator_status: the same cases as sdk/cpp operator_status_test."""

import unittest

from ctrlhost_sdk import Request, Result, set_operator_status
from tools.internal import bazel_unittest


def run(status=None, deleting=False, **kwargs):
    meta = {"name": "a", "namespace": "n", "generation": 3}
    if deleting:
        meta.update(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["x"])
    obj = {"apiVersion": "example.com/v1", "kind": "App", "metadata": meta}
    if status is not None:
        obj["status"] = status
    result = Result()
    set_operator_status(Request.for_object(obj), result, **kwargs)
    return result


def conditions(result):
    return {c[0]: "%s %s" % (c[1], c[2]) for c in result.conditions}


class OperatorStatusTest(unittest.TestCase):
    def test_deploying_then_deployed(self):
        deploying = run(operator_version="1.0.0", message="waiting for web")
        self.assertEqual(deploying.status["phase"], "Deploying")
        self.assertEqual(deploying.status["targetVersion"], "1.0.0")
        self.assertEqual(deploying.status["observedGeneration"], 3)
        self.assertNotIn("observedVersion", deploying.status)
        self.assertEqual(conditions(deploying), {
            "Available": "False Deploying", "Progressing": "True Deploying",
            "Degraded": "False AsExpected", "Ready": "False Deploying",
            "Reconciling": "True Deploying", "Stalled": "False AsExpected"})
        deployed = run(operator_version="1.0.0", children_ready=True)
        self.assertEqual(deployed.status["phase"], "Deployed")
        self.assertEqual(deployed.status["observedVersion"], "1.0.0")
        self.assertEqual(conditions(deployed)["Available"], "True AsExpected")
        self.assertEqual(conditions(deployed)["Reconciling"], "False AsExpected")

    def test_upgrade_keeps_available_and_is_never_degraded(self):
        was = {"observedVersion": "1.0.0", "conditions": [{"type": "Available", "status": "True"}]}
        upgrading = run(was, operator_version="1.1.0", message="web 1/2")
        self.assertEqual(upgrading.status["phase"], "Upgrading")
        self.assertNotIn("observedVersion", upgrading.status)
        self.assertEqual(conditions(upgrading)["Available"], "True PreviousVersionAvailable")
        self.assertEqual(conditions(upgrading)["Progressing"], "True Upgrading")
        self.assertEqual(conditions(upgrading)["Degraded"], "False AsExpected")
        self.assertEqual(upgrading.conditions[1][3], "upgrading from 1.0.0 to 1.1.0: web 1/2")
        done = run(was, operator_version="1.1.0", children_ready=True)
        self.assertEqual(done.status["phase"], "Deployed")
        self.assertEqual(done.status["observedVersion"], "1.1.0")

    def test_persistent_failure_and_deletion(self):
        failed = run(operator_version="1.0.0", failure="image pull refused",
                     failure_reason="ImagePull")
        self.assertEqual(failed.status["phase"], "Error")
        self.assertEqual(conditions(failed)["Degraded"], "True ImagePull")
        self.assertEqual(conditions(failed)["Stalled"], "True ImagePull")
        self.assertEqual(conditions(failed)["Available"], "False NotReady")
        deleting = run(deleting=True, operator_version="1.0.0", children_ready=True)
        self.assertEqual(deleting.status["phase"], "Deleting")
        self.assertEqual(conditions(deleting)["Available"], "False Deleting")


if __name__ == "__main__":
    bazel_unittest.main()
