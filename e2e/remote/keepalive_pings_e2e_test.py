"""An SDK plugin server accepts the host's HTTP/2 keepalive pings without GOAWAY
(docs/protocol.md, "Liveness"); $CTRLHOST_E2E_WEBAPP picks the WebApp plugin's language (cpp,
py, node; one Bazel target each).

Speaks raw HTTP/2 to the plugin on 127.0.0.1 (no gRPC call, so no data): the connection preface,
SETTINGS, then PINGs back to back. Every PING must be acknowledged and no GOAWAY sent. A gRPC
server left at its defaults (one ping per 5 minutes without data, 2 strikes) answers the third
one with GOAWAY "too_many_pings".
"""

import os
import socket
import struct
import time
import unittest

from e2e.remote import remote_mtls_e2e_test as remote
from tools.internal import bazel_unittest

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS, PING, GOAWAY = 4, 6, 7
ACK = 1
PINGS = 6
READ_SECONDS = 10


def frame(kind, flags, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + b"\0\0\0\0" + payload


class Frames:
    """Reads HTTP/2 frames from a socket with a bounded wait."""

    def __init__(self, sock):
        self.sock = sock
        self.buffer = b""

    def _read(self, n, deadline):
        while len(self.buffer) < n:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = self.sock.recv(65536)
            if not chunk:
                raise AssertionError("the plugin closed the connection")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def next(self, deadline):
        header = self._read(9, deadline)
        length = int.from_bytes(header[:3], "big")
        return header[3], header[4], self._read(length, deadline)


class KeepalivePingsTest(unittest.TestCase):

    def setUp(self):
        self.port = remote.free_port()
        self.plugin = remote.PluginProcess(
            remote.plugin_env(CTRLHOST_PLUGIN_ADDRESS="127.0.0.1:%d" % self.port),
            os.path.join(remote.apiserver_fixture.temp_root(),
                         "pings-plugin-%d.log" % self.port))
        deadline = time.monotonic() + remote.WAIT_SECONDS
        while True:
            self.assertTrue(self.plugin.alive(), self.plugin.log())
            try:
                self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=1)
                break
            except OSError:
                self.assertLess(time.monotonic(), deadline, self.plugin.log())
                time.sleep(0.1)

    def tearDown(self):
        self.sock.close()
        code = self.plugin.stop()
        self.assertEqual(code, 0, self.plugin.log())

    def test_back_to_back_pings_are_acknowledged(self):
        frames = Frames(self.sock)
        self.sock.sendall(PREFACE + frame(SETTINGS, 0))
        acked = 0
        for i in range(PINGS):
            payload = struct.pack(">Q", i + 1)
            self.sock.sendall(frame(PING, 0, payload))
            deadline = time.monotonic() + READ_SECONDS
            while True:
                kind, flags, body = frames.next(deadline)
                self.assertNotEqual(kind, GOAWAY, "GOAWAY after %d pings: %r" % (acked, body))
                if kind == SETTINGS and not flags & ACK:
                    self.sock.sendall(frame(SETTINGS, ACK))
                if kind == PING and flags & ACK and body == payload:
                    acked += 1
                    break
        self.assertEqual(acked, PINGS)


if __name__ == "__main__":
    bazel_unittest.main()
