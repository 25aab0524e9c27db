"""The conformance "scenario" controller on the Python SDK (see scenario.cc for the outcomes)."""

import sys

from ctrlhost_sdk import Controller, Plugin, Result, new_object

scenario = (Controller("scenario")
            .for_("e2e.ctrlhost.dev", "v1", "Scenario")
            .owns("", "v1", "ConfigMap"))


@scenario.reconcile
def reconcile(req):
    if not req.exists or req.deleting:
        return Result()
    outcome = req.spec.get("outcome", "ok")
    result = Result()
    if outcome == "requeue":
        result.status["phase"] = "Waiting"
        result.requeue_after = 30
    elif outcome == "retryable":
        return Result.retryable_error("the scenario asks for a retry")
    elif outcome == "terminal":
        result.event("Warning", "GivingUp", "the scenario asks to stop")
        result.set_error("terminal", "the scenario asks to stop")
    elif outcome == "forbidden":
        result.desire(new_object("v1", "Secret", req.name))["stringData"] = {"token": "x"}
    else:
        data = req.spec.get("data")
        result.desire(new_object("v1", "ConfigMap", req.name))["data"] = (
            data if isinstance(data, dict) else {})
        result.status["phase"] = "Done"
    return result


if __name__ == "__main__":
    plugin = Plugin("scenario", "1.0.0")
    plugin.add(scenario)
    sys.exit(plugin.run())
