"""Starts the real `ctrlhost apiserver` binary for end-to-end tests and talks to it.

Everything here is bounded: every wait has a deadline, every server a test starts is
killed by its PID when the test process exits (even after a failure or an exception),
and the server binds 127.0.0.1 port 0 with its data dir under $TEST_TMPDIR.

Example:

    server = apiserver_fixture.ApiServer.start()
    status, body = server.api.request("GET", "/api/v1/namespaces")
    result = apiserver_fixture.kubectl("kubectl", server.kubeconfig, "get", "ns")
    server.stop()

Pending server features: a test decorated with `@pending("openapi")` is skipped (with the
reason) when "openapi" is listed in $CTRLHOST_E2E_PENDING; the Bazel targets set it for
the features the server does not have yet (see e2e/apiserver/BUILD.bazel, docs/e2e.md).
"""

import atexit
import base64
import http.client
import json
import os
import resource
import select
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import unittest
import urllib.parse

import yaml

START_TIMEOUT_SECONDS = 20
STOP_TIMEOUT_SECONDS = 10
REQUEST_TIMEOUT_SECONDS = 20
KUBECTL_TIMEOUT_SECONDS = 30

_running = []


def _kill_leftovers():
    for server in list(_running):
        server.kill()


atexit.register(_kill_leftovers)


def _preexec(open_files, preexec_fn):
    """The child's set-up before exec: an open-files limit and/or the caller's own function."""
    if open_files is None and preexec_fn is None:
        return None

    def run():
        if open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))
        if preexec_fn is not None:
            preexec_fn()
    return run


def binary_path():
    """The ctrlhost binary: $CTRLHOST_BIN, else the Bazel runfile."""
    path = os.environ.get("CTRLHOST_BIN")
    if path:
        return path
    return os.path.join(os.environ.get("TEST_SRCDIR", "."), "ctrlhost", "runtime", "exe",
                        "ctrlhost")


def temp_root():
    return os.environ.get("TEST_TMPDIR") or tempfile.gettempdir()


def pending(feature):
    """Skips the test when `feature` is listed in $CTRLHOST_E2E_PENDING (comma separated)."""
    listed = [f.strip() for f in os.environ.get("CTRLHOST_E2E_PENDING", "").split(",")]
    return unittest.skipIf(feature in listed,
                           "pending server feature %r (CTRLHOST_E2E_PENDING; docs/e2e.md)" %
                           feature)


class ApiClient:
    """A minimal HTTPS client for the API server using the kubeconfig's CA and token.

    One connection per request, so a test can send anything (bad bodies, no token) and
    a failed request never poisons the next one.
    """

    def __init__(self, kubeconfig_path):
        with open(kubeconfig_path, encoding="utf-8") as f:
            config = yaml.safe_load(f)
        cluster = config["clusters"][0]["cluster"]
        self.url = cluster["server"]
        self.token = config["users"][0]["user"]["token"]
        parsed = urllib.parse.urlparse(self.url)
        self.host, self.port = parsed.hostname, parsed.port
        self.ca_path = os.path.join(os.path.dirname(kubeconfig_path), "e2e-ca-from-kubeconfig.crt")
        with open(self.ca_path, "wb") as f:
            f.write(base64.b64decode(cluster["certificate-authority-data"]))
        self.context = ssl.create_default_context(cafile=self.ca_path)

    def connect(self, timeout=REQUEST_TIMEOUT_SECONDS):
        return http.client.HTTPSConnection(self.host, self.port, context=self.context,
                                           timeout=timeout)

    def raw_request(self, method, path, body=None, content_type="application/json",
                    token=True, headers=None):
        """Returns (status, headers dict with lower-case names, body bytes)."""
        all_headers = {"Accept": "application/json"}
        if token:
            all_headers["Authorization"] = "Bearer " + self.token
        if body is not None:
            if not isinstance(body, (bytes, str)):
                body = json.dumps(body)
            if isinstance(body, str):
                body = body.encode("utf-8")
            if content_type:
                all_headers["Content-Type"] = content_type
        all_headers.update(headers or {})
        connection = self.connect()
        try:
            connection.request(method, path, body=body, headers=all_headers)
            response = connection.getresponse()
            data = response.read()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, data
        finally:
            connection.close()

    def request(self, method, path, body=None, content_type="application/json", token=True,
                headers=None):
        """Returns (status, parsed JSON body or None when the body is not JSON)."""
        status, _, data = self.raw_request(method, path, body, content_type, token, headers)
        try:
            return status, json.loads(data) if data else None
        except ValueError:
            return status, None

    def ensure_namespace(self, name):
        status, body = self.request("POST", "/api/v1/namespaces",
                                    {"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": name}})
        if status not in (201, 409):
            raise AssertionError("creating namespace %s: %s %s" % (name, status, body))

    def watch(self, path, timeout=REQUEST_TIMEOUT_SECONDS):
        """Starts a watch; returns a WatchStream (status and the events as they come)."""
        return WatchStream(self, path, timeout)


class WatchStream:
    """One open watch request; `next_event(deadline)` returns the next decoded event."""

    def __init__(self, client, path, timeout):
        self.connection = client.connect(timeout=timeout)
        self.connection.request("GET", path, headers={
            "Accept": "application/json", "Authorization": "Bearer " + client.token})
        # A watch's answer says `Connection: close`, upon which http.client lets go of the
        # connection's socket (the response keeps reading it): keep it for timeouts and close.
        self.sock = self.connection.sock
        self.response = self.connection.getresponse()
        self.status = self.response.status
        self.headers = {k.lower(): v for k, v in self.response.getheaders()}

    def body(self):
        return json.loads(self.response.read())

    def next_event(self, timeout=REQUEST_TIMEOUT_SECONDS):
        """The next event as a dict, or None when the stream ended or `timeout` passed."""
        self.sock.settimeout(timeout)
        try:
            line = self.response.readline()
        except (socket.timeout, TimeoutError):
            return None
        if not line:
            return None
        return json.loads(line)

    def events_until(self, predicate, timeout=REQUEST_TIMEOUT_SECONDS):
        """Reads events until predicate(event) is true; returns all of them (deadline bound)."""
        deadline = time.monotonic() + timeout
        events = []
        while time.monotonic() < deadline:
            event = self.next_event(max(0.1, deadline - time.monotonic()))
            if event is None:
                break
            events.append(event)
            if predicate(event):
                return events
        raise AssertionError("watch condition not met before the deadline; events: %s" %
                             [(e.get("type"), e.get("object", {}).get("metadata", {})
                               .get("name")) for e in events])

    def close(self):
        """Idempotent; safe after the server died."""
        sock = self.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.connection.close()


class OwnedProcess:
    """A child process the test owns: `running()` lists it until it is stopped, and every
    process still listed is killed by its PID when the test process exits."""

    def alive(self):
        return self.process.poll() is None

    def stop(self):
        """SIGTERM, bounded wait, then SIGKILL. Returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self.kill()
        self._forget()
        return self.process.returncode

    def kill(self):
        """kill -9 by PID (no graceful shutdown) and reap it."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            try:
                self.process.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                pass
        self._forget()

    def _cleanup(self):
        """Extra cleanup of subclasses once the process is gone."""

    def _forget(self):
        if self.process.stdout:
            self.process.stdout.close()
        self._cleanup()
        if self in _running:
            _running.remove(self)


def own(process_object):
    """Lists `process_object` (an OwnedProcess) for the exit-time cleanup."""
    _running.append(process_object)


def disown(process_object):
    if process_object in _running:
        _running.remove(process_object)


class ApiServer(OwnedProcess):
    """A running `ctrlhost apiserver` process owned by the test."""

    def __init__(self, process, data_dir, url, kubeconfig, stderr_path):
        self.process = process
        self.data_dir = data_dir
        self.url = url
        self.kubeconfig = kubeconfig
        self.stderr_path = stderr_path
        self.api = ApiClient(kubeconfig)

    @classmethod
    def start(cls, data_dir=None, extra_args=(), open_files=None, preexec_fn=None):
        """Starts the server on a free port and waits (bounded) until it serves.

        `open_files` sets the server's soft and hard limit of open files (RLIMIT_NOFILE);
        `preexec_fn` runs in the child before exec (e.g. to set another resource limit)."""
        if data_dir is None:
            data_dir = tempfile.mkdtemp(prefix="apiserver-", dir=temp_root())
        stderr_path = os.path.join(data_dir, "..", os.path.basename(data_dir) + ".stderr")
        stderr_file = open(stderr_path, "ab")
        process = subprocess.Popen(
            [binary_path(), "apiserver", "--data-dir", data_dir, "--port", "0",
             "--print-kubeconfig-path", *extra_args],
            stdout=subprocess.PIPE, stderr=stderr_file, stdin=subprocess.DEVNULL,
            preexec_fn=_preexec(open_files, preexec_fn))
        stderr_file.close()
        placeholder = cls.__new__(cls)
        placeholder.process = process
        _running.append(placeholder)
        url = kubeconfig = None
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        output = b""
        while time.monotonic() < deadline and kubeconfig is None:
            ready, _, _ = select.select([process.stdout], [], [], 0.2)
            if ready:
                chunk = os.read(process.stdout.fileno(), 4096)
                if not chunk:
                    break
                output += chunk
                for line in output.decode(errors="replace").splitlines():
                    if line.startswith("API server listening on "):
                        url = line.split()[-1]
                    elif line.startswith("kubeconfig: "):
                        kubeconfig = line[len("kubeconfig: "):].strip()
            elif process.poll() is not None:
                break
        if kubeconfig is None or url is None:
            placeholder.kill()
            with open(stderr_path, errors="replace") as f:
                raise AssertionError("ctrlhost apiserver did not start (exit %s): %s\n%s" %
                                     (process.poll(), output, f.read()[-4000:]))
        _running.remove(placeholder)
        server = cls(process, data_dir, url, kubeconfig, stderr_path)
        _running.append(server)
        return server

    def stderr(self):
        with open(self.stderr_path, errors="replace") as f:
            return f.read()

def kubectl(binary, kubeconfig, *args, input_text=None, timeout=KUBECTL_TIMEOUT_SECONDS,
            check=False):
    """Runs kubectl with only our kubeconfig; returns the CompletedProcess (text)."""
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    # kubectl caches discovery under $HOME/.kube; keep it per test run and writable.
    env["HOME"] = temp_root()
    result = subprocess.run([binary, "--kubeconfig", kubeconfig, *args], input=input_text,
                            capture_output=True, text=True, timeout=timeout, env=env)
    if check and result.returncode != 0:
        raise AssertionError("kubectl %s failed (%d):\nstdout: %s\nstderr: %s" %
                             (" ".join(args), result.returncode, result.stdout, result.stderr))
    return result
