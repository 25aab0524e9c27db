"""The ctrlhost-webapp image, run the way a kubelet runs deploy/base's Deployment, against real
Kubernetes 1.20 (e2e/kube fixture). `podman run` does not work on these machines, so the test
does what the container runtime would:

- imports the oci-archive tools/image exported (buildah from oci-archive:..., buildah mount);
- in a private mount namespace, bind-mounts the Deployment's volumes where its volumeMounts say
  (the operator ConfigMap, the emptyDirs, the projected service-account token, CA and namespace
  in the kubelet's ..data symlink layout), makes the image's root read-only, and runs the
  container's command and args chrooted as runAsUser/runAsGroup 65532 with only
  KUBERNETES_SERVICE_HOST/PORT in the environment. One change to the pod spec: --metrics-addr
  binds 127.0.0.1 on a free port (tests never bind 0.0.0.0 or a fixed port);
- binds the RBAC in deploy/base (what `ctrlhost rbac` printed) to the ServiceAccount;
- runs the WebApp scenario (children with owner references, status, deletion) with no 403
  answer for the host's account;
- rotates the token as the kubelet does (a new ..data directory swapped in atomically), revokes
  the old one (its bound Secret is deleted: the server answers 401 to it) and runs the scenario
  again: the host re-read the token file.

Needs root, buildah and the archive: CTRLHOST_IMAGE_ARCHIVE=.../ctrlhost-webapp.oci.tar
(tools/test builds it with tools/image and passes it).
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


def render_base():
    kustomization = os.path.realpath(host_fixture.runfile("deploy/base/kustomization.yaml"))
    result = subprocess.run(["kubectl", "kustomize", os.path.dirname(kustomization)],
                            capture_output=True, text=True, timeout=60, check=True)
    return [d for d in yaml.safe_load_all(result.stdout) if d]


class ImageChrootTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        archive = os.environ.get("CTRLHOST_IMAGE_ARCHIVE", "")
        if not os.path.isfile(archive):
            raise AssertionError("CTRLHOST_IMAGE_ARCHIVE=%r is not a file: build it with "
                                 "`tools/image ctrlhost-webapp` and pass "
                                 "--test_env=CTRLHOST_IMAGE_ARCHIVE=PATH" % archive)
        if os.geteuid() != 0:
            raise AssertionError("needs root (chroot, mount namespaces)")
        cls.cluster = host_fixture.cluster()
        cls.cluster.kubectl("apply", "-f", host_fixture.runfile("plugins/webapp/deploy/crd.yaml"),
                            check=True)
        cls.cluster.ensure_namespace(APPS)
        documents = render_base()
        cls.deployment = next(d for d in documents if d["kind"] == "Deployment")
        cls.configmap = next(d for d in documents if d["kind"] == "ConfigMap")
        # Namespace, ServiceAccount and RBAC for real; the workload is what we run here.
        setup = [d for d in documents if d["kind"] in (
            "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
            "RoleBinding")]
        cls.cluster.kubectl("apply", "-f", "-", input_text=yaml.safe_dump_all(setup), check=True)
        with open(os.path.join(cls.cluster.pki, "ca.crt")) as f:
            cls.sa = ServiceAccountVolume(f.read(), NAMESPACE)
        cls.token = cls.mint_token("token-1")
        cls.sa.write(cls.token)
        cls.buildah = Buildah()
        cls.container = cls.buildah("from", "--quiet", "oci-archive:" + archive)
        cls.rootfs = cls.buildah("mount", cls.container)
        cls.process = None
        cls.start()

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.process is not None and cls.process.poll() is None:
                cls.process.send_signal(signal.SIGTERM)
                try:
                    cls.process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    cls.process.kill()
                    cls.process.wait(timeout=30)
        finally:
            cls.log.close()
            cls.buildah.cleanup()

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
    def start(cls):
        pod = cls.deployment["spec"]["template"]["spec"]
        container = next(c for c in pod["containers"] if c["name"] == "ctrlhost")
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = []  # (source directory, mount path, read-only)
        for mount in container["volumeMounts"]:
            volume = volumes[mount["name"]]
            if "configMap" in volume:
                source = tmpdir("configmap-")
                os.chmod(source, 0o755)  # as the kubelet makes it: readable by the pod's user
                for key, text in cls.configmap["data"].items():
                    with open(os.path.join(source, key), "w") as f:
                        f.write(text)
                    os.chmod(os.path.join(source, key), 0o644)
            elif "emptyDir" in volume:
                source = tmpdir("emptydir-")
                os.chown(source, 0, pod["securityContext"]["fsGroup"])
                os.chmod(source, 0o2775)
            elif "projected" in volume:
                assert mount["mountPath"] == SA_DIR, mount
                source = cls.sa.dir
            else:
                raise AssertionError("volume kind not handled: %s" % volume)
            mounts.append((source, mount["mountPath"], mount.get("readOnly", False)))
        cls.metrics_port = kube_fixture.free_port()
        args = [a if not a.startswith("--metrics-addr=") else
                "--metrics-addr=127.0.0.1:%d" % cls.metrics_port for a in container["args"]]
        user = "%d:%d" % (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"])
        assert container["securityContext"]["readOnlyRootFilesystem"]
        root = cls.rootfs
        script = ["set -e", 'mount --bind "$R" "$R"']
        for source, path, read_only in mounts:
            script.append('mkdir -p "$R%s" && mount --bind "%s" "$R%s"' % (path, source, path))
            if read_only:
                script.append('mount -o remount,bind,ro "$R%s"' % path)
        script += ['mount -t proc proc "$R/proc"', 'mount --rbind /dev "$R/dev"',
                   'mount -o remount,bind,ro "$R"',
                   'exec env -i KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=%d '
                   '/usr/sbin/chroot --userspec=%s "$R" "$@"' % (cls.cluster.port, user)]
        cls.log_path = os.path.join(tmpdir("host-log-"), "host.log")
        cls.log = open(cls.log_path, "w+")
        cls.process = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(script),
             "sh", *container["command"], *args],
            env={"R": root, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
            stdout=cls.log, stderr=subprocess.STDOUT)
        cls.wait(lambda: cls.readyz()[0] == 200, "/readyz 200")

    @classmethod
    def readyz(cls):
        if cls.process.poll() is not None:
            raise AssertionError("the host exited %s:\n%s" % (cls.process.returncode,
                                                             cls.host_log()[-4000:]))
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/readyz?verbose" % cls.metrics_port,
                                        timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError as e:
            return 0, str(e)

    @classmethod
    def host_log(cls):
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
        raise AssertionError("timed out waiting for %s; host log:\n%s" % (
            what, cls.host_log()[-4000:]))

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

    def test_1_runs_as_nonroot_with_read_only_root_in_cluster(self):
        with open("/proc/%d/status" % self.process.pid) as f:
            ids = {line.split(":")[0]: line.split()[1:] for line in f if ":" in line}
        self.assertEqual(ids["Uid"][0], "65532")
        self.assertEqual(ids["Gid"][0], "65532")
        self.assertIn("in-cluster", self.host_log())
        self.webapp_scenario("store")
        forbidden = [e for e in self.cluster.audit_events(USER)
                     if e.get("responseStatus", {}).get("code") == 403]
        self.assertEqual(forbidden, [])
        print("in-image host: %d requests by %s, 0 answered 403" % (
            len(self.cluster.audit_events(USER)), USER))

    def test_2_rotated_token_is_reread_and_the_old_one_revoked(self):
        new_token = self.mint_token("token-2")
        self.sa.write(new_token)
        status, _ = self.cluster.request("DELETE", "/api/v1/namespaces/%s/secrets/token-1" %
                                         NAMESPACE)
        self.assertEqual(status, 200)
        self.wait(lambda: self.cluster.request("GET", "/api", token=self.token)[0] == 401,
                  "the old token revoked")
        self.assertEqual(self.cluster.request("GET", "/api", token=new_token)[0], 200)
        self.webapp_scenario("after-rotation")
        self.assertEqual(self.readyz()[0], 200)


if __name__ == "__main__":
    unittest.main()
