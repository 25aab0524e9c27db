"""End-to-end tests of the real `ctrlhost` binary: exit codes, stdout/stderr, messages.

Each test runs the binary as a subprocess with a time limit and checks what a user sees.
"""

import json
import os
import selectors
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

from tools.internal import bazel_unittest

BINARY = os.path.join(os.environ.get("TEST_SRCDIR", "."), "ctrlhost", "runtime", "exe", "ctrlhost")
# A real plugin whose primary kind (ConfigMap) every API server serves: `run` gets ready with it.
REPLICATOR = os.path.join(os.environ.get("TEST_SRCDIR", "."), "ctrlhost", "plugins",
                          "configmap-replicator", "configmap-replicator")
TIMEOUT_SECONDS = 30


def ctrlhost(*args, env=None):
    full_env = dict(os.environ)
    full_env.pop("KUBECONFIG", None)
    if env:
        full_env.update(env)
    return subprocess.run([BINARY, *args], capture_output=True, text=True,
                          timeout=TIMEOUT_SECONDS, env=full_env,
                          cwd=os.environ.get("TEST_TMPDIR", tempfile.gettempdir()))


class HelpAndVersionTest(unittest.TestCase):

    def test_top_level_help(self):
        for args in (["--help"], ["-h"], ["help"]):
            result = ctrlhost(*args)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertTrue(result.stdout.startswith("Usage: ctrlhost COMMAND"), result.stdout)
            for command in ("run", "apiserver", "plugin", "dump", "version", "help"):
                self.assertIn("\n  %s " % command, result.stdout)
            self.assertEqual(result.stderr, "")

    def test_every_command_has_help(self):
        for command in (["run"], ["apiserver"], ["plugin"], ["plugin", "list"],
                        ["plugin", "swap"], ["dump"], ["rbac"], ["version"]):
            result = ctrlhost(*command, "--help")
            self.assertEqual(result.returncode, 0, (command, result.stderr))
            self.assertIn("Usage: ctrlhost " + " ".join(command), result.stdout)
            if command != ["plugin"]:
                self.assertIn("--log-level", result.stdout)

    def test_help_command_forwards(self):
        self.assertEqual(ctrlhost("help", "run").stdout, ctrlhost("run", "--help").stdout)
        self.assertEqual(ctrlhost("help", "plugin", "swap").stdout,
                         ctrlhost("plugin", "swap", "--help").stdout)

    def test_version(self):
        result = ctrlhost("version")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("ctrlhost 0.1.0-dev\n", result.stdout)
        self.assertIn("plugin protocols: v1alpha1\n", result.stdout)
        self.assertRegex(result.stdout, r"gRPC: \d+\.\d+")
        self.assertRegex(result.stdout, r"protobuf: \d+\.\d+")


class UsageErrorTest(unittest.TestCase):

    def test_no_command(self):
        result = ctrlhost()
        self.assertEqual(result.returncode, 2)
        self.assertIn('error: missing command for "ctrlhost"', result.stderr)
        self.assertEqual(result.stdout, "")

    def test_unknown_command(self):
        result = ctrlhost("rnu")
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stderr,
                         'error: unknown command "rnu" for "ctrlhost" (did you mean run?)\n'
                         'run "ctrlhost --help" for usage\n')
        self.assertEqual(result.stdout, "")

    def test_unknown_flag(self):
        result = ctrlhost("run", "--kubconfig", "x")
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stderr,
                         'error: unknown flag --kubconfig for "ctrlhost run" '
                         '(did you mean --kubeconfig?)\n'
                         'run "ctrlhost run --help" for usage\n')

    def test_bad_value(self):
        result = ctrlhost("apiserver", "--port", "70000")
        self.assertEqual(result.returncode, 2)
        self.assertIn("error: --port must be between 0 and 65535, got 70000\n", result.stderr)
        result = ctrlhost("apiserver", "--port", "abc")
        self.assertIn('error: invalid value "abc" for --port: not an integer\n', result.stderr)

    def test_run_missing_file(self):
        result = ctrlhost("run", "-f", "missing.yaml")
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stderr,
                         'error: --file "missing.yaml": no such file or directory\n'
                         'run "ctrlhost run --help" for usage\n')

    def test_run_without_file(self):
        result = ctrlhost("run")
        self.assertEqual(result.returncode, 2)
        self.assertIn('missing required flag --file for "ctrlhost run"', result.stderr)


class AdminClientTest(unittest.TestCase):

    def test_plugin_list_without_a_host(self):
        data_dir = os.path.join(os.environ.get("TEST_TMPDIR", tempfile.gettempdir()), "nohost")
        result = ctrlhost("plugin", "list", "--data-dir", data_dir, "--timeout", "3s")
        self.assertEqual(result.returncode, 1)
        self.assertEqual(result.stderr,
                         'error: cannot reach the ctrlhost admin API at unix://%s/admin.sock: '
                         'is "ctrlhost run" running?\n' % data_dir)
        self.assertEqual(result.stdout, "")

    def test_dump_without_a_host(self):
        result = ctrlhost("dump", "--admin-socket", "/nonexistent/admin.sock")
        self.assertEqual(result.returncode, 1)
        self.assertIn("cannot reach the ctrlhost admin API at unix:///nonexistent/admin.sock",
                      result.stderr)

    def test_swap_usage_error(self):
        result = ctrlhost("plugin", "swap", "web")
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stderr,
                         "error: one of --command, --endpoint, --promote-canary, "
                         "--abort-canary or --from-shadow is required\n"
                         'run "ctrlhost plugin swap --help" for usage\n')


class RunPreviewTest(unittest.TestCase):

    def test_empty_operator_file_is_refused(self):
        # Regression: an empty file was accepted and ran nothing.
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as directory:
            operator = os.path.join(directory, "op.yaml")
            open(operator, "w").close()
            for extra in ([], ["--preview"]):
                result = ctrlhost("run", "-f", operator, *extra)
                self.assertEqual(result.returncode, 1, result.stderr)
                self.assertIn(operator + ": no Operator document", result.stderr)
                self.assertEqual(result.stdout, "")

    def test_run_directory_preview(self):
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as directory:
            for name in ("b.yaml", "a.yml", "notes.txt"):
                with open(os.path.join(directory, name), "w") as f:
                    f.write("apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\n"
                            "metadata: {name: op-%s}\n"
                            "spec:\n  plugins:\n  - name: web\n    exec: {command: /bin/true}\n"
                            % name.split(".")[0])
            result = ctrlhost("run", "-f", directory, "--preview")
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("preview", result.stdout)
            self.assertIn("API server: embedded", result.stdout)
            a = result.stdout.index(os.path.join(directory, "a.yml"))
            b = result.stdout.index(os.path.join(directory, "b.yaml"))
            self.assertLess(a, b)
            self.assertNotIn("notes.txt", result.stdout)

    def test_run_with_kubeconfig_environment(self):
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as directory:
            operator = os.path.join(directory, "op.yaml")
            config = os.path.join(directory, "config")
            with open(operator, "w") as f:
                f.write("apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: op}\n"
                        "spec:\n  plugins:\n  - name: web\n    exec: {command: /bin/true}\n")
            open(config, "w").close()
            result = ctrlhost("run", "-f", operator, "--preview", env={"KUBECONFIG": config})
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("the cluster of kubeconfig %s (from $KUBECONFIG)" % config,
                          result.stdout)


def end(process):
    """Kills `process` if it still runs (a test that failed half-way) and closes its pipes."""
    if process.poll() is None:
        process.kill()
        process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


def read_lines_until(process, prefix, timeout=TIMEOUT_SECONDS):
    """Stdout lines of `process` up to and including the first starting with `prefix`.

    Raw reads: a buffered readline() could hold lines the selector no longer sees."""
    lines = []
    pending = b""
    deadline = time.monotonic() + timeout
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    while time.monotonic() < deadline:
        if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
            break
        chunk = os.read(process.stdout.fileno(), 65536)
        if not chunk:
            break
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            lines.append(line.decode() + "\n")
            if line.startswith(prefix.encode()):
                return lines
    return lines


class RbacTest(unittest.TestCase):

    def operator(self, directory, command, namespaces=None):
        path = os.path.join(directory, "op.yaml")
        with open(path, "w") as f:
            f.write("apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: rep}\n"
                    "spec:\n  plugins:\n  - name: replicator\n    exec: {command: %s}\n"
                    % command)
            if namespaces:
                f.write("  controllers:\n  - name: configmap-replicator\n"
                        "    namespaces: [%s]\n" % ", ".join(namespaces))
        return path

    def test_rules_from_the_plugins_declarations(self):
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as directory:
            result = ctrlhost("rbac", "-f", self.operator(directory, REPLICATOR),
                              "--service-account", "host", "-n", "ops")
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("kind: ClusterRole\n", result.stdout)
            self.assertIn("kind: ClusterRoleBinding\n", result.stdout)
            self.assertIn("name: host\n    namespace: ops", result.stdout)
            self.assertIn("- configmaps", result.stdout)
            self.assertIn("- delete", result.stdout)  # the replicator prunes (deleteAbsent)
            self.assertNotIn("- update", result.stdout)
            # The replicator's primary (Namespace) is cluster-scoped: its events go to "default".
            self.assertIn("kind: Role\n", result.stdout)
            self.assertIn("namespace: default\n", result.stdout)
            # A namespaces override does not narrow a cluster-scoped primary (the host ignores
            # it there, and so does the role).
            narrowed = ctrlhost("rbac", "-f", self.operator(directory, REPLICATOR, ["a"]),
                                "--service-account", "host", "-n", "ops")
            self.assertEqual(narrowed.returncode, 0, narrowed.stderr)
            self.assertEqual(narrowed.stdout, result.stdout)

    def test_a_plugin_that_does_not_start_is_named(self):
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as directory:
            result = ctrlhost("rbac", "-f", self.operator(directory, "/nonexistent/plugin"),
                              "--timeout", "5s")
            self.assertEqual(result.returncode, 1, result.stderr)
            self.assertIn("error: operator rep: plugin replicator", result.stderr)
            self.assertEqual(result.stdout, "")

    def test_usage_errors(self):
        self.assertEqual(ctrlhost("rbac").returncode, 2)
        result = ctrlhost("rbac", "-f", "x.yaml", "--name", "")
        self.assertEqual(result.returncode, 2)
        self.assertIn("--name must not be empty", result.stderr)


class ApiServerOutputTest(unittest.TestCase):

    def serve(self, *flags):
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as directory:
            data_dir = os.path.join(directory, "data")
            process = subprocess.Popen([BINARY, "apiserver", "--data-dir", data_dir,
                                        "--port", "0", *flags],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            try:
                lines = read_lines_until(process, "try: ")
                process.send_signal(signal.SIGTERM)
                self.assertEqual(process.wait(timeout=TIMEOUT_SECONDS), 0)
            finally:
                end(process)
            return lines, os.path.join(data_dir, "kubeconfig")

    def test_kubeconfig_line_only_with_the_flag(self):
        lines, _ = self.serve()
        self.assertTrue(lines[0].startswith("API server listening on https://127.0.0.1:"), lines)
        self.assertFalse([l for l in lines if l.startswith("kubeconfig: ")], lines)
        lines, kubeconfig = self.serve("--print-kubeconfig-path")
        self.assertEqual(lines[1], "kubeconfig: %s\n" % kubeconfig, lines)


class RunEmbeddedApiServerTest(unittest.TestCase):

    def test_run_without_kubeconfig_serves_the_embedded_api_server(self):
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as directory:
            operator = os.path.join(directory, "op.yaml")
            with open(operator, "w") as f:
                f.write("apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: op}\n"
                        "spec:\n  plugins:\n  - name: replicator\n"
                        "    exec: {command: %s}\n" % REPLICATOR)
            data_dir = os.path.join(directory, "data")
            env = dict(os.environ)
            env.pop("KUBECONFIG", None)
            process = subprocess.Popen(
                [BINARY, "run", "-f", operator, "--data-dir", data_dir, "--apiserver-port", "0",
                 "--metrics-addr", "127.0.0.1:0"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            try:
                lines = read_lines_until(process, "ready")
                url = next((l.split()[-1] for l in lines
                            if l.startswith("API server listening on ")), None)
                self.assertIsNotNone(url, "no listening line; stdout: %r" % lines)
                self.assertIn("kubeconfig: " + os.path.join(data_dir, "kubeconfig") + "\n", lines)
                self.assertTrue([l for l in lines if l.startswith("metrics: http://127.0.0.1:")],
                                lines)
                context = ssl.create_default_context(cafile=os.path.join(data_dir, "ca.crt"))
                with open(os.path.join(data_dir, "token")) as f:
                    token = f.read().strip()
                request = urllib.request.Request(url + "/api/v1/namespaces",
                                                 headers={"Authorization": "Bearer " + token})
                with urllib.request.urlopen(request, context=context, timeout=10) as response:
                    names = [n["metadata"]["name"] for n in json.load(response)["items"]]
                self.assertIn("default", names)
                self.assertTrue(os.path.exists(os.path.join(data_dir, "kubeconfig")))
                process.send_signal(signal.SIGTERM)
                self.assertEqual(process.wait(timeout=TIMEOUT_SECONDS), 0,
                                 process.stderr.read().decode(errors="replace"))
            finally:
                end(process)


class RunWithEveryPluginRefusedTest(unittest.TestCase):
    """First contact (a Go plugin's author): a plugin the host refused (here: a command that does
    not exist) left `ctrlhost run` waiting for ever without printing "ready", and a script that
    waited for that line hung. When every plugin is refused the host stops and fails, naming
    each plugin and why."""

    def test_run_fails_when_every_plugin_is_refused(self):
        # Under /tmp: the admin socket's address (DATA_DIR/admin.sock) must fit 107 bytes.
        with tempfile.TemporaryDirectory(dir="/tmp") as directory:
            operator = os.path.join(directory, "op.yaml")
            with open(operator, "w") as f:
                f.write("apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: op}\n"
                        "spec:\n  plugins:\n"
                        "  - {name: gone, exec: {command: /nonexistent/plugin}}\n"
                        "  - {name: lost, exec: {command: no-such-plugin-command}}\n")
            env = dict(os.environ)
            env.pop("KUBECONFIG", None)
            started = time.monotonic()
            result = subprocess.run(
                [BINARY, "run", "-f", operator, "--data-dir", os.path.join(directory, "data"),
                 "--apiserver-port", "0", "--metrics-addr", "127.0.0.1:0"],
                capture_output=True, text=True, timeout=TIMEOUT_SECONDS, env=env)
            self.assertEqual(result.returncode, 1, result.stderr)
            self.assertLess(time.monotonic() - started, TIMEOUT_SECONDS)
            self.assertNotIn("ready", result.stdout.splitlines())
            self.assertIn("error: every plugin was refused and none is restarted, so nothing "
                          "can run:\n", result.stderr)
            self.assertIn('  operator op, plugin gone: cannot execute plugin command '
                          '"/nonexistent/plugin": No such file or directory\n', result.stderr)
            self.assertIn('  operator op, plugin lost: cannot start plugin command '
                          '"no-such-plugin-command": not found in PATH\n', result.stderr)

    def test_an_operator_whose_plugins_are_all_refused_does_not_hold_up_the_others(self):
        """One operator's plugins are all refused (a file without an execute bit, a command that
        does not exist) while another operator's plugin works: the host used to never print
        "ready", and a script waiting for it hung. It is ready for the working operator, the
        line and the log name each refused plugin and why, /readyz keeps failing naming them,
        and the host runs on."""
        with tempfile.TemporaryDirectory(dir="/tmp") as directory:
            not_executable = os.path.join(directory, "plugin")
            with open(not_executable, "w") as f:
                f.write("#!/bin/sh\n")
            os.chmod(not_executable, 0o644)
            operators = os.path.join(directory, "operators")
            os.mkdir(operators)
            with open(os.path.join(operators, "broken.yaml"), "w") as f:
                f.write("apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\n"
                        "metadata: {name: broken}\nspec:\n  plugins:\n"
                        "  - {name: noexec, exec: {command: %s}}\n"
                        "  - {name: gone, exec: {command: /nonexistent/plugin}}\n"
                        % not_executable)
            with open(os.path.join(operators, "good.yaml"), "w") as f:
                f.write("apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\n"
                        "metadata: {name: good}\nspec:\n  plugins:\n"
                        "  - {name: replicator, exec: {command: %s}}\n" % REPLICATOR)
            env = dict(os.environ)
            env.pop("KUBECONFIG", None)
            data_dir = os.path.join(directory, "data")
            process = subprocess.Popen(
                [BINARY, "run", "-f", operators, "--data-dir", data_dir,
                 "--apiserver-port", "0", "--metrics-addr", "127.0.0.1:0"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            try:
                lines = read_lines_until(process, "ready")
                self.assertTrue(lines and lines[-1].startswith("ready"), lines)
                ready = lines[-1]
                self.assertTrue(ready.startswith("ready (refused: operator broken, plugin "),
                                ready)
                self.assertIn('operator broken, plugin noexec: cannot execute plugin command '
                              '"%s": Permission denied' % not_executable, ready)
                self.assertIn('operator broken, plugin gone: cannot execute plugin command '
                              '"/nonexistent/plugin": No such file or directory', ready)
                self.assertNotIn("operator good", ready)
                listed = ctrlhost("plugin", "list", "--data-dir", data_dir).stdout
                rows = [r.split()[:3] for r in listed.splitlines()]
                self.assertIn(["good", "replicator", "READY"], rows)
                self.assertIn(["broken", "noexec", "FAILED"], rows)
                # /readyz keeps failing while a plugin is refused, naming it and why.
                metrics = [l for l in lines if l.startswith("metrics: ")][0].split()[-1]
                with self.assertRaises(urllib.error.HTTPError) as caught:
                    urllib.request.urlopen(metrics.replace("/metrics", "/readyz?verbose"),
                                           timeout=10)
                self.assertEqual(caught.exception.code, 503)
                body = caught.exception.read().decode()
                self.assertIn("plugin broken/noexec is FAILED: cannot execute plugin command",
                              body)
                self.assertIsNone(process.poll())
                process.send_signal(signal.SIGTERM)
                self.assertEqual(process.wait(timeout=TIMEOUT_SECONDS), 0)
                stderr = process.stderr.read().decode(errors="replace")
                self.assertIn("ready without the refused plugins", stderr)
                self.assertNotIn("every plugin was refused", stderr)
            finally:
                end(process)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RunAgainstAClusterTest(unittest.TestCase):
    """Issue 13 item 5: a $KUBECONFIG left set was used silently, and a host whose cluster was
    unreachable at start exited."""

    def test_run_names_the_cluster_and_serves_readyz_while_it_is_unreachable(self):
        # Under /tmp: the admin socket's address (DATA_DIR/admin.sock) must fit 107 bytes.
        with tempfile.TemporaryDirectory(dir="/tmp") as directory:
            operator = os.path.join(directory, "op.yaml")
            with open(operator, "w") as f:  # (an empty operator file is refused)
                f.write("apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: r}\n"
                        "spec:\n  plugins:\n  - name: replicator\n"
                        "    exec: {command: %s}\n" % REPLICATOR)
            config = os.path.join(directory, "config")
            server = "https://127.0.0.1:%d" % free_port()  # nothing listens there
            with open(config, "w") as f:
                f.write("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                        "clusters: [{name: c, cluster: {server: '%s', "
                        "insecure-skip-tls-verify: true}}]\n"
                        "users: [{name: u, user: {token: t}}]\n"
                        "contexts: [{name: c, context: {cluster: c, user: u}}]\n" % server)
            env = dict(os.environ)
            env["KUBECONFIG"] = config
            process = subprocess.Popen(
                [BINARY, "run", "-f", operator, "--data-dir", os.path.join(directory, "data"),
                 "--metrics-addr", "127.0.0.1:0"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            try:
                lines = read_lines_until(process, "metrics: ")
                self.assertIn("API server: %s\n" % server, lines)
                # The data dir did not exist: created (0700) before anything started, in this
                # mode as with the embedded server, and the admin socket is in it.
                data_dir = os.path.join(directory, "data")
                self.assertEqual(os.stat(data_dir).st_mode & 0o777, 0o700)
                self.assertTrue(os.path.exists(os.path.join(data_dir, "admin.sock")))
                self.assertIn("cluster: %s from $KUBECONFIG=%s (not the embedded API server; "
                              "unset KUBECONFIG to use it)\n" % (server, config), lines)
                metrics = lines[-1].split()[-1]
                readyz = metrics.replace("/metrics", "/readyz?verbose")
                with self.assertRaises(urllib.error.HTTPError) as caught:
                    urllib.request.urlopen(readyz, timeout=10)
                self.assertEqual(caught.exception.code, 503)
                body = caught.exception.read().decode()
                self.assertIn("[-]api-server failed: API server %s unreachable for " % server,
                              body)
                self.assertIn("; retrying discovery", body)
                with urllib.request.urlopen(metrics.replace("/metrics", "/healthz"),
                                            timeout=10) as response:
                    self.assertEqual(response.status, 200)
                self.assertIsNone(process.poll())  # still running
                process.send_signal(signal.SIGTERM)
                self.assertEqual(process.wait(timeout=TIMEOUT_SECONDS), 0)
                stderr = process.stderr.read().decode(errors="replace")
                self.assertIn("working against a cluster", stderr)
                self.assertIn("API server unreachable at start", stderr)
            finally:
                end(process)


def landlock_available():
    """Landlock's ABI version via landlock_create_ruleset(NULL, 0, VERSION) > 0."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(444, None, 0, 1) > 0


class RelativePathsTest(unittest.TestCase):
    """First contact: `ctrlhost run --data-dir .ctrlhost` (the README's tour) failed under
    Landlock: the plugin sandbox got the relative admin socket path and refused every plugin.
    Every path is made absolute where it is parsed; a relative plugin command means the host's
    working directory, whatever the plugin's workingDir."""

    def run_relative(self, landlock):
        # Under /tmp: the admin socket's address (DATA_DIR/admin.sock) must fit 107 bytes.
        with tempfile.TemporaryDirectory(dir="/tmp") as cwd:
            os.mkdir(os.path.join(cwd, "bin"))
            os.symlink(REPLICATOR, os.path.join(cwd, "bin", "replicator"))
            with open(os.path.join(cwd, "op.yaml"), "w") as f:
                f.write("apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: op}\n"
                        "spec:\n  plugins:\n  - name: replicator\n"
                        "    exec: {command: bin/replicator, workingDir: /}\n")
            env = dict(os.environ)
            env.pop("KUBECONFIG", None)
            process = subprocess.Popen(
                [BINARY, "run", "-f", "op.yaml", "--data-dir", ".ctrlhost/new/demo",
                 "--apiserver-port", "0", "--metrics-addr", "127.0.0.1:0", "--plugin-user",
                 "host", "--plugin-landlock=%s" % ("true" if landlock else "false")],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
            try:
                lines = read_lines_until(process, "ready", timeout=300)
                self.assertTrue(lines and lines[-1].startswith("ready"),
                                "not ready: stdout %r" % lines)
                data_dir = os.path.join(cwd, ".ctrlhost", "new", "demo")
                self.assertIn("kubeconfig: %s\n" % os.path.join(data_dir, "kubeconfig"), lines)
                for directory in (os.path.join(cwd, ".ctrlhost"), data_dir):
                    self.assertEqual(os.stat(directory).st_mode & 0o777, 0o700, directory)
                self.assertTrue(os.path.exists(os.path.join(data_dir, "admin.sock")))
                # The admin client with the same relative data dir finds the host.
                listed = subprocess.run([BINARY, "plugin", "list", "--data-dir",
                                         ".ctrlhost/new/demo"], capture_output=True, text=True,
                                        timeout=TIMEOUT_SECONDS, cwd=cwd)
                self.assertEqual(listed.returncode, 0, listed.stderr)
                self.assertIn("replicator", listed.stdout)
                process.send_signal(signal.SIGTERM)
                self.assertEqual(process.wait(timeout=TIMEOUT_SECONDS), 0)
                stderr = process.stderr.read().decode(errors="replace")
                self.assertNotIn("must be absolute", stderr)
                self.assertNotIn("plugin refused", stderr)
            finally:
                end(process)

    def test_relative_data_dir_under_landlock(self):
        if not landlock_available():
            self.skipTest("the kernel has no Landlock (the other case runs without it)")
        self.run_relative(landlock=True)

    def test_relative_data_dir_without_landlock(self):
        self.run_relative(landlock=False)


if __name__ == "__main__":
    bazel_unittest.main()
