"""End to end, as an attacker (issue 13, item 9): an exec'd plugin tries to take the host's
credentials. It is told everything a plugin could find out (the data dir, the kubeconfig, the
admin socket, the other plugin's socket, the host's pid, the API server's address) and tries to
read the token and the kubeconfig, list the data dir and the socket directory, read the host's
environment and open files through /proc, signal the host, connect to the admin socket (and call
it) and to the other plugin's socket, and write a Secret to kube-system with whatever it found. Every attempt
must fail, and the host keeps reconciling the other plugin's objects.

Two hosts: plugins under their own uids (`--plugin-user auto`, needs root: skipped otherwise, with
the reason) and plugins under the host's own uid with Landlock only (`--plugin-user host`; skipped
when the kernel has no Landlock). Under the same uid Landlock (ABI <= 7) does not mediate connect()
on socket files, so there the two socket connects are reported, not asserted (docs/operations.md);
an admin RPC over that connection is refused all the same (the host's admin token, which the
plugin cannot read) and is asserted.
"""

import json
import os
import shutil
import stat
import tempfile
import time
import unittest

from e2e.host import host_fixture
from tools.internal import bazel_unittest

ATTACKER = r'''#!/usr/bin/python3
import json, os, socket, ssl, sys, time, urllib.request

def say(name, leaked, detail=""):
    print("ATTACK %s %s %s" % (name, "LEAKED" if leaked else "blocked", detail), flush=True)

hints_path = os.environ["ATTACK_HINTS"]
for _ in range(600):
    if os.path.exists(hints_path):
        break
    time.sleep(0.1)
hints = json.load(open(hints_path))

def attempt_read(name, path):
    try:
        with open(path, "rb") as f:
            data = f.read()
        say(name, True, "%s: %d bytes" % (path, len(data)))
        return data
    except OSError as e:
        say(name, False, "%s: %s" % (path, e.strerror))
        return None

def attempt_list(name, path):
    try:
        say(name, True, "%s: %s" % (path, sorted(os.listdir(path))[:5]))
    except OSError as e:
        say(name, False, "%s: %s" % (path, e.strerror))

def attempt_connect(name, path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        say(name, True, path + ": connected")
    except OSError as e:
        say(name, False, "%s: %s" % (path, e.strerror))
    finally:
        s.close()

token = attempt_read("read_token", os.path.join(hints["data_dir"], "token"))
# Every file the data dir holds (the test lists it for the attacker, who cannot list it).
for name in hints["data_files"]:
    attempt_read("read_data_file:" + name, os.path.join(hints["data_dir"], name))
attempt_read("read_kubeconfig", hints["kubeconfig"])
attempt_list("list_data_dir", hints["data_dir"])
attempt_list("list_socket_dir", hints["socket_dir"])
attempt_connect("admin_socket", hints["admin_socket"])
attempt_read("read_admin_token", hints["admin_socket"] + ".token")

def attempt_admin_call(name, path):
    """A real admin RPC over the socket: ListPlugins with an empty request."""
    try:
        import grpc
    except ImportError as e:
        print("ATTACK %s untested %s" % (name, e), flush=True)  # fails the test
        return
    try:
        channel = grpc.insecure_channel("unix:" + path)
        call = channel.unary_unary("/ctrlhost.admin.v1alpha1.AdminService/ListPlugins")
        call(b"", timeout=10)
        say(name, True, "ListPlugins answered")
    except grpc.RpcError as e:
        say(name, False, "%s: %s" % (e.code().name, e.details()))

attempt_admin_call("admin_api", hints["admin_socket"])
attempt_connect("other_plugin_socket", hints["victim_socket"])
environ = attempt_read("host_environ", "/proc/%d/environ" % hints["host_pid"])
def attempt_open_fds(name, pid):
    """Opens the host's open files (the database, the token) through /proc/PID/fd."""
    directory = "/proc/%d/fd" % pid
    try:
        fds = os.listdir(directory)
    except OSError as e:
        say(name, False, "%s: %s" % (directory, e.strerror))
        return
    opened, errors = [], set()
    for fd in fds:
        try:
            os.close(os.open(os.path.join(directory, fd), os.O_RDONLY))
            opened.append(fd)
        except OSError as e:
            errors.add(e.strerror)
    say(name, bool(opened), "opened %s of %d; %s" % (opened[:5], len(fds), sorted(errors)))

attempt_open_fds("host_open_files", hints["host_pid"])
attempt_read("host_root_token", "/proc/%d/root%s/token" % (hints["host_pid"], hints["data_dir"]))
leaked_env = [k for k, v in os.environ.items()
              if k == "KUBECONFIG" or hints["host_secret"] in v]
say("own_environment", bool(leaked_env), ",".join(leaked_env))
try:
    os.kill(hints["host_pid"], 0)
    say("signal_host", True, "signal 0 delivered")
except OSError as e:
    say("signal_host", False, e.strerror)
# The API server with what was found (no token: anonymous).
body = json.dumps({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "stolen", "namespace": "kube-system"},
                   "stringData": {"x": "y"}}).encode()
request = urllib.request.Request(hints["api_url"] + "/api/v1/namespaces/kube-system/secrets",
                                 data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
if token:
    request.add_header("Authorization", "Bearer " + token.decode().strip())
try:
    with urllib.request.urlopen(request, context=ssl._create_unverified_context(),
                                timeout=10) as response:
        say("write_api", True, "HTTP %d" % response.status)
except urllib.error.HTTPError as e:
    say("write_api", e.code not in (401, 403), "HTTP %d" % e.code)
except OSError as e:
    say("write_api", False, str(e))
print("ATTACK done", flush=True)
time.sleep(600)
'''

OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: {name}
spec:
  plugins:
    - name: chaos
      exec:
        command: {victim}
        env:
          CHAOS_DIR: {chaos_dir}
    - name: attacker
      startupTimeout: 5m
      exec:
        command: {attacker}
        env:
          ATTACK_HINTS: {hints}
"""

HOST_SECRET = "host-secret-value-7f3a9c"
ALWAYS_BLOCKED = ["read_token", "read_kubeconfig", "list_data_dir", "list_socket_dir",
                  "host_environ", "host_open_files", "host_root_token", "own_environment",
                  "signal_host", "write_api", "read_admin_token", "admin_api"]
SOCKETS = ["admin_socket", "other_plugin_socket"]


class MaliciousPluginTest(unittest.TestCase):

    def run_attack(self, plugin_user, admin_socket_in_data_dir=False):
        # Everything the plugins run from is in a directory any uid can read (Bazel's output
        # tree is not); it exists before the host starts.
        work = tempfile.mkdtemp(prefix="attack-", dir="/tmp")
        self.addCleanup(shutil.rmtree, work, True)
        os.chmod(work, 0o755)
        victim = os.path.join(work, "chaos")
        shutil.copy(host_fixture.runfile("e2e/host/chaos/chaos"), victim)
        attacker = os.path.join(work, "attacker.py")
        with open(attacker, "w") as f:
            f.write(ATTACKER)
        for path in (victim, attacker):
            os.chmod(path, 0o755)
        chaos_dir = os.path.join(work, "chaos-dir")
        os.mkdir(chaos_dir)
        os.chmod(chaos_dir, 0o777 | stat.S_ISVTX)
        hints = os.path.join(work, "hints")
        name = "evil" + plugin_user[:4]
        extra = {}
        if admin_socket_in_data_dir:
            # The default layout: the admin socket (and its token) inside the data dir, so the
            # data dir is both hidden and the way to other hidden paths. A short path for the
            # socket address.
            extra = {"default_admin_socket": True,
                     "data_dir": tempfile.mkdtemp(prefix="attack-data-", dir="/tmp")}
            self.addCleanup(shutil.rmtree, extra["data_dir"], True)
        host = host_fixture.start_host(
            OPERATOR.format(name=name, victim=victim, chaos_dir=chaos_dir, attacker=attacker,
                            hints=hints),
            extra_args=["--plugin-user", plugin_user], wait_ready=False,
            env={"CTRLHOST_E2E_SECRET_TOKEN": HOST_SECRET}, **extra)
        self.addCleanup(host.stop)
        host.kubectl("apply", "-f", host_fixture.runfile("e2e/host/chaos/crd.yaml"), check=True)
        socket_dir = host.wait_for(
            lambda: next((line.split("sockets=")[1].split()[0]
                          for line in host.log().splitlines()
                          if "plugin isolation" in line and "sockets=" in line), None),
            "the plugin isolation log line")
        victim_socket = host.wait_for(
            lambda: next((os.path.join(root, f) for root, _, files in os.walk(socket_dir)
                          for f in files if f == name + "-chaos-1.sock"), None),
            "the victim plugin's socket")
        hint_data = {"data_dir": os.path.abspath(host.data_dir), "kubeconfig": host.kubeconfig,
                     "admin_socket": host.admin_socket, "socket_dir": socket_dir,
                     "victim_socket": victim_socket, "host_pid": host.process.pid,
                     "api_url": host.url, "host_secret": HOST_SECRET,
                     "data_files": sorted(f for f in os.listdir(host.data_dir)
                                          if os.path.isfile(os.path.join(host.data_dir, f)))}
        self.data_files = hint_data["data_files"]
        with open(hints + ".tmp", "w") as f:
            json.dump(hint_data, f)
        os.chmod(hints + ".tmp", 0o644)
        os.rename(hints + ".tmp", hints)
        host.wait_for(lambda: "ATTACK done" in host.log(), "the attacker to finish")
        results = {}
        for line in host.log().splitlines():
            if "ATTACK " in line and "plugin output" in line:
                words = line.split("ATTACK ", 1)[1].rstrip('"').split(" ", 2)
                if len(words) >= 2:
                    results.setdefault(words[0], (words[1], " ".join(words[2:])))
        # The host keeps working: the other plugin still reconciles.
        body = {"apiVersion": "e2e.ctrlhost.dev/v1", "kind": "Chaos",
                "metadata": {"name": "after-attack", "namespace": "default"},
                "spec": {"mode": "ok", "data": {"k": "v"}}}
        host.kubectl("apply", "-f", "-", input_text=json.dumps(body), check=True)
        host.wait_for(lambda: (json.loads(host.kubectl("get", "chaos", "after-attack", "-o",
                                                       "json", check=True).stdout)
                               .get("status", {}).get("phase") == "Done"),
                      "the victim plugin's object reconciled after the attack")
        self.assertIsNone(host.kubectl("get", "secret", "stolen", "-n", "kube-system",
                                       "-o", "name").stdout.strip() or None)
        return results

    def assert_blocked(self, results, names):
        for attack in names:
            self.assertIn(attack, results, results)
            self.assertEqual(results[attack][0], "blocked", (attack, results))

    def test_plugins_under_their_own_uids(self):
        if os.geteuid() != 0:
            self.skipTest("not root: the host cannot run plugins under other uids here (the "
                          "Landlock part is test_plugins_under_the_hosts_uid)")
        results = self.run_attack("auto")
        self.assert_blocked(results, ALWAYS_BLOCKED + SOCKETS + self.data_file_attacks())

    def test_plugins_under_the_hosts_uid(self):
        if not landlock_available():
            self.skipTest("the kernel has no Landlock: under the host's uid nothing hides files")
        results = self.run_attack("host")
        self.assert_blocked(results, ALWAYS_BLOCKED + self.data_file_attacks())
        for attack in SOCKETS:  # reported, see the module comment
            print("same uid:", attack, results.get(attack))

    def test_plugins_under_the_hosts_uid_admin_socket_in_data_dir(self):
        """Regression: with the admin socket inside the data dir (the default), Landlock took
        the data dir for a directory on the way to the socket and allowed every other entry of
        it: a plugin read the token, kubeconfig, keys and database."""
        if not landlock_available():
            self.skipTest("the kernel has no Landlock: under the host's uid nothing hides files")
        results = self.run_attack("host", admin_socket_in_data_dir=True)
        attacks = self.data_file_attacks()
        self.assertIn("read_data_file:token" if not host_fixture.real_kube()
                      else "read_data_file:admin.sock.token", attacks)
        self.assert_blocked(results, ALWAYS_BLOCKED + attacks)

    def data_file_attacks(self):
        return ["read_data_file:" + name for name in self.data_files]


def landlock_available():
    """Landlock's ABI version via landlock_create_ruleset(NULL, 0, VERSION) > 0."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(444, None, 0, 1) > 0


if __name__ == "__main__":
    bazel_unittest.main()
