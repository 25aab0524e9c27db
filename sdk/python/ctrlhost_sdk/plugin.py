"""Plugin: the process that serves controllers to the ctrlhost host.

    plugin = Plugin("webapp", "1.0.0")
    plugin.add(controller)
    sys.exit(plugin.run())   # serves $CTRLHOST_PLUGIN_ADDRESS until SIGTERM

run() reads CTRLHOST_PLUGIN_ADDRESS ("unix:///path/to.sock", "unix:relative.sock" or
"host:port"; exit code 2 with a clear message when it is unset or malformed) and
CTRLHOST_PLUGIN_TLS_CERT_FILE/_KEY_FILE/_CLIENT_CA_FILE (TLS or mutual TLS, see tls.py;
plaintext only on Unix sockets and loopback hosts, else exit code 2), serves Describe,
grpc.health.v1.Health and the Reconcile stream, and on SIGTERM or SIGINT drains: health turns
NOT_SERVING, new reconciles are answered with a retryable error, in-flight reconciles get up to
`drain_seconds` to finish (then they are cancelled and abandoned), the server stops and the
process exits 0 (run() returns 0, or exits at once when reconciles were abandoned).

Concurrency: reconciles run on a thread pool (`workers`, default the sum of the controllers'
max_concurrent, at least 4); answers go back in completion order. A CancelNotice sets the
request's `cancelled` flag and its answer is dropped.

Reconcile functions may be plain functions or `async def` coroutines (see controller.py).

Thread-safety: declare controllers before start(); afterwards the Plugin is read-only except for
the negotiated capabilities (guarded by `_lock`). A Plugin is a protocol.PluginHandler: that is
all the server (server.py) knows of it.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
from typing import Dict, FrozenSet, List, Optional, Tuple

from ctrlhost_sdk import log
from ctrlhost_sdk._proto import pb
from ctrlhost_sdk.controller import Controller
from ctrlhost_sdk.protocol import (  # noqa: F401 - re-exported, their historical home
    ADDRESS_ENV,
    MAX_MESSAGE_BYTES,
    PROTOCOL_VERSION,
    SERVICE_NAME,
    DescribeRefused,
)
from ctrlhost_sdk.result import ALL_CAPABILITIES, error_response
from ctrlhost_sdk.server import PluginServer
from ctrlhost_sdk.tasks import TaskFn
from ctrlhost_sdk.tls import ServerTls, check_plaintext_allowed, server_tls_from_env


def parse_address(address: str) -> Tuple[str, Optional[str]]:
    """The gRPC listen address for CTRLHOST_PLUGIN_ADDRESS; ValueError when malformed."""
    if not address:
        raise ValueError("%s is not set (want unix:///path/to.sock or host:port)" % ADDRESS_ENV)
    if address.startswith("unix:"):
        path = address[len("unix:"):]
        if path.startswith("//"):
            path = path[2:]
        if not path or "\0" in path:
            raise ValueError("%s=%r names no socket path" % (ADDRESS_ENV, address))
        if len(path.encode()) > 107:
            raise ValueError("%s: socket path longer than 107 bytes" % ADDRESS_ENV)
        return "unix:" + path, path
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError("%s=%r is neither unix:///path nor host:port" % (ADDRESS_ENV, address))
    return address, None


class Plugin:
    """The controllers of one plugin process and how they are served."""

    def __init__(self, name: str, version: str, workers: Optional[int] = None,
                 drain_seconds: float = 10.0, max_message_bytes: int = MAX_MESSAGE_BYTES,
                 task_backoff: Tuple[float, float] = (1.0, 60.0)):
        self.name = name
        self.task_backoff = task_backoff
        self.version = version
        self.workers = workers
        self.drain_seconds = drain_seconds
        self.max_message_bytes = max_message_bytes
        self._controllers: Dict[str, Controller] = {}
        self._lock = threading.Lock()
        self._capabilities: FrozenSet[int] = frozenset(ALL_CAPABILITIES)  # until Describe

    def add(self, controller: Controller) -> Controller:
        if controller.name in self._controllers:
            raise ValueError("duplicate controller %r" % controller.name)
        controller.spec()  # validates now, not at the first Describe
        self._controllers[controller.name] = controller
        return controller

    @property
    def controllers(self) -> Dict[str, Controller]:
        return dict(self._controllers)

    @property
    def capabilities(self) -> FrozenSet[int]:
        with self._lock:
            return self._capabilities

    def worker_count(self) -> int:
        if self.workers:
            return self.workers
        total = sum(max(1, c.spec().max_concurrent_reconciles) for c in self._controllers.values())
        return max(4, total)

    def describe(self, request: pb.DescribeRequest) -> pb.DescribeResponse:
        """The pb.DescribeResponse; DescribeRefused when the host and plugin cannot agree."""
        if not self._controllers:
            raise DescribeRefused("plugin %r declares no controller" % self.name)
        offered = list(request.protocol_versions)
        if PROTOCOL_VERSION not in offered:
            raise DescribeRefused('plugin "%s" speaks protocol %s only; the host offered [%s]'
                                  % (self.name, PROTOCOL_VERSION, ", ".join(offered)))
        host = {c for c in request.capabilities if c in ALL_CAPABILITIES}
        for c in self._controllers.values():
            for needed in sorted(c.required_capabilities()):
                if needed not in host:
                    raise DescribeRefused('controller "%s" needs %s, which the host does not offer'
                                          % (c.name, pb.Capability.Name(needed)))
        with self._lock:
            self._capabilities = frozenset(host)
        resp = pb.DescribeResponse(protocol_version=PROTOCOL_VERSION, plugin_name=self.name,
                                   plugin_version=self.version,
                                   capabilities=sorted(ALL_CAPABILITIES))
        for c in self._controllers.values():
            resp.controllers.append(c.spec())
        log.info("plugin described", plugin=self.name, host_version=request.host_version,
                 instance=request.instance_name, controllers=len(self._controllers))
        return resp

    def tasks_of(self, controller: str) -> List[Tuple[str, TaskFn]]:
        c = self._controllers.get(controller)
        return c.tasks if c is not None else []

    def handle(self, request_id: int, call: pb.ReconcileCall,
               cancelled: Optional[threading.Event] = None) -> pb.ReconcileResponse:
        """One reconcile; never raises."""
        controller = self._controllers.get(call.controller)
        if controller is None:
            return error_response(request_id, 'plugin "%s" has no controller "%s"'
                                  % (self.name, call.controller), terminal=True)
        resp = controller.invoke(request_id, call, self.capabilities, cancelled)
        if resp.HasField("error"):
            log.warning("reconcile failed", controller=call.controller, namespace=call.namespace,
                        name=call.name, trace_id=call.trace_id, error=resp.error.message)
        return resp

    def start(self, address: str, tls: Optional[ServerTls] = None) -> PluginServer:
        """Starts serving on a gRPC listen address ("unix:/path", "127.0.0.1:0") and returns the
        running server (see server.PluginServer), with TLS when `tls` is set. Raises OSError
        when it cannot listen, ValueError for plaintext on a non-loopback TCP address."""
        if tls is None:
            check_plaintext_allowed(address)
        server = PluginServer(self)
        server.start(address, tls)
        return server

    def run(self, address: Optional[str] = None, install_signals: bool = True) -> int:
        """Serves until SIGTERM/SIGINT; returns the process exit code (0 after a graceful stop,
        1 when it cannot listen, 2 for a bad address or declaration)."""
        raw = address if address is not None else os.environ.get(ADDRESS_ENV, "")
        try:
            listen, _ = parse_address(raw)
            tls = server_tls_from_env()
            if tls is None:
                check_plaintext_allowed(listen)
            for c in self._controllers.values():
                c.spec()
            if not self._controllers:
                raise ValueError("plugin %r declares no controller" % self.name)
        except ValueError as e:
            log.error("cannot start plugin", plugin=self.name, error=str(e))
            sys.stderr.write("error: %s\n" % e)
            return 2
        stop = threading.Event()
        if install_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: stop.set())
            # `kill -USR1 PID` dumps every thread's stack to stderr (diagnosing a stuck plugin).
            faulthandler.register(signal.SIGUSR1, all_threads=True)
        try:
            server = self.start(listen, tls)
        except (OSError, RuntimeError) as e:
            log.error("cannot listen", plugin=self.name, address=listen, error=str(e))
            return 1
        log.info("plugin serving", plugin=self.name, version=self.version,
                 address=server.address, workers=self.worker_count(),
                 tls=tls.mode if tls is not None else "off")
        while not stop.wait(0.5):  # wakes periodically so the signal handler gets to run
            pass
        log.info("plugin draining", plugin=self.name, in_flight=server.in_flight)
        abandoned = server.shutdown(self.drain_seconds)
        log.info("plugin stopped", plugin=self.name, abandoned=abandoned)
        if abandoned:
            # Reconcile threads still running would hold the interpreter's exit (the pool joins
            # its threads at exit); the host has already requeued their keys.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        return 0
