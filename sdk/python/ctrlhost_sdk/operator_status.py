"""The standard operator status (as sdk/cpp's operator_status.h and sdk/node's
operator_status.js): status.phase, operatorVersion, targetVersion, observedVersion,
observedGeneration, and the conditions Available, Progressing, Degraded, Ready, Reconciling,
Stalled that OpenShift, kstatus (Flux, Argo CD) and `kubectl wait --for=condition=Available`
read. The host adds lastTransitionTime when a condition's status changes.

    set_operator_status(req, result, operator_version="1.4.0",
                        children_ready=state.all_ready, message="waiting for web")

The phase, first match wins:
  Deleting   the primary is being deleted
  Error      `failure` is set (a persistent failure: Degraded and Stalled True)
  Deployed   every child ready: observedVersion = targetVersion, Available True
  Upgrading  not ready and the last observedVersion differs from the target: Progressing True;
             Available stays True if it was (a normal upgrade is never Degraded)
  Deploying  not ready otherwise: Progressing True, Available False

Thread-safety: a pure function of its arguments.
"""

from __future__ import annotations

from ctrlhost_sdk.request import Request, find_path
from ctrlhost_sdk.result import FALSE, TRUE, Result


def _was_available(req: Request) -> bool:
    conditions = find_path(req.object, "status.conditions")
    if not isinstance(conditions, list):
        return False
    for c in conditions:
        if isinstance(c, dict) and c.get("type") == "Available":
            return bool(c.get("status") == "True")
    return False


def set_operator_status(req: Request, result: Result, operator_version: str,
                        target_version: str = "", children_ready: bool = False,
                        message: str = "", failure: str = "",
                        failure_reason: str = "Failed") -> None:
    target = target_version or operator_version
    previous = find_path(req.object, "status.observedVersion")
    previous = previous if isinstance(previous, str) else ""
    status = result.status
    status["operatorVersion"] = operator_version
    status["targetVersion"] = target
    status["observedGeneration"] = req.generation

    def put(kind: str, value: bool, reason: str, text: str) -> None:
        result.set_condition(kind, TRUE if value else FALSE, reason, text)

    waiting = message or "not every child is ready"
    if req.deleting:
        gone = "the object is being deleted"
        status["phase"] = "Deleting"
        put("Available", False, "Deleting", gone)
        put("Progressing", True, "Deleting", gone)
        put("Degraded", False, "AsExpected", "")
        put("Ready", False, "Deleting", gone)
        put("Reconciling", True, "Deleting", gone)
        put("Stalled", False, "AsExpected", "")
    elif failure:
        status["phase"] = "Error"
        put("Available", children_ready, "AsExpected" if children_ready else "NotReady",
            "" if children_ready else waiting)
        put("Progressing", False, failure_reason, failure)
        put("Degraded", True, failure_reason, failure)
        put("Ready", False, failure_reason, failure)
        put("Reconciling", False, failure_reason, failure)
        put("Stalled", True, failure_reason, failure)
    elif children_ready:
        text = "every child is ready at version " + target
        status["phase"] = "Deployed"
        status["observedVersion"] = target
        put("Available", True, "AsExpected", text)
        put("Progressing", False, "AsExpected", text)
        put("Degraded", False, "AsExpected", "")
        put("Ready", True, "AsExpected", text)
        put("Reconciling", False, "AsExpected", "")
        put("Stalled", False, "AsExpected", "")
    elif previous and previous != target:
        text = "upgrading from %s to %s: %s" % (previous, target, waiting)
        available = _was_available(req)
        status["phase"] = "Upgrading"
        put("Available", available, "PreviousVersionAvailable" if available else "Upgrading",
            text)
        put("Progressing", True, "Upgrading", text)
        put("Degraded", False, "AsExpected", "")
        put("Ready", False, "Upgrading", text)
        put("Reconciling", True, "Upgrading", text)
        put("Stalled", False, "AsExpected", "")
    else:
        status["phase"] = "Deploying"
        put("Available", False, "Deploying", waiting)
        put("Progressing", True, "Deploying", waiting)
        put("Degraded", False, "AsExpected", "")
        put("Ready", False, "Deploying", waiting)
        put("Reconciling", True, "Deploying", waiting)
        put("Stalled", False, "AsExpected", "")
