"""End to end, on both servers: a dependent whose owners are all absent while the API server runs
(written after its owner was deleted, or naming an owner that never existed) is garbage collected
in the background, and one with a live owner is kept. Against the embedded server this was done
only at its next start (issue 13 leftover); real Kubernetes' garbage collector is the reference."""

import json
import unittest

from e2e.host import host_fixture
from tools.internal import bazel_unittest

OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: gc
spec:
  plugins:
    - name: chaos
      exec:
        command: {chaos}
"""


def config_map(name, owners):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default",
                         "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                                              "name": owner_name, "uid": uid}
                                             for owner_name, uid in owners]}}


class GarbageCollectionTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.host = host_fixture.start_host(OPERATOR.format(
            chaos=host_fixture.runfile("e2e/host/chaos/chaos")))

    @classmethod
    def tearDownClass(cls):
        code = cls.host.stop()
        assert code == 0, "ctrlhost exited %s\n%s" % (code, cls.host.log()[-4000:])

    def apply(self, body):
        self.host.kubectl("apply", "-f", "-", input_text=json.dumps(body), check=True)

    def exists(self, name):
        return self.host.get("/api/v1/namespaces/default/configmaps/" + name) is not None

    def test_dependents_of_absent_owners_are_collected_while_running(self):
        self.apply({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "gc-owner", "namespace": "default"}})
        owner = self.host.get("/api/v1/namespaces/default/configmaps/gc-owner")
        live = ("gc-owner", owner["metadata"]["uid"])
        ghost = ("gc-ghost", "00000000-0000-4000-8000-00000000dead")
        self.apply(config_map("gc-orphan", [ghost]))
        self.apply(config_map("gc-kept", [ghost, live]))
        self.host.wait_for(lambda: not self.exists("gc-orphan"),
                           "the dependent of an absent owner collected")
        self.assertTrue(self.exists("gc-kept"))
        # The owner goes; a dependent written afterwards still names it.
        self.host.kubectl("delete", "configmap", "gc-owner", "--wait=true", check=True)
        self.host.wait_for(lambda: not self.exists("gc-kept"), "the owner's dependent collected")
        self.apply(config_map("gc-late", [live]))
        self.host.wait_for(lambda: not self.exists("gc-late"),
                           "a dependent written after its owner's deletion collected")


if __name__ == "__main__":
    bazel_unittest.main()
