"""deploy/ against real Kubernetes 1.20 (e2e/kube fixture):

- every kustomization (base, overlays) renders with `kubectl kustomize` and every object it
  renders is accepted by `kubectl apply --dry-run=server` (the API server's validation and
  admission, nothing stored);
- deploy/base/rbac.yaml is what `ctrlhost rbac --leader-elect` prints for
  deploy/base/operator.yaml today (a plugin that declares more fails this until the file is
  regenerated);
- the Deployment runs 2 replicas with --leader-elect, its identity and Lease namespace from the
  downward API, the Lease rule is a Role in its namespace, and the PodDisruptionBudget leaves a
  host up.
"""

import os
import shutil
import subprocess
import tempfile
import unittest

import yaml

from e2e.apiserver import apiserver_fixture
from e2e.host import host_fixture
from tools.internal import bazel_unittest

KUSTOMIZATIONS = ["deploy/base", "deploy/overlays/sidecar", "deploy/overlays/remote-mtls"]
# Overlays whose Secrets are generated from files a script makes first (certs/, git-ignored).
CERT_SCRIPTS = {"deploy/overlays/remote-mtls": "make-certs.sh"}
NAMESPACE = "ctrlhost"
BUNDLED_WEBAPP = "/opt/ctrlhost/plugins/webapp"  # its path in the ctrlhost-webapp image


def kustomize_dir(path):
    """A copy of deploy/ (kustomize needs the real tree, not runfile symlinks) with what the
    overlay's script generates, and the kustomization's directory in it."""
    deploy = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(
        host_fixture.runfile("deploy/base/kustomization.yaml")))))
    copy = tempfile.mkdtemp(prefix="deploy-", dir=os.environ.get("TEST_TMPDIR"))
    shutil.copytree(os.path.join(deploy, "deploy"), os.path.join(copy, "deploy"),
                    ignore=shutil.ignore_patterns("certs"))
    directory = os.path.join(copy, path)
    if path in CERT_SCRIPTS:
        subprocess.run([os.path.join(directory, CERT_SCRIPTS[path])], check=True,
                       capture_output=True, timeout=60)
    return directory


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
                             "Namespace", "PodDisruptionBudget", "Role", "RoleBinding", "Service",
                             "ServiceAccount"):
                    self.assertIn(kind, kinds)
                result = self.cluster.kubectl("apply", "--dry-run=server", "-f", "-",
                                              input_text=yaml.safe_dump_all(documents))
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(result.stdout.count("(server dry run)"), len(documents),
                                 result.stdout)

    def test_deployment_is_hardened(self):
        for path in KUSTOMIZATIONS:
            for deployment in [d for d in self.render(path) if d["kind"] == "Deployment"]:
                with self.subTest(path=path, deployment=deployment["metadata"]["name"]):
                    self.check_hardened(deployment["spec"]["template"]["spec"])

    def check_hardened(self, pod):
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

    def test_remote_plugin_serves_mutual_tls(self):
        documents = self.render("deploy/overlays/remote-mtls")
        by_name = {(d["kind"], d["metadata"]["name"]): d for d in documents}
        plugin = by_name[("Deployment", "webapp-plugin")]["spec"]["template"]["spec"]
        env = {e["name"]: e["value"] for e in plugin["containers"][0]["env"]}
        self.assertEqual(env["CTRLHOST_PLUGIN_ADDRESS"], "0.0.0.0:9443")
        mount = plugin["containers"][0]["volumeMounts"][0]["mountPath"]
        for variable, key in (("CERT", "tls.crt"), ("KEY", "tls.key"), ("CLIENT_CA", "ca.crt")):
            self.assertEqual(env["CTRLHOST_PLUGIN_TLS_%s_FILE" % variable], mount + "/" + key)
        secrets = {d["metadata"]["name"]: d for d in documents if d["kind"] == "Secret"}
        plugin_secret = plugin["volumes"][0]["secret"]["secretName"]
        self.assertEqual(sorted(secrets[plugin_secret]["data"]), ["ca.crt", "tls.crt", "tls.key"])
        # The host's operator file points at the files of the Secret mounted into its container.
        host = by_name[("Deployment", "ctrlhost")]["spec"]["template"]["spec"]
        host_secret = next(v["secret"]["secretName"] for v in host["volumes"] if "secret" in v)
        self.assertEqual(sorted(secrets[host_secret]["data"]), ["ca.crt", "tls.crt", "tls.key"])
        configmap = next(d for d in documents if d["kind"] == "ConfigMap")
        operator = yaml.safe_load(configmap["data"]["operator.yaml"])
        tls = operator["spec"]["plugins"][0]["endpoint"]["tls"]
        host_mounts = {m["name"]: m["mountPath"]
                       for m in host["containers"][0]["volumeMounts"]}
        for field, key in (("caFile", "ca.crt"), ("certFile", "tls.crt"), ("keyFile", "tls.key")):
            self.assertEqual(tls[field], host_mounts["plugin-tls"] + "/" + key)
        self.assertEqual(operator["spec"]["plugins"][0]["endpoint"]["address"],
                         tls["serverName"] + ":9443")

    def test_two_replicas_with_leader_election(self):
        for path in KUSTOMIZATIONS:
            with self.subTest(path):
                documents = self.render(path)
                deployment = next(d for d in documents if d["kind"] == "Deployment" and
                                  d["metadata"]["name"] == "ctrlhost")
                self.assertEqual(deployment["spec"]["replicas"], 2)
                host = next(c for c in deployment["spec"]["template"]["spec"]["containers"]
                            if c["name"] == "ctrlhost")
                self.assertIn("--leader-elect", host["args"])
                env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
                       for e in host["env"] if "valueFrom" in e}
                self.assertEqual(env, {"POD_NAME": "metadata.name",
                                       "POD_NAMESPACE": "metadata.namespace"})
                # The Lease rule: a Role in the host's namespace, nothing cluster-wide.
                role = next(d for d in documents if d["kind"] == "Role")
                self.assertEqual(role["metadata"]["namespace"], NAMESPACE)
                self.assertIn({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                               "verbs": ["create", "delete", "get", "list", "update", "watch"]},
                              role["rules"])
                cluster_role = next(d for d in documents if d["kind"] == "ClusterRole")
                for rule in cluster_role["rules"]:
                    self.assertNotIn("leases", rule["resources"])
                pdb = next(d for d in documents if d["kind"] == "PodDisruptionBudget")
                self.assertEqual(pdb["spec"]["minAvailable"], 1)
                self.assertNotIn("maxUnavailable", pdb["spec"])

    def test_committed_rbac_is_what_ctrlhost_rbac_prints(self):
        with open(host_fixture.runfile("deploy/base/operator.yaml")) as f:
            operator = f.read()
        self.assertIn(BUNDLED_WEBAPP, operator)
        path = os.path.join(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")), "op.yaml")
        with open(path, "w") as f:
            f.write(operator.replace(BUNDLED_WEBAPP, host_fixture.runfile("plugins/webapp/webapp")))
        result = subprocess.run([apiserver_fixture.binary_path(), "rbac", "-f", path,
                                 "--namespace", NAMESPACE, "--leader-elect"],
                                capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(host_fixture.runfile("deploy/base/rbac.yaml")) as f:
            committed = "".join(line for line in f if not line.startswith("#"))
        self.assertEqual(committed, result.stdout,
                         "regenerate deploy/base/rbac.yaml (see its first line)")


if __name__ == "__main__":
    bazel_unittest.main()
