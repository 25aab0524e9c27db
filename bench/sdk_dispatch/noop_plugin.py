"""The no-op plugin of the sdk-dispatch benchmark on the Python SDK: controller "echo" answers
every request with the status {"seen": NAME}, the same answer as the C++ baseline's."""

import os
import sys

from ctrlhost_sdk import Controller, Plugin, Result

echo = Controller("echo").for_("example.com", "v1", "WebApp").max_concurrent(64)


@echo.reconcile
def reconcile(req):
    result = Result()
    result.status["seen"] = req.name
    return result


if __name__ == "__main__":
    # NOOP_WORKERS overrides the SDK's thread-pool size (for tuning runs).
    plugin = Plugin("noop-py", "0.1.0", workers=int(os.environ.get("NOOP_WORKERS", "0")) or None)
    plugin.add(echo)
    sys.exit(plugin.run())
