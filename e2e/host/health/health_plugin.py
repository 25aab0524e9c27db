"""The health e2e plugin (health_e2e_test.py), on the Python SDK.

Controller "mirror" reconciles ConfigMaps labelled health-e2e=true: it desires the child
NAME-mirror whose data.value is the primary's data.value. Every reconcile appends
"<monotonic seconds> <health> <name> <value>" to $HEALTH_DIR/reconciles.log, <health> being what
the plugin reported on grpc.health.v1 when the request arrived, so the test can tell whether the
host sent a request while the plugin said NOT_SERVING.

The test flips health by writing SERVING or NOT_SERVING to $HEALTH_DIR/health (polled every
50 ms); the plugin then calls PluginServer.set_serving and writes the state to
$HEALTH_DIR/health.ack. SIGTERM drains as Plugin.run does.
"""

import os
import signal
import sys
import threading
import time

from ctrlhost_sdk import Controller, Plugin, Result, new_object
from ctrlhost_sdk.plugin import ADDRESS_ENV, parse_address

HEALTH_DIR = os.environ["HEALTH_DIR"]

_lock = threading.Lock()
_serving = True  # guarded by _lock


def append(name, line):
    with open(os.path.join(HEALTH_DIR, name), "a", encoding="utf-8") as f:
        f.write(line + "\n")


mirror = (Controller("mirror").for_("", "v1", "ConfigMap").label_selector("health-e2e=true")
          .owns("", "v1", "ConfigMap"))


@mirror.reconcile
def reconcile(req):
    with _lock:
        health = "SERVING" if _serving else "NOT_SERVING"
        value = ((req.object or {}).get("data") or {}).get("value", "")
        append("reconciles.log", "%.6f %s %s %s" % (time.monotonic(), health, req.name, value))
    result = Result()
    if req.object is None or req.deleting:
        return result
    child = result.desire(new_object("v1", "ConfigMap", req.name + "-mirror"))
    child["data"] = {"value": value}
    return result


def follow_health_file(server, stop):
    global _serving
    path = os.path.join(HEALTH_DIR, "health")
    current = "SERVING"
    while not stop.wait(0.05):
        try:
            with open(path, encoding="utf-8") as f:
                wanted = f.read().strip()
        except FileNotFoundError:
            continue
        if wanted not in ("SERVING", "NOT_SERVING") or wanted == current:
            continue
        with _lock:
            _serving = wanted == "SERVING"
        server.set_serving(wanted == "SERVING")
        current = wanted
        append("health.ack", wanted)


def main():
    plugin = Plugin("health-e2e", "0.1.0")
    plugin.add(mirror)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    listen, _ = parse_address(os.environ.get(ADDRESS_ENV, ""))
    server = plugin.start(listen)
    follower = threading.Thread(target=follow_health_file, args=(server, stop), daemon=True)
    follower.start()
    while not stop.wait(0.5):
        pass
    server.shutdown(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
