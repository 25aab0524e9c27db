"""A loopback TCP proxy a test controls, to cut a client off from a server without touching
either: `cut()` closes every connection and refuses new ones, `blackhole()` keeps accepting
but forwards nothing (a partition: the client sees silence, not an error), `restore()` forwards
again. TLS passes through untouched (the server's certificate must name 127.0.0.1).

    proxy = tcp_proxy.TcpProxy(target_port=6443)
    kubeconfig = ... server https://127.0.0.1:<proxy.port> ...
    proxy.cut(); ...; proxy.restore()
    proxy.close()

Binds 127.0.0.1 only; every thread is a daemon and every socket is closed by close().
"""

import select
import socket
import threading

FORWARD = "forward"
CUT = "cut"
BLACKHOLE = "blackhole"


class TcpProxy:

    def __init__(self, target_port, target_host="127.0.0.1"):
        self.target = (target_host, target_port)
        self._lock = threading.Lock()
        self._mode = FORWARD
        self._connections = []  # [client socket, server socket or None]
        self._closed = False
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port = self._listener.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._accept_loop, daemon=True).start()

    @property
    def mode(self):
        with self._lock:
            return self._mode

    def cut(self):
        """Closes every open connection; new ones are accepted and closed at once."""
        with self._lock:
            self._mode = CUT
            connections, self._connections = self._connections, []
        for pair in connections:
            _close_all(pair)

    def blackhole(self):
        """Keeps every connection open but forwards no byte in either direction."""
        with self._lock:
            self._mode = BLACKHOLE

    def restore(self):
        with self._lock:
            self._mode = FORWARD

    def close(self):
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        _close_all([self._listener])
        for pair in connections:
            _close_all(pair)

    def _accept_loop(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._closed:
                    client.close()
                    return
                self.accepted += 1
                mode = self._mode
            if mode == CUT:
                client.close()
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            pair = [client, server]
            with self._lock:
                self._connections.append(pair)
            threading.Thread(target=self._pump, args=(pair,), daemon=True).start()

    def _pump(self, pair):
        client, server = pair
        sockets = [client, server]
        try:
            while True:
                with self._lock:
                    if pair not in self._connections:
                        return
                    mode = self._mode
                if mode == BLACKHOLE:
                    # Hold the bytes: read nothing, so the peers' buffers fill and stall.
                    select.select([], [], [], 0.1)
                    continue
                readable, _, _ = select.select(sockets, [], [], 0.1)
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    (server if sock is client else client).sendall(data)
        except OSError:
            return
        finally:
            with self._lock:
                if pair in self._connections:
                    self._connections.remove(pair)
            _close_all(pair)


def _close_all(sockets):
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            sock.close()
        except OSError:
            pass
