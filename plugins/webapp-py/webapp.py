"""The WebApp controller (apps.ctrlhost.dev/v1alpha1) on the Python SDK.

The same behaviour as the C++ reference plugin (plugins/webapp/webapp.cc) on the same inputs:
a WebApp owns a ConfigMap (<name>-config, spec.config), a Deployment (<name>: spec.image,
spec.replicas, spec.port, spec.env) and a Service (<name>: spec.port); status reports
observedGeneration, replicas, readyReplicas (from the Deployment child), url and the conditions
Ready and Progressing. The finalizer apps.ctrlhost.dev/external-record stands for cleanup
outside the cluster: one record file per WebApp (RecordStore), removed before `finalized`.

    records = RecordStore(RecordStore.default_dir())
    plugin = Plugin("webapp", "1.0.0")
    plugin.add(make_controller(records))
    sys.exit(plugin.run())

Thread-safety: reconciles run concurrently for different WebApps (never for one: the host
guarantees per-key exclusivity); RecordStore touches one file per key.
"""

import errno
import json
import os
import re

from ctrlhost_sdk import (Controller, Handlers, Result, build_config_map, build_deployment,
                          build_service, common_labels, config_hash, find_path,
                          selector_labels, service_port)

GROUP, VERSION, KIND = "apps.ctrlhost.dev", "v1alpha1", "WebApp"
FINALIZER = "apps.ctrlhost.dev/external-record"
_DNS_NAME = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$")


class SpecError(ValueError):
    pass


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _string_map(spec, field):
    value = spec.get(field)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError("spec.%s must be a map of strings" % field)
    for key in sorted(value):
        if not isinstance(value[key], str):
            raise SpecError("spec.%s.%s must be a string" % (field, key))
    return dict(value)


def _int(spec, field, fallback, lo, hi):
    value = spec.get(field)
    if value is None:
        return fallback
    if not _is_int(value):
        raise SpecError("spec.%s must be an integer" % field)
    if value < lo or value > hi:
        raise SpecError("spec.%s must be between %d and %d, not %d" % (field, lo, hi, value))
    return value


def parse_spec(spec):
    """The validated spec as a dict; SpecError with the same messages as the C++ plugin."""
    image = spec.get("image")
    if not isinstance(image, str) or not image:
        raise SpecError("spec.image is required (a container image reference)")
    return {
        "image": image,
        "replicas": _int(spec, "replicas", 1, 0, 1000),
        "port": _int(spec, "port", 8080, 1, 65535),
        "env": _string_map(spec, "env"),
        "config": _string_map(spec, "config"),
    }


# The pod template annotation holding config_hash(spec.config).
CONFIG_HASH_ANNOTATION = "apps.ctrlhost.dev/config-hash"


def desire_children(req, spec, result):
    """The children, from the SDK's builders: the same objects as the C++ and Node plugins."""
    name = req.name
    config_name = name + "-config"
    labels = common_labels("webapp", name)
    selector = selector_labels("webapp", name)
    config = dict(sorted(spec["config"].items()))
    result.desire(build_config_map(config_name, config, labels=labels))
    container = {
        "name": "web",
        "image": spec["image"],
        "ports": [{"name": "http", "containerPort": spec["port"]}],
        "envFrom": [{"configMapRef": {"name": config_name}}],
    }
    env = [{"name": k, "value": v} for k, v in sorted(spec["env"].items())]
    if env:
        container["env"] = env
    # The configuration's hash on the pod template: pods restart when (only when) it changes.
    result.desire(build_deployment(name, labels=labels, selector=selector,
                                   replicas=spec["replicas"], containers=[container],
                                   pod_annotations={CONFIG_HASH_ANNOTATION: config_hash(config)}))
    result.desire(build_service(name, labels=labels, selector=selector,
                                ports=[service_port(spec["port"], "http", "http")]))


def report_status(req, spec, result):
    ready = 0
    dep = req.child("Deployment", req.name)
    if dep is not None:
        r = find_path(dep, "status.readyReplicas")
        if _is_int(r):
            ready = r
    status = result.status
    status["observedGeneration"] = req.generation
    status["replicas"] = spec["replicas"]
    status["readyReplicas"] = ready
    status["url"] = "http://%s.%s.svc:%d" % (req.name, req.namespace, spec["port"])
    progress = "%d/%d replicas ready" % (ready, spec["replicas"])
    if ready >= spec["replicas"]:
        result.set_condition("Ready", True, "AllReplicasReady", progress)
        result.set_condition("Progressing", False, "Stable", progress)
    else:
        result.set_condition("Ready", False, "ReplicasNotReady", progress)
        result.set_condition("Progressing", True, "RollingOut", progress)


class RecordError(Exception):
    def __init__(self, message, invalid=False):
        super().__init__(message)
        self.invalid = invalid  # a bad name: retrying cannot help


class RecordStore:
    """One JSON file per WebApp, "<namespace>_<name>.json", written atomically (temporary file
    and rename) and only when its content changes."""

    def __init__(self, directory):
        self.dir = directory

    @staticmethod
    def default_dir():
        d = os.environ.get("WEBAPP_RECORD_DIR")
        if d:
            return d
        return os.path.join(os.environ.get("TMPDIR") or "/tmp", "ctrlhost-webapp-records")

    def path_for(self, ns, name):
        def ok(s):
            return 0 < len(s) <= 253 and _DNS_NAME.match(s) is not None

        if not ok(ns) or not ok(name):
            raise RecordError('"%s/%s" is not a valid namespace/name' % (ns, name), invalid=True)
        return "%s/%s_%s.json" % (self.dir, ns, name)

    def read(self, ns, name):
        try:
            with open(self.path_for(ns, name), encoding="utf-8") as f:
                return json.load(f)
        except (RecordError, OSError, ValueError):
            return None

    def write(self, ns, name, record):
        path = self.path_for(ns, name)
        if self.read(ns, name) == record:
            return
        try:
            os.mkdir(self.dir, 0o700)
        except FileExistsError:
            pass
        except OSError as e:
            raise RecordError("mkdir %s: %s" % (self.dir, os.strerror(e.errno))) from None
        tmp = path + ".tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        except OSError:
            raise RecordError("cannot write %s" % tmp) from None
        try:
            os.rename(tmp, path)
        except OSError as e:
            raise RecordError("rename %s: %s" % (tmp, os.strerror(e.errno))) from None

    def remove(self, ns, name):
        path = self.path_for(ns, name)
        try:
            os.remove(path)
        except OSError as e:
            if e.errno != errno.ENOENT:
                raise RecordError("remove %s: %s" % (path, os.strerror(e.errno))) from None


def upsert(records, req):
    try:
        spec = parse_spec(req.spec)
    except SpecError as e:
        # Retrying cannot fix the spec; the next edit of the WebApp reconciles it again.
        # Children that exist are kept as they are.
        message = str(e)
        result = Result.terminal_error(message)
        result.status["observedGeneration"] = req.generation
        result.set_condition("Ready", False, "InvalidSpec", message)
        result.set_condition("Progressing", False, "InvalidSpec", message)
        result.event("Warning", "InvalidSpec", message)
        return result
    result = Result()
    desire_children(req, spec, result)
    report_status(req, spec, result)
    record = {"uid": req.uid, "namespace": req.namespace, "name": req.name,
              "image": spec["image"], "replicas": spec["replicas"], "port": spec["port"]}
    try:
        records.write(req.namespace, req.name, record)
    except RecordError as e:
        # The children and status are still applied; the record is retried with backoff.
        result.set_error("terminal" if e.invalid else "retryable", "external record: %s" % e)
    return result


def delete(records, req):
    if not req.finalizing:
        return Result()  # deletion notice: nothing left to forget
    try:
        records.remove(req.namespace, req.name)
    except RecordError as e:
        return Result.retryable_error("removing the external record: %s" % e)
    result = Result()
    result.event("Normal", "RecordRemoved", "external record removed")
    return result  # Handlers sets finalized


def make_controller(records):
    """The controller "webapp"."""
    controller = (
        Controller("webapp")
        .for_(GROUP, VERSION, KIND)
        .owns("apps", "v1", "Deployment")
        .owns("", "v1", "Service")
        .owns("", "v1", "ConfigMap")
        .finalizer(FINALIZER)
        .max_concurrent(4)
    )
    controller.reconcile(Handlers(on_upsert=lambda r: upsert(records, r),
                                  on_delete=lambda r: delete(records, r)))
    return controller
