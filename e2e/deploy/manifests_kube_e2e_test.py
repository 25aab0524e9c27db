"""deploy/ against real Kubernetes 1.20 (e2e/kube fixture):

- every kustomization (base, overlays) renders with `kubectl kustomize` and every object it
  renders is accepted by `kubectl apply --dry-run=server` (the API server's validation and
  admission, nothing stored);
- deploy/base/rbac.yaml is what `ctrlhost rbac` prints for deploy/base/operator.yaml today (a
  plugin that declares more fails this until the file is regenerated).
"""

import os
import subprocess
import tempfile
import unittest

import yaml

from e2e.apiserver import apiserver_fixture
from e2e.host import host_fixture

KUSTOMIZATIONS = ["deploy/base", "deploy/overlays/sidecar"]
NAMESPACE = "ctrlhost"
BUNDLED_WEBAPP = "/opt/ctrlhost/plugins/webapp"  # its path in the ctrlhost-webapp image


def kustomize_dir(path):
    """The real directory of a kustomization (runfiles are symlinks; kustomize needs the tree)."""
    return os.path.dirname(os.path.realpath(host_fixture.runfile(path + "/kustomization.yaml")))


class ManifestsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cluster = host_fixture.cluster()
        cls.cluster.ensure_namespace(NAMESPACE)
        cls.has_policy_v1 = cls.cluster.request("GET", "/apis/policy/v1")[0] == 200

    def render(self, path):
        result = subprocess.run(["kubectl", "kustomize", kustomize_dir(path)],
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        documents = [d for d in yaml.safe_load_all(result.stdout) if d]
        if not self.has_policy_v1:
            # Kubernetes 1.20 serves PodDisruptionBudget as policy/v1beta1 only (policy/v1 is
            # 1.21+); the spec used is the same in both.
            for d in documents:
                if d["kind"] == "PodDisruptionBudget":
                    d["apiVersion"] = "policy/v1beta1"
        return documents

    def test_every_manifest_passes_server_side_dry_run(self):
        for path in KUSTOMIZATIONS:
            with self.subTest(path):
                documents = self.render(path)
                kinds = sorted(d["kind"] for d in documents)
                for kind in ("ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment",
                             "Namespace", "PodDisruptionBudget", "Service", "ServiceAccount"):
                    self.assertIn(kind, kinds)
                result = self.cluster.kubectl("apply", "--dry-run=server", "-f", "-",
                                              input_text=yaml.safe_dump_all(documents))
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(result.stdout.count("(server dry run)"), len(documents),
                                 result.stdout)

    def test_deployment_is_hardened(self):
        for path in KUSTOMIZATIONS:
            deployment = next(d for d in self.render(path) if d["kind"] == "Deployment")
            pod = deployment["spec"]["template"]["spec"]
            self.assertTrue(pod["securityContext"]["runAsNonRoot"])
            self.assertEqual(pod["securityContext"]["runAsUser"], 65532)
            self.assertEqual(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault")
            self.assertFalse(pod["automountServiceAccountToken"])
            for container in pod["containers"]:
                context = container["securityContext"]
                self.assertTrue(context["readOnlyRootFilesystem"], container["name"])
                self.assertFalse(context["allowPrivilegeEscalation"], container["name"])
                self.assertEqual(context["capabilities"]["drop"], ["ALL"], container["name"])
                self.assertIn("memory", container["resources"]["limits"], container["name"])
                mounts = [m["mountPath"] for m in container.get("volumeMounts", [])]
                # Only the host holds API credentials.
                self.assertEqual(
                    "/var/run/secrets/kubernetes.io/serviceaccount" in mounts,
                    container["name"] == "ctrlhost", container["name"])

    def test_committed_rbac_is_what_ctrlhost_rbac_prints(self):
        with open(host_fixture.runfile("deploy/base/operator.yaml")) as f:
            operator = f.read()
        self.assertIn(BUNDLED_WEBAPP, operator)
        path = os.path.join(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")), "op.yaml")
        with open(path, "w") as f:
            f.write(operator.replace(BUNDLED_WEBAPP, host_fixture.runfile("plugins/webapp/webapp")))
        result = subprocess.run([apiserver_fixture.binary_path(), "rbac", "-f", path,
                                 "--namespace", NAMESPACE],
                                capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(host_fixture.runfile("deploy/base/rbac.yaml")) as f:
            committed = "".join(line for line in f if not line.startswith("#"))
        self.assertEqual(committed, result.stdout,
                         "regenerate deploy/base/rbac.yaml (see its first line)")


if __name__ == "__main__":
    unittest.main()
