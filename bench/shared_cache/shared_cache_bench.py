"""shared-cache: N operators on one ctrlhost host versus N client-go programs (bench/README.md).

Starts a real Kubernetes 1.20.2 cluster (e2e/kube: etcd, kube-apiserver, kube-controller-manager
on loopback), loads 10,000 objects (ConfigMaps, Secrets, Deployments and a custom resource,
realistic sizes, managedFields as the server writes them), then for each N in --operators:

- ctrlhost: one `ctrlhost run` with N Operator documents, each exec'ing one
  `shared_cache_plugin` (four controllers, one per kind, reconcile = read the object);
- client-go: N `clientgo-baseline controller` processes (bench/shared_cache/clientgo/main.go,
  one shared informer factory each, built by clientgo/build);
- client-go 0.32: the same program built with Debian trixie's client-go 0.32.3 by
  tools/clientgo-modern, run with KUBE_FEATURE_WatchListClient=true (client-go 1.35+'s default),
  when that build exists (else skipped, saying so);

and reports, ctrlhost as VALUE and client-go as BASELINE of the same run: total RSS of every
process of the side once it is quiet (the host and its plugins; the N programs), the watches
registered on the kube-apiserver (`apiserver_registered_watchers`, minus those open before) and
the TCP connections the side holds to it, the initial sync time (process start until the host
prints `ready` / the last program prints `synced`), and the kube-apiserver's CPU seconds in that
time. Targets at the largest N: memory <= 0.2x, watches <= 0.1x, sync time <= 0.5x.

Flags: --operators=1,5,20 --objects=10000 --json --keep (leave the cluster's directory).
"""

import base64
import http.client
import json
import os
import random
import select
import signal
import ssl
import string
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from bench.procfs import cpu_seconds, status_kib
from bench.report import Reporter
from e2e.kube import kube_fixture

CRD_GROUP = "shared.bench.ctrlhost.dev"
NAMESPACES = 10
# CPU seconds per second of wall time below which a set of processes counts as quiet: a base
# plus a share per process (idle gRPC health checks, Go runtime timers, lease renewals).
QUIET_CPU_SECONDS = 0.05
QUIET_CPU_SECONDS_PER_PROCESS = 0.01
QUIET_APISERVER_CPU_SECONDS = 0.25  # kube-apiserver with its controller manager and audit log
QUIET_TIMEOUT_SECONDS = 240
SYNC_TIMEOUT_SECONDS = 300
PAGE = os.sysconf("SC_PAGE_SIZE")


def log(message):
    print("shared-cache: " + message, file=sys.stderr, flush=True)


# --- /proc --------------------------------------------------------------------------------


def pss_kib(pid):
    """Proportional set size: pages shared by k processes (the same binary's text, shared
    libraries) count 1/k in each."""
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid):
    """Direct children of pid (the host's plugins)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry, "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return found


def connections_to(pids, port):
    """Established TCP connections from any of pids to 127.0.0.1:port."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir("/proc/%d/fd" % pid):
                try:
                    target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    count = 0
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            parts = line.split()
            remote_port = int(parts[2].split(":")[1], 16)
            if remote_port == port and parts[3] == "01" and parts[9] in inodes:
                count += 1
    return count


# --- the cluster and its objects ------------------------------------------------------------

class Api:
    """Keep-alive HTTPS to the cluster with the admin token; one per thread."""

    def __init__(self, cluster):
        context = ssl.create_default_context(cafile=os.path.join(cluster.pki, "ca.crt"))
        self.connection = http.client.HTTPSConnection("127.0.0.1", cluster.port, context=context,
                                                      timeout=60)
        self.headers = {"Authorization": "Bearer " + kube_fixture.ADMIN_TOKEN,
                        "Accept": "application/json", "Content-Type": "application/json"}

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body)
        self.connection.request(method, path, body=data, headers=self.headers)
        response = self.connection.getresponse()
        raw = response.read()
        return response.status, raw


def words(rng, length):
    return "".join(rng.choice(string.ascii_lowercase + "     ") for _ in range(length))


def make_objects(total, rng):
    """(path, body) for every object: 40% ConfigMaps, 30% Secrets, 15% Deployments and 15%
    Gadgets, spread over NAMESPACES namespaces."""
    counts = [("configmap", total * 40 // 100), ("secret", total * 30 // 100),
              ("deployment", total * 15 // 100)]
    counts.append(("gadget", total - sum(c for _, c in counts)))
    objects = []
    for kind, count in counts:
        for i in range(count):
            namespace = "bench-%d" % (i % NAMESPACES)
            name = "%s-%05d" % (kind, i)
            labels = {"app": "shop-%d" % (i % 50), "tier": rng.choice(["web", "db", "cache"])}
            if kind == "configmap":
                objects.append(("/api/v1/namespaces/%s/configmaps" % namespace, {
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": namespace, "labels": labels},
                    "data": {"app.properties": words(rng, 700), "mode": "production",
                             "replicas": str(i % 7)}}))
            elif kind == "secret":
                objects.append(("/api/v1/namespaces/%s/secrets" % namespace, {
                    "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": name, "namespace": namespace, "labels": labels},
                    "data": {"password": base64.b64encode(os.urandom(24)).decode(),
                             "tls.key": base64.b64encode(os.urandom(300)).decode()}}))
            elif kind == "deployment":
                objects.append(("/apis/apps/v1/namespaces/%s/deployments" % namespace, {
                    "apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": name, "namespace": namespace, "labels": labels},
                    "spec": {
                        "replicas": 0,  # no kubelet here: the controller manager makes only RSs
                        "selector": {"matchLabels": {"app": name}},
                        "template": {
                            "metadata": {"labels": {"app": name, "tier": labels["tier"]}},
                            "spec": {"containers": [{
                                "name": "app", "image": "registry.example/shop/app:1.%d" % i,
                                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                                "env": [{"name": "ENV_%d" % k, "value": words(rng, 12)}
                                        for k in range(8)],
                                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                              "limits": {"memory": "256Mi"}},
                            }]}}}}))
            else:
                objects.append(("/apis/%s/v1/namespaces/%s/gadgets" % (CRD_GROUP, namespace), {
                    "apiVersion": CRD_GROUP + "/v1", "kind": "Gadget",
                    "metadata": {"name": name, "namespace": namespace, "labels": labels},
                    "spec": {"size": i % 13, "owner": words(rng, 20),
                             "description": words(rng, 500),
                             "ports": [{"name": "p%d" % k, "port": 8000 + k} for k in range(6)]}}))
    return objects


def load_cluster(cluster, total, clients=8):
    api = Api(cluster)
    for i in range(NAMESPACES):
        api.call("POST", "/api/v1/namespaces",
                 {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench-%d" % i}})
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets." + CRD_GROUP},
        "spec": {"group": CRD_GROUP, "scope": "Namespaced",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget",
                           "listKind": "GadgetList"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object",
                                         "x-kubernetes-preserve-unknown-fields": True}}}]}}
    status, raw = api.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    if status != 201:
        raise RuntimeError("creating the CRD: %d %s" % (status, raw[:300]))
    deadline = time.time() + 60
    while api.call("GET", "/apis/%s/v1/gadgets?limit=1" % CRD_GROUP)[0] != 200:
        if time.time() > deadline:
            raise RuntimeError("the Gadget CRD was not served within 60 s")
        time.sleep(0.2)
    objects = make_objects(total, random.Random(17))
    errors = []

    def create(part):
        worker = Api(cluster)
        for path, body in part:
            status, raw = worker.call("POST", path, body)
            if status != 201:
                errors.append("%s %s: %d %s" % (path, body["metadata"]["name"], status, raw[:200]))
                return

    threads = [threading.Thread(target=create, args=(objects[i::clients],))
               for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("loading objects: " + errors[0])
    return len(objects)


def registered_watchers(cluster):
    api = Api(cluster)
    status, raw = api.call("GET", "/metrics")
    if status != 200:
        raise RuntimeError("GET /metrics: %d" % status)
    total = 0.0
    for line in raw.decode().splitlines():
        if line.startswith("apiserver_registered_watchers{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def host_cache_figures(url):
    """{watch: (objects, memory bytes)} from the host's ctrlhost_watch_objects and
    ctrlhost_watch_memory_bytes, and the sum of ctrlhost_plugin_cache_bytes."""
    with urllib.request.urlopen(url, timeout=30) as response:
        text = response.read().decode()
    watches = {}
    plugin_bytes = 0.0
    for line in text.splitlines():
        for family, index in (("ctrlhost_watch_objects{", 0), ("ctrlhost_watch_memory_bytes{", 1)):
            if line.startswith(family):
                name = line.split('watch="', 1)[1].split('"', 1)[0]
                entry = watches.setdefault(name, [0.0, 0.0])
                entry[index] = float(line.rsplit(" ", 1)[1])
        if line.startswith("ctrlhost_plugin_cache_bytes{"):
            plugin_bytes += float(line.rsplit(" ", 1)[1])
    return watches, plugin_bytes


def wait_quiet(pids_of, what, limit=None):
    """Waits (bounded) until the processes pids_of() returns use less than `limit` CPU seconds
    per second (default: QUIET_CPU_SECONDS plus a share per process) over 2 s, i.e. their
    initial work is done."""
    deadline = time.time() + QUIET_TIMEOUT_SECONDS
    previous = sum(cpu_seconds(p) for p in pids_of())
    while time.time() < deadline:
        time.sleep(2.0)
        pids = pids_of()
        now = sum(cpu_seconds(p) for p in pids)
        allowed = limit if limit is not None else (
            QUIET_CPU_SECONDS + QUIET_CPU_SECONDS_PER_PROCESS * len(pids))
        if now - previous < 2 * allowed:
            return True
        previous = now
    log("%s did not become quiet within %d s" % (what, QUIET_TIMEOUT_SECONDS))
    return False


# --- the two sides ----------------------------------------------------------------------------

def read_lines_until(process, wanted, deadline):
    """Reads process's stdout lines until wanted(line) is true; returns the line, or None when
    the process ended (its returncode is then set) or the deadline passed, whether or not it
    prints anything meanwhile (raw reads polled with select: a blocking readline would wait for
    a silent process past any deadline)."""
    pending = b""
    while time.time() < deadline:
        readable, _, _ = select.select([process.stdout], [], [],
                                       max(0.0, min(1.0, deadline - time.time())))
        if not readable:
            if process.poll() is not None:
                return None
            continue
        chunk = os.read(process.stdout.fileno(), 65536)
        if not chunk:
            process.wait()
            return None
        pending += chunk
        while b"\n" in pending:
            raw, pending = pending.split(b"\n", 1)
            line = raw.decode(errors="replace").strip()
            if wanted(line):
                return line
    return None


def stop(processes):
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Side:
    """One measured side for one N: its processes, and the figures."""

    def __init__(self, name):
        self.name = name
        self.processes = []
        self.root_pids = []
        self.metrics_url = None  # the host's

    def pids(self):
        found = list(self.root_pids)
        for pid in self.root_pids:
            found.extend(children(pid))
        return found


def run_ctrlhost(n, cluster, ctrlhost, plugin, work):
    side = Side("ctrlhost")
    directory = tempfile.mkdtemp(prefix="host-%d-" % n, dir=work)
    operators = os.path.join(directory, "operators.yaml")
    with open(operators, "w") as f:
        for i in range(n):
            f.write("---\napiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\n"
                    "metadata: {name: op-%d}\nspec:\n  plugins:\n"
                    "    - name: shared-cache\n      exec: {command: %s, env: "
                    "{SHARED_CACHE_SUFFIX: \"-op-%d\"}}\n" % (i, plugin, i))
    os.makedirs(os.path.join(directory, "data"))
    metrics_port = kube_fixture.free_port()
    log_file = open(os.path.join(directory, "host.log"), "wb")
    start = time.time()
    process = subprocess.Popen(
        [ctrlhost, "run", "-f", operators, "--kubeconfig", cluster.kubeconfig,
         "--data-dir", os.path.join(directory, "data"),
         "--metrics-addr", "127.0.0.1:%d" % metrics_port, "--log-level", "warning",
         # The plugin is in Bazel's output tree, readable by its owner only: as root the host
         # would run it under a uid of its own (docs/operations.md), which cannot execute it.
         "--plugin-user", "host"],
        stdout=subprocess.PIPE, stderr=log_file, stdin=subprocess.DEVNULL)
    log_file.close()
    side.processes.append(process)
    side.root_pids.append(process.pid)
    line = read_lines_until(process, lambda l: l.startswith("ready"),
                            start + SYNC_TIMEOUT_SECONDS)
    # "ready (refused: ...)": the host runs without a plugin it refused, which is no
    # measurement of N operators.
    if line is None or line.startswith("ready (refused:"):
        stop(side.processes)
        with open(os.path.join(directory, "host.log"), errors="replace") as f:
            tail = f.read()[-3000:]
        why = ("it exited %s" % process.returncode if line is None and
               process.returncode is not None else
               "timed out after %d s" % SYNC_TIMEOUT_SECONDS if line is None else line)
        raise RuntimeError("ctrlhost with %d operators did not get ready (%s; log: %s):\n%s" %
                           (n, why, os.path.join(directory, "host.log"), tail))
    side.sync_seconds = time.time() - start
    side.metrics_url = "http://127.0.0.1:%d/metrics" % metrics_port
    # stdout keeps flowing (nothing more is printed after ready); the pipe is not read again.
    return side, start


def run_clientgo(n, cluster, baseline, work, env=None):
    side = Side("client-go")
    start = time.time()
    for i in range(n):
        log_file = open(os.path.join(work, "clientgo-%d-%d-%d.log" % (n, i, id(env))), "wb")
        process = subprocess.Popen(
            [baseline, "controller", "--kubeconfig", cluster.kubeconfig,
             "--crd", CRD_GROUP + "/v1/gadgets"],
            stdout=subprocess.PIPE, stderr=log_file, stdin=subprocess.DEVNULL,
            env=dict(os.environ, **(env or {})))
        log_file.close()
        side.processes.append(process)
        side.root_pids.append(process.pid)
    for process in side.processes:
        if read_lines_until(process, lambda l: l.startswith("synced"),
                            start + SYNC_TIMEOUT_SECONDS) is None:
            stop(side.processes)
            raise RuntimeError("a client-go program did not sync (logs in %s)" % work)
    side.sync_seconds = time.time() - start
    return side, start


def measure(n, kind, cluster, tools, work):
    """Starts one side with n operators, measures it, stops it; returns a dict of figures."""
    apiserver_pid = cluster.apiserver.process.pid
    watchers_before = registered_watchers(cluster)
    cpu_before = cpu_seconds(apiserver_pid)
    if kind == "ctrlhost":
        side, _ = run_ctrlhost(n, cluster, tools["ctrlhost"], tools["plugin"], work)
    elif kind == "client-go 0.32":
        # client-go 1.35+'s default: streaming initial lists (kube 1.20 has none: each program
        # falls back to a LIST, as it would against any server older than 1.27).
        side, _ = run_clientgo(n, cluster, tools["clientgo-0.32"], work,
                               {"KUBE_FEATURE_WatchListClient": "true"})
    else:
        side, _ = run_clientgo(n, cluster, tools["clientgo"], work)
    cpu_sync = cpu_seconds(apiserver_pid) - cpu_before
    try:
        quiet = wait_quiet(side.pids, "%s with N=%d" % (kind, n))
        cache = host_cache_figures(side.metrics_url) if side.metrics_url else ({}, 0.0)
        pids = side.pids()
        figures = {
            "rss_mib": sum(status_kib(p, "VmRSS") for p in pids) / 1024.0,
            "peak_rss_mib": sum(status_kib(p, "VmHWM") for p in pids) / 1024.0,
            "pss_mib": sum(pss_kib(p) for p in pids) / 1024.0,
            "processes": len(pids),
            "watches": registered_watchers(cluster) - watchers_before,
            "connections": connections_to(pids, cluster.port),
            "sync_seconds": side.sync_seconds,
            "apiserver_cpu_seconds": cpu_sync,
            "quiet": quiet,
            # The first process alone: the host (ctrlhost), one program (client-go).
            "first_rss_mib": status_kib(side.root_pids[0], "VmRSS") / 1024.0,
            "first_peak_rss_mib": status_kib(side.root_pids[0], "VmHWM") / 1024.0,
            # Where the first process's memory is: its own (heap, stacks) or file pages (the
            # binary and its libraries, which other processes may share).
            "first_anon_mib": status_kib(side.root_pids[0], "RssAnon") / 1024.0,
            "first_file_mib": status_kib(side.root_pids[0], "RssFile") / 1024.0,
            "first_pss_mib": pss_kib(side.root_pids[0]) / 1024.0,
            "first_threads": status_kib(side.root_pids[0], "Threads"),
            # The other processes (the host's plugins; the other programs), on average.
            "others_anon_mib": sum(status_kib(p, "RssAnon") for p in pids
                                   if p != side.root_pids[0]) / 1024.0 / max(1, len(pids) - 1),
            "others_file_mib": sum(status_kib(p, "RssFile") for p in pids
                                   if p != side.root_pids[0]) / 1024.0 / max(1, len(pids) - 1),
            "cache_watches": cache[0],
            "plugin_cache_bytes": cache[1],
        }
    finally:
        stop(side.processes)
    # Let the server forget the closed watches before the next side counts its own.
    deadline = time.time() + 30
    while registered_watchers(cluster) > watchers_before and time.time() < deadline:
        time.sleep(0.5)
    log("%s N=%d: %s" % (kind, n, json.dumps(figures)))
    return figures


def runfile(path):
    """A file of the runfiles tree this script runs from (a Bazel data dependency)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    candidate = os.path.join(root, path)
    if not os.path.exists(candidate):
        raise RuntimeError("%s is missing: run this through bazel or tools/bench" % candidate)
    return candidate


def main(argv):
    operators = [1, 5, 20]
    total = 10000
    json_output = False
    keep = False
    for arg in argv:
        if arg == "--json":
            json_output = True
        elif arg == "--keep":
            keep = True
        elif arg.startswith("--operators="):
            operators = [int(x) for x in arg.split("=", 1)[1].split(",")]
        elif arg.startswith("--objects="):
            total = int(arg.split("=", 1)[1])
        elif arg.startswith("--kubeconfig="):
            pass  # this benchmark starts its own cluster: it needs the kube-apiserver's PID
        else:
            print("shared_cache_bench: unknown flag %s" % arg, file=sys.stderr)
            return 2
    reporter = Reporter("shared-cache", json_output)

    build = runfile("bench/shared_cache/clientgo/build")
    tools = {
        "ctrlhost": os.path.abspath(runfile("runtime/exe/ctrlhost")),
        "plugin": os.path.abspath(runfile("bench/shared_cache/shared_cache_plugin")),
        "clientgo": subprocess.run([build], check=True, stdout=subprocess.PIPE)
                              .stdout.decode().strip(),
    }
    modern = os.environ.get("CTRLHOST_CLIENTGO_BASELINE") or os.path.expanduser(
        "~/.cache/ctrlhost/clientgo-0.32/bin/current-baseline")
    if os.access(modern, os.X_OK):
        tools["clientgo-0.32"] = modern
    else:
        log("client-go 0.32 side skipped: %s is not built (tools/clientgo-modern builds it)" %
            modern)
    work = tempfile.mkdtemp(prefix="shared-cache-")
    log("starting a real Kubernetes 1.20 cluster in %s" % work)
    cluster = kube_fixture.Cluster.start(os.path.join(work, "cluster"))
    try:
        started = time.time()
        loaded = load_cluster(cluster, total)
        log("loaded %d objects in %.1f s" % (loaded, time.time() - started))
        # The controller manager makes a ReplicaSet per Deployment and writes their status.
        wait_quiet(lambda: [cluster.apiserver.process.pid], "the kube-apiserver after loading",
                   QUIET_APISERVER_CPU_SECONDS)
        for n in operators:
            # Alternate which side goes first, so that neither always meets a warmer server.
            order = ["ctrlhost", "client-go"] if n % 2 else ["client-go", "ctrlhost"]
            if "clientgo-0.32" in tools:
                order.insert(1, "client-go 0.32")
            results = {kind: measure(n, kind, cluster, tools, work) for kind in order}
            ours, theirs = results["ctrlhost"], results["client-go"]
            last = n == operators[-1] and n >= 20
            prefix = "N=%d: " % n

            def add(metric, key, unit, limit=None):
                met = None
                target = None
                if last and limit is not None:
                    target = "<= %gx" % limit
                    met = theirs[key] > 0 and ours[key] / theirs[key] <= limit
                reporter.add(prefix + metric, ours[key], unit, theirs[key] or None, target, met)

            add("total RSS, ctrlhost vs client-go", "rss_mib", "MiB", 0.2)
            add("watches on kube-apiserver", "watches", "watches", 0.1)
            add("initial sync time", "sync_seconds", "s", 0.5)
            add("kube-apiserver CPU during sync", "apiserver_cpu_seconds", "s")
            add("TCP connections to kube-apiserver", "connections", "conns")
            add("total PSS (shared pages split)", "pss_mib", "MiB")
            add("peak RSS (sum of VmHWM)", "peak_rss_mib", "MiB")
            add("processes", "processes", "procs")
            if n == operators[0]:
                # Memory bounds: the initial lists are consumed page by page (500 objects), so
                # the host's peak during the sync stays near its steady state.
                peak = ours["first_peak_rss_mib"] / max(ours["first_rss_mib"], 1e-9)
                reporter.add(prefix + "host alone: peak RSS during sync / steady RSS", peak, "x",
                             None, "<= 1.3x", peak <= 1.3)
                reporter.add(prefix + "host alone: steady RSS vs one client-go program",
                             ours["first_rss_mib"], "MiB", theirs["first_rss_mib"])
                for what, key, unit in [("anonymous RSS (heap, stacks)", "first_anon_mib", "MiB"),
                                        ("file RSS (binary, libraries)", "first_file_mib", "MiB"),
                                        ("PSS", "first_pss_mib", "MiB"),
                                        ("threads", "first_threads", "threads")]:
                    reporter.add(prefix + "host alone: " + what, ours[key], unit,
                                 theirs[key])
                # One plugin (an average of the host's children; C++ SDK plugins are linked
                # statically, sdk/cpp/plugin.bzl) against one client-go program (the others).
                if ours["processes"] > 1:
                    for what, key in [("anonymous RSS", "others_anon_mib"),
                                      ("file RSS", "others_file_mib")]:
                        reporter.add(prefix + "one plugin / one other program: " + what,
                                     ours[key], "MiB", theirs[key])
                # What the host reports about its caches (ctrlhost_watch_memory_bytes).
                total = 0.0
                for name, (objects, memory) in sorted(ours["cache_watches"].items()):
                    total += memory
                    if objects:
                        reporter.add(prefix + "host cache heap per object, " + name,
                                     memory / objects, "B")
                reporter.add(prefix + "host cache heap, all kinds (ctrlhost_watch_memory_bytes)",
                             total / 1048576.0, "MiB")
            modern = results.get("client-go 0.32")
            if modern is not None:
                # The headline against today's client-go (issue 29): PSS <= 0.1x, RSS <= 0.2x,
                # watches <= 0.1x, initial sync <= 0.5x at the largest N.
                for metric, key, unit, limit in [
                        ("total PSS vs client-go 0.32 (WatchList on)", "pss_mib", "MiB", 0.1),
                        ("total RSS vs client-go 0.32 (WatchList on)", "rss_mib", "MiB", 0.2),
                        ("watches vs client-go 0.32", "watches", "watches", 0.1),
                        ("initial sync time vs client-go 0.32", "sync_seconds", "s", 0.5)]:
                    target = "<= %gx" % limit if last else None
                    met = (modern[key] > 0 and ours[key] / modern[key] <= limit) if last else None
                    reporter.add(prefix + metric, ours[key], unit, modern[key] or None, target,
                                 met)
                theirs = dict(theirs, quiet=theirs["quiet"] and modern["quiet"])
            if not (ours["quiet"] and theirs["quiet"]):
                reporter.add(prefix + "both sides quiet before RSS was read", 0, "", None,
                             "quiet", False)
    finally:
        cluster.stop()
        if not keep:
            subprocess.run(["rm", "-rf", work])
    return reporter.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
