"""ctrlhost_sdk.tls: TLS configuration from the environment and the plaintext rule. The TLS
handshakes themselves are tested with a host in e2e/remote."""

import os
import tempfile
import unittest

from ctrlhost_sdk import tls
from tools.internal import bazel_unittest

PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


class TlsTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))

    def write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def test_nothing_set_is_plaintext(self):
        self.assertIsNone(tls.server_tls_from_env({}))

    def test_reads_the_three_files(self):
        got = tls.server_tls_from_env({
            tls.CERT_FILE_ENV: self.write("c.pem", PEM),
            tls.KEY_FILE_ENV: self.write("k.pem", b"-----BEGIN PRIVATE KEY-----\nx\n"),
            tls.CLIENT_CA_FILE_ENV: self.write("ca.pem", PEM)})
        self.assertEqual(got.cert_chain_pem, PEM)
        self.assertEqual(got.client_ca_pem, PEM)
        self.assertEqual(got.mode, "mutual")
        without_ca = tls.load_server_tls(self.write("c.pem", PEM), self.write("k.pem", PEM))
        self.assertIsNone(without_ca.client_ca_pem)
        self.assertEqual(without_ca.mode, "tls")

    def test_certificate_and_key_go_together(self):
        with self.assertRaises(ValueError) as e:
            tls.server_tls_from_env({tls.KEY_FILE_ENV: self.write("k.pem", PEM)})
        self.assertEqual(str(e.exception),
                         "CTRLHOST_PLUGIN_TLS_CERT_FILE and CTRLHOST_PLUGIN_TLS_KEY_FILE must be "
                         "set together (only CTRLHOST_PLUGIN_TLS_KEY_FILE is set)")

    def test_client_ca_needs_a_certificate(self):
        with self.assertRaisesRegex(ValueError, "CTRLHOST_PLUGIN_TLS_CLIENT_CA_FILE needs"):
            tls.load_server_tls("", "", self.write("ca.pem", PEM))

    def test_missing_and_non_pem_files_name_the_variable(self):
        cert = self.write("c.pem", PEM)
        with self.assertRaisesRegex(
                ValueError, "^CTRLHOST_PLUGIN_TLS_KEY_FILE=/nonexistent/k: cannot read: "):
            tls.load_server_tls(cert, "/nonexistent/k")
        with self.assertRaisesRegex(ValueError, "key.txt: not a PEM file"):
            tls.load_server_tls(cert, self.write("key.txt", b"not a key"))

    def test_plaintext_only_on_unix_and_loopback(self):
        for listen in ("unix:/tmp/x.sock", "127.0.0.1:0", "127.1.2.3:80", "localhost:9443",
                       "[::1]:9443"):
            tls.check_plaintext_allowed(listen)
        for listen in ("0.0.0.0:9443", "[::]:9443", "10.0.0.1:9443", "plugin.svc:9443",
                       "128.0.0.1:1"):
            with self.assertRaisesRegex(ValueError, "refusing to serve plaintext on "):
                tls.check_plaintext_allowed(listen)


if __name__ == "__main__":
    bazel_unittest.main()
