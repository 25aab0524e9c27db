"""Fidelity the other way: a real client-go program, k8s.io/sample-controller (Kubernetes
1.20.2, built by tools/kubernetes), against the embedded API server
(sample_controller_e2e_test) and, as the anchor, against real Kubernetes
(sample_controller_kube_e2e_test). The same assertions hold on both: a Foo gets its Deployment
(owned by the Foo, the Foo's replicas), the Foo's status.availableReplicas is written, a
Normal "Synced" event is recorded, and a replica change propagates. Its informers list and
watch Deployments and Foos, and its log has no watch errors."""

import os
import signal
import subprocess
import time
import unittest

from e2e.apiserver import apiserver_fixture
from e2e.host import host_fixture
from e2e.kube import kube_fixture
from tools.internal import bazel_unittest

CRD = host_fixture.runfile("e2e/kube/testdata/foo-crd.yaml")
FOO = """\
apiVersion: samplecontroller.k8s.io/v1alpha1
kind: Foo
metadata: {name: example-foo, namespace: default}
spec: {deploymentName: example-foo, replicas: %d}
"""
TIMEOUT = 60


class SampleControllerTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        if host_fixture.real_kube():
            cls.server = host_fixture.cluster()
        else:
            cls.server = apiserver_fixture.ApiServer.start()
        cls.api = apiserver_fixture.ApiClient(cls.server.kubeconfig)
        cls.kubectl("apply", "-f", CRD, check=True)
        cls.kubectl("wait", "--for=condition=Established",
                    "crd/foos.samplecontroller.k8s.io", "--timeout=60s", check=True)
        cls.log_path = os.path.join(apiserver_fixture.temp_root(), "sample-controller.log")
        log = open(cls.log_path, "ab")
        cls.controller = subprocess.Popen(
            [os.path.join(kube_fixture.binary_dir(), "sample-controller"),
             "-kubeconfig", cls.server.kubeconfig, "-alsologtostderr", "-v", "2"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()

    @classmethod
    def tearDownClass(cls):
        if cls.controller.poll() is None:
            cls.controller.send_signal(signal.SIGTERM)
            try:
                cls.controller.wait(10)
            except subprocess.TimeoutExpired:
                cls.controller.kill()
                cls.controller.wait(10)
        if not host_fixture.real_kube():
            cls.server.stop()

    @classmethod
    def kubectl(cls, *args, **kwargs):
        return apiserver_fixture.kubectl("kubectl", cls.server.kubeconfig, *args, **kwargs)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def wait_for(self, condition, what):
        deadline = time.monotonic() + TIMEOUT
        last = None
        while time.monotonic() < deadline:
            self.assertIsNone(self.controller.poll(), "sample-controller exited\n" + self.log())
            last = condition()
            if last:
                return last
            time.sleep(0.2)
        self.fail("timed out waiting for %s (last: %r)\nsample-controller log:\n%s" %
                  (what, last, self.log()[-5000:]))

    def get(self, path):
        status, body = self.api.request("GET", path)
        return body if status == 200 else None

    def test_foo_gets_its_deployment_status_and_events(self):
        self.kubectl("apply", "-f", "-", input_text=FOO % 1, check=True)
        foo = self.wait_for(lambda: self.get(
            "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos/example-foo"),
            "the Foo")
        deployment = self.wait_for(
            lambda: self.get("/apis/apps/v1/namespaces/default/deployments/example-foo"),
            "the Deployment")
        owner = deployment["metadata"]["ownerReferences"][0]
        self.assertEqual((owner["kind"], owner["name"], owner["uid"], owner["controller"]),
                         ("Foo", "example-foo", foo["metadata"]["uid"], True))
        self.assertEqual(deployment["spec"]["replicas"], 1)
        # No kubelet on either server: 0 available, and the controller writes that down.
        self.wait_for(lambda: "availableReplicas" in (self.get(
            "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos/example-foo")
            or {}).get("status", {}), "status.availableReplicas")

        def synced_event():
            events = self.get("/api/v1/namespaces/default/events") or {"items": []}
            return [e for e in events["items"] if e.get("reason") == "Synced"
                    and e["involvedObject"].get("name") == "example-foo"]
        event = self.wait_for(synced_event, "a Synced event")[0]
        self.assertEqual(event["type"], "Normal")
        self.assertEqual(event["involvedObject"]["kind"], "Foo")

        self.kubectl("apply", "-f", "-", input_text=FOO % 3, check=True)
        self.wait_for(lambda: (self.get("/apis/apps/v1/namespaces/default/deployments/"
                                        "example-foo") or {}).get("spec", {})
                      .get("replicas") == 3, "the Deployment scaled to 3")
        log = self.log()
        self.assertIn("Started workers", log)
        self.assert_no_watch_trouble(log)

    def assert_no_watch_trouble(self, log):
        # (A 409 on the Foo's update is client-go's ordinary optimistic concurrency, on both.)
        for problem in ("Failed to watch", "Failed to list", "unexpected EOF",
                        "unable to decode", "panic"):
            self.assertNotIn(problem.lower(), log.lower(),
                             "sample-controller logged %r:\n%s" % (problem, log))

    def test_zz_server_restart_ends_watches_cleanly(self):
        """A graceful API server stop ends every watch stream properly (the last chunk), so
        client-go sees the end of a watch, not a broken stream ("unexpected EOF"); after the
        restart its informers resume and it keeps working. (Right after its restart real
        Kubernetes answers 503 for a CRD's resource for a moment: client-go logs "Failed to
        watch" there, so only the cut stream is the criterion.)"""
        self.kubectl("apply", "-f", "-", input_text=FOO % 1, check=True)
        self.wait_for(lambda: (self.get("/apis/apps/v1/namespaces/default/deployments/"
                                        "example-foo") or {}).get("spec", {})
                      .get("replicas") == 1, "the Deployment at 1")
        time.sleep(2)  # the informers' watches are open
        if host_fixture.real_kube():
            self.server.apiserver.stop()
            self.server.start_apiserver()
        else:
            port = self.server.url.rsplit(":", 1)[1]
            self.server.stop()
            type(self).server = apiserver_fixture.ApiServer.start(
                data_dir=self.server.data_dir, extra_args=("--port", port))
        self.kubectl("apply", "-f", "-", input_text=FOO % 2, check=True)
        self.wait_for(lambda: (self.get("/apis/apps/v1/namespaces/default/deployments/"
                                        "example-foo") or {}).get("spec", {})
                      .get("replicas") == 2, "the Deployment at 2 after the restart")
        self.assertNotIn("unexpected eof", self.log().lower(),
                         "a watch stream was cut instead of ended:\n" + self.log())


if __name__ == "__main__":
    bazel_unittest.main()
