"""The background-task e2e plugin (tasks_e2e_test.py), on the Python SDK.

Controller "poke" reconciles ConfigMaps labelled tasks-e2e=true. Its background task "poll"
reads $TASK_DIR/names every 100 ms; each new line "namespace/name" is remembered in this process
and enqueued. A reconcile of a remembered object desires the child ConfigMap NAME-poked with
data.version = $TASK_VERSION, so the child says which plugin instance's task asked for it.
Each task writes what it does to $TASK_DIR/$TASK_VERSION.log ("started", "enqueue NS/NAME",
"stopped: REASON") so the test can tell a stopped task from a killed process.
The task "flaky" raises once, then waits: the host's /debug/dump shows its restart and error.
"""

import os
import sys
import threading

from ctrlhost_sdk import Controller, Plugin, Result, new_object

TASK_DIR = os.environ["TASK_DIR"]
VERSION = os.environ.get("TASK_VERSION", "v1")
LOG = os.path.join(TASK_DIR, VERSION + ".log")

_lock = threading.Lock()
_poked = set()  # keys the task enqueued, guarded by _lock
_log_lock = threading.Lock()


def log(line):
    with _log_lock, open(LOG, "a", encoding="utf-8") as f:
        f.write(line + "\n")


poke = (Controller("poke").for_("", "v1", "ConfigMap").label_selector("tasks-e2e=true")
        .owns("", "v1", "ConfigMap"))
if "TASK_MAX_CONCURRENT" in os.environ:
    # Another Describe (the test's v2): the host replaces the controllers on the swap.
    poke.max_concurrent(int(os.environ["TASK_MAX_CONCURRENT"]))


@poke.reconcile
def reconcile(req):
    if not req.exists or req.deleting:
        return Result()
    with _lock:
        poked = req.namespace + "/" + req.name in _poked
    result = Result()
    if poked:
        child = result.desire(new_object("v1", "ConfigMap", req.name + "-poked"))
        child["metadata"]["labels"] = {"tasks-e2e-child": "true"}
        child["data"] = {"version": VERSION}
    return result


@poke.background_task("poll")
def poll(ctx):
    log("started")
    seen = set()
    path = os.path.join(TASK_DIR, "names")
    while not ctx.wait(0.1):
        try:
            with open(path, encoding="utf-8") as f:
                lines = [line.strip() for line in f if line.strip()]
        except FileNotFoundError:
            continue
        for key in lines:
            if key in seen:
                continue
            seen.add(key)
            namespace, _, name = key.partition("/")
            with _lock:
                _poked.add(key)
            log("enqueue " + key)
            ctx.enqueue(namespace, name)
    log("stopped: " + ctx.stop_reason)


_flaky_runs = []


@poke.background_task("flaky")
def flaky(ctx):
    _flaky_runs.append(1)
    if len(_flaky_runs) == 1:
        raise ValueError("flaky task failed on its first run")
    ctx.wait(3600)


def main():
    plugin = Plugin("tasks", VERSION, task_backoff=(0.2, 1.0))
    plugin.add(poke)
    return plugin.run()


if __name__ == "__main__":
    sys.exit(main())
