"""The images, run the way a kubelet runs the Deployments of deploy/base (the ctrlhost-webapp
bundle) and deploy/overlays/sidecar (the ctrlhost image + the plugin-webapp sidecar over a Unix
socket in a shared emptyDir), against real Kubernetes 1.20 (e2e/kube fixture). `podman run`
does not work on these machines, so the test does what the container runtime would:

- imports each container's image from the oci-archive tools/image exported (buildah from
  oci-archive:DIR/NAME.oci.tar, buildah mount);
- in a private mount namespace, bind-mounts the Deployment's volumes where its volumeMounts say
  (the operator ConfigMap, the emptyDirs, the projected service-account token, CA and namespace
  in the kubelet's ..data symlink layout), makes the image's root read-only, and runs the
  container's command and args chrooted as runAsUser/runAsGroup 65532 with only
  KUBERNETES_SERVICE_HOST/PORT and the container's env in the environment (fieldRef values
  resolved as the kubelet would: POD_NAME, POD_NAMESPACE). One change to the pod spec:
  --metrics-addr binds 127.0.0.1 on a free port per pod (tests never bind 0.0.0.0 or a fixed
  port);
- runs as many pods as the Deployment's replicas (2, with --leader-elect): exactly one leads
  (holds the Lease, leader_election_master_status 1), the other stands by and is ready too;
- binds the RBAC in deploy/base (what `ctrlhost rbac` printed) to the ServiceAccount;
- runs the WebApp scenario (children with owner references, status, deletion) with no 403
  answer for the host's account;
- bundle: rotates the token as the kubelet does (a new ..data directory swapped in
  atomically), revokes the old one (its bound Secret is deleted: the server answers 401 to it)
  and runs the scenario again: the host re-read the token file.

Needs root, buildah and the archives: CTRLHOST_IMAGE_DIR=DIR holding NAME.oci.tar
(`tools/image --out DIR`; tools/test builds them and passes it).
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.request

import yaml

from e2e.host import host_fixture
from e2e.kube import kube_fixture
from tools.internal import bazel_unittest

NAMESPACE = "ctrlhost"
ACCOUNT = "ctrlhost"
USER = "system:serviceaccount:%s:%s" % (NAMESPACE, ACCOUNT)
APPS = "shop"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
WAIT_SECONDS = 120


def tmpdir(prefix):
    return tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("TEST_TMPDIR"))


class Buildah:
    """buildah with a private vfs storage (removed by cleanup())."""

    def __init__(self):
        self.root = tmpdir("buildah-")

    def __call__(self, *args):
        result = subprocess.run(
            ["buildah", "--root", os.path.join(self.root, "storage"), "--runroot",
             os.path.join(self.root, "run"), "--storage-driver", "vfs", *args],
            capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            raise AssertionError("buildah %s: %s" % (" ".join(args), result.stderr))
        return result.stdout.strip()

    def cleanup(self):
        subprocess.run(["buildah", "--root", os.path.join(self.root, "storage"), "--runroot",
                        os.path.join(self.root, "run"), "--storage-driver", "vfs", "rm", "--all"],
                       capture_output=True, timeout=120)
        shutil.rmtree(self.root, ignore_errors=True)


class ServiceAccountVolume:
    """The projected service-account volume in the kubelet's layout: token, ca.crt and namespace
    are links into ..data, a link to a timestamped directory that rotation replaces at once."""

    def __init__(self, ca_pem, namespace):
        self.dir = tmpdir("serviceaccount-")
        os.chmod(self.dir, 0o755)
        self.ca_pem = ca_pem
        self.namespace = namespace
        self.generation = 0
        for name in ("token", "ca.crt", "namespace"):
            os.symlink("..data/" + name, os.path.join(self.dir, name))

    def write(self, token):
        self.generation += 1
        payload = "..2026_11_25_00_00_%02d.%d" % (self.generation, os.getpid())
        path = os.path.join(self.dir, payload)
        os.mkdir(path)
        os.chmod(path, 0o755)
        for name, text in (("token", token), ("ca.crt", self.ca_pem),
                           ("namespace", self.namespace)):
            with open(os.path.join(path, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(path, name), 0o444)
        os.symlink(payload, os.path.join(self.dir, "..data_tmp"))
        os.rename(os.path.join(self.dir, "..data_tmp"), os.path.join(self.dir, "..data"))


def render(kustomization_dir):
    kustomization = os.path.realpath(
        host_fixture.runfile(kustomization_dir + "/kustomization.yaml"))
    result = subprocess.run(["kubectl", "kustomize", os.path.dirname(kustomization)],
                            capture_output=True, text=True, timeout=60, check=True)
    return [d for d in yaml.safe_load_all(result.stdout) if d]


class PodTest(unittest.TestCase):
    """Runs the Deployment's pod of KUSTOMIZATION chrooted; subclasses hold the tests."""

    KUSTOMIZATION = None
    TOKEN_PREFIX = None

    @classmethod
    def setUpClass(cls):
        cls.image_dir = os.environ.get("CTRLHOST_IMAGE_DIR", "")
        if not os.path.isdir(cls.image_dir):
            raise AssertionError("CTRLHOST_IMAGE_DIR=%r is not a directory: build the images "
                                 "with `tools/image --out DIR` and pass "
                                 "--test_env=CTRLHOST_IMAGE_DIR=DIR" % cls.image_dir)
        if os.geteuid() != 0:
            raise AssertionError("needs root (chroot, mount namespaces)")
        cls.processes = {}
        cls.host_dirs = []  # outside TEST_TMPDIR: removed by tearDownClass
        cls.buildah = Buildah()
        cls.cluster = host_fixture.cluster()
        cls.cluster.kubectl("apply", "-f", host_fixture.runfile("plugins/webapp/deploy/crd.yaml"),
                            check=True)
        cls.cluster.ensure_namespace(APPS)
        documents = render(cls.KUSTOMIZATION)
        cls.deployment = next(d for d in documents if d["kind"] == "Deployment")
        cls.configmap = next(d for d in documents if d["kind"] == "ConfigMap")
        # Namespace, ServiceAccount and RBAC for real; the workload is what we run here.
        setup = [d for d in documents if d["kind"] in (
            "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
            "RoleBinding")]
        cls.cluster.kubectl("apply", "-f", "-", input_text=yaml.safe_dump_all(setup), check=True)
        with open(os.path.join(cls.cluster.pki, "ca.crt")) as f:
            cls.sa = ServiceAccountVolume(f.read(), NAMESPACE)
        cls.token = cls.mint_token(cls.TOKEN_PREFIX + "-1")
        cls.sa.write(cls.token)
        cls.log_path = os.path.join(tmpdir("pod-log-"), "pod.log")
        cls.log = open(cls.log_path, "w+")
        cls.metrics_ports = {}  # pod name -> its --metrics-addr port
        for replica in range(cls.deployment["spec"].get("replicas", 1)):
            cls.start_pod("ctrlhost-%s-%d" % (cls.TOKEN_PREFIX.split("-")[0], replica))
        for pod in cls.metrics_ports:
            cls.wait(lambda: cls.readyz(pod)[0] == 200, "/readyz 200 on %s" % pod)

    @classmethod
    def tearDownClass(cls):
        try:
            for process in cls.processes.values():
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in cls.processes.values():
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=30)
        finally:
            cls.log.close()
            cls.buildah.cleanup()
            for path in cls.host_dirs:
                shutil.rmtree(path, ignore_errors=True)

    @classmethod
    def mint_token(cls, secret_name):
        """A bound token for the ServiceAccount, revoked when Secret `secret_name` is deleted."""
        status, secret = cls.cluster.request(
            "POST", "/api/v1/namespaces/%s/secrets" % NAMESPACE,
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret_name}})
        assert status == 201, (status, secret)
        status, body = cls.cluster.request(
            "POST", "/api/v1/namespaces/%s/serviceaccounts/%s/token" % (NAMESPACE, ACCOUNT),
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
             "spec": {"expirationSeconds": 3600, "boundObjectRef": {
                 "apiVersion": "v1", "kind": "Secret", "name": secret_name,
                 "uid": secret["metadata"]["uid"]}}})
        assert status == 201, (status, body)
        return body["status"]["token"]

    @classmethod
    def volume_sources(cls, pod):
        """A host directory per volume of the pod, filled as the kubelet would."""
        sources = {}
        for volume in pod["volumes"]:
            if "configMap" in volume:
                source = tmpdir("configmap-")
                os.chmod(source, 0o755)  # as the kubelet makes it: readable by the pod's user
                for key, text in cls.configmap["data"].items():
                    with open(os.path.join(source, key), "w") as f:
                        f.write(text)
                    os.chmod(os.path.join(source, key), 0o644)
            elif "emptyDir" in volume:
                # Short host paths: a plugin socket in it must fit 107 bytes on the host too.
                source = tempfile.mkdtemp(prefix="emptydir-", dir="/tmp")
                cls.host_dirs.append(source)
                os.chown(source, 0, pod["securityContext"]["fsGroup"])
                os.chmod(source, 0o2775)
            elif "projected" in volume:
                source = cls.sa.dir
            else:
                raise AssertionError("volume kind not handled: %s" % volume)
            sources[volume["name"]] = source
        return sources

    @classmethod
    def start_pod(cls, pod_name):
        pod = cls.deployment["spec"]["template"]["spec"]
        cls.metrics_ports[pod_name] = kube_fixture.free_port()
        sources = cls.volume_sources(pod)  # emptyDirs of its own; the same ConfigMap and token
        for container in pod["containers"]:
            cls.start_container(pod_name, pod, container, sources)

    @staticmethod
    def env_value(pod_name, entry):
        """An env entry's value as the kubelet resolves it (value, or a fieldRef we know)."""
        if "value" in entry:
            return entry["value"]
        field = entry["valueFrom"]["fieldRef"]["fieldPath"]
        values = {"metadata.name": pod_name, "metadata.namespace": NAMESPACE}
        if field not in values:
            raise AssertionError("env %s: fieldRef %s not handled" % (entry["name"], field))
        return values[field]

    @classmethod
    def start_container(cls, pod_name, pod, container, sources):
        image = container["image"].split("/")[-1].split(":")[0]
        archive = os.path.join(cls.image_dir, image + ".oci.tar")
        rootfs = cls.buildah("mount", cls.buildah("from", "--quiet", "oci-archive:" + archive))
        mounts = []  # (source directory, mount path, read-only)
        for mount in container.get("volumeMounts", []):
            if mount["name"] == "kube-api-access":
                assert mount["mountPath"] == SA_DIR, mount
            mounts.append((sources[mount["name"]], mount["mountPath"],
                           mount.get("readOnly", False)))
        args = [a if not a.startswith("--metrics-addr=") else
                "--metrics-addr=127.0.0.1:%d" % cls.metrics_ports[pod_name]
                for a in container.get("args", [])]
        user = "%d:%d" % (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"])
        assert container["securityContext"]["readOnlyRootFilesystem"], container["name"]
        env = ["KUBERNETES_SERVICE_HOST=127.0.0.1", "KUBERNETES_SERVICE_PORT=%d" % cls.cluster.port]
        env += ["%s=%s" % (e["name"], cls.env_value(pod_name, e))
                for e in container.get("env", [])]
        script = ["set -e", 'mount --bind "$R" "$R"']
        for source, path, read_only in mounts:
            script.append('mkdir -p "$R%s" && mount --bind "%s" "$R%s"' % (path, source, path))
            if read_only:
                script.append('mount -o remount,bind,ro "$R%s"' % path)
        script += ['mount -t proc proc "$R/proc"', 'mount --rbind /dev "$R/dev"',
                   'mount -o remount,bind,ro "$R"',
                   'exec env -i %s /usr/sbin/chroot --userspec=%s "$R" "$@"' % (
                       " ".join(env), user)]
        cls.processes[(pod_name, container["name"])] = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(script),
             "sh", *container["command"], *args],
            env={"R": rootfs, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
            stdout=cls.log, stderr=subprocess.STDOUT)

    @classmethod
    def readyz(cls, pod_name):
        return cls.http_get(pod_name, "/readyz?verbose")

    @classmethod
    def http_get(cls, pod_name, path):
        for name, process in cls.processes.items():
            if process.poll() is not None:
                raise AssertionError("container %s exited %s:\n%s" % (
                    name, process.returncode, cls.pod_log()[-4000:]))
        try:
            with urllib.request.urlopen(
                    "http://127.0.0.1:%d%s" % (cls.metrics_ports[pod_name], path),
                    timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError as e:
            return 0, str(e)

    @classmethod
    def pod_log(cls):
        with open(cls.log_path) as f:
            return f.read()

    @classmethod
    def wait(cls, condition, what, timeout=WAIT_SECONDS):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            time.sleep(0.5)
        raise AssertionError("timed out waiting for %s; pod log:\n%s" % (
            what, cls.pod_log()[-4000:]))

    def get(self, *args):
        result = self.cluster.kubectl("get", "-o", "json", "-n", APPS, *args)
        return json.loads(result.stdout) if result.returncode == 0 else None

    def webapp_scenario(self, name):
        self.cluster.kubectl("apply", "-n", APPS, "-f", "-", check=True, input_text="""
apiVersion: apps.ctrlhost.dev/v1alpha1
kind: WebApp
metadata: {name: %s}
spec: {image: nginx:1.25, replicas: 2, config: {A: b}}
""" % name)
        web = self.wait(lambda: (lambda w: w if w and w.get("status", {}).get(
            "observedGeneration") == 1 else None)(self.get("webapp", name)), "%s status" % name)
        for kind, child in (("deployment", name), ("service", name),
                            ("configmap", name + "-config")):
            obj = self.wait(lambda: self.get(kind, child), "%s %s" % (kind, child))
            self.assertEqual(obj["metadata"]["ownerReferences"][0]["uid"], web["metadata"]["uid"])
        self.cluster.kubectl("delete", "webapp", name, "-n", APPS, "--wait=true",
                             "--timeout=60s", check=True, timeout=90)

    def leader_status(self):
        """{pod name: leader_election_master_status} of every pod."""
        out = {}
        for pod in self.metrics_ports:
            status, text = self.http_get(pod, "/metrics")
            self.assertEqual(status, 200, text)
            values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                      if line.startswith("leader_election_master_status{")]
            self.assertEqual(len(values), 1, text)
            out[pod] = values[0]
        return out

    def check_one_leader_one_standby(self):
        self.assertEqual(len(self.metrics_ports), 2, "the Deployment runs 2 replicas")
        for pod in self.metrics_ports:
            self.assertEqual(self.readyz(pod)[0], 200, pod)
        status = self.wait(lambda: (lambda s: s if sorted(s.values()) == [0, 1] else None)(
            self.leader_status()), "one leader and one standby")
        leader = next(pod for pod, value in status.items() if value == 1)
        lease = self.cluster.request(
            "GET", "/apis/coordination.k8s.io/v1/namespaces/%s/leases/ctrlhost" % NAMESPACE)
        self.assertEqual(lease[0], 200, lease)
        # Identities are $POD_NAME + "_" + 8 hex digits: the downward API reached the host.
        self.assertTrue(lease[1]["spec"]["holderIdentity"].startswith(leader + "_"), lease)

    def check_nonroot_in_cluster_without_403(self, name):
        for container, process in self.processes.items():
            with open("/proc/%d/status" % process.pid) as f:
                ids = {line.split(":")[0]: line.split()[1:] for line in f if ":" in line}
            self.assertEqual((ids["Uid"][0], ids["Gid"][0]), ("65532", "65532"), container)
        self.assertIn("in-cluster", self.pod_log())
        self.webapp_scenario(name)
        forbidden = [e for e in self.cluster.audit_events(USER)
                     if e.get("responseStatus", {}).get("code") == 403]
        self.assertEqual(forbidden, [])
        print("%s: %d requests by %s so far, 0 answered 403" % (
            self.KUSTOMIZATION, len(self.cluster.audit_events(USER)), USER))


class BundleTest(PodTest):
    """deploy/base: the host with the WebApp plugin exec'd inside its container."""

    KUSTOMIZATION = "deploy/base"
    TOKEN_PREFIX = "bundle-token"

    def test_1_runs_as_nonroot_with_read_only_root_in_cluster(self):
        self.check_nonroot_in_cluster_without_403("store")

    def test_1b_one_leader_one_standby(self):
        self.check_one_leader_one_standby()

    def test_2_rotated_token_is_reread_and_the_old_one_revoked(self):
        new_token = self.mint_token(self.TOKEN_PREFIX + "-2")
        self.sa.write(new_token)
        status, _ = self.cluster.request("DELETE", "/api/v1/namespaces/%s/secrets/%s-1" %
                                         (NAMESPACE, self.TOKEN_PREFIX))
        self.assertEqual(status, 200)
        self.wait(lambda: self.cluster.request("GET", "/api", token=self.token)[0] == 401,
                  "the old token revoked")
        self.assertEqual(self.cluster.request("GET", "/api", token=new_token)[0], 200)
        self.webapp_scenario("after-rotation")
        for pod in self.metrics_ports:
            self.assertEqual(self.readyz(pod)[0], 200, pod)


class SidecarTest(PodTest):
    """deploy/overlays/sidecar: the host image and the plugin image in two containers."""

    KUSTOMIZATION = "deploy/overlays/sidecar"
    TOKEN_PREFIX = "sidecar-token"

    def test_plugin_in_a_sidecar_over_a_shared_socket(self):
        self.assertEqual(sorted(container for _, container in self.processes),
                         ["ctrlhost", "ctrlhost", "webapp", "webapp"])
        self.check_nonroot_in_cluster_without_403("sidecar-store")
        self.check_one_leader_one_standby()


if __name__ == "__main__":
    bazel_unittest.main()
