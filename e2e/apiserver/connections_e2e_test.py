"""Connection exhaustion against the real `ctrlhost apiserver` (issue 14 items 6 and 7).

- Slowloris: more trickling unauthenticated TLS connections than the server's open-file
  limit, each mid-handshake, re-opened when closed, while kubectl and a list+watch client
  (what the host's informers do) still work; trickling connections are closed by the
  authentication deadline.
- Watch clients that disconnect release their socket (and, with --watch-threads=0, their
  thread) at once (no CLOSE-WAIT until the watch times out). Issue 30: 2,000 watches hold no
  thread each (the stream loop writes them); a watcher that reads nothing is ended after
  --watch-stall-timeout while the others are served.
- Concurrent LISTs of a large namespace are streamed: the server's peak RSS does not grow by
  the body size.
- --max-mutating-requests-inflight / --max-requests-inflight: 429 TooManyRequests with
  Retry-After; watches are not counted.
- Issue 25: clients that hold LISTs they never read take at most the LIST share of the read
  seats (single-object GETs are served) and are cut after --write-stall-timeout; a flood of
  silent connections does not evict clients that take a moment before their request; idle
  keep-alive connections make room at --max-connections; a client refused there gets 429 with
  Retry-After and a Status.

Every wait is bounded; the assertions are on counts (threads, descriptors, bytes), never on
durations.
"""

import json
import socket
import ssl
import threading
import time
import unittest

import apiserver_fixture
from apiserver_fixture import ApiServer, kubectl
from attack import (StuckLists, Trickler, close_all, fds_of, fill_namespace,
                    open_handshaking_connections, open_idle_connections,
                    raise_own_open_file_limit, threads_of, timed_requests, unreadable_list_bytes,
                    vm_kib, wait_until)
from tools.internal import bazel_unittest

KUBECTL = "/usr/bin/kubectl"


class SlowlorisTest(unittest.TestCase):

    def test_trickling_connections_do_not_lock_out_clients(self):
        # The setting: the server may open 4,096 files; the attack opens more
        # connections than that (kubectl and the informers were locked out at 4,086).
        own_limit = raise_own_open_file_limit()
        attempted = min(5000, own_limit - 500)
        self.assertGreater(attempted, 4096, "this test needs an open-file hard limit > 4,600")
        server = ApiServer.start(open_files=4096)
        try:
            api = server.api
            api.ensure_namespace("slowloris")
            watch = api.watch("/api/v1/namespaces/slowloris/configmaps?watch=1"
                              "&allowWatchBookmarks=true", timeout=60)
            self.assertEqual(watch.status, 200)
            # Every connection is mid-handshake and trickles (idle ones would be closed by a
            # 30 s read timeout and free their descriptors: the attack keeps them busy), and
            # the attacker re-opens those the server closes.
            trickler = Trickler(api.host, api.port, attempted, refill=200)
            slow = None
            try:
                # kubectl (a new TLS connection, discovery, a list) while every connection
                # above is held.
                result = kubectl(KUBECTL, server.kubeconfig, "--request-timeout=20s",
                                 "get", "namespaces", "-o", "name")
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertIn("namespace/slowloris", result.stdout)
                result = kubectl(KUBECTL, server.kubeconfig, "--request-timeout=20s",
                                 "-n", "slowloris", "create", "configmap", "during-attack")
                self.assertEqual(result.returncode, 0, result.stderr)
                # The watch opened before the attack (an informer's) still gets its event.
                watch.events_until(lambda e: e["object"]["metadata"].get("name") ==
                                   "during-attack", timeout=20)
                # A new list+watch, as an informer starting during the attack does.
                status, body = api.request("GET", "/api/v1/namespaces/slowloris/configmaps")
                self.assertEqual(status, 200, body)
                again = api.watch("/api/v1/namespaces/slowloris/configmaps?watch=1"
                                  "&resourceVersion=" + body["metadata"]["resourceVersion"])
                self.assertEqual(again.status, 200)
                again.close()
                # The server holds a bounded number of descriptors, far below the attack.
                self.assertLess(fds_of(server.process.pid), 1000)
                trickler.stop()
                # Fewer trickling connections than the unauthenticated pool holds: none is
                # evicted, each is closed by the authentication deadline (10 s) although it
                # sends a byte every half second and so never trips a read timeout.
                slow = Trickler(api.host, api.port, 50)
                self.assertTrue(wait_until(lambda: slow.closed_by_server() == 50, 30),
                                "trickling connections still open: %d of 50 closed" %
                                slow.closed_by_server())
            finally:
                trickler.stop()
                if slow is not None:
                    slow.stop()
                watch.close()
            # The refusals and evictions are logged, but rate-limited (the issue saw one line
            # per connection: 3,069).
            evictions = [line for line in server.stderr().splitlines()
                         if "unauthenticated connection" in line]
            self.assertGreater(len(evictions), 0)
            self.assertLess(len(evictions), 50)
        finally:
            server.stop()


class DisconnectedWatchersTest(unittest.TestCase):

    def _open_watches_then_disconnect(self, server, count, thread_check):
        api = server.api
        api.ensure_namespace("watchers")
        pid = server.process.pid
        # A connection of our own first, so that the baseline counts a settled server.
        self.assertEqual(api.request("GET", "/api/v1/namespaces/watchers")[0], 200)
        base_threads, base_fds = threads_of(pid), fds_of(pid)
        watches = [api.watch("/api/v1/namespaces/watchers/configmaps?watch=1")
                   for _ in range(count)]
        try:
            self.assertTrue(all(w.status == 200 for w in watches))
            thread_check(pid, base_threads)
            # Every watch is served: one write reaches each of them.
            api.request("POST", "/api/v1/namespaces/watchers/configmaps",
                        {"metadata": {"name": "hello"}, "data": {"k": "v"}})
            for w in watches:
                w.events_until(lambda e: e["object"]["metadata"]["name"] == "hello")
        finally:
            for w in watches:
                w.close()
        # Without detection the threads and sockets stay until the watch timeout (30 min).
        returned = wait_until(lambda: threads_of(pid) <= base_threads + 2 and
                              fds_of(pid) <= base_fds + 2, 30)
        self.assertTrue(returned, "threads %d (baseline %d), descriptors %d (baseline %d)" %
                        (threads_of(pid), base_threads, fds_of(pid), base_fds))

    def test_two_thousand_watches_hold_no_thread_each(self):
        # Issue 30: a watch is written by the stream loop's threads once it is set up; the
        # thread that served its request ends. (The former model: 1.04 threads per watch.)
        raise_own_open_file_limit()
        server = ApiServer.start()
        try:
            def few_threads(pid, base):
                # The request threads end as their watches are handed over.
                self.assertTrue(wait_until(lambda: threads_of(pid) <= base + 8, 30),
                                "%d threads for 2,000 watches (baseline %d)" %
                                (threads_of(pid), base))
            self._open_watches_then_disconnect(server, 2000, few_threads)
        finally:
            server.stop()

    def test_threads_and_sockets_return_to_baseline_with_a_thread_per_watch(self):
        # --watch-threads=0: the former model, a watch keeps its connection's thread.
        server = ApiServer.start(extra_args=("--watch-threads=0",))
        try:
            def thread_each(pid, base):
                self.assertGreaterEqual(threads_of(pid), base + 150)
            self._open_watches_then_disconnect(server, 200, thread_each)
        finally:
            server.stop()


def raw_watch_socket(api, path, rcvbuf):
    """A TLS connection that has sent a watch request, with a receive buffer of about
    `rcvbuf` bytes; nothing is read from it."""
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    raw.settimeout(30)
    raw.connect((api.host, api.port))
    tls = api.context.wrap_socket(raw, server_hostname=api.host)
    tls.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\n"
                 "Authorization: Bearer %s\r\n\r\n" % (path, api.host, api.token)).encode())
    return tls


def ends_within(sock, seconds):
    """Reads `sock` to its end: True when the server closed or reset it within `seconds`."""
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
        return True
    except (socket.timeout, TimeoutError):
        return False
    finally:
        sock.close()


class SilentWatcherTest(unittest.TestCase):

    def test_a_watcher_that_reads_nothing_is_ended_and_the_others_are_served(self):
        # Issue 30 item 2: detected by its socket not draining (--watch-stall-timeout), not by
        # a blocked write; the others are written by the same threads and never wait for it.
        server = ApiServer.start(extra_args=("--watch-stall-timeout=1s",))
        try:
            api = server.api
            api.ensure_namespace("silent")
            path = "/api/v1/namespaces/silent/configmaps?watch=1"
            # A raw TLS connection with a small receive buffer, which reads nothing.
            silent = raw_watch_socket(api, path, rcvbuf=4096)
            readers = [api.watch(path) for _ in range(3)]
            # ~12 MB of events: more than the window (1 MiB) and every socket buffer between.
            filler = "x" * (100 * 1024)
            for i in range(120):
                status, body = api.request("POST", "/api/v1/namespaces/silent/configmaps",
                                           {"metadata": {"name": "big-%03d" % i},
                                            "data": {"filler": filler}})
                self.assertEqual(status, 201, body)
                for w in readers:
                    w.events_until(lambda e, i=i: e["object"]["metadata"]["name"] ==
                                   "big-%03d" % i)
            # Ended with a reset once it stalled; its memory is released.
            self.assertTrue(wait_until(
                lambda: "stream ended: the client read nothing of its response" in server.stderr(),
                30),
                server.stderr()[-2000:])
            self.assertTrue(ends_within(silent, 30))
            for w in readers:
                w.close()
        finally:
            server.stop()


class ConcurrentListTest(unittest.TestCase):

    def test_lists_are_streamed_not_materialised(self):
        server = ApiServer.start()
        try:
            api = server.api
            api.ensure_namespace("big")
            value = "x" * (100 * 1024)
            items = 600  # more than the 500 answered in one body
            for i in range(items):
                status, body = api.request("POST", "/api/v1/namespaces/big/configmaps", {
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "cm-%04d" % i}, "data": {"v": value}})
                self.assertEqual(status, 201, body)
            body_mib = items * len(value) / (1 << 20)  # ~59 MiB
            pid = server.process.pid
            # Reset the peak RSS (VmHWM) to the current RSS.
            with open("/proc/%d/clear_refs" % pid, "w") as f:
                f.write("5")
            before = vm_kib(pid, "VmRSS")
            sizes = []
            errors = []

            def list_once():
                # Read as a stream and count the items: 8 parsed copies would weigh on the
                # test process, not on the server.
                try:
                    connection = api.connect(timeout=60)
                    connection.request("GET", "/api/v1/namespaces/big/configmaps", headers={
                        "Accept": "application/json", "Authorization": "Bearer " + api.token})
                    response = connection.getresponse()
                    if response.status != 200:
                        errors.append(response.status)
                    count, tail, marker = 0, b"", b'"name":"cm-'
                    while True:
                        chunk = response.read(256 * 1024)
                        if not chunk:
                            break
                        data = tail + chunk
                        count += data.count(marker)
                        tail = data[-(len(marker) - 1):]
                    if not data.rstrip().endswith(b"]}"):
                        errors.append("truncated list")
                    sizes.append(count)
                    connection.close()
                except Exception as e:  # pylint: disable=broad-except
                    errors.append(repr(e))

            threads = [threading.Thread(target=list_once) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            self.assertEqual(errors, [])
            self.assertEqual(sizes, [items] * 8)
            growth_mib = (vm_kib(pid, "VmHWM") - before) / 1024
            print("8 concurrent LISTs of %.0f MiB: peak RSS +%.1f MiB" % (body_mib, growth_mib))
            # Materialised, each LIST alone holds its whole body (8 of them: ~470 MiB).
            self.assertLess(growth_mib, body_mib / 2)
        finally:
            server.stop()


class InflightLimitTest(unittest.TestCase):

    def test_too_many_requests_and_watches_not_counted(self):
        server = ApiServer.start(extra_args=("--max-requests-inflight=1",
                                             "--max-mutating-requests-inflight=1"))
        try:
            api = server.api
            api.ensure_namespace("inflight")
            # A watch is long-running: it holds no read slot.
            watch = api.watch("/api/v1/namespaces/inflight/configmaps?watch=1")
            self.assertEqual(watch.status, 200)
            self.assertEqual(api.request("GET", "/api/v1/namespaces/inflight")[0], 200)
            # A create whose body is still arriving holds the one write slot.
            held = api.context.wrap_socket(socket.create_connection((api.host, api.port), 20),
                                           server_hostname=api.host)
            body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "held"}}).encode()
            held.sendall(("POST /api/v1/namespaces/inflight/configmaps HTTP/1.1\r\n"
                          "Host: x\r\nAuthorization: Bearer %s\r\n"
                          "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" %
                          (api.token, len(body))).encode() + body[:10])
            refused = None
            for _ in range(50):  # until the held request has taken its slot
                status, headers, data = api.raw_request(
                    "POST", "/api/v1/namespaces/inflight/configmaps",
                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "x-"}})
                if status == 429:
                    refused = (headers, json.loads(data))
                    break
                time.sleep(0.1)
            self.assertIsNotNone(refused, "no 429 while a write was in flight")
            headers, status_body = refused
            self.assertEqual(headers.get("retry-after"), "1")
            self.assertEqual(status_body["kind"], "Status")
            self.assertEqual(status_body["reason"], "TooManyRequests")
            self.assertEqual(status_body["code"], 429)
            # Reads have their own limit.
            self.assertEqual(api.request("GET", "/api/v1/namespaces/inflight")[0], 200)
            held.sendall(body[10:])
            held.settimeout(20)
            self.assertIn(b" 201 ", held.recv(4096))
            held.close()
            status, _ = api.request("POST", "/api/v1/namespaces/inflight/configmaps", {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after"}})
            self.assertEqual(status, 201)
            watch.close()
        finally:
            server.stop()

    def test_flags_are_validated(self):
        import subprocess  # pylint: disable=import-outside-toplevel
        for flag in ("--max-connections=0", "--max-requests-inflight=-1",
                     "--max-mutating-requests-inflight=x"):
            result = subprocess.run([apiserver_fixture.binary_path(), "apiserver", flag],
                                    capture_output=True, text=True, timeout=20)
            self.assertEqual(result.returncode, 2, (flag, result.stderr))
            self.assertIn(flag.split("=")[0], result.stderr)


class StuckListsTest(unittest.TestCase):
    """Issue 25: 400 clients holding LISTs they never read took every --max-requests-inflight
    seat until the 30 s write timeout, and a plain GET got 429 for 25 s. Here at a tenth of the
    scale (40 seats, 40 clients): the proportions are the same, the kernel memory the stuck
    answers pin is not (tools/measure-connections --scenario stuck-lists runs the full 400)."""

    def test_gets_are_served_while_clients_hold_every_list_seat(self):
        server = ApiServer.start(extra_args=("--max-requests-inflight=40",))
        try:
            api = server.api
            fill_namespace(api, "big", unreadable_list_bytes())
            stuck = StuckLists(api, "/api/v1/namespaces/big/configmaps", 40)
            try:
                # The LIST share (30 seats) is held once a LIST of ours is refused.
                self.assertTrue(wait_until(lambda: timed_requests(
                    api, "/api/v1/namespaces", 1, 0)[0][0] == 429, 30),
                                "LISTs are not refused: the stuck clients hold no seats")
                gets = timed_requests(api, "/api/v1/namespaces/default", 20)
                discovery = timed_requests(api, "/api", 5)
            finally:
                stuck.stop()
            print("GETs while 40 clients hold LISTs: %s" %
                  ", ".join("%d in %.0f ms" % (st, sec * 1000) for st, sec in gets))
            self.assertEqual([st for st, _ in gets], [200] * 20)
            self.assertEqual([st for st, _ in discovery], [200] * 5)
        finally:
            server.stop()

    def test_a_list_nobody_reads_is_cut_after_the_write_stall_timeout(self):
        server = ApiServer.start(extra_args=("--write-stall-timeout=1s",))
        try:
            api = server.api
            fill_namespace(api, "big", unreadable_list_bytes())
            stuck = StuckLists(api, "/api/v1/namespaces/big/configmaps", 5, refill=False)
            try:
                # Bounded by 30 s, 30 times the timeout (a 30 s write timeout held them before).
                self.assertTrue(wait_until(lambda: stuck.closed_by_server() == 5, 30),
                                "%d of 5 stuck LISTs cut" % stuck.closed_by_server())
            finally:
                stuck.stop()
            lines = [line for line in server.stderr().splitlines()
                     if "read nothing of its response" in line]
            self.assertGreater(len(lines), 0)
            self.assertLessEqual(len(lines), 5)
            self.assertEqual(api.request("GET", "/api/v1/namespaces/default")[0], 200)
        finally:
            server.stop()


class ConnectionFloodTest(unittest.TestCase):

    def _handshaken(self, api):
        """A client past its TLS handshake that has not sent its request yet."""
        raw = socket.create_connection((api.host, api.port), 20)
        return api.context.wrap_socket(raw, server_hostname=api.host)

    def _request(self, tls):
        """GET /api/v1/namespaces/default on `tls`; the status, or -1 when the server closed it."""
        try:
            tls.settimeout(20)
            tls.sendall(("GET /api/v1/namespaces/default HTTP/1.1\r\nHost: x\r\n"
                         "Authorization: Bearer %s\r\nConnection: close\r\n\r\n" %
                         self.api.token).encode())
            head = tls.recv(64)
            return int(head.split()[1]) if head.startswith(b"HTTP/1.1 ") else -1
        except (OSError, ValueError, IndexError):
            return -1
        finally:
            close_all([tls])

    def test_silent_connections_do_not_evict_clients_that_take_a_moment(self):
        # Issue 25: 25 % of clients that waited 0.5 s before their request were evicted by a
        # flood of new connections. The unauthenticated pool is 256: each round floods it.
        server = ApiServer.start()
        try:
            self.api = api = server.api
            pid = server.process.pid
            self.assertEqual(api.request("GET", "/api/v1/namespaces/default")[0], 200)
            base_fds = fds_of(pid)
            lost = 0
            for _ in range(10):
                client = self._handshaken(api)
                flood = open_idle_connections(api.host, api.port, 300)
                try:
                    # The server holds (nearly) a full pool of them: the flood evicts. (Its
                    # descriptors are counted, not awaited exactly: the client must send its
                    # request within the server's 10 s authentication deadline.)
                    wait_until(lambda: fds_of(pid) >= base_fds + 200, 5)
                    if self._request(client) != 200:
                        lost += 1
                finally:
                    close_all(flood)
            self.assertEqual(lost, 0, "%d of 10 clients lost to silent connections" % lost)
            # A flood that has sent its ClientHello but not finished a handshake ranks below a
            # client past its handshake, too.
            client = self._handshaken(api)
            flood = open_handshaking_connections(api.host, api.port, 300)
            try:
                self.assertEqual(self._request(client), 200)
            finally:
                close_all(flood)
        finally:
            server.stop()

    def test_idle_keep_alive_connections_make_room(self):
        # Issue 25: authenticated idle connections filled --max-connections for their 30 s
        # keep-alive, and every new client was refused.
        server = ApiServer.start(extra_args=("--max-connections=20",))
        try:
            api = server.api
            idle = []
            for _ in range(20):
                connection = api.connect()
                connection.request("GET", "/api/v1/namespaces/default", headers={
                    "Authorization": "Bearer " + api.token})
                response = connection.getresponse()
                response.read()
                self.assertEqual(response.status, 200)
                idle.append(connection)
            status, _ = api.request("GET", "/api/v1/namespaces/default")
            self.assertEqual(status, 200)
            self.assertIn("idle keep-alive connection closed for a newer one", server.stderr())
            for connection in idle:
                connection.close()
        finally:
            server.stop()

    def test_a_refused_client_gets_429_with_retry_after(self):
        # Issue 25: a client refused at --max-connections saw its TLS connection closed without
        # an answer; kube-apiserver answers 429 with Retry-After.
        server = ApiServer.start(extra_args=("--max-connections=10",))
        try:
            api = server.api
            watches = [api.watch("/api/v1/namespaces/default/configmaps?watch=1")
                       for _ in range(10)]
            try:
                self.assertTrue(all(w.status == 200 for w in watches))
                status, headers, data = api.raw_request("GET", "/api/v1/namespaces/default")
            finally:
                for w in watches:
                    w.close()
            self.assertEqual(status, 429)
            self.assertEqual(headers.get("retry-after"), "1")
            body = json.loads(data)
            self.assertEqual((body["kind"], body["reason"], body["code"]),
                             ("Status", "TooManyRequests", 429))
            # The watches gone, new clients are served again.
            self.assertTrue(wait_until(lambda: api.request(
                "GET", "/api/v1/namespaces/default")[0] == 200, 20))
        finally:
            server.stop()


if __name__ == "__main__":
    bazel_unittest.main()
