"""The conformance "scenario" controller on the Python SDK (see scenario.cc for the outcomes)."""

import os
import sys
import threading

from ctrlhost_sdk import (CONFIG_HASH_ANNOTATION, StageCallbacks, find_path, set_operator_status, UPDATE_ALLOWED, Controller, DependentChain,
                          Plugin, ReconcileError, ResourceRouter, Result, build_cluster_role,
                          build_cluster_role_binding, build_config_map, build_deployment,
                          build_role, build_role_binding, build_secret, build_service,
                          build_service_account, common_labels, config_hash, new_object,
                          owner_reference, policy_rule, selector_labels, service_account_subject,
                          service_port)

scenario = (Controller("scenario")
            .for_("e2e.ctrlhost.dev", "v1", "Scenario")
            .owns("", "v1", "ConfigMap")
            .owns("e2e.ctrlhost.dev", "v1", "Scenario"))


def chain(req):
    def step(dep):
        def on_pass(req, desired, current, ctx):
            ctx.set_flag("seen-" + dep)
            if dep == "a":
                ctx.set_flag(UPDATE_ALLOWED, req.spec.get("allowUpdates") is True)
            if req.spec.get("failStep") == dep:
                raise ReconcileError("spec.failStep", terminal=True)
            if req.spec.get("cancelPass") == dep:
                ctx.cancel_pass("spec.cancelPass")
            if req.spec.get("cancelResource") == dep:
                ctx.cancel_resource("spec.cancelResource")
            if dep == "c" and current is not None and not ctx.flag(UPDATE_ALLOWED):
                ctx.cancel_resource("updates not allowed")
        return on_pass

    deps = DependentChain()
    for dep in ("a", "b", "c"):
        deps.add(dep, "v1", "ConfigMap",
                 desired=lambda r, dep=dep: dict(new_object("v1", "ConfigMap",
                                                            r.name + "-" + dep),
                                                 data={"v": "new"}),
                 on_pass=step(dep))

    def then(req, state, result):
        result.status.update(phase="Done", cancelled=state.cancelled, flags=state.flags,
                             allReady=state.all_ready, failedAt=state.failed_at)

    return deps.build(then)(req)


def callbacks(req):
    from ctrlhost_sdk.stage_callbacks import STAGES
    log = []

    def label(req, stage, desired, current):
        if desired is not None:
            desired["metadata"].setdefault("labels", {})["stage"] = stage

    def record(req, stage, desired, current):
        log.append("%s:%s" % (stage, (desired if desired is not None else current)["metadata"]
                              ["name"]))

    def guard(req, stage, desired, current):
        if req.spec.get("failAt") == stage:
            raise ReconcileError("spec.failAt", terminal=True)

    cbs = StageCallbacks()
    for stage in STAGES:
        cbs.on("v1", "ConfigMap", stage, "label", label)
        cbs.on("v1", "ConfigMap", stage, "record", record)
        cbs.on("v1", "ConfigMap", stage, "guard", guard)
    deps = DependentChain().with_callbacks(cbs)
    for dep in ("a", "b", "c"):
        deps.add(dep, "v1", "ConfigMap",
                 desired=lambda r, dep=dep: dict(new_object("v1", "ConfigMap",
                                                            r.name + "-" + dep),
                                                 data={"v": "new"}),
                 when=(lambda r: False) if dep == "c" else None)

    def then(req, state, result):
        result.status.update(phase="Done", log=log)

    return deps.build(then)(req)


def operator_status(req):
    def string_at(field, fallback):
        v = req.spec.get(field)
        return v if isinstance(v, str) else fallback

    version = string_at("version", "1.0.0")
    result = Result()
    result.desire(new_object("v1", "ConfigMap", req.name))["data"] = {"version": version}
    child = req.child("ConfigMap", req.name)
    ready = child is not None and find_path(child, "data.version") == version
    set_operator_status(req, result, operator_version="1.0.0", target_version=version,
                        children_ready=ready,
                        message="" if ready else "waiting for ConfigMap " + req.name,
                        failure=string_at("failure", ""))
    return result


def builders(req):
    name = req.name
    labels = common_labels("scenario", name)
    selector = selector_labels("scenario", name)
    try:
        hash_ = config_hash(req.spec.get("config", {}))
    except ValueError as e:
        raise ReconcileError(str(e), terminal=True)
    rules = [policy_rule([""], ["configmaps"], ["get", "list"]),
             policy_rule(["apps"], ["deployments"], ["watch"])]
    subjects = [service_account_subject(name, req.namespace)]
    built = [
        build_deployment(name, labels=labels, selector=selector, replicas=2,
                         containers=[{"name": "main", "image": "busybox"}],
                         pod_annotations={CONFIG_HASH_ANNOTATION: hash_},
                         pod_spec={"serviceAccountName": name}),
        build_service(name, labels=labels, selector=selector,
                      ports=[service_port(80, "http", "http"),
                             service_port(53, "dns", 53, "UDP")], type="ClusterIP"),
        build_config_map(name + "-config", {"a": "b"}, labels=labels,
                         owner=owner_reference(req)),
        build_secret(name + "-secret", {"token": "t"}, "Opaque", labels=labels),
        build_service_account(name, labels=labels),
        build_role(name, rules, labels=labels),
        build_role_binding(name, name, subjects, labels=labels),
        build_cluster_role(name + "-cluster", rules, labels=labels),
        build_cluster_role_binding(name + "-cluster", name + "-cluster", subjects,
                                   labels=labels),
    ]
    result = Result()
    result.status.update(phase="Done", configHash=hash_, built=built)
    return result


def _reconcile_as(set_name):
    def reconcile_set(req, context):
        result = Result()
        result.desire(new_object("v1", "ConfigMap", req.name))["data"] = {"set": set_name}
        result.status.update(phase="Done", set=set_name, context=context)
        return result
    return reconcile_set


router = (ResourceRouter()
          .add("v1", lambda r: r.labels.get("version", "") in ("", "v1"), _reconcile_as("v1"))
          .add("v2", lambda r: r.labels.get("version") == "v2", _reconcile_as("v2"),
               init_context=lambda r: {"replicas": 2, "set": "v2"})
          .add("canary", lambda r: r.labels.get("track") == "canary", _reconcile_as("canary")))


def route(req):
    skipped_before = router.skipped
    result = router.route(req)
    if router.skipped > skipped_before:
        result.status["skipped"] = router.skipped
    return result


TASK_FILE = os.environ.get("SCENARIO_TASK_FILE", "")


def read_tokens():
    """"namespace/name" -> token, from the lines "namespace/name token"."""
    tokens = {}
    try:
        with open(TASK_FILE, encoding="utf-8") as f:
            for line in f:
                fields = line.split()
                if len(fields) == 2:
                    tokens[fields[0]] = fields[1]
    except OSError:
        pass
    return tokens


def task(req):
    token = read_tokens().get("%s/%s" % (req.namespace, req.name), "")
    result = Result()
    result.desire(new_object("v1", "ConfigMap", req.name))["data"] = {"token": token}
    result.status.update(phase="Done", token=token)
    return result


_poke_runs = [0]
_poke_lock = threading.Lock()


def poke(ctx):
    with _poke_lock:
        _poke_runs[0] += 1
        first = _poke_runs[0] == 1
    if first:
        raise RuntimeError("scenario task fails on its first run")
    seen = {}
    while True:
        for key, token in sorted(read_tokens().items()):
            if seen.get(key) == token:
                continue
            seen[key] = token
            namespace, _, name = key.partition("/")
            try:
                ctx.enqueue(namespace, name)
            except ValueError as e:
                print("scenario task: %s" % e, file=sys.stderr, flush=True)
        if ctx.wait(0.2):
            return


if TASK_FILE:
    scenario.background_task("poke")(poke)


@scenario.reconcile
def reconcile(req):
    if not req.exists or req.deleting:
        return Result()
    outcome = req.spec.get("outcome", "ok")
    if outcome == "chain":
        return chain(req)
    if outcome == "builders":
        return builders(req)
    if outcome == "callbacks":
        return callbacks(req)
    if outcome == "status":
        return operator_status(req)
    if outcome == "route":
        return route(req)
    if outcome == "task":
        return task(req)
    result = Result()
    if outcome == "requeue":
        result.status["phase"] = "Waiting"
        result.requeue_after = 30
    elif outcome == "retryable":
        return Result.retryable_error("the scenario asks for a retry")
    elif outcome == "retry-after":
        raise ReconcileError("the scenario's quota is used up", reason="QuotaExceeded",
                             retry_after=45)
    elif outcome == "terminal":
        result.event("Warning", "GivingUp", "the scenario asks to stop")
        result.set_error("terminal", "the scenario asks to stop")
    elif outcome == "forbidden":
        result.desire(new_object("v1", "Secret", req.name))["stringData"] = {"token": "x"}
    elif outcome == "labels":
        # Default labels: a child of another kind gets the primary's, one of its own kind none.
        result.desire(new_object("v1", "ConfigMap", req.name))["data"] = {"k": "v"}
        result.desire(new_object("e2e.ctrlhost.dev/v1", "Scenario", req.name + "-child"))[
            "spec"] = {"outcome": "ok"}
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
