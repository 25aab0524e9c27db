"""Background tasks: long-running functions of a controller that the host starts and stops.

    poller = Controller("poller").for_("", "v1", "ConfigMap")

    @poller.background_task("watch-file")
    def watch_file(ctx):
        while not ctx.wait(1.0):                 # True once the host stops the task
            for namespace, name in read_changes():
                ctx.enqueue(namespace, name)     # reconcile that primary of this controller

The host sends StartTasks when the controller starts on this plugin instance and StopTasks when
it stops (operator removed, plugin swapped out, leadership lost, host shutting down); the tasks
of a Reconcile stream also stop when that stream ends. A task that raises is logged, reported to
the host (it shows in /debug/dump with its restarts and last error) and started again after a
backoff (1 s doubling up to 60 s by default); it never takes the plugin down. A task that returns
while not stopped is finished and not restarted.

`TaskContext.enqueue` checks the key as the host does (ValueError for a malformed namespace or
name); the host may still refuse it (the controller stopped, or over its enqueue rate): such
refusals are logged by the SDK.

Threading: each task runs on its own thread. A TaskRunner belongs to one stream; its `_lock`
guards the running set. `send` (the stream's queue) is thread-safe.
"""

from __future__ import annotations

import itertools
import re
import threading
from typing import Callable, Dict, List, Optional, Tuple

from ctrlhost_sdk import log
from ctrlhost_sdk._proto import pb

_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$")

TaskFn = Callable[["TaskContext"], None]
_ids = itertools.count(1)


def check_key(namespace: str, name: str, namespaced: Optional[bool] = None) -> None:
    """Raises ValueError when (namespace, name) is not a well-formed key (the host's rules)."""
    if len(name) > 253 or not _SUBDOMAIN.match(name):
        raise ValueError("name %r is not a valid object name (RFC 1123 subdomain)" % (name,))
    if namespace and not _LABEL.match(namespace):
        raise ValueError("namespace %r is not a valid namespace (RFC 1123 label)" % (namespace,))
    if namespaced is True and not namespace:
        raise ValueError("namespace missing: the primary kind is namespaced")
    if namespaced is False and namespace:
        raise ValueError("namespace %r given for a cluster-scoped primary kind" % (namespace,))


class TaskContext:
    """What a task function gets. Thread-safe."""

    def __init__(self, controller: str, task: str, stopped: threading.Event,
                 send: Callable[[pb.ReconcileResponse], None]) -> None:
        self.controller = controller
        self.task = task
        self.cancelled = stopped  # set when the host stops the task
        self.stop_reason = ""     # why, once cancelled: "plugin swapped out", "stream ended", ...
        self._send = send

    def wait(self, seconds: float) -> bool:
        """Sleeps up to `seconds`; True as soon as the task is stopped (then return)."""
        return self.cancelled.wait(seconds)

    def enqueue(self, namespace: str, name: str) -> None:
        """Asks the host to reconcile the primary (namespace, name) of this controller.
        ValueError for a malformed key; a no-op once the task is stopped."""
        check_key(namespace, name)
        if self.cancelled.is_set():
            return
        self._send(pb.ReconcileResponse(task_enqueue=pb.TaskEnqueue(
            controller=self.controller, task=self.task, namespace=namespace, name=name,
            enqueue_id=next(_ids))))


class TaskRunner:
    """The background tasks started on one Reconcile stream."""

    def __init__(self, tasks_of: Callable[[str], List[Tuple[str, TaskFn]]],
                 send: Callable[[pb.ReconcileResponse], None],
                 backoff: Tuple[float, float] = (1.0, 60.0)) -> None:
        self._tasks_of = tasks_of
        self._send = send
        self._backoff = backoff
        self._lock = threading.Lock()
        self._running: Dict[str, Tuple[List[TaskContext], List[threading.Thread]]] = {}

    def start(self, controller: str) -> None:
        tasks = self._tasks_of(controller)
        if not tasks:
            log.warning("StartTasks for a controller without background tasks",
                        controller=controller)
            return
        with self._lock:
            if controller in self._running:
                return  # idempotent
            stop = threading.Event()  # one per controller: its tasks stop together
            contexts = [TaskContext(controller, name, stop, self._send) for name, _ in tasks]
            threads = [threading.Thread(target=self._run, args=(ctx, fn),
                                        name="ctrlhost-task-%s-%s" % (controller, ctx.task),
                                        daemon=True) for ctx, (_, fn) in zip(contexts, tasks)]
            self._running[controller] = (contexts, threads)
        log.info("background tasks started", controller=controller, tasks=len(threads))
        for t in threads:
            t.start()

    def stop(self, controller: str = "", reason: str = "") -> List[threading.Thread]:
        """Stops the tasks of `controller` ("" = all); returns their threads (to join)."""
        with self._lock:
            names = [controller] if controller else list(self._running)
            stopped = [self._running.pop(n) for n in names if n in self._running]
        threads: List[threading.Thread] = []
        for contexts, ts in stopped:
            for ctx in contexts:
                ctx.stop_reason = reason
            contexts[0].cancelled.set()
            threads.extend(ts)
        if stopped:
            log.info("background tasks stopped", controller=controller or "*", reason=reason)
        return threads

    def running(self) -> List[str]:
        with self._lock:
            return sorted(self._running)

    def _status(self, controller: str, task: str, state: int, restarts: int,
                error: str = "") -> None:
        self._send(pb.ReconcileResponse(task_status=pb.TaskStatus(
            controller=controller, task=task, state=state, restarts=restarts,
            last_error=error[:1024])))

    def _run(self, ctx: TaskContext, fn: TaskFn) -> None:
        controller, name, stop = ctx.controller, ctx.task, ctx.cancelled
        restarts = 0
        last_error = ""  # reported with every state: the last failure's message
        delay = self._backoff[0]
        while not stop.is_set():
            self._status(controller, name, pb.TASK_STATE_RUNNING, restarts, last_error)
            try:
                fn(ctx)
            except Exception as e:  # noqa: BLE001 - a task never takes the plugin down
                if stop.is_set():
                    break
                restarts += 1
                log.error("background task failed; restarting after backoff",
                          controller=controller, task=name, restarts=restarts,
                          backoff_seconds=delay, error=repr(e))
                last_error = repr(e)
                self._status(controller, name, pb.TASK_STATE_BACKOFF, restarts, last_error)
                if stop.wait(delay):
                    break
                delay = min(delay * 2, self._backoff[1])
                continue
            if not stop.is_set():
                log.info("background task finished", controller=controller, task=name)
                self._status(controller, name, pb.TASK_STATE_FINISHED, restarts, last_error)
                return
        self._status(controller, name, pb.TASK_STATE_STOPPED, restarts, last_error)
