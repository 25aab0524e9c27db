"""A remote plugin over TCP with mutual TLS, in each SDK's language ($CTRLHOST_E2E_WEBAPP: cpp,
py, node; one Bazel target each).

The WebApp plugin runs as its own process (as a plugin Deployment would), listening on
127.0.0.1 with CTRLHOST_PLUGIN_TLS_CERT_FILE/_KEY_FILE/_CLIENT_CA_FILE set to certificates this
test makes with openssl (a CA that signs the plugin's serving certificate and the host's client
certificate; a second, unrelated CA). The host dials it with `endpoint.tls`:

- with the CA and its client certificate: the handshake passes and a WebApp is reconciled;
- without a client certificate: the plugin refuses the handshake; the host never gets ready for
  it and says so in its log and /debug/dump;
- trusting the wrong CA: the host refuses the plugin's certificate, with the reason in its log
  and /debug/dump;
- the plugin itself refuses to serve plaintext on a non-loopback address, and refuses half a
  TLS configuration, both with a message naming what to set.
"""

import os
import socket
import subprocess
import tempfile
import time
import unittest

from e2e.apiserver import apiserver_fixture
from e2e.host import host_fixture
from tools.internal import bazel_unittest

WEBAPP_PLUGINS = {
    "cpp": "plugins/webapp/webapp",
    "py": "plugins/webapp-py/webapp-py",
    "node": "plugins/webapp-node/webapp-node",
}

OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: remote
spec:
  plugins:
    - name: webapp
      startupTimeout: 5s
      endpoint:
        address: 127.0.0.1:{port}
        tls:
{tls}
"""

WAIT_SECONDS = 60
# What the host's log and dump say when the plugin closes the connection during the TLS
# handshake (TLS 1.3: the client's part was done; the plugin's own log says "peer did not return
# a certificate") ...
CLOSED_BY_PLUGIN = "cannot connect: failed to connect to all addresses"
# ... and when the host refuses the plugin's certificate.
CERTIFICATE_REFUSED = "certificate verify failed"


def openssl(directory, *args):
    subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True,
                   timeout=60)


def make_ca(directory, name):
    openssl(directory, "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out",
            name + ".key")
    openssl(directory, "req", "-x509", "-new", "-key", name + ".key", "-days", "2", "-subj",
            "/CN=" + name, "-out", name + ".crt")


def make_cert(directory, ca, name, extensions):
    openssl(directory, "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out",
            name + ".key")
    openssl(directory, "req", "-new", "-key", name + ".key", "-subj", "/CN=" + name, "-out",
            name + ".csr")
    with open(os.path.join(directory, name + ".ext"), "w") as f:
        f.write(extensions)
    openssl(directory, "x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey",
            ca + ".key", "-CAcreateserial", "-days", "2", "-extfile", name + ".ext", "-out",
            name + ".crt")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PluginProcess(apiserver_fixture.OwnedProcess):
    """The WebApp plugin, started by the test (not by the host)."""

    def __init__(self, env, log_path):
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                [host_fixture.runfile(WEBAPP_PLUGINS[os.environ.get("CTRLHOST_E2E_WEBAPP",
                                                                    "cpp")])],
                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        apiserver_fixture.own(self)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def _forget(self):
        apiserver_fixture.disown(self)


def plugin_env(**variables):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTRLHOST_PLUGIN_")}
    env.update(variables)
    return env


class RemoteMtlsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="pki-", dir=apiserver_fixture.temp_root())
        make_ca(cls.dir, "ca")
        make_ca(cls.dir, "other-ca")
        make_cert(cls.dir, "ca", "plugin", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                  "extendedKeyUsage=serverAuth\n")
        make_cert(cls.dir, "ca", "host", "extendedKeyUsage=clientAuth\n")
        cls.port = free_port()
        cls.plugin = PluginProcess(plugin_env(
            CTRLHOST_PLUGIN_ADDRESS="127.0.0.1:%d" % cls.port,
            CTRLHOST_PLUGIN_TLS_CERT_FILE=cls.path("plugin.crt"),
            CTRLHOST_PLUGIN_TLS_KEY_FILE=cls.path("plugin.key"),
            CTRLHOST_PLUGIN_TLS_CLIENT_CA_FILE=cls.path("ca.crt")),
            os.path.join(cls.dir, "plugin.log"))
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            if not cls.plugin.alive():
                raise AssertionError("the plugin exited %s:\n%s" % (
                    cls.plugin.process.returncode, cls.plugin.log()))
            try:
                socket.create_connection(("127.0.0.1", cls.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("the plugin does not listen:\n" + cls.plugin.log())
                time.sleep(0.1)

    @classmethod
    def tearDownClass(cls):
        code = cls.plugin.stop()
        assert code == 0, "the plugin exited %s:\n%s" % (code, cls.plugin.log())

    @classmethod
    def path(cls, name):
        return os.path.join(cls.dir, name)

    def start_host(self, wait_ready=True, **tls):
        lines = "\n".join("          %s: %s" % (k, v) for k, v in tls.items())
        return host_fixture.start_host(OPERATOR.format(port=self.port, tls=lines),
                                       wait_ready=wait_ready)

    def wait(self, condition, what, host):
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError("timed out waiting for %s; host log:\n%s\nplugin log:\n%s" % (
            what, host.log()[-4000:], self.plugin.log()[-2000:]))

    def check_refused(self, host, reason):
        """The plugin never gets ready; the log and /debug/dump both give `reason`."""
        def dumped_error():
            status, text = host.endpoint("/debug/dump")
            self.assertEqual(status, 200, text)
            return text if reason in text else None
        dump = self.wait(dumped_error, "%r in /debug/dump" % reason, host)
        self.assertEqual(host.metric("ctrlhost_plugin_up"), 0, dump)
        self.assertIn(reason, host.log())
        self.assertNotEqual(host.endpoint("/readyz")[0], 200)
        return dump

    def test_mutual_tls_reconciles(self):
        host = self.start_host(caFile=self.path("ca.crt"), certFile=self.path("host.crt"),
                               keyFile=self.path("host.key"))
        try:
            self.wait(lambda: host.metric("ctrlhost_plugin_up") == 1, "the plugin up", host)
            host.kubectl("apply", "-f", host_fixture.runfile("plugins/webapp/deploy/crd.yaml"),
                         check=True)
            host.kubectl("apply", "-f", "-", check=True, input_text="""
apiVersion: apps.ctrlhost.dev/v1alpha1
kind: WebApp
metadata: {name: remote-shop, namespace: default}
spec: {image: nginx:1.25, replicas: 1}
""")
            self.wait(lambda: host.get(
                "/apis/apps/v1/namespaces/default/deployments/remote-shop"), "the Deployment",
                host)
        finally:
            self.assertEqual(host.stop(), 0, host.log()[-4000:])
        self.assertIn("mutual", self.plugin.log())

    def test_host_without_client_certificate_is_refused(self):
        host = self.start_host(wait_ready=False, caFile=self.path("ca.crt"))
        try:
            self.check_refused(host, CLOSED_BY_PLUGIN)
        finally:
            host.stop()

    def test_wrong_ca_is_refused(self):
        host = self.start_host(wait_ready=False, caFile=self.path("other-ca.crt"),
                               certFile=self.path("host.crt"), keyFile=self.path("host.key"))
        try:
            self.check_refused(host, CERTIFICATE_REFUSED)
        finally:
            host.stop()

    def run_plugin_briefly(self, **variables):
        """Starts the plugin with `variables`; it must exit 2 at once. Returns its output."""
        plugin = PluginProcess(plugin_env(**variables),
                               os.path.join(self.dir, "refused-%d.log" % time.monotonic_ns()))
        try:
            plugin.process.wait(WAIT_SECONDS)
        finally:
            plugin.kill()
        self.assertEqual(plugin.process.returncode, 2, plugin.log())
        return plugin.log()

    def test_plaintext_on_a_non_loopback_address_is_refused(self):
        out = self.run_plugin_briefly(CTRLHOST_PLUGIN_ADDRESS="0.0.0.0:%d" % free_port())
        self.assertIn("refusing to serve plaintext on 0.0.0.0:", out)
        self.assertIn("CTRLHOST_PLUGIN_TLS_CERT_FILE", out)

    def test_half_a_tls_configuration_is_refused(self):
        out = self.run_plugin_briefly(CTRLHOST_PLUGIN_ADDRESS="127.0.0.1:%d" % free_port(),
                                      CTRLHOST_PLUGIN_TLS_CERT_FILE=self.path("plugin.crt"))
        self.assertIn("CTRLHOST_PLUGIN_TLS_CERT_FILE and CTRLHOST_PLUGIN_TLS_KEY_FILE must be "
                      "set together", out)


if __name__ == "__main__":
    bazel_unittest.main()
