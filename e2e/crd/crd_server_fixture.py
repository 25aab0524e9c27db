"""A second real server for custom resources: `k8s.io/apiextensions-apiserver` 0.36 on etcd.

The binary is built from Debian sid's packages by `tools/crd-server-sid` (cached outside the
checkout, patched to run standalone: it serves `/apis` and OpenAPI v2 itself and authenticates
bearer tokens from a token file; see tools/crd-server-sid-patches/). It serves CRDs and custom
resources only: no namespaces, no built-in kinds, no admission. etcd is Debian bookworm's
`etcd-server` (3.4), as for e2e/kube. Both bind 127.0.0.1 on free ports, keep their data in a
fresh directory under $TEST_TMPDIR and are stopped by PID when the test process exits, also
after a failure.

    server = crd_server_fixture.CrdServer.start(crd_server_fixture.binary_path())
    status, body = server.api.request("GET", "/apis/apiextensions.k8s.io/v1/"
                                      "customresourcedefinitions")
    server.stop()

`binary_path()` is $CTRLHOST_CRD_SERVER_SID (tools/test sets it when tools/crd-server-sid built
the server), or None: the tests that need it are then skipped with `SKIP_REASON`.

Run on its own (by hand):
    PYTHONPATH=. /usr/bin/python3 -m e2e.crd.crd_server_fixture --dir /tmp/crd
    # prints "kubeconfig: PATH"; Ctrl-C stops it
"""

import argparse
import http.client
import os
import signal
import tempfile

from e2e.apiserver import apiserver_fixture
from e2e.kube import kube_fixture

ENV = "CTRLHOST_CRD_SERVER_SID"
SKIP_REASON = (
    "$%s is not set: the sid lane (apiextensions-apiserver 0.36 built from Debian sid by "
    "tools/crd-server-sid) is not built here; tools/crd-server-sid says why (sid drops old "
    "versions: tools/crd-server-sid --repin)" % ENV)
ADMIN_TOKEN = "e2e-crd-admin-token-0123456789abcdef"


def binary_path():
    """The apiextensions-apiserver to run, or None when the lane is not built."""
    path = os.environ.get(ENV, "")
    return path if path else None


class CrdServer:
    """etcd + apiextensions-apiserver owned by the test."""

    def __init__(self, binary, directory):
        self.binary = binary
        self.dir = directory
        self.pki = os.path.join(directory, "pki")
        self.etcd_port = kube_fixture.free_port()
        self.etcd_peer_port = kube_fixture.free_port()
        self.port = kube_fixture.free_port()
        self.url = "https://127.0.0.1:%d" % self.port
        self.kubeconfig = os.path.join(directory, "admin.kubeconfig")
        self.etcd = self.server = None
        self.api = None
        self.version = None

    @classmethod
    def start(cls, binary, directory=None):
        """Starts etcd and the server and waits (bounded) until /readyz answers 200."""
        if directory is None:
            directory = tempfile.mkdtemp(prefix="crd-server-", dir=apiserver_fixture.temp_root())
        server = cls(binary, directory)
        try:
            kube_fixture.make_pki(server.pki)
            with open(os.path.join(directory, "tokens.csv"), "w") as f:
                f.write('%s,e2e-admin,e2e-admin,"system:masters"\n' % ADMIN_TOKEN)
            kube_fixture.write_kubeconfig(server.kubeconfig, server.url,
                                          os.path.join(server.pki, "ca.crt"), ADMIN_TOKEN,
                                          namespace="default")
            server._start_etcd()
            server._start_server()
        except BaseException:
            server.stop()
            raise
        return server

    def _start_etcd(self):
        client = "http://127.0.0.1:%d" % self.etcd_port
        peer = "http://127.0.0.1:%d" % self.etcd_peer_port
        self.etcd = kube_fixture._Component("etcd", [
            kube_fixture.ETCD, "--name", "e2e", "--data-dir", os.path.join(self.dir, "etcd"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", "e2e=" + peer, "--initial-cluster-state", "new",
            "--logger", "zap", "--log-level", "warn",
        ], os.path.join(self.dir, "etcd.log"))
        kube_fixture.wait_started("etcd", self.etcd, self._etcd_healthy)

    def _etcd_healthy(self):
        connection = http.client.HTTPConnection("127.0.0.1", self.etcd_port, timeout=10)
        try:
            connection.request("GET", "/health")
            response = connection.getresponse()
            response.read()
            return response.status == 200
        finally:
            connection.close()

    def _start_server(self):
        self.server = kube_fixture._Component("apiextensions-apiserver", [
            self.binary,
            "--etcd-servers", "http://127.0.0.1:%d" % self.etcd_port,
            "--bind-address", "127.0.0.1", "--secure-port", str(self.port),
            "--tls-cert-file", os.path.join(self.pki, "serving.crt"),
            "--tls-private-key-file", os.path.join(self.pki, "serving.key"),
            "--token-auth-file", os.path.join(self.dir, "tokens.csv"),
            "--cert-dir", os.path.join(self.dir, "certs"),
            "--profiling=false", "--v=0",
        ], os.path.join(self.dir, "apiextensions-apiserver.log"))
        self.api = apiserver_fixture.ApiClient(self.kubeconfig)
        kube_fixture.wait_started("apiextensions-apiserver", self.server, self._ready)

    def _ready(self):
        status, _ = self.api.request("GET", "/readyz")
        if status != 200:
            return False
        status, self.version = self.api.request("GET", "/version")
        return status == 200

    def alive(self):
        return self.server is not None and self.server.alive()

    def stop(self):
        """Stops the server, then etcd, by PID."""
        for component in (self.server, self.etcd):
            if component is not None:
                component.stop()

    def log_tail(self):
        return self.server.log_tail() if self.server else ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", help="data directory (default: a new temporary one)")
    parser.add_argument("--binary", default=binary_path(),
                        help="the apiextensions-apiserver (default: $%s)" % ENV)
    args = parser.parse_args()
    if not args.binary:
        parser.error("no binary: pass --binary or set $%s (tools/crd-server-sid --path)" % ENV)
    if args.dir:
        os.makedirs(args.dir, exist_ok=True)
    server = CrdServer.start(args.binary, args.dir)
    print("API server listening on %s" % server.url, flush=True)
    print("kubeconfig: %s" % server.kubeconfig, flush=True)
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(True))
    while not stop:
        signal.pause()
    server.stop()


if __name__ == "__main__":
    main()
