"""A test plugin on the SDK: controller "echo" (example.com/v1 Echo).

spec.gate: a file path; the reconcile waits until it exists (or the request is cancelled).
spec.raise: raise an exception with this message. Otherwise: status.echo = spec.message.
spec.pad: a number; status.pad is that many "x" (to make an answer larger than
$MAX_MESSAGE_BYTES, the plugin's message limit when set).
"""

import os
import sys

from ctrlhost_sdk import Controller, Plugin, Result

echo = Controller("echo").for_("example.com", "v1", "Echo").max_concurrent(8)


@echo.reconcile
def reconcile(req):
    gate = req.spec.get("gate")
    if isinstance(gate, str):
        while not os.path.exists(gate):
            if req.wait_cancelled(0.01):
                return Result.retryable_error("cancelled")
    if "raise" in req.spec:
        raise RuntimeError(str(req.spec["raise"]))
    result = Result()
    result.status["echo"] = req.spec.get("message", "")
    if isinstance(req.spec.get("pad"), int):
        result.status["pad"] = "x" * req.spec["pad"]
    return result


if __name__ == "__main__":
    plugin = Plugin("echo", "0.0.1", drain_seconds=float(os.environ.get("DRAIN_SECONDS", "30")),
                    max_message_bytes=int(os.environ.get("MAX_MESSAGE_BYTES", 64 << 20)))
    plugin.add(echo)
    sys.exit(plugin.run())
