"""The VersionedApp controller (ref.ctrlhost.dev/v1alpha1) on the Python SDK.

The port of the C++ reference plugin (plugins/versioned-app/versioned_app.cc; its header and
README describe the behaviour): the same children, status, events and errors on the same
inputs, checked by e2e/host/versioned_app_e2e_test.py against one golden file. Every piece of
the controller model in one plugin: resource sets by spec.version major (v1, v2), a
DependentChain whose ConfigMap step cancels the pass while the object is on hold, stage
callbacks on the Deployment (pre-update refuses a downgrade, post-create records an event), the
standard operator status, a background task polling the hold file, the resource builders.

    plugin = Plugin("versioned-app", OPERATOR_VERSION)
    plugin.add(make_controller(os.environ.get(HOLD_FILE_ENV, "")))
    sys.exit(plugin.run())

Thread-safety: reconciles run concurrently for different objects and share only constants; the
task has its own thread and state.
"""

import re
import sys
from typing import List, NamedTuple, Optional, Set, Tuple

from ctrlhost_sdk import (CONFIG_HASH_ANNOTATION, NORMAL, PRE_UPDATE, POST_CREATE, TERMINAL,
                          WARNING, Controller, DependentChain, ReconcileError, ResourceRouter,
                          Result, StageCallbacks, build_config_map, build_deployment,
                          build_service, build_service_account, common_labels, config_hash,
                          find_path, selector_labels, service_port, set_operator_status)

GROUP, VERSION, KIND = "ref.ctrlhost.dev", "v1alpha1", "VersionedApp"
OPERATOR_VERSION = "1.0.0"
HOLD_FILE_ENV = "VERSIONED_APP_HOLD_FILE"
APP = "versioned-app"
VERSION_LABEL = "app.kubernetes.io/version"
DEFAULT_IMAGE = "registry.example/app"
METRICS_PORT = 9090
_DNS_PART = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$")
_NUMBER = re.compile(r"^[0-9]{1,9}$")


class SpecError(ValueError):
    pass


def parse_semver(text: str) -> Tuple[int, int, int]:
    """(major, minor, patch) of "MAJOR.MINOR.PATCH"; SpecError otherwise."""
    parts = text.split(".")
    if len(parts) != 3 or not all(_NUMBER.match(p) for p in parts):
        raise SpecError('spec.version "%s" is not MAJOR.MINOR.PATCH' % text)
    return int(parts[0]), int(parts[1]), int(parts[2])


class Spec(NamedTuple):
    version: str
    semver: Tuple[int, int, int]
    image: str
    replicas: int
    config: dict


def parse_spec(spec: dict) -> Spec:
    version = spec.get("version")
    if not isinstance(version, str):
        raise SpecError("spec.version is required (MAJOR.MINOR.PATCH)")
    semver = parse_semver(version)
    image = spec.get("image")
    if image is None:
        image = DEFAULT_IMAGE
    elif not isinstance(image, str) or not image:
        raise SpecError("spec.image must be a non-empty string")
    replicas = spec.get("replicas")
    if replicas is None:
        replicas = 1
    elif (not isinstance(replicas, int) or isinstance(replicas, bool)
          or not 0 <= replicas <= 100):
        raise SpecError("spec.replicas must be an integer from 0 to 100")
    config = spec.get("config")
    if config is None:
        config = {}
    elif not isinstance(config, dict):
        raise SpecError("spec.config must be a map of strings")
    for key, value in config.items():
        if not isinstance(value, str):
            raise SpecError("spec.config.%s must be a string" % key)
    return Spec(version, semver, image, replicas, config)


class HoldList(NamedTuple):
    keys: Set[str]
    malformed: List[str]


def _is_dns_part(s: str, limit: int) -> bool:
    return 0 < len(s) <= limit and bool(_DNS_PART.match(s))


def read_hold_file(path: str) -> HoldList:
    """The hold file's keys and malformed lines; a missing file holds nothing. OSError (with
    the path in its message) when it cannot be read."""
    keys: Set[str] = set()
    malformed: List[str] = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return HoldList(keys, malformed)
    except OSError as e:
        raise OSError("hold file %s: %s" % (path, e.strerror)) from e
    for line in lines:
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        parts = text.split("/")
        if len(parts) == 2 and _is_dns_part(parts[0], 63) and _is_dns_part(parts[1], 253):
            keys.add(text)
        else:
            malformed.append(text)
    return HoldList(keys, malformed)


def _major_of(req) -> int:
    version = req.spec.get("version")
    try:
        return parse_semver(version)[0] if isinstance(version, str) else -1
    except SpecError:
        return -1


def _version_label_of(obj: Optional[dict]) -> str:
    labels = find_path(obj or {}, "metadata.labels")
    value = labels.get(VERSION_LABEL) if isinstance(labels, dict) else None
    return value if isinstance(value, str) else ""


def _invalid_spec(req, message: str) -> Result:
    result = Result.terminal_error(message)
    result.event(WARNING, "InvalidSpec", message)
    set_operator_status(req, result, operator_version=OPERATOR_VERSION, failure=message,
                        failure_reason="InvalidSpec")
    return result


def _deployment_callbacks(notes: dict, set_name: str) -> StageCallbacks:
    def refuse_downgrade(req, stage, desired, current):
        old, new = _version_label_of(current), _version_label_of(desired)
        try:
            if parse_semver(new) >= parse_semver(old):
                return
        except SpecError:
            return
        notes["refused"] = "downgrade from %s to %s refused" % (old, new)
        raise ReconcileError(notes["refused"], terminal=True)

    def record_created(req, stage, desired, current):
        notes["created"].append("Deployment %s created at %s by resource set %s" % (
            desired["metadata"].get("name", ""), _version_label_of(desired), set_name))

    return (StageCallbacks()
            .on("apps/v1", "Deployment", PRE_UPDATE, "refuse-downgrade", refuse_downgrade)
            .on("apps/v1", "Deployment", POST_CREATE, "record-created", record_created))


def _reconcile(hold_file: str, req, context: dict) -> Result:
    if not req.exists or req.deleting:
        return Result()  # children go by owner reference
    set_name = context.get("set", "")
    try:
        spec = parse_spec(req.spec)
    except SpecError as e:
        return _invalid_spec(req, str(e))
    if set_name == "v1" and spec.semver[0] != 1:
        return _invalid_spec(req, "spec.version %s: major version %d is not served (1 or 2)"
                             % (spec.version, spec.semver[0]))
    held = False
    if hold_file:
        try:
            held = "%s/%s" % (req.namespace, req.name) in read_hold_file(hold_file).keys
        except OSError as e:
            return Result.retryable_error(str(e))

    name = req.name
    config_name = name + "-config"
    labels = common_labels(APP, name)
    # Only the Deployment carries the version: the downgrade check and readiness read it.
    versioned_labels = dict(labels, **{VERSION_LABEL: spec.version})
    selector = selector_labels(APP, name)
    metrics_port = context.get("metricsPort", 0)
    v2 = set_name == "v2"

    def on_config_pass(_req, _desired, _current, ctx):
        if held:  # the precondition: Deployment and Service are left as they are
            ctx.cancel_pass("on hold in the hold file")

    def deployment(_req):
        ports = [{"name": "http", "containerPort": 8080}]
        if metrics_port > 0:
            ports.append({"name": "metrics", "containerPort": metrics_port})
        container = {"name": "app", "image": "%s:%s" % (spec.image, spec.version),
                     "ports": ports, "envFrom": [{"configMapRef": {"name": config_name}}]}
        return build_deployment(name, labels=versioned_labels, selector=selector,
                                replicas=spec.replicas, containers=[container],
                                pod_annotations={CONFIG_HASH_ANNOTATION:
                                                 config_hash(spec.config)},
                                pod_spec={"serviceAccountName": name} if v2 else None)

    def service(_req):
        ports = [service_port(80, "http", "http")]
        if metrics_port > 0:
            ports.append(service_port(metrics_port, "metrics", "metrics"))
        return build_service(name, labels=labels, selector=selector, ports=ports)

    notes = {"created": [], "refused": ""}
    chain = DependentChain().with_callbacks(_deployment_callbacks(notes, set_name))
    chain.add("config", "v1", "ConfigMap",
              desired=lambda _r: build_config_map(config_name, spec.config, labels=labels),
              on_pass=on_config_pass)
    if v2:
        chain.add("service-account", "v1", "ServiceAccount",
                  desired=lambda _r: build_service_account(name, labels=labels))
    # Ready once it runs the target version (the test servers run no pods).
    chain.add("deployment", "apps/v1", "Deployment", desired=deployment,
              ready=lambda current: _version_label_of(current) == spec.version)
    chain.add("service", "v1", "Service", desired=service)

    def then(r, state, result):
        for message in notes["created"]:
            result.event(NORMAL, "DeploymentCreated", message)
        failed = result.error is not None and result.error[0] == TERMINAL
        if notes["refused"]:
            result.event(WARNING, "DowngradeRefused", notes["refused"])
        # A failed step leaves the chain not ready (ChainState.failed_at), as in every SDK.
        ready = state.all_ready
        if result.error is not None:
            message = ""
        elif held:
            message = "on hold: listed in the hold file"
        elif not ready:
            message = "waiting for " + ", ".join(state.pending)
        else:
            message = ""
        result.status["resourceSet"] = set_name
        set_operator_status(r, result, operator_version=OPERATOR_VERSION,
                            target_version=spec.version, children_ready=ready,
                            message=message, failure=result.error[1] if failed else "",
                            failure_reason="DowngradeRefused" if notes["refused"]
                            else "ReconcileFailed")

    return chain.build(then)(req)


def poll_hold_file(path: str, ctx) -> None:
    """Enqueues every object whose hold state changed (all listed ones on the first read),
    once a second until stopped; problems with the file are logged once each."""
    previous: Set[str] = set()
    last_problem = ""
    while True:
        if path:
            holds: Optional[HoldList] = None
            problem = ""
            try:
                holds = read_hold_file(path)
                if holds.malformed:
                    problem = "hold file %s: not namespace/name, ignored: %s" % (
                        path, ", ".join(holds.malformed))
            except OSError as e:
                problem = str(e)
            if problem and problem != last_problem:
                print("WARNING versioned-app: " + problem, file=sys.stderr, flush=True)
            last_problem = problem
            if holds is not None:
                changed = sorted(holds.keys - previous) + sorted(previous - holds.keys)
                for key in changed:
                    namespace, name = key.split("/", 1)
                    try:
                        ctx.enqueue(namespace, name)
                    except ValueError as e:
                        print("WARNING versioned-app: enqueue %s: %s" % (key, e),
                              file=sys.stderr, flush=True)
                previous = holds.keys
        if ctx.wait(1.0):
            return


def make_controller(hold_file: str) -> Controller:
    """The controller "versioned-app"; `hold_file` may be empty (nothing is ever on hold)."""
    router = (ResourceRouter()
              .add("v1", lambda r: _major_of(r) != 2,
                   lambda r, c: _reconcile(hold_file, r, c),
                   init_context=lambda r: {"set": "v1"})
              .add("v2", lambda r: _major_of(r) == 2,
                   lambda r, c: _reconcile(hold_file, r, c),
                   init_context=lambda r: {"set": "v2", "metricsPort": METRICS_PORT}))
    controller = (Controller("versioned-app")
                  .for_(GROUP, VERSION, KIND)
                  .owns("apps", "v1", "Deployment")
                  .owns("", "v1", "Service")
                  .owns("", "v1", "ConfigMap")
                  .owns("", "v1", "ServiceAccount")
                  .max_concurrent(4))
    controller.reconcile(router.route)
    controller.background_task("hold-file")(lambda ctx: poll_hold_file(hold_file, ctx))
    return controller
