"""The plugin and SDK images tools/image exports, each imported from its oci-archive with
buildah and run chrooted as the image's user with its entrypoint and environment (no shell, no
other files than the image's):

- each plugin image serves the plugin protocol on $CTRLHOST_PLUGIN_ADDRESS: `ctrlhost rbac`
  dials it as an endpoint, completes the handshake (Describe + health) and prints the rules
  its controllers need;
- the SDK base images hold a runtime that loads the SDK (`import ctrlhost_sdk`, `require()`).

Needs root, buildah and the archives: CTRLHOST_IMAGE_DIR=DIR holding NAME.oci.tar
(`tools/image --out DIR`).
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from e2e.apiserver import apiserver_fixture
from tools.internal import bazel_unittest

# image -> a resource its controllers' rules must name
PLUGINS = {
    "plugin-webapp": "webapps",
    "plugin-configmap-replicator": "configmaps",
    "plugin-webapp-py": "webapps",
    "plugin-webapp-node": "webapps",
}
SDK_CHECKS = {
    "sdk-python": ["-c", "import grpc, ctrlhost_sdk; print('ok')"],
    "sdk-node": ["-e", "require('/opt/ctrlhost/sdk/node/src'); console.log('ok')"],
}
WAIT_SECONDS = 60


class Image:
    """One image imported into a private buildah storage and mounted."""

    def __init__(self, archive):
        self.root = tempfile.mkdtemp(prefix="buildah-", dir=os.environ.get("TEST_TMPDIR"))
        self.container = self.buildah("from", "--quiet", "oci-archive:" + archive)
        self.rootfs = self.buildah("mount", self.container)
        self.config = json.loads(self.buildah("inspect", self.container))["OCIv1"]["config"]

    def buildah(self, *args):
        result = subprocess.run(
            ["buildah", "--root", os.path.join(self.root, "storage"), "--runroot",
             os.path.join(self.root, "run"), "--storage-driver", "vfs", *args],
            capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            raise AssertionError("buildah %s: %s" % (" ".join(args), result.stderr))
        return result.stdout.strip()

    def argv(self, *extra):
        """chroot into the image as its user, running its entrypoint with `extra`."""
        return ["/usr/sbin/chroot", "--userspec=" + self.config["User"], self.rootfs,
                *self.config["Entrypoint"], *extra]

    def env(self, **extra):
        env = dict(e.split("=", 1) for e in self.config.get("Env", []))
        env.update(extra)
        return env

    def close(self):
        self.buildah("rm", "--all")
        shutil.rmtree(self.root, ignore_errors=True)


class PluginImagesTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = os.environ.get("CTRLHOST_IMAGE_DIR", "")
        if not os.path.isdir(cls.dir):
            raise AssertionError("CTRLHOST_IMAGE_DIR=%r is not a directory: build the images "
                                 "with `tools/image --out DIR`" % cls.dir)

    def open(self, name):
        image = Image(os.path.join(self.dir, name + ".oci.tar"))
        self.addCleanup(image.close)
        self.assertEqual(self.config_user(image), "65532:65532")
        labels = image.config.get("Labels", {})
        for label in ("version", "revision", "source"):
            self.assertIn("org.opencontainers.image." + label, labels)
        self.assertFalse(os.path.lexists(os.path.join(image.rootfs, "bin/sh")), "a shell")
        return image

    @staticmethod
    def config_user(image):
        return image.config["User"]

    def test_plugins_serve_the_protocol(self):
        for name, resource in PLUGINS.items():
            with self.subTest(name):
                image = self.open(name)
                # As in deploy/overlays/sidecar: the socket in a volume (a short host path: a
                # Unix socket path has at most 107 bytes) mounted at /var/run/plugins.
                volume = tempfile.mkdtemp(prefix="plugins-", dir="/tmp")
                self.addCleanup(shutil.rmtree, volume, True)
                os.chmod(volume, 0o777)
                socket = "/var/run/plugins/plugin.sock"
                log = tempfile.TemporaryFile(mode="w+")
                process = subprocess.Popen(
                    ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                     'mkdir -p "$1/var/run/plugins" && mount --bind "$2" "$1/var/run/plugins" '
                     '&& shift 2 && exec "$@"', "sh", image.rootfs, volume, *image.argv()],
                    env=image.env(CTRLHOST_PLUGIN_ADDRESS="unix://" + socket,
                                  PATH="/usr/sbin:/usr/bin:/bin"),
                    stdout=log, stderr=subprocess.STDOUT)
                try:
                    deadline = time.monotonic() + WAIT_SECONDS
                    while not os.path.exists(os.path.join(volume, "plugin.sock")):
                        self.assertIsNone(process.poll(), "plugin exited")
                        self.assertLess(time.monotonic(), deadline, "no socket")
                        time.sleep(0.2)
                    operator = os.path.join(image.root, "operator.yaml")
                    with open(operator, "w") as f:
                        f.write("apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\n"
                                "metadata: {name: probe}\nspec:\n  plugins:\n    - name: p\n"
                                "      endpoint: {address: 'unix://%s'}\n"
                                % os.path.join(volume, "plugin.sock"))
                    result = subprocess.run([apiserver_fixture.binary_path(), "rbac", "-f",
                                             operator], capture_output=True, text=True,
                                            timeout=120)
                    self.assertEqual(result.returncode, 0, result.stderr)
                    self.assertIn("- " + resource, result.stdout)
                finally:
                    process.terminate()
                    process.wait(timeout=30)
                    log.seek(0)
                    output = log.read()
                    log.close()
                self.assertEqual(process.returncode, 0, output)

    def test_sdk_bases_load_the_sdk(self):
        for name, args in SDK_CHECKS.items():
            with self.subTest(name):
                image = self.open(name)
                result = subprocess.run(image.argv(*args), env=image.env(), capture_output=True,
                                        text=True, timeout=120)
                self.assertEqual((result.returncode, result.stdout.strip()), (0, "ok"),
                                 result.stderr)
        image = self.open("sdk-cpp")
        self.assertTrue(os.path.exists(os.path.join(
            image.rootfs, "usr/lib/x86_64-linux-gnu/libgrpc++.so.1.51")))


if __name__ == "__main__":
    bazel_unittest.main()
