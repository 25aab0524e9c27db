"""Watch fan-out: W watchers on one resource under a stream of writes, the embedded API server
(`ctrlhost apiserver`) against a real kube-apiserver 1.20 (e2e/kube fixture) in the same run.

Each scenario gets a fresh embedded server of its own; the real cluster (started once) serves
them one after the other. See bench/README.md, section `fanout`.

Fan-out (the default; --no-fanout leaves it out): a namespace, W watchers of its ConfigMaps (raw
HTTPS on asyncio, one watch per TLS connection, from the same resourceVersion), one slow watcher
(opens its watch and reads no byte), and a writer process creating ConfigMaps at --rate for
--duration (each carries its sequence number and the CLOCK_MONOTONIC time it was sent). Figures:
writes/s achieved, events lost per reading watcher, delivery delay send -> receipt p50/p99 over
every event of every watcher, the server's threads and RSS (sampled every 0.5 s), what became of
the slow watcher, and the client's own CPU use (a client near 1 CPU-second per second is the
bottleneck, not the server). Ratios: embedded over kube-apiserver.

Silent watcher (--silent-seconds=S, issue 30): on one server, a phase of S seconds of writes at
--rate to W readers plus one watcher that reads no byte, then a control phase of the same length
without it (in that order, so that the control, not the silent phase, has the warmer server).
Figures: the readers' p99 with and without it, what became of it (the embedded server resets a
watch that accepts no byte for --watch-stall-timeout while events wait), and the server's RSS
growth in each phase.

Idle watches (--idle-watches=N, issue 30; on kube-apiserver too with --idle-kube): the time of
`kubectl get configmaps` (median of 5) and the server's threads and RSS, before and with N idle
watches open (one TLS connection each, opened at most OPEN_AT_ONCE at a time); then one write
that every idle watch must receive.
"""

import asyncio
import collections
import fcntl
import json
import multiprocessing
import os
import resource
import shutil
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time

from bench.procfs import cpu_seconds, status_kib
from bench.report import Reporter

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAMESPACE = "fanout"
BUCKET_MS = 1  # delay histogram resolution
MAX_BUCKETS = 60000
SEQ_MARKER = b'"seq":"'  # in every event the writer caused
OPEN_AT_ONCE = 100  # idle watches being opened at once (the server keeps 256 unauthenticated)
OPEN_TIMEOUT_SECONDS = 60  # one idle watch's connection, handshake and response headers
KUBECTL_RUNS = 5
PROBE_NAME = b"idle-probe"
PROBE_TIMEOUT_SECONDS = 60
SETTLE_SECONDS = 2
TCP_ESTABLISHED, TCP_CLOSE = 1, 7  # tcpi_state in struct tcp_info


def log(message):
    print("fanout: " + message, file=sys.stderr, flush=True)


# --- raw HTTP/1.1 over TLS -------------------------------------------------------------------

_contexts = {}  # CA path -> its client SSLContext (shared by every connection of a process)


class Target:
    """Where and how to reach one server."""

    def __init__(self, name, host, port, token, ca_path, pid, kubeconfig):
        self.name, self.host, self.port = name, host, port
        self.token, self.ca_path, self.pid = token, ca_path, pid
        self.kubeconfig = kubeconfig

    def context(self):
        if self.ca_path not in _contexts:
            _contexts[self.ca_path] = ssl.create_default_context(cafile=self.ca_path)
        return _contexts[self.ca_path]


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


def configmaps_path(namespace):
    return "/api/v1/namespaces/%s/configmaps" % namespace


def watch_path(namespace, resource_version):
    return configmaps_path(namespace) + "?watch=true&resourceVersion=%s" % resource_version


async def call(target, method, path, body=None):
    reader, writer = await asyncio.open_connection(target.host, target.port, ssl=target.context())
    writer.write(request_bytes(target, method, path, body))
    status, headers = await read_headers(reader)
    data = await read_body(reader, headers)
    writer.close()
    return status, data


async def namespace_version(target, namespace):
    """Creates `namespace` (if needed); returns its ConfigMaps' resourceVersion."""
    status, data = await call(target, "POST", "/api/v1/namespaces",
                              b'{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"%s"}}'
                              % namespace.encode())
    if status not in (201, 409):
        raise RuntimeError("%s: creating the namespace: %d %s" % (target.name, status, data[:300]))
    status, data = await call(target, "GET", configmaps_path(namespace))
    return json.loads(data)["metadata"]["resourceVersion"]


# --- the writer (its own process, so that its CPU does not share the watchers' event loop) --

def writer_main(target, namespace, rate, duration, connections, pad, start_at, result_queue):
    _contexts.clear()  # forked: its own TLS contexts

    async def run():
        sent = [0]
        acked = [0]
        failed = [0]
        per_connection = rate / connections
        end = start_at + duration

        async def one(index):
            reader, writer = await asyncio.open_connection(target.host, target.port,
                                                           ssl=target.context())
            path = configmaps_path(namespace)
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


async def watch(target, path, watcher, histogram, stop):
    try:
        reader, writer = await asyncio.open_connection(target.host, target.port,
                                                       ssl=target.context(), limit=1 << 20)
        writer.write(request_bytes(target, "GET", path))
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
                i = event.find(SEQ_MARKER)
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


class SilentWatch:
    """One watch that reads no byte after its response headers until drain(): the kernel's
    socket buffers fill, then the server's. A blocking TLS socket, not asyncio, whose transports
    read ahead on their own (up to 256 KiB of TLS plus the StreamReader's limit).

    Opened and drained in a worker thread (both block); poll() only reads the TCP state and
    may run on the event loop meanwhile.
    """

    def __init__(self, target, path):
        self.status = None
        self.ended_at = None  # when poll() first found the connection no longer established
        self.ended_state = None  # its TCP state then: TCP_CLOSE after a reset
        raw = socket.create_connection((target.host, target.port), timeout=30)
        self.sock = target.context().wrap_socket(raw, server_hostname=target.host)
        self.sock.sendall(request_bytes(target, "GET", path))
        head = b""
        while b"\r\n\r\n" not in head:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed before the response headers")
            head += data
        head, self.early = head.split(b"\r\n\r\n", 1)
        self.status = int(head.split(b" ", 2)[1])

    def poll(self):
        """Notes when the connection stops being established, reading nothing: a reset (the
        kernel then drops what the server had not sent), or a FIN that came after every byte
        the server sent (a FIN behind unsent bytes waits for the client to read)."""
        if self.ended_at is not None:
            return
        try:
            state = self.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]
        except OSError:
            return
        if state != TCP_ESTABLISHED:
            self.ended_at, self.ended_state = time.monotonic(), state

    def queued_bytes(self):
        """Bytes the kernel holds for us, unread (not counting the server's side)."""
        try:
            answer = fcntl.ioctl(self.sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
            return struct.unpack("i", answer)[0]
        except OSError:
            return -1

    def drain(self, bound_seconds=20, quiet_seconds=2):
        """Reads what the server still sends (`quiet_seconds` without a byte = still open; EOF
        = closed; a reset); returns what became of the watch."""
        self.poll()
        result = {"status": self.status, "queued_bytes": self.queued_bytes(),
                  "outcome": "still sending after %d s" % bound_seconds}
        got = self.early[-4096:]
        received = self.early.count(SEQ_MARKER)
        deadline = time.monotonic() + bound_seconds
        self.sock.settimeout(quiet_seconds)
        try:
            while time.monotonic() < deadline:
                data = self.sock.recv(1 << 20)
                if not data:
                    result["outcome"] = "closed by server"
                    break
                # The 7-byte marker may straddle two reads: count over the previous 6 bytes
                # too (a marker wholly inside them was counted already).
                received += (got[-6:] + data).count(SEQ_MARKER)
                got = (got + data)[-4096:]
        except TimeoutError:
            result["outcome"] = "still open"
        except (ConnectionError, ssl.SSLError, OSError) as e:
            result["outcome"] = "reset (%s)" % type(e).__name__
        if self.ended_state == TCP_CLOSE and result["outcome"] == "closed by server":
            # After a reset the kernel hands out what it holds, then EOF (not ECONNRESET).
            result["outcome"] = "reset (seen in its TCP state)"
        result["events"] = received
        result["gone"] = b'"ERROR"' in got and b"410" in got
        self.sock.close()
        return result


def ended_by_server(slow):
    return slow.get("outcome", "").startswith(("closed", "reset")) or bool(slow.get("gone"))


async def run_phase(target, namespace, watchers, rate, duration, writers, pad, with_slow=True):
    resource_version = await namespace_version(target, namespace)
    path = watch_path(namespace, resource_version)
    loop = asyncio.get_running_loop()

    threads_idle = status_kib(target.pid, "Threads")
    stop = asyncio.Event()
    histogram = [0] * MAX_BUCKETS
    silent = None
    slow = {"status": None, "outcome": "none (--no-slow)"}
    if with_slow:
        try:
            silent = await loop.run_in_executor(None, SilentWatch, target, path)
        except (ConnectionError, ssl.SSLError, OSError) as e:
            slow["outcome"] = "failed to open (%r)" % e
    state = [Watcher() for _ in range(watchers)]
    tasks = []
    for w in state:
        tasks.append(asyncio.ensure_future(watch(target, path, w, histogram, stop)))
        await asyncio.sleep(0)
    # Every watch open before the first write (bounded).
    deadline = time.monotonic() + 60
    while any(w.status is None and not w.closed for w in state) and \
            time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    opened = sum(1 for w in state if w.status == 200)
    log("%s: %d/%d watches open in %s" % (target.name, opened, watchers, namespace))

    samples = []
    client_cpu0 = time.process_time()

    async def sample():
        while not stop.is_set():
            samples.append((status_kib(target.pid, "Threads"), status_kib(target.pid, "VmRSS")))
            if silent is not None:
                silent.poll()
            await asyncio.sleep(0.5)

    base_threads = status_kib(target.pid, "Threads")
    base_rss = status_kib(target.pid, "VmRSS")
    sampler = asyncio.ensure_future(sample())
    queue = multiprocessing.Queue()
    start_at = time.monotonic() + 0.5
    process = multiprocessing.Process(
        target=writer_main,
        args=(target, namespace, rate, duration, writers, pad, start_at, queue))
    server_cpu0 = cpu_seconds(target.pid)
    wall0 = time.monotonic()
    process.start()
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
    for t in tasks:
        t.cancel()
    sampler.cancel()
    await asyncio.gather(*tasks, sampler, return_exceptions=True)
    if silent is not None:
        slow = await asyncio.wait_for(loop.run_in_executor(None, silent.drain), 60)
        # Seconds from the first write until the server ended it (-1: not seen meanwhile).
        slow["ended_after_s"] = (silent.ended_at - start_at if silent.ended_at is not None
                                 else -1)

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
        "rss_growth_mib": (max([s[1] for s in samples] or [0]) - base_rss) / 1024.0,
        "client_cpu_per_s": client_cpu / wall,
        "server_cpu_per_s": server_cpu / wall,
        "slow": slow,
    }


# --- idle watches ----------------------------------------------------------------------------

class IdleWatch:
    """One idle watch: its answer's status, when it saw the probe's event, how it ended."""

    __slots__ = ("status", "error", "probe_at", "transport")

    def __init__(self):
        self.status = self.error = self.probe_at = self.transport = None


async def idle_watch(target, path, watch, opening):
    """Opens the watch (at most OPEN_AT_ONCE at a time) and waits for the probe's event; the
    connection stays open after it, until the caller aborts its transport."""
    try:
        async with opening:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(target.host, target.port, ssl=target.context()),
                OPEN_TIMEOUT_SECONDS)
            watch.transport = writer.transport
            writer.write(request_bytes(target, "GET", path))
            status, _ = await asyncio.wait_for(read_headers(reader), OPEN_TIMEOUT_SECONDS)
            watch.status = status
        if watch.status != 200:
            watch.error = "HTTP %d" % watch.status
            return
        tail = b""
        while True:
            data = await reader.read(65536)
            if not data:
                watch.error = "ended by the server before the write"
                return
            if PROBE_NAME in tail + data:
                watch.probe_at = time.monotonic()
                return
            tail = data[-len(PROBE_NAME):]
    except (ConnectionError, asyncio.IncompleteReadError, asyncio.TimeoutError, ssl.SSLError,
            OSError, ValueError, IndexError) as e:
        watch.error = watch.error or repr(e)[:200]


def kubectl_get_ms(kubectl, target, namespace, home):
    """`kubectl get configmaps -n namespace`: the median wall time in ms of KUBECTL_RUNS runs
    after one more (which fills kubectl's discovery cache), and the failures' messages."""
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    env["HOME"] = home  # the discovery cache, per server
    times, failures = [], []
    for run in range(KUBECTL_RUNS + 1):
        began = time.monotonic()
        try:
            result = subprocess.run(
                [kubectl, "--kubeconfig", target.kubeconfig, "get", "configmaps", "-n", namespace],
                capture_output=True, text=True, timeout=60, env=env)
        except subprocess.TimeoutExpired:
            failures.append("timed out after 60 s")
            continue
        if result.returncode != 0:
            failures.append("exit %d: %s" % (result.returncode, result.stderr.strip()[-300:]))
        elif run > 0:
            times.append((time.monotonic() - began) * 1000)
    return (statistics.median(times) if times else float("nan")), failures


async def run_idle(target, count, kubectl, home):
    namespace = "fanout-idle"
    resource_version = await namespace_version(target, namespace)
    path = watch_path(namespace, resource_version)
    loop = asyncio.get_running_loop()
    pid = target.pid
    os.makedirs(home, exist_ok=True)

    kubectl_before, failures_before = await loop.run_in_executor(
        None, kubectl_get_ms, kubectl, target, namespace, home)
    threads_before = status_kib(pid, "Threads")
    rss_before = status_kib(pid, "VmRSS")

    watches = [IdleWatch() for _ in range(count)]
    opening = asyncio.Semaphore(OPEN_AT_ONCE)
    began = time.monotonic()
    tasks = [asyncio.ensure_future(idle_watch(target, path, w, opening)) for w in watches]
    threads_peak = threads_before
    deadline = began + OPEN_TIMEOUT_SECONDS + count * 0.02
    while time.monotonic() < deadline and \
            any(w.status is None and w.error is None for w in watches):
        threads_peak = max(threads_peak, status_kib(pid, "Threads"))
        await asyncio.sleep(0.25)
    open_seconds = time.monotonic() - began
    # The watches counted from here on (one answered late would still be opening).
    open_watches = [w for w in watches if w.status == 200]
    opened = len(open_watches)
    failed = [w for w in watches if w.status != 200]
    log("%s: %d/%d idle watches open in %.1f s" % (target.name, opened, count, open_seconds))
    for error, n in collections.Counter(w.error or "no answer in time" for w in failed) \
            .most_common(5):
        log("%s: %d idle watches failed to open: %s" % (target.name, n, error))

    await asyncio.sleep(SETTLE_SECONDS)
    threads_open = status_kib(pid, "Threads")
    rss_open = status_kib(pid, "VmRSS")
    threads_peak = max(threads_peak, threads_open)
    kubectl_open, failures_open = await loop.run_in_executor(
        None, kubectl_get_ms, kubectl, target, namespace, home)
    for failure in failures_before + failures_open:
        log("%s: kubectl get failed: %s" % (target.name, failure))

    # One write; every watch open must get its event (bounded wait).
    ended_before = sum(1 for w in open_watches if w.error is not None)
    sent_at = time.monotonic()
    status, data = await call(target, "POST", configmaps_path(namespace),
                              b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s"}}'
                              % PROBE_NAME)
    if status != 201:
        log("%s: the write to the idle watches failed: %d %s" % (target.name, status, data[:300]))
    deadline = time.monotonic() + PROBE_TIMEOUT_SECONDS
    while time.monotonic() < deadline and \
            any(w.probe_at is None and w.error is None for w in open_watches):
        await asyncio.sleep(0.1)
    received = [w.probe_at - sent_at for w in open_watches if w.probe_at is not None]
    ended = [w.error for w in open_watches if w.error is not None]
    for error, n in collections.Counter(ended).most_common(3):
        log("%s: %d idle watches ended: %s" % (target.name, n, error))

    for w in watches:
        if w.transport is not None:
            w.transport.abort()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(SETTLE_SECONDS)
    return {
        "count": count,
        "opened": opened,
        "failed": len(failed),
        "open_seconds": open_seconds,
        "kubectl_before_ms": kubectl_before,
        "kubectl_open_ms": kubectl_open,
        "kubectl_failures": len(failures_before) + len(failures_open),
        "threads_before": threads_before,
        "threads_peak": threads_peak,
        "threads_open": threads_open,
        "rss_before_mib": rss_before / 1024.0,
        "rss_open_mib": rss_open / 1024.0,
        "rss_per_watch_kib": (rss_open - rss_before) / max(opened, 1),
        "ended_before_write": ended_before,
        "lost": opened - len(received),
        "delivery_last_ms": max(received) * 1000 if received else float("nan"),
        "delivery_median_ms": statistics.median(received) * 1000 if received else float("nan"),
        "threads_closed": status_kib(pid, "Threads"),
        "rss_closed_mib": status_kib(pid, "VmRSS") / 1024.0,
    }


# --- the servers -----------------------------------------------------------------------------

def runfile(path):
    candidate = os.path.join(ROOT, path)
    if not os.path.exists(candidate):
        raise RuntimeError("%s is missing: run this through bazel or tools/bench" % candidate)
    return candidate


def default_kubectl():
    listed = [p for p in os.environ.get("CTRLHOST_E2E_KUBECTLS", "").replace(",", ":").split(":")
              if p.strip()]
    return listed[0] if listed else shutil.which("kubectl") or "/usr/bin/kubectl"


class Options:
    def __init__(self):
        self.watchers, self.rate, self.duration, self.writers, self.pad = 100, 200, 10.0, 4, 200
        self.json_output = False
        self.with_kube = True
        self.with_slow = True
        self.fanout = True
        self.silent_seconds = 0.0
        self.idle_watches = 0
        self.idle_kube = False
        self.kubectl = None
        self.work = None  # the run's temporary directory
        # More fan-out runs after the first, [(watchers, rate, duration)] (--issue30).
        self.more_fanouts = []

    def parse(self, argv):
        """Returns None, or the message about a bad flag."""
        for arg in argv:
            name, _, value = arg.partition("=")
            if arg == "--json":
                self.json_output = True
            elif name == "--watchers":
                self.watchers = int(value)
            elif name == "--rate":
                self.rate = float(value)
            elif name == "--duration":
                self.duration = float(value.rstrip("s"))
            elif name == "--writers":
                self.writers = int(value)
            elif name == "--pad":
                self.pad = int(value)
            elif arg == "--no-slow":
                self.with_slow = False
            elif arg == "--no-kube":
                self.with_kube = False
            elif arg == "--no-fanout":
                self.fanout = False
            elif name == "--silent-seconds":
                self.silent_seconds = float(value.rstrip("s"))
            elif name == "--idle-watches":
                self.idle_watches = int(value)
            elif arg == "--idle-kube":
                self.idle_kube = True
            elif arg == "--issue30":
                # Issue 30's four cases in one run: the default fan-out (W=100), W=1,000 at
                # 30 writes/s, 10,000 idle watches and a watcher silent for 60 s.
                self.more_fanouts = [(1000, 30.0, 20.0)]
                self.idle_watches = self.idle_watches or 10000
                self.silent_seconds = self.silent_seconds or 60.0
            elif name == "--kubectl":
                self.kubectl = value
            elif name == "--kubeconfig":
                pass  # this benchmark starts its own cluster: it needs the kube-apiserver's PID
            else:
                return "unknown flag %s" % arg
        self.kubectl = self.kubectl or default_kubectl()
        return None


def scenarios(options):
    """[(name, function of a Target returning its results, embedded server's extra flags)]."""
    o = options
    listed = []
    if o.fanout:
        for i, (w, r, d) in enumerate([(o.watchers, o.rate, o.duration)] + o.more_fanouts):
            # The first keeps its historical names; the others get their own namespace on the
            # one real cluster.
            name = "fanout" if i == 0 else "fanout-w%d" % w
            listed.append((name, lambda t, w=w, r=r, d=d, ns=(
                NAMESPACE if i == 0 else "fanout-w%d" % w): asyncio.run(run_phase(
                    t, ns, w, r, d, o.writers, o.pad, o.with_slow)), []))
    if o.silent_seconds > 0:
        def silent(t):
            phases = {}
            for name, with_silent in (("silent", True), ("control", False)):
                phases[name] = asyncio.run(run_phase(
                    t, "fanout-" + name, o.watchers, o.rate, o.silent_seconds, o.writers, o.pad,
                    with_silent))
            return phases
        listed.append(("silent", silent, []))
    if o.idle_watches > 0:
        listed.append(("idle", lambda t: asyncio.run(run_idle(
            t, o.idle_watches, o.kubectl, os.path.join(o.work, "kubectl-home-" + t.name))),
            ["--max-connections=%d" % max(8192, o.idle_watches + 1000)]))
    return listed


def run_servers(options):
    """{"embedded": {scenario: results}, "kube": {...}}: a fresh embedded server per scenario,
    one real cluster for all of them (the idle watches only with --idle-kube)."""
    from e2e.kube import kube_fixture
    from e2e.apiserver import apiserver_fixture

    results = {"embedded": {}}
    work = options.work
    for name, run, extra_args in scenarios(options):
        directory = os.path.join(work, "embedded" if name == "fanout" else "embedded-" + name)
        os.makedirs(directory)
        server = apiserver_fixture.ApiServer.start(directory, extra_args=extra_args)
        try:
            api = server.api
            target = Target("embedded", api.host, api.port, api.token, api.ca_path,
                            server.process.pid, server.kubeconfig)
            results["embedded"][name] = run(target)
        finally:
            server.stop()
    kube_scenarios = [s for s in scenarios(options) if s[0] != "idle" or options.idle_kube]
    if options.with_kube and kube_scenarios:
        results["kube"] = {}
        cluster = kube_fixture.Cluster.start(os.path.join(work, "kube"), controller_manager=False)
        try:
            api = cluster.api
            target = Target("kube-apiserver", api.host, api.port, api.token, api.ca_path,
                            cluster.apiserver.process.pid, cluster.kubeconfig)
            for name, run, _ in kube_scenarios:
                results["kube"][name] = run(target)
        finally:
            cluster.stop()
    return results


# --- the report ------------------------------------------------------------------------------

def report_fanout(reporter, watchers, rate, ours, theirs):
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
    if theirs:
        # Issue 30: at 1,000 watchers at most half of kube-apiserver's p99; below, ahead of it.
        ratio = ours["p99"] / theirs["p99"] if theirs["p99"] else float("inf")
        bound = 0.5 if watchers >= 1000 else 1.0
        reporter.add(prefix + "delivery delay p99 over kube-apiserver's", round(ratio, 3), "x",
                     None, "<= %gx" % bound if bound < 1 else "< 1x",
                     ratio <= bound if bound < 1 else ratio < bound)
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
    for name, result in (("embedded", ours), ("kube-apiserver", theirs)):
        if result is None:
            continue
        slow = result["slow"]
        log("%s: slow watcher: %s, %s events read afterwards, 410 Gone: %s" % (
            name, slow.get("outcome"), slow.get("events"), slow.get("gone")))
        reporter.add(prefix + "%s slow watcher: closed by server (1) or still open (0)" % name,
                     1 if ended_by_server(slow) else 0, "")


def silent_figures(phases):
    silent, control = phases["silent"], phases["control"]
    slow = silent["slow"]
    p99_ratio = (silent["p99"] / control["p99"] if control["p99"] else
                 (1.0 if silent["p99"] == 0 else float("inf")))
    return {
        "p99_silent": silent["p99"],
        "p99_control": control["p99"],
        "p99_ratio": p99_ratio,
        "p50_silent": silent["p50"],
        "p50_control": control["p50"],
        "lost_silent": silent["lost"],
        "lost_control": control["lost"],
        "writes_silent": silent["writes_per_s"],
        "writes_control": control["writes_per_s"],
        "ended": 1 if ended_by_server(slow) else 0,
        "ended_after_s": slow.get("ended_after_s", -1),
        "events_after": slow.get("events", 0),
        "rss_growth_silent": silent["rss_growth_mib"],
        "rss_growth_control": control["rss_growth_mib"],
        "rss_growth_excess": silent["rss_growth_mib"] - control["rss_growth_mib"],
        "rss_peak_silent": silent["rss_peak_mib"],
        "rss_peak_control": control["rss_peak_mib"],
    }


def report_silent(reporter, options, ours, theirs):
    for name, phases in (("embedded", ours), ("kube-apiserver", theirs)):
        if phases is None:
            continue
        for phase in ("silent", "control"):
            log("%s, %s phase: %s" % (name, phase, phases[phase]))
        slow = phases["silent"]["slow"]
        log("%s: silent watcher: %s after the writes, ended %.1f s after the first write (-1: "
            "not seen), %d bytes unread in its socket then, %s events read afterwards, "
            "410 Gone: %s" % (
                name, slow.get("outcome"), slow.get("ended_after_s", -1),
                slow.get("queued_bytes", -1), slow.get("events"), slow.get("gone")))
    mine = silent_figures(ours)
    other = silent_figures(theirs) if theirs else None
    prefix = "silent watcher, W=%d, %g writes/s for %g s: " % (
        options.watchers, options.rate, options.silent_seconds)

    def add(metric, key, unit, target=None, met=None):
        reporter.add(prefix + metric, mine[key], unit, other[key] if other else None,
                     target, met)

    add("writes/s achieved, with it", "writes_silent", "writes/s")
    add("writes/s achieved, control (without it)", "writes_control", "writes/s")
    add("events lost, readers, with it", "lost_silent", "events", "0", mine["lost_silent"] == 0)
    add("events lost, readers, control", "lost_control", "events", "0",
        mine["lost_control"] == 0)
    add("readers' delivery delay p50, with it", "p50_silent", "ms")
    add("readers' delivery delay p50, control", "p50_control", "ms")
    add("readers' delivery delay p99, with it", "p99_silent", "ms")
    add("readers' delivery delay p99, control", "p99_control", "ms")
    add("readers' p99 with it / control", "p99_ratio", "x", "<= 1.2", mine["p99_ratio"] <= 1.2)
    add("silent watcher ended by the server (1) or still open (0)", "ended", "")
    add("silent watcher ended, s after the first write (-1: not seen)", "ended_after_s", "s")
    add("events the silent watcher read after the writes", "events_after", "events")
    add("server RSS, peak, with it", "rss_peak_silent", "MiB")
    add("server RSS, peak, control", "rss_peak_control", "MiB")
    add("server RSS growth during the writes, with it", "rss_growth_silent", "MiB")
    add("server RSS growth during the writes, control", "rss_growth_control", "MiB")
    add("server RSS growth with it minus control", "rss_growth_excess", "MiB", "<= 16 MiB",
        mine["rss_growth_excess"] <= 16)


def report_idle(reporter, ours, theirs):
    for key, value in sorted(ours.items()):
        log("embedded idle %s = %s; kube-apiserver %s" % (key, value, theirs and theirs.get(key)))
    prefix = "%d idle watches: " % ours["count"]

    def add(metric, key, unit, target=None, met=None):
        reporter.add(prefix + metric, ours[key], unit, theirs[key] if theirs else None,
                     target, met)

    add("watches opened", "opened", "watches")
    add("watches that failed to open", "failed", "watches", "0", ours["failed"] == 0)
    add("seconds to open them all", "open_seconds", "s")
    add("kubectl get configmaps, none open (median of %d)" % KUBECTL_RUNS, "kubectl_before_ms",
        "ms")
    add("kubectl get configmaps, all open (median of %d)" % KUBECTL_RUNS, "kubectl_open_ms", "ms",
        "<= 2x none open", ours["kubectl_open_ms"] <= 2 * ours["kubectl_before_ms"])
    add("kubectl get failures", "kubectl_failures", "runs")
    add("server threads, none open", "threads_before", "threads")
    add("server threads, peak while opening", "threads_peak", "threads")
    add("server threads, all open", "threads_open", "threads", "<= 64",
        ours["threads_open"] <= 64)
    add("server RSS, none open", "rss_before_mib", "MiB")
    add("server RSS, all open", "rss_open_mib", "MiB")
    add("server RSS growth per watch", "rss_per_watch_kib", "KiB", "<= 20 KiB",
        ours["rss_per_watch_kib"] <= 20)
    add("watches ended by the server before the write", "ended_before_write", "watches")
    add("watches that missed the one write (lost)", "lost", "watches", "0", ours["lost"] == 0)
    add("the write's delivery, median watch", "delivery_median_ms", "ms")
    add("the write's delivery, last watch", "delivery_last_ms", "ms")
    add("server threads, all closed", "threads_closed", "threads")
    add("server RSS, all closed", "rss_closed_mib", "MiB")


def main(argv):
    options = Options()
    error = options.parse(argv)
    if error:
        print("fanout_bench: " + error, file=sys.stderr)
        return 2
    if options.idle_watches and not os.access(options.kubectl, os.X_OK):
        print("fanout_bench: no kubectl at %s (--kubectl=PATH, $CTRLHOST_E2E_KUBECTLS)"
              % options.kubectl, file=sys.stderr)
        return 2
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    # The servers inherit this limit: the embedded one keeps 256 descriptors for itself and
    # lowers --max-connections (N + 1000) to fit the rest.
    if options.idle_watches and hard < options.idle_watches + 1000 + 256:
        log("the open-file limit (%d) is short of %d idle watches plus the server's reserve: "
            "expect watches that fail to open" % (hard, options.idle_watches))
    if not scenarios(options):
        print("fanout_bench: nothing to run (--no-fanout without --silent-seconds or "
              "--idle-watches)", file=sys.stderr)
        return 2
    os.environ.setdefault("CTRLHOST_BIN", os.path.abspath(runfile("runtime/exe/ctrlhost")))

    reporter = Reporter("fanout", options.json_output)
    options.work = tempfile.mkdtemp(prefix="fanout-")
    try:
        results = run_servers(options)
    finally:
        subprocess.run(["rm", "-rf", options.work])

    ours, theirs = results["embedded"], results.get("kube", {})
    for i, (w, r, _) in enumerate([(options.watchers, options.rate, options.duration)] +
                                  options.more_fanouts):
        name = "fanout" if i == 0 else "fanout-w%d" % w
        if name in ours:
            report_fanout(reporter, w, r, ours[name], theirs.get(name))
    if "silent" in ours:
        report_silent(reporter, options, ours["silent"], theirs.get("silent"))
    if "idle" in ours:
        report_idle(reporter, ours["idle"], theirs.get("idle"))
    return reporter.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
