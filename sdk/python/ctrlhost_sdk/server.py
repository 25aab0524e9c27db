"""The gRPC server behind Plugin.start(): Describe, the Reconcile streams and health.

Threading: grpcio runs each RPC on a thread of its server pool. A Reconcile stream's handler
starts a reader thread that takes requests off the stream and submits reconciles to the worker
pool; workers put their answers on the stream's queue and the handler yields them, so answers
go out in completion order. `PluginServer._cond` guards the in-flight count and the draining
flags; each stream's `_StreamState.lock` guards its cancel flags and counters.

The server knows the plugin only as a protocol.PluginHandler (it never imports plugin.py).
"""

from __future__ import annotations

import concurrent.futures
import os
import queue
import stat
import threading
import time
from typing import Any, Dict, Iterator, Optional, Set, Union

import grpc

from ctrlhost_sdk import log
from ctrlhost_sdk._awaitable import shared_loop
from ctrlhost_sdk._proto import HealthCheckResponse, add_health_to_server, pb, pb_grpc
from ctrlhost_sdk.protocol import SERVICE_NAME, DescribeRefused, PluginHandler
from ctrlhost_sdk.result import RESPONSE_TOO_LARGE, error_response
from ctrlhost_sdk.tasks import TaskRunner
from ctrlhost_sdk.tls import ServerTls, server_credentials


class _Done:
    """The end-of-stream marker put on a stream's queue."""


_DONE = _Done()


class _Health:
    """grpc.health.v1 for "" and the plugin service. Thread-safe: `_cond` guards the state."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._serving = False
        self._stopped = False

    def set(self, serving: bool) -> None:
        with self._cond:
            self._serving = serving
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def _status(self) -> int:
        H = HealthCheckResponse
        return H.SERVING if self._serving else H.NOT_SERVING

    def Check(self, request: Any, context: grpc.ServicerContext) -> Any:
        if request.service not in ("", SERVICE_NAME):
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
        with self._cond:
            return HealthCheckResponse(status=self._status())

    def Watch(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        if request.service not in ("", SERVICE_NAME):
            yield HealthCheckResponse(status=HealthCheckResponse.SERVICE_UNKNOWN)
            return
        last = None
        while True:
            with self._cond:
                if self._stopped or not context.is_active():
                    return
                status = self._status()
                if status == last:
                    self._cond.wait(0.1)  # re-checks is_active()
                    continue
            last = status
            yield HealthCheckResponse(status=status)


class _StreamState:
    def __init__(self, plugin: PluginHandler) -> None:
        self.lock = threading.Lock()
        self.cancel_flags: Dict[int, threading.Event] = {}
        self.in_flight = 0
        self.reading = True
        self.out: queue.SimpleQueue[Union[pb.ReconcileResponse, _Done]] = queue.SimpleQueue()
        # Background tasks started on this stream; stopped when it ends.
        # Handlers written before background tasks (test fakes) have neither member.
        self.tasks = TaskRunner(getattr(plugin, "tasks_of", lambda _controller: []),
                                self.out.put, getattr(plugin, "task_backoff", (1.0, 60.0)))

    def finish_if_idle(self) -> None:
        # Called with `lock` held.
        if not self.reading and self.in_flight == 0:
            self.out.put(_DONE)


class _Service(pb_grpc.ControllerPluginServiceServicer):
    def __init__(self, server: PluginServer) -> None:
        self._server = server

    def Describe(self, request: pb.DescribeRequest,
                 context: grpc.ServicerContext) -> pb.DescribeResponse:
        try:
            return self._server.plugin.describe(request)
        except DescribeRefused as e:
            log.error("describe refused", error=str(e))
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))

    def Reconcile(self, request_iterator: Iterator[pb.ReconcileRequest],
                  context: grpc.ServicerContext) -> Iterator[pb.ReconcileResponse]:
        state = _StreamState(self._server.plugin)
        self._server._add_stream(state)

        def host_gone() -> None:
            state.tasks.stop(reason="stream ended")
            state.out.put(_DONE)
        context.add_callback(host_gone)
        reader = threading.Thread(target=self._read, args=(request_iterator, state),
                                  name="ctrlhost-stream-reader", daemon=True)
        reader.start()
        try:
            while True:
                item = state.out.get()
                if isinstance(item, _Done):
                    return
                yield item
        finally:
            state.tasks.stop(reason="stream ended")
            self._server._remove_stream(state)

    def _read(self, request_iterator: Iterator[pb.ReconcileRequest], state: _StreamState) -> None:
        server = self._server
        try:
            for request in request_iterator:
                rid = request.request_id
                kind = request.WhichOneof("payload")
                if kind == "cancel":
                    with state.lock:
                        flag = state.cancel_flags.get(rid)
                    if flag is not None:
                        flag.set()
                    continue
                if kind == "start_tasks":
                    if not server.draining:
                        state.tasks.start(request.start_tasks.controller)
                    continue
                if kind == "stop_tasks":
                    state.tasks.stop(request.stop_tasks.controller, request.stop_tasks.reason)
                    continue
                if kind == "enqueue_refused":
                    r = request.enqueue_refused
                    log.warning("the host refused a background task's enqueue",
                                enqueue_id=r.enqueue_id, code=r.code, error=r.message)
                    continue
                if kind != "reconcile" or rid == 0:
                    log.warning("ignoring a malformed reconcile request", request_id=rid)
                    continue
                if server.draining:
                    state.out.put(error_response(rid, "plugin shutting down"))
                    continue
                flag = threading.Event()
                with state.lock:
                    state.cancel_flags[rid] = flag
                    state.in_flight += 1
                server._add_in_flight(1)
                try:
                    server.pool.submit(self._work, state, rid, request.reconcile, flag)
                except RuntimeError:  # pool shut down
                    self._done(state, rid)
                    state.out.put(error_response(rid, "plugin shutting down"))
        except grpc.RpcError:
            pass  # the stream broke; in-flight answers are dropped
        except Exception as e:  # noqa: BLE001
            log.error("reconcile stream reader failed", error=repr(e))
        finally:
            state.tasks.stop(reason="stream ended")
            with state.lock:
                state.reading = False
                state.finish_if_idle()

    def _work(self, state: _StreamState, rid: int, call: pb.ReconcileCall,
              flag: threading.Event) -> None:
        try:
            resp = self._server.plugin.handle(rid, call, flag)
            size = resp.ByteSize()
            if size > self._server.plugin.max_message_bytes:
                # Only this request fails; terminal, since it will not shrink on a retry.
                resp = error_response(rid, "response of %d bytes exceeds the message limit of %d"
                                      % (size, self._server.plugin.max_message_bytes),
                                      terminal=True, reason=RESPONSE_TOO_LARGE)
            if not flag.is_set():
                state.out.put(resp)
        except Exception as e:  # noqa: BLE001 - never lose an answer
            state.out.put(error_response(rid, "plugin failure: %r" % (e,)))
        finally:
            self._done(state, rid)

    def _done(self, state: _StreamState, rid: int) -> None:
        with state.lock:
            state.cancel_flags.pop(rid, None)
            state.in_flight -= 1
            state.finish_if_idle()
        self._server._add_in_flight(-1)


class PluginServer:
    """A started plugin server. Thread-safe."""

    def __init__(self, plugin: PluginHandler) -> None:
        self.plugin = plugin
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=plugin.worker_count(), thread_name_prefix="ctrlhost-reconcile")
        self._cond = threading.Condition()
        self._in_flight = 0
        self._draining = False
        self._streams: Set[_StreamState] = set()
        self._health = _Health()
        self._grpc: Optional[grpc.Server] = None
        self._holds_loop = False
        self.address: Optional[str] = None

    def start(self, listen: str, tls: Optional[ServerTls] = None) -> None:
        """Listens on `listen`, with TLS when `tls` is set (mutual when it has a client CA)."""
        if listen.startswith("unix:"):
            path = listen[len("unix:"):]
            try:
                if stat.S_ISSOCK(os.lstat(path).st_mode):
                    os.unlink(path)  # stale socket of an earlier instance
            except OSError:
                pass
        options = [
            ("grpc.max_receive_message_length", self.plugin.max_message_bytes),
            ("grpc.max_send_message_length", self.plugin.max_message_bytes),
            ("grpc.so_reuseport", 0),
            # Accept the host's HTTP/2 keepalive pings (every 10 s, also on an idle connection;
            # docs/protocol.md, "Liveness") down to one per second, never answering them with
            # GOAWAY "too_many_pings" (gRPC's default allows one per 5 minutes without calls).
            ("grpc.http2.min_ping_interval_without_data_ms", 1000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_ping_strikes", 0),
        ]
        # Each open stream and health watch holds a thread of this pool.
        self._grpc = grpc.server(
            concurrent.futures.ThreadPoolExecutor(max_workers=32,
                                                  thread_name_prefix="ctrlhost-grpc"),
            options=options)
        pb_grpc.add_ControllerPluginServiceServicer_to_server(_Service(self), self._grpc)
        add_health_to_server(self._health.Check, self._health.Watch, self._grpc)
        if tls is not None:
            port = self._grpc.add_secure_port(listen, server_credentials(tls))
        else:
            port = self._grpc.add_insecure_port(listen)
        if port == 0:
            raise OSError("cannot listen on %s" % listen)
        # Serving from the first answer: the host checks health as soon as the socket appears.
        self._health.set(True)
        self._grpc.start()
        # Async reconciles share one event loop for as long as the server runs (_awaitable.py).
        shared_loop.acquire()
        self._holds_loop = True
        if listen.startswith("unix:"):
            self.address = listen
        else:
            self.address = "%s:%d" % (listen.rpartition(":")[0], port)

    def set_serving(self, serving: bool) -> None:
        """Reports SERVING or NOT_SERVING on grpc.health.v1 (Check and every Watch), e.g. to
        pause while a dependency is down. The host sends no new reconciles while NOT_SERVING:
        they wait in the host, and restart it after its notServingTimeout (docs/protocol.md,
        "Liveness"). Ignored once draining (shutdown keeps NOT_SERVING)."""
        with self._cond:
            if self._draining:
                return
        self._health.set(serving)

    @property
    def draining(self) -> bool:
        with self._cond:
            return self._draining

    @property
    def in_flight(self) -> int:
        with self._cond:
            return self._in_flight

    def _add_in_flight(self, delta: int) -> None:
        with self._cond:
            self._in_flight += delta
            self._cond.notify_all()

    def _add_stream(self, state: _StreamState) -> None:
        with self._cond:
            self._streams.add(state)

    def _remove_stream(self, state: _StreamState) -> None:
        with self._cond:
            self._streams.discard(state)

    def shutdown(self, grace_seconds: float) -> int:
        """Drains: NOT_SERVING, refuses new work, waits up to grace_seconds for in-flight
        reconciles, then stops. Returns the number of reconciles abandoned."""
        with self._cond:
            if self._draining:
                return 0
            self._draining = True
        self._health.set(False)
        deadline = time.monotonic() + grace_seconds
        with self._cond:
            while self._in_flight > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            abandoned = self._in_flight
            streams = list(self._streams)
        self._health.stop()
        for state in streams:
            state.tasks.stop(reason="plugin shutting down")
            with state.lock:
                flags = list(state.cancel_flags.values())
            for flag in flags:
                flag.set()  # cooperative reconciles (req.cancelled) stop now
            state.out.put(_DONE)  # ends the stream: answers still running are dropped
        if self._grpc is not None:
            self._grpc.stop(0.5).wait(5)
        self.pool.shutdown(wait=False)
        if self._holds_loop:
            # The last holder stops the loop: coroutines still running (abandoned reconciles)
            # are cancelled, so their worker threads finish too.
            self._holds_loop = False
            shared_loop.release()
        return abandoned
