"""Real Kubernetes for end-to-end tests: etcd + kube-apiserver + kube-controller-manager.

The binaries are Kubernetes 1.20.2 built from Debian's source package by `tools/kubernetes`
(cached outside the checkout); etcd is Debian's `etcd-server`. Everything binds 127.0.0.1 on
free ports, keeps its data in a fresh directory under $TEST_TMPDIR, and is stopped by PID when
the test process exits, also after a failure.

    cluster = kube_fixture.Cluster.start()
    cluster.kubectl("get", "namespaces", check=True)
    limited = cluster.service_account_kubeconfig("shop", "webapp-operator")
    cluster.kill_apiserver(); cluster.start_apiserver()   # kill -9 and restart, same port
    cluster.stop()

What it is: kube-apiserver with HTTPS (its own CA, made with openssl), a static token file (an
admin token in system:masters), `--authorization-mode=RBAC`, service-account token signing
(TokenRequest works); kube-controller-manager with the garbage collector, namespace,
service-account, deployment and replicaset controllers. There is no kubelet and no scheduler:
pods are created by the ReplicaSet controller and stay Pending, so a Deployment never has ready
replicas.

Run on its own (for C++ tests or by hand):
    python3 -m e2e.kube.kube_fixture --dir /tmp/k   # prints "kubeconfig: PATH", runs until
                                                     # SIGTERM/SIGINT (--stdin: or stdin closes)
The binaries are found in $CTRLHOST_KUBE_BIN, else ~/.cache/ctrlhost/kubernetes/current (the
link `tools/kubernetes` maintains); when neither has them the fixture fails, naming the command
that builds them.
"""

import argparse
import base64
import http.client
import json
import os
import select
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

import yaml

from e2e.apiserver import apiserver_fixture

START_TIMEOUT_SECONDS = 120
ETCD = "/usr/bin/etcd"
ADMIN_TOKEN = "e2e-admin-token-0123456789abcdef"
CONTROLLER_MANAGER_TOKEN = "e2e-kcm-token-0123456789abcdef"
CONTROLLERS = "garbagecollector,namespace,serviceaccount,serviceaccount-token,deployment,replicaset"
SERVICE_CIDR = "10.0.0.0/24"


def binary_dir():
    """The directory holding kube-apiserver and friends, or an AssertionError saying how to
    build them."""
    candidates = [os.environ.get("CTRLHOST_KUBE_BIN", ""),
                  os.path.join(os.path.expanduser("~"), ".cache", "ctrlhost", "kubernetes",
                               "current")]
    for directory in candidates:
        if directory and all(os.access(os.path.join(directory, b), os.X_OK)
                             for b in ("kube-apiserver", "kube-controller-manager")):
            return directory
    raise AssertionError(
        "real Kubernetes binaries not found (looked in $CTRLHOST_KUBE_BIN=%r and %s): build "
        "them once with tools/kubernetes (tools/test does it for you)" %
        (candidates[0], candidates[1]))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(directory):
    """A CA, a serving certificate for 127.0.0.1/localhost/kubernetes.default.svc and a
    service-account signing key pair (EC P-256), written into `directory`."""
    os.makedirs(directory, exist_ok=True)
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ca.key", cwd=directory)
    _openssl("req", "-x509", "-new", "-key", "ca.key", "-days", "3650", "-subj",
             "/CN=ctrlhost-e2e-ca", "-out", "ca.crt", cwd=directory)
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "serving.key",
             cwd=directory)
    _openssl("req", "-new", "-key", "serving.key", "-subj", "/CN=kube-apiserver",
             "-out", "serving.csr", cwd=directory)
    with open(os.path.join(directory, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,"
                "DNS:kubernetes.default,DNS:kubernetes.default.svc,"
                "DNS:kubernetes.default.svc.cluster.local\n"
                "extendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", "serving.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "3650", "-extfile", "san.ext", "-out", "serving.crt",
             cwd=directory)
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key",
             cwd=directory)
    _openssl("ec", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=directory)


def write_kubeconfig(path, server, ca_path, token, namespace=None):
    with open(ca_path, "rb") as f:
        ca_data = base64.b64encode(f.read()).decode()
    context = {"cluster": "e2e", "user": "e2e"}
    if namespace:
        context["namespace"] = namespace
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "e2e",
        "clusters": [{"name": "e2e", "cluster": {"server": server,
                                                  "certificate-authority-data": ca_data}}],
        "users": [{"name": "e2e", "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": context}],
    }
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(config, f)
    os.chmod(path, 0o600)
    return path


class _Component(apiserver_fixture.OwnedProcess):
    """One process of the cluster (etcd, kube-apiserver, kube-controller-manager)."""

    def __init__(self, name, argv, log_path):
        self.name = name
        self.log_path = log_path
        log = open(log_path, "ab")
        self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
        log.close()
        apiserver_fixture.own(self)

    def log_tail(self, size=4000):
        with open(self.log_path, errors="replace") as f:
            return f.read()[-size:]


def wait_started(what, component, ready):
    """Polls ready() until it is true, at most START_TIMEOUT_SECONDS; fails at once, with the
    log's tail, when the component's process exits. Connection errors count as not ready yet."""
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if component.process.poll() is not None:
            raise AssertionError("%s exited (%s) at start:\n%s" %
                                 (what, component.process.returncode, component.log_tail()))
        try:
            if ready():
                return
        except (OSError, ValueError, http.client.HTTPException):
            pass  # not listening yet (ssl.SSLError is an OSError)
        time.sleep(0.2)  # polling an observable condition, bounded by the deadline
    raise AssertionError("%s not ready after %ss:\n%s" %
                         (what, START_TIMEOUT_SECONDS, component.log_tail()))


class Cluster:
    """etcd + kube-apiserver + kube-controller-manager owned by the test."""

    def __init__(self, directory, extra_apiserver_args=()):
        self.dir = directory
        self.bin = binary_dir()
        self.pki = os.path.join(directory, "pki")
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.port = free_port()
        self.url = "https://127.0.0.1:%d" % self.port
        self.extra_apiserver_args = list(extra_apiserver_args)
        self.etcd = self.apiserver = self.controller_manager = None
        self.kubeconfig = os.path.join(directory, "admin.kubeconfig")
        self.audit_log = os.path.join(directory, "audit.log")
        self.version = None

    # --- lifecycle --------------------------------------------------------------------------

    @classmethod
    def start(cls, directory=None, extra_apiserver_args=(), controller_manager=True):
        """Starts the three processes and waits (bounded) until the API server is ready."""
        if directory is None:
            directory = tempfile.mkdtemp(prefix="kube-", dir=apiserver_fixture.temp_root())
        cluster = cls(directory, extra_apiserver_args)
        try:
            make_pki(cluster.pki)
            with open(os.path.join(directory, "tokens.csv"), "w") as f:
                f.write('%s,e2e-admin,e2e-admin,"system:masters"\n' % ADMIN_TOKEN)
                f.write('%s,system:kube-controller-manager,kcm,"system:masters"\n' %
                        CONTROLLER_MANAGER_TOKEN)
            write_kubeconfig(cluster.kubeconfig, cluster.url, os.path.join(cluster.pki, "ca.crt"),
                             ADMIN_TOKEN)
            cluster.start_etcd()
            cluster.start_apiserver()
            if controller_manager:
                cluster.start_controller_manager()
        except BaseException:
            cluster.stop()
            raise
        cluster.api = apiserver_fixture.ApiClient(cluster.kubeconfig)
        return cluster

    def start_etcd(self):
        data = os.path.join(self.dir, "etcd")
        client = "http://127.0.0.1:%d" % self.etcd_port
        peer = "http://127.0.0.1:%d" % self.etcd_peer_port
        self.etcd = _Component("etcd", [
            ETCD, "--name", "e2e", "--data-dir", data,
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", "e2e=" + peer, "--initial-cluster-state", "new",
            "--logger", "zap", "--log-level", "warn",
        ], os.path.join(self.dir, "etcd.log"))
        wait_started("etcd", self.etcd, lambda: self.etcd_request("/health") is not None)

    def start_apiserver(self):
        """Starts kube-apiserver (again, after kill_apiserver: same port, same etcd)."""
        pki = self.pki
        self.apiserver = _Component("kube-apiserver", [
            os.path.join(self.bin, "kube-apiserver"),
            "--etcd-servers", "http://127.0.0.1:%d" % self.etcd_port,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(self.port), "--insecure-port", "0",
            "--tls-cert-file", os.path.join(pki, "serving.crt"),
            "--tls-private-key-file", os.path.join(pki, "serving.key"),
            "--client-ca-file", os.path.join(pki, "ca.crt"),
            "--token-auth-file", os.path.join(self.dir, "tokens.csv"),
            "--authorization-mode", "RBAC",
            "--service-account-key-file", os.path.join(pki, "sa.pub"),
            "--service-account-signing-key-file", os.path.join(pki, "sa.key"),
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range", SERVICE_CIDR,
            "--cert-dir", os.path.join(self.dir, "apiserver-certs"),
            "--profiling=false", "--logtostderr", "--v=0",
            "--audit-policy-file", self._audit_policy(),
            "--audit-log-path", self.audit_log, "--audit-log-format", "json",
            *self.extra_apiserver_args,
        ], os.path.join(self.dir, "kube-apiserver.log"))
        wait_started("kube-apiserver", self.apiserver, lambda: self._ready())

    def start_controller_manager(self):
        kubeconfig = write_kubeconfig(os.path.join(self.dir, "kcm.kubeconfig"), self.url,
                                      os.path.join(self.pki, "ca.crt"), CONTROLLER_MANAGER_TOKEN)
        self.controller_manager = _Component("kube-controller-manager", [
            os.path.join(self.bin, "kube-controller-manager"),
            "--kubeconfig", kubeconfig, "--controllers", CONTROLLERS,
            "--service-account-private-key-file", os.path.join(self.pki, "sa.key"),
            "--root-ca-file", os.path.join(self.pki, "ca.crt"),
            "--leader-elect=false", "--use-service-account-credentials=false",
            "--port", "0", "--secure-port", "0",
            "--concurrent-gc-syncs", "5", "--logtostderr", "--v=0",
        ], os.path.join(self.dir, "kube-controller-manager.log"))
        # Ready once the service-account controller made the default namespace's account.
        wait_started("kube-controller-manager", self.controller_manager,
                   lambda: self.request("GET", "/api/v1/namespaces/default/serviceaccounts/"
                                        "default")[0] == 200)

    def _audit_policy(self):
        """Every request of the test's clients at Metadata level (who, verb, resource, answer);
        the cluster's own components and the API server's loopback traffic are left out."""
        path = os.path.join(self.dir, "audit-policy.yaml")
        with open(path, "w") as f:
            f.write("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\n"
                    "rules:\n"
                    "  - level: None\n    users: [system:kube-controller-manager, system:apiserver]\n"
                    "  - level: None\n    userGroups: [system:serviceaccounts:kube-system]\n"
                    "  - level: Metadata\n")
        return path

    def audit_events(self, user=None):
        """The audit log's events (dicts: user.username, verb, objectRef, responseStatus.code,
        requestReceivedTimestamp, ...), optionally only those of `user`."""
        events = []
        if not os.path.exists(self.audit_log):
            return events
        with open(self.audit_log, errors="replace") as f:
            for line in f:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # a line being written
                if user is None or event.get("user", {}).get("username") == user:
                    events.append(event)
        return events

    def kill_apiserver(self):
        """kill -9 kube-apiserver (etcd and the controller manager keep running)."""
        self.apiserver.kill()

    def stop(self):
        """Stops every process (controller manager, API server, etcd), by PID."""
        for component in (self.controller_manager, self.apiserver, self.etcd):
            if component is not None:
                component.stop()


    def _ready(self):
        status, body = self.request("GET", "/readyz")
        if status != 200:
            return False
        status, version = self.request("GET", "/version")
        self.version = version
        return status == 200

    # --- talking to it ----------------------------------------------------------------------

    def request(self, method, path, body=None, content_type="application/json", token=None):
        """(status, parsed JSON or raw text) with the admin token unless `token` is given."""
        context = ssl.create_default_context(cafile=os.path.join(self.pki, "ca.crt"))
        connection = http.client.HTTPSConnection("127.0.0.1", self.port, context=context,
                                                 timeout=apiserver_fixture.REQUEST_TIMEOUT_SECONDS)
        headers = {"Authorization": "Bearer " + (token or ADMIN_TOKEN),
                   "Accept": "application/json"}
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            headers["Content-Type"] = content_type
        try:
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            raw = response.read()
        finally:
            connection.close()
        try:
            return response.status, json.loads(raw) if raw else None
        except ValueError:
            return response.status, raw.decode(errors="replace")

    def etcd_request(self, path, body=None):
        """etcd's v3 JSON gateway (e.g. /v3/kv/compaction); the parsed answer, or None."""
        connection = http.client.HTTPConnection("127.0.0.1", self.etcd_port, timeout=10)
        try:
            connection.request("POST" if body is not None else "GET", path,
                               body=json.dumps(body) if body is not None else None)
            response = connection.getresponse()
            raw = response.read()
            if response.status != 200:
                return None
            return json.loads(raw) if raw else {}
        finally:
            connection.close()

    def etcd_revision(self):
        answer = self.etcd_request("/v3/kv/range", {"key": base64.b64encode(b"/").decode(),
                                                    "limit": 1})
        return int(answer["header"]["revision"])

    def compact_etcd(self):
        """Compacts etcd at its current revision (physically): every older resourceVersion
        is gone, so a watch from one of them is answered 410 Gone. Returns the revision."""
        revision = self.etcd_revision()
        if self.etcd_request("/v3/kv/compaction", {"revision": revision, "physical": True}) is None:
            raise AssertionError("etcd compaction at %d failed" % revision)
        return revision

    def kubectl(self, *args, kubeconfig=None, input_text=None, check=False, timeout=60):
        return apiserver_fixture.kubectl("kubectl", kubeconfig or self.kubeconfig, *args,
                                         input_text=input_text, check=check, timeout=timeout)

    def ensure_namespace(self, name):
        status, body = self.request("POST", "/api/v1/namespaces", {
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        if status not in (201, 409):
            raise AssertionError("creating namespace %s: %s %s" % (name, status, body))

    def service_account_kubeconfig(self, namespace, name, path=None, expiration_seconds=3600):
        """Creates ServiceAccount `namespace/name` (if absent), mints a bound token for it with
        the TokenRequest API and writes a kubeconfig that uses it. Returns the path. The
        account has no permissions until the test binds a Role to it."""
        self.ensure_namespace(namespace)
        status, body = self.request("POST", "/api/v1/namespaces/%s/serviceaccounts" % namespace, {
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace}})
        if status not in (201, 409):
            raise AssertionError("creating serviceaccount: %s %s" % (status, body))
        status, body = self.request(
            "POST", "/api/v1/namespaces/%s/serviceaccounts/%s/token" % (namespace, name), {
                "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": expiration_seconds}})
        if status != 201:
            raise AssertionError("TokenRequest: %s %s" % (status, body))
        path = path or os.path.join(self.dir, "sa-%s-%s.kubeconfig" % (namespace, name))
        return write_kubeconfig(path, self.url, os.path.join(self.pki, "ca.crt"),
                                body["status"]["token"], namespace=namespace)

    def logs(self):
        return {c.name: c.log_tail() for c in (self.etcd, self.apiserver, self.controller_manager)
                if c is not None}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", help="data directory (default: a new temporary one)")
    parser.add_argument("--apiserver-arg", action="append", default=[])
    parser.add_argument("--stdin", action="store_true",
                        help="also stop when standard input closes (a parent process died)")
    args = parser.parse_args()
    directory = args.dir
    if directory:
        os.makedirs(directory, exist_ok=True)
    cluster = Cluster.start(directory, extra_apiserver_args=args.apiserver_arg)
    print("API server listening on %s" % cluster.url, flush=True)
    print("kubeconfig: %s" % cluster.kubeconfig, flush=True)
    print("ready", flush=True)
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(True))
    while not stop:
        try:
            readable, _, _ = select.select([sys.stdin] if args.stdin else [], [], [], 0.5)
        except InterruptedError:
            continue
        if readable and not sys.stdin.readline():
            break  # stdin closed: the parent is gone
    cluster.stop()


if __name__ == "__main__":
    main()
