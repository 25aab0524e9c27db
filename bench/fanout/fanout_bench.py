"""Watch fan-out: W watchers on one resource under a stream of writes, the embedded API server
(`ctrlhost apiserver`) against a real kube-apiserver 1.20 (e2e/kube fixture) in the same run.

Per server: a namespace, W watchers of its ConfigMaps (raw HTTPS on asyncio, one watch per TLS
connection, from the same resourceVersion), one slow watcher (opens its watch and reads nothing),
and a writer process creating ConfigMaps at --rate for --duration (each carries its sequence number
and the CLOCK_MONOTONIC time it was sent). Figures: writes/s achieved, events lost per reading
watcher, delivery delay send -> receipt p50/p99 over every event of every watcher, the server's
threads and RSS (sampled every 0.5 s), what became of the slow watcher, and the client's own CPU
use (a client near 1 CPU-second per second is the bottleneck, not the server). Ratios: embedded
over kube-apiserver. See bench/README.md, section `fanout`.
"""

import asyncio
import json
import multiprocessing
import os
import resource
import ssl
import subprocess
import sys
import tempfile
import time

from bench.procfs import cpu_seconds, status_kib
from bench.report import Reporter

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAMESPACE = "fanout"
BUCKET_MS = 1  # delay histogram resolution
MAX_BUCKETS = 60000


def log(message):
    print("fanout: " + message, file=sys.stderr, flush=True)


# --- raw HTTP/1.1 over TLS -------------------------------------------------------------------

class Target:
    """Where and how to reach one server."""

    def __init__(self, name, host, port, token, ca_path, pid):
        self.name, self.host, self.port = name, host, port
        self.token, self.ca_path, self.pid = token, ca_path, pid

    def context(self):
        context = ssl.create_default_context(cafile=self.ca_path)
        return context


async def read_headers(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            key, value = line.split(":", 1)
            headers[key.strip().lower()] = value.strip()
    return status, headers


async def read_body(reader, headers):
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            if size == 0:
                await reader.readline()
                return body
            body += await reader.readexactly(size + 2)
            body = body[:-2]
    return await reader.readexactly(int(headers.get("content-length", "0")))


def request_bytes(target, method, path, body=None):
    head = ("%s %s HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: Bearer %s\r\n"
            "Accept: application/json\r\n" % (method, path, target.host, target.port, target.token))
    if body is not None:
        head += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
    return (head + "\r\n").encode() + (body or b"")


async def call(target, method, path, body=None):
    reader, writer = await asyncio.open_connection(target.host, target.port, ssl=target.context())
    writer.write(request_bytes(target, method, path, body))
    status, headers = await read_headers(reader)
    data = await read_body(reader, headers)
    writer.close()
    return status, data


# --- the writer (its own process, so that its CPU does not share the watchers' event loop) --

def writer_main(target, rate, duration, connections, pad, start_at, result_queue):
    async def run():
        sent = [0]
        acked = [0]
        failed = [0]
        per_connection = rate / connections
        end = start_at + duration

        async def one(index):
            reader, writer = await asyncio.open_connection(target.host, target.port,
                                                           ssl=target.context())
            path = "/api/v1/namespaces/%s/configmaps" % NAMESPACE
            k = 0
            while True:
                due = start_at + (k + index / connections) / per_connection
                if due >= end:
                    break
                now = time.monotonic()
                if due > now:
                    await asyncio.sleep(due - now)
                seq = k * connections + index
                body = ('{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w-%d"},'
                        '"data":{"seq":"%d","t":"%.6f","pad":"%s"}}'
                        % (seq, seq, time.monotonic(), "x" * pad)).encode()
                writer.write(request_bytes(target, "POST", path, body))
                sent[0] += 1
                status, headers = await read_headers(reader)
                await read_body(reader, headers)
                if status == 201:
                    acked[0] += 1
                else:
                    failed[0] += 1
                k += 1
            writer.close()

        began = time.monotonic()
        await asyncio.gather(*[one(i) for i in range(connections)])
        elapsed = time.monotonic() - began
        result_queue.put({"acked": acked[0], "failed": failed[0], "sent": sent[0],
                          "elapsed": elapsed})

    asyncio.run(run())


# --- the watchers ----------------------------------------------------------------------------

class Watcher:
    def __init__(self):
        self.seen = set()
        self.status = None
        self.error = None
        self.closed = False


async def watch(target, resource_version, watcher, histogram, stop):
    try:
        reader, writer = await asyncio.open_connection(target.host, target.port,
                                                       ssl=target.context(), limit=1 << 20)
        writer.write(request_bytes(
            target, "GET", "/api/v1/namespaces/%s/configmaps?watch=true&resourceVersion=%s"
            % (NAMESPACE, resource_version)))
        watcher.status, headers = await read_headers(reader)
        chunked = headers.get("transfer-encoding", "").lower() == "chunked"
        pending = b""
        while not stop.is_set():
            if chunked:
                line = await reader.readline()
                if not line:
                    watcher.closed = True
                    return
                size = int(line.split(b";")[0], 16)
                if size == 0:
                    watcher.closed = True
                    return
                data = (await reader.readexactly(size + 2))[:-2]
            else:
                data = await reader.read(65536)
                if not data:
                    watcher.closed = True
                    return
            now = time.monotonic()
            pending += data
            *events, pending = pending.split(b"\n")
            for event in events:
                if not event:
                    continue
                # Only the two fields we need, without a JSON parse (the client must not be
                # the bottleneck): "seq":"N" and "t":"T" of the ConfigMap's data.
                i = event.find(b'"seq":"')
                if i < 0:
                    if b'"ERROR"' in event[:40]:
                        watcher.error = event[:300].decode(errors="replace")
                    continue
                j = event.find(b'"', i + 7)
                seq = int(event[i + 7:j])
                if seq in watcher.seen:
                    continue
                watcher.seen.add(seq)
                i = event.find(b'"t":"')
                j = event.find(b'"', i + 5)
                bucket = int((now - float(event[i + 5:j])) * 1000 / BUCKET_MS)
                histogram[min(max(bucket, 0), MAX_BUCKETS - 1)] += 1
    except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, OSError) as e:
        watcher.closed = True
        watcher.error = watcher.error or repr(e)


async def slow_watch(target, resource_version, result, stop):
    """Opens a watch and reads nothing until `stop`; then finds out what the server did."""
    reader, writer = await asyncio.open_connection(target.host, target.port,
                                                   ssl=target.context(), limit=1 << 20)
    writer.write(request_bytes(
        target, "GET", "/api/v1/namespaces/%s/configmaps?watch=true&resourceVersion=%s"
        % (NAMESPACE, resource_version)))
    result["status"], _ = await read_headers(reader)
    await stop.wait()
    # Drain what is buffered: EOF means the server closed the watch.
    received = 0
    got = b""
    deadline = time.monotonic() + 20
    result["outcome"] = "still sending after 20 s"
    try:
        while time.monotonic() < deadline:
            data = await asyncio.wait_for(reader.read(1 << 20), 2.0)
            if not data:
                result["outcome"] = "closed by server"
                break
            # The 7-byte marker may straddle two reads: count over the previous 6 bytes too
            # (a marker wholly inside them was counted already).
            received += (got[-6:] + data).count(b'"seq":"')
            got = (got + data)[-4096:]
    except asyncio.TimeoutError:
        result["outcome"] = "still open"
    except (ConnectionError, ssl.SSLError, OSError) as e:
        result["outcome"] = "reset (%s)" % type(e).__name__
    result["events"] = received
    result["gone"] = b'"ERROR"' in got and b"410" in got
    writer.close()


async def run_phase(target, watchers, rate, duration, writers, pad, with_slow=True):
    status, data = await call(target, "POST", "/api/v1/namespaces",
                              b'{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"%s"}}'
                              % NAMESPACE.encode())
    if status not in (201, 409):
        raise RuntimeError("%s: creating the namespace: %d %s" % (target.name, status, data[:300]))
    status, data = await call(target, "GET", "/api/v1/namespaces/%s/configmaps" % NAMESPACE)
    resource_version = json.loads(data)["metadata"]["resourceVersion"]

    threads_idle = status_kib(target.pid, "Threads")
    stop = asyncio.Event()
    histogram = [0] * MAX_BUCKETS
    state = [Watcher() for _ in range(watchers)]
    tasks = []
    for w in state:
        tasks.append(asyncio.ensure_future(watch(target, resource_version, w, histogram, stop)))
        await asyncio.sleep(0)
    slow = {} if with_slow else {"status": None, "outcome": "none (--no-slow)"}
    slow_task = asyncio.ensure_future(
        slow_watch(target, resource_version, slow, stop) if with_slow else asyncio.sleep(0))
    # Every watch open before the first write (bounded).
    deadline = time.monotonic() + 60
    while (any(w.status is None for w in state) or "status" not in slow) and \
            time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    opened = sum(1 for w in state if w.status == 200)
    log("%s: %d/%d watches open" % (target.name, opened, watchers))

    samples = []
    client_cpu0 = time.process_time()

    async def sample():
        while not stop.is_set():
            samples.append((status_kib(target.pid, "Threads"), status_kib(target.pid, "VmRSS")))
            await asyncio.sleep(0.5)

    base_threads = status_kib(target.pid, "Threads")
    base_rss = status_kib(target.pid, "VmRSS")
    sampler = asyncio.ensure_future(sample())
    queue = multiprocessing.Queue()
    start_at = time.monotonic() + 0.5
    process = multiprocessing.Process(target=writer_main,
                                      args=(target, rate, duration, writers, pad, start_at, queue))
    server_cpu0 = cpu_seconds(target.pid)
    wall0 = time.monotonic()
    process.start()
    loop = asyncio.get_running_loop()
    written = await loop.run_in_executor(None, queue.get, True, duration + 120)
    await loop.run_in_executor(None, process.join, 30)
    # Let the streams catch up (bounded): every reading watcher has every acknowledged write.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(
            len(w.seen) < written["acked"] for w in state if not w.closed):
        await asyncio.sleep(0.2)
    wall = time.monotonic() - wall0
    client_cpu = time.process_time() - client_cpu0
    server_cpu = cpu_seconds(target.pid) - server_cpu0
    stop.set()
    await asyncio.wait_for(slow_task, 60)
    for t in tasks:
        t.cancel()
    sampler.cancel()
    await asyncio.gather(*tasks, sampler, return_exceptions=True)

    reading = [w for w in state if w.status == 200]
    lost = sum(max(0, written["acked"] - len(w.seen)) for w in reading)
    total = sum(histogram)

    def percentile(p):
        rank = p * total
        running = 0
        for bucket, count in enumerate(histogram):
            running += count
            if running >= rank and count:
                return bucket * BUCKET_MS
        return float("nan")

    return {
        "opened": opened,
        "closed": sum(1 for w in reading if w.closed),
        "writes_per_s": written["acked"] / written["elapsed"],
        "acked": written["acked"],
        "failed_writes": written["failed"],
        "lost": lost,
        "delivered": total,
        "p50": percentile(0.5),
        "p99": percentile(0.99),
        "threads_idle": threads_idle,
        "threads_per_watcher": (max([s[0] for s in samples] or [0]) - threads_idle) /
                               max(watchers + 1, 1),
        "threads_before": base_threads,
        "threads_peak": max([s[0] for s in samples] or [0]),
        "rss_before_mib": base_rss / 1024.0,
        "rss_peak_mib": max([s[1] for s in samples] or [0]) / 1024.0,
        "rss_end_mib": (samples[-1][1] if samples else 0) / 1024.0,
        "client_cpu_per_s": client_cpu / wall,
        "server_cpu_per_s": server_cpu / wall,
        "slow": slow,
    }


# --- the servers ---------------------------------------------------------------------------

def runfile(path):
    candidate = os.path.join(ROOT, path)
    if not os.path.exists(candidate):
        raise RuntimeError("%s is missing: run this through bazel or tools/bench" % candidate)
    return candidate


def main(argv):
    watchers, rate, duration, writers, pad = 100, 200, 10.0, 4, 200
    json_output = False
    with_kube = True
    with_slow = True
    for arg in argv:
        if arg == "--json":
            json_output = True
        elif arg.startswith("--watchers="):
            watchers = int(arg.split("=", 1)[1])
        elif arg.startswith("--rate="):
            rate = float(arg.split("=", 1)[1])
        elif arg.startswith("--duration="):
            duration = float(arg.split("=", 1)[1].rstrip("s"))
        elif arg.startswith("--writers="):
            writers = int(arg.split("=", 1)[1])
        elif arg.startswith("--pad="):
            pad = int(arg.split("=", 1)[1])
        elif arg == "--no-slow":
            with_slow = False
        elif arg == "--no-kube":
            with_kube = False
        elif arg.startswith("--kubeconfig="):
            pass  # this benchmark starts its own cluster: it needs the kube-apiserver's PID
        else:
            print("fanout_bench: unknown flag %s" % arg, file=sys.stderr)
            return 2
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    os.environ.setdefault("CTRLHOST_BIN", os.path.abspath(runfile("runtime/exe/ctrlhost")))
    from e2e.kube import kube_fixture
    from e2e.apiserver import apiserver_fixture

    reporter = Reporter("fanout", json_output)
    work = tempfile.mkdtemp(prefix="fanout-")
    results = {}
    try:
        os.makedirs(os.path.join(work, "embedded"))
        server = apiserver_fixture.ApiServer.start(os.path.join(work, "embedded"))
        try:
            api = server.api
            target = Target("embedded", api.host, api.port, api.token, api.ca_path,
                            server.process.pid)
            results["embedded"] = asyncio.run(run_phase(target, watchers, rate, duration,
                                                        writers, pad, with_slow))
        finally:
            server.stop()
        if with_kube:
            cluster = kube_fixture.Cluster.start(os.path.join(work, "kube"),
                                                 controller_manager=False)
            try:
                api = cluster.api
                target = Target("kube-apiserver", api.host, api.port, api.token, api.ca_path,
                                cluster.apiserver.process.pid)
                results["kube"] = asyncio.run(run_phase(target, watchers, rate, duration,
                                                        writers, pad, with_slow))
            finally:
                cluster.stop()
    finally:
        subprocess.run(["rm", "-rf", work])

    ours = results["embedded"]
    theirs = results.get("kube")
    for key, value in sorted(ours.items()):
        log("embedded %s = %s; kube-apiserver %s" % (key, value, theirs and theirs.get(key)))
    prefix = "W=%d, %g writes/s: " % (watchers, rate)

    def add(metric, key, unit, target=None, met=None):
        reporter.add(prefix + metric, ours[key], unit, theirs[key] if theirs else None,
                     target, met)

    add("writes/s achieved", "writes_per_s", "writes/s")
    add("watches opened", "opened", "watches")
    add("events lost, all reading watchers", "lost", "events", "0", ours["lost"] == 0)
    add("events delivered", "delivered", "events")
    add("delivery delay p50", "p50", "ms")
    add("delivery delay p99", "p99", "ms", "<= 100 ms", ours["p99"] <= 100)
    add("reading watches closed by server", "closed", "watches")
    add("server threads, peak", "threads_peak", "threads")
    add("server threads with no watch open", "threads_idle", "threads")
    add("server threads added per watch", "threads_per_watcher", "threads", "<= 0.1",
        ours["threads_per_watcher"] <= 0.1)
    add("server threads before writes", "threads_before", "threads")
    add("server RSS before writes", "rss_before_mib", "MiB")
    add("server RSS, peak", "rss_peak_mib", "MiB")
    add("server RSS at end", "rss_end_mib", "MiB")
    add("server CPU-s per s", "server_cpu_per_s", "CPU")
    add("client (watchers) CPU-s per s", "client_cpu_per_s", "CPU", "< 0.9",
        ours["client_cpu_per_s"] < 0.9 and (theirs is None or theirs["client_cpu_per_s"] < 0.9))
    for name, result in results.items():
        slow = result["slow"]
        log("%s: slow watcher: %s, %s events read afterwards, 410 Gone: %s" % (
            name, slow.get("outcome"), slow.get("events"), slow.get("gone")))
        reporter.add(prefix + "%s slow watcher: closed by server (1) or still open (0)" % name,
                     1 if slow.get("outcome", "").startswith(("closed", "reset")) or
                     slow.get("gone") else 0, "")
    return reporter.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
