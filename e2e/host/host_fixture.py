"""Starts the real `ctrlhost run` with real plugin processes for end-to-end tests.

The host runs with its embedded API server (127.0.0.1, port 0, data under $TEST_TMPDIR), or,
when $CTRLHOST_E2E_SERVER is "kube", against a real Kubernetes API server (e2e/kube: etcd,
kube-apiserver and kube-controller-manager started for the test process); the metrics/health
endpoints are on 127.0.0.1 port 0. `start_host` picks the server; the same test file runs
against both (two Bazel targets, see e2e/host/BUILD.bazel). Every wait is bounded, and every process a
test starts is stopped by its PID when the test process exits (even after a failure).

Example:

    host = host_fixture.Host.start(operator_yaml)
    host.kubectl("apply", "-f", crd_path, check=True)
    host.wait_for(lambda: host.get("/api/v1/namespaces/default/configmaps/x"), "configmap x")
    host.stop()
"""

import json
import os
import re
import select
import subprocess
import tempfile
import time
import unittest
import urllib.request

from e2e.apiserver import apiserver_fixture

START_TIMEOUT_SECONDS = 60
STOP_TIMEOUT_SECONDS = 20
WAIT_TIMEOUT_SECONDS = 60

# Host.metric's `default` when none is given: an absent series fails.
_NO_DEFAULT = object()


def _existing_series(text, name):
    """What /metrics has instead of `name`: its series if the metric exists with other labels,
    else every metric name, for Host.metric's error."""
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    same = [line for line in samples
            if line.startswith(name) and line[len(name):len(name) + 1] in ("{", " ")]
    if same:
        return "series of %s:\n  %s" % (name, "\n  ".join(same))
    names = sorted({re.split(r"[{ ]", line, maxsplit=1)[0] for line in samples})
    return "no series of that name; the metrics are:\n  %s" % "\n  ".join(names)

def runfile(path):
    """A file from the Bazel runfiles tree (workspace-relative path), or from the source tree."""
    root = os.environ.get("TEST_SRCDIR")
    if root:
        candidate = os.path.join(root, "ctrlhost", path)
        if os.path.exists(candidate):
            return candidate
    return path


def kubectl_binary():
    return os.environ.get("CTRLHOST_E2E_KUBECTL", "kubectl")


class Host(apiserver_fixture.OwnedProcess):
    """A running `ctrlhost run` process owned by the test."""

    def __init__(self, process, data_dir, url, kubeconfig, metrics_url, log_path, output,
                 admin_socket=None):
        self.process = process
        self.data_dir = data_dir
        self.url = url
        self.kubeconfig = kubeconfig
        self.metrics_url = metrics_url
        self.log_path = log_path
        self.output = output
        self.admin_socket = admin_socket
        self.api = apiserver_fixture.ApiClient(kubeconfig)

    @classmethod
    def start(cls, operator_yaml, data_dir=None, extra_args=(), env=None, kubeconfig=None,
              wait_ready=True, default_admin_socket=False):
        """Writes `operator_yaml` to a file, starts the host and waits until it is ready.

        With `kubeconfig`, the host works against that cluster instead of its embedded API
        server. With wait_ready=False it returns once the host printed its metrics address
        (e.g. while the API server it needs is down). With default_admin_socket the host
        gets no --admin-socket and uses its default, DATA_DIR/admin.sock (`data_dir` must then
        be short: a Unix socket address holds 107 bytes)."""
        if data_dir is None:
            data_dir = tempfile.mkdtemp(prefix="host-", dir=apiserver_fixture.temp_root())
        operator_path = os.path.join(data_dir, "operator.yaml")
        with open(operator_path, "w", encoding="utf-8") as f:
            f.write(operator_yaml)
        log_path = data_dir + ".log"
        # The admin socket needs a short path (a Unix socket address holds 107 bytes).
        if default_admin_socket:
            admin_socket = os.path.join(data_dir, "admin.sock")
            admin_args = []
        else:
            admin_dir = tempfile.mkdtemp(prefix="ctrlhost-admin-", dir="/tmp")
            admin_socket = os.path.join(admin_dir, "admin.sock")
            admin_args = ["--admin-socket", admin_socket]
        log_file = open(log_path, "ab")
        process_env = dict(os.environ)
        process_env.pop("KUBECONFIG", None)
        process_env.update(env or {})
        server_args = ["--kubeconfig", kubeconfig] if kubeconfig else ["--apiserver-port", "0"]
        # Plugins run from Bazel's output tree, which only its owner can read: as root the host
        # would run them as uid 65532. The malicious-plugin test sets its own --plugin-user.
        if not any(str(arg).startswith("--plugin-user") for arg in extra_args):
            server_args += ["--plugin-user", "host"]
        process = subprocess.Popen(
            [apiserver_fixture.binary_path(), "run", "-f", operator_path, "--data-dir", data_dir,
             *server_args, "--metrics-addr", "127.0.0.1:0",
             *admin_args, *extra_args],
            stdout=subprocess.PIPE, stderr=log_file, stdin=subprocess.DEVNULL, env=process_env)
        log_file.close()
        placeholder = cls.__new__(cls)
        placeholder.process = process
        placeholder.admin_socket = admin_socket
        apiserver_fixture.own(placeholder)
        url = metrics_url = None
        ready = False
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        output = b""
        while time.monotonic() < deadline and not ready:
            readable, _, _ = select.select([process.stdout], [], [], 0.2)
            if readable:
                chunk = os.read(process.stdout.fileno(), 4096)
                if not chunk:
                    break
                output += chunk
                for line in output.decode(errors="replace").splitlines():
                    if line.startswith("API server listening on ") or (
                            line.startswith("API server: ") and kubeconfig):
                        url = line.split()[-1]
                    elif line.startswith("kubeconfig: "):
                        kubeconfig = line[len("kubeconfig: "):].strip()
                    elif line.startswith("metrics: "):
                        metrics_url = line.split()[-1]
                    elif line.startswith("ready (refused:"):
                        # Ready without a plugin it refused: a failure for a fixture's caller
                        # (a test that wants a refused plugin passes wait_ready=False).
                        break
                    elif line.startswith("ready"):
                        ready = True
                if metrics_url and not wait_ready:
                    ready = True
            elif process.poll() is not None:
                break
        if not ready or kubeconfig is None:
            placeholder.kill()
            with open(log_path, errors="replace") as f:
                raise AssertionError("ctrlhost run did not become ready (exit %s): %s\n%s" %
                                     (process.poll(), output.decode(errors="replace"),
                                      f.read()[-6000:]))
        apiserver_fixture.disown(placeholder)
        host = cls(process, data_dir, url, kubeconfig, metrics_url, log_path,
                   output.decode(errors="replace"), admin_socket)
        apiserver_fixture.own(host)
        return host

    # --- talking to it --------------------------------------------------------------------

    def kubectl(self, *args, input_text=None, check=False,
                timeout=apiserver_fixture.KUBECTL_TIMEOUT_SECONDS):
        return apiserver_fixture.kubectl(kubectl_binary(), self.kubeconfig, *args,
                                         input_text=input_text, check=check, timeout=timeout)

    def ctrlhost(self, *args, timeout=120):
        """Runs a `ctrlhost` admin command (plugin, dump) against this host's admin socket."""
        return subprocess.run([apiserver_fixture.binary_path(), *args,
                               "--admin-socket", self.admin_socket],
                              capture_output=True, text=True, timeout=timeout)

    def get(self, path):
        """The object at `path` as a dict, or None on 404."""
        status, body = self.api.request("GET", path)
        if status == 404:
            return None
        if status != 200:
            raise AssertionError("GET %s: %s %s" % (path, status, body))
        return body

    def metrics(self):
        """The /metrics text."""
        with urllib.request.urlopen(self.metrics_url, timeout=10) as response:
            return response.read().decode()

    def metric(self, name, default=_NO_DEFAULT, **labels):
        """Sum of the samples of `name` whose labels include `labels`.

        No such series is an AssertionError naming the metric, the labels and the series that
        do exist: a renamed metric or label must fail a check such as "no relist", not read as
        0. Only a test that reads a counter before its first increment (a labelled series
        appears at its first increment) passes `default`, which is then returned instead.
        """
        total = 0.0
        found = False
        pattern = re.compile(r"^%s(\{[^}]*\})? (\S+)$" % re.escape(name))
        text = self.metrics()
        for line in text.splitlines():
            match = pattern.match(line)
            if not match:
                continue
            label_text = match.group(1) or ""
            if all('%s="%s"' % (k, v) in label_text for k, v in labels.items()):
                total += float(match.group(2))
                found = True
        if found:
            return total
        if default is not _NO_DEFAULT:
            return default
        wanted = ",".join('%s="%s"' % item for item in sorted(labels.items()))
        raise AssertionError("metric %s%s: no such series at %s\n%s" % (
            name, "{%s}" % wanted if wanted else "", self.metrics_url,
            _existing_series(text, name)))

    def endpoint(self, path):
        """GET on the metrics server (e.g. /readyz, /debug/dump): (status, text)."""
        base = self.metrics_url.rsplit("/metrics", 1)[0]
        try:
            with urllib.request.urlopen(base + path, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def wait_for(self, condition, what, timeout=WAIT_TIMEOUT_SECONDS):
        """Polls `condition()` until it returns a truthy value (returned); bounded."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError("ctrlhost exited (%s) while waiting for %s\n%s" %
                                     (self.process.returncode, what, self.log()[-6000:]))
            last = condition()
            if last:
                return last
            time.sleep(0.1)
        raise AssertionError("timed out after %ss waiting for %s (last: %s)\nhost log tail:\n%s" %
                             (timeout, what, json.dumps(last)[:2000] if last else last,
                              self.log()[-6000:]))

    # --- lifecycle (stop, kill, alive: apiserver_fixture.OwnedProcess) --------------------

    def _cleanup(self):
        admin_socket = getattr(self, "admin_socket", None)
        if admin_socket:
            for remove in (os.unlink, lambda p: os.rmdir(os.path.dirname(p))):
                try:
                    remove(admin_socket)
                except OSError:
                    pass


# --- which API server ----------------------------------------------------------------------

_cluster = None


def server_kind():
    """"embedded" (the host's own API server) or "kube" (real Kubernetes), from
    $CTRLHOST_E2E_SERVER."""
    kind = os.environ.get("CTRLHOST_E2E_SERVER", "embedded")
    if kind not in ("embedded", "kube"):
        raise AssertionError("CTRLHOST_E2E_SERVER must be embedded or kube, not %r" % kind)
    return kind


def real_kube():
    return server_kind() == "kube"


def cluster():
    """The real Kubernetes cluster of this test process (started on first use), or None when
    the tests run against the embedded server."""
    global _cluster
    if not real_kube():
        return None
    if _cluster is None:
        from e2e.kube import kube_fixture  # pylint: disable=import-outside-toplevel
        _cluster = kube_fixture.Cluster.start()
    return _cluster


def shared_server(crd_path, group_version, timeout=60, apiserver_args=()):
    """For tests that run several hosts against one server: the real cluster of this test
    process (CTRLHOST_E2E_SERVER=kube) or a standalone `ctrlhost apiserver` (started with
    `apiserver_args`), with the CRD at `crd_path` applied and `/apis/<group_version>` served.
    Returns (server, kubeconfig, api): `server` is None for the real cluster, else the caller
    stops it."""
    if real_kube():
        server, kubeconfig = None, cluster().kubeconfig
    else:
        server = apiserver_fixture.ApiServer.start(extra_args=apiserver_args)
        kubeconfig = server.kubeconfig
    api = apiserver_fixture.ApiClient(kubeconfig)
    result = apiserver_fixture.kubectl(kubectl_binary(), kubeconfig, "apply", "-f", crd_path)
    if result.returncode != 0:
        if server is not None:
            server.stop()
        raise AssertionError("kubectl apply -f %s: %s" % (crd_path, result.stderr))
    deadline = time.monotonic() + timeout
    while api.request("GET", "/apis/" + group_version)[0] != 200:
        if time.monotonic() > deadline:
            if server is not None:
                server.stop()
            raise AssertionError("/apis/%s not served after %ss" % (group_version, timeout))
        time.sleep(0.1)
    return server, kubeconfig, api


def chaos_records(directory, namespace=None):
    """The chaos plugin's record log in `directory` (e2e/host/chaos: one line per step,
    "<ns>/<name> <attempt> <what> <$CHAOS_VERSION> <pid>"): [(key, what, version)] in append
    order, only `namespace`'s keys when given."""
    try:
        with open(os.path.join(directory, "log"), encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        fields = line.split(" ")
        if len(fields) >= 4 and (namespace is None or fields[0].startswith(namespace + "/")):
            out.append((fields[0], fields[2], fields[3]))
    return out


class ChaosHostTest(unittest.TestCase):
    """Base of the tests that run one host with the chaos plugin: the subclass's OPERATOR (a
    template with {chaos} and {dir}) is started once per class against this run's server, with
    the Chaos CRD applied; `cls.dir` is the plugin's record-log directory."""

    OPERATOR = None

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix=cls.__name__ + "-", dir=os.environ.get("TEST_TMPDIR"))
        cls.host = start_host(cls.OPERATOR.format(chaos=runfile("e2e/host/chaos/chaos"),
                                                  dir=cls.dir))
        cls.host.kubectl("apply", "-f", runfile("e2e/host/chaos/crd.yaml"), check=True)

    @classmethod
    def tearDownClass(cls):
        code = cls.host.stop()
        assert code == 0, "ctrlhost exited %s\n%s" % (code, cls.host.log()[-4000:])

    def create(self, name, mode):
        """Applies Chaos default/`name` with spec.mode `mode`."""
        body = {"apiVersion": "e2e.ctrlhost.dev/v1", "kind": "Chaos",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"mode": mode, "data": {"k": name}}}
        self.host.kubectl("apply", "-f", "-", input_text=json.dumps(body), check=True)


class ChaosServerTest(unittest.TestCase):
    """Base of the tests that run several hosts with the chaos plugin against one server
    (leader election, sharding, per-operator Leases): shared_server() with the Chaos CRD once
    per class, `cls.chaos` the plugin's path, and a polling wait()."""

    apiserver_args = ()  # of the standalone `ctrlhost apiserver` (not for a real cluster)

    @classmethod
    def setUpClass(cls):
        cls.server, cls.kubeconfig, cls.api = shared_server(
            runfile("e2e/host/chaos/crd.yaml"), "e2e.ctrlhost.dev/v1",
            apiserver_args=cls.apiserver_args)
        cls.chaos = runfile("e2e/host/chaos/chaos")

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            cls.server.stop()

    wait_interval = 0.05  # seconds between two polls of wait()

    @classmethod
    def wait(cls, condition, what, timeout=60):
        """`condition()`'s first truthy value within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = condition()
            if last:
                return last
            time.sleep(cls.wait_interval)
        raise AssertionError("timed out after %ss waiting for %s (last: %r)" %
                             (timeout, what, last))


def start_host(operator_yaml, **kwargs):
    """Starts the host against the server this test run is for (see server_kind())."""
    if real_kube() and "kubeconfig" not in kwargs:
        kwargs["kubeconfig"] = cluster().kubeconfig
    return Host.start(operator_yaml, **kwargs)
