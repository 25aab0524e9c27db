"""End-to-end tests of `ctrlhost apiserver` driven by the real kubectl.

The whole suite runs once for `kubectl` on PATH and once more for every extra kubectl
listed (colon or comma separated) in $CTRLHOST_E2E_KUBECTLS, each against its own fresh
server, so older clients (Debian's kubectl 1.20) are held to the same behaviour.

Objects that a test only needs as a starting point are created over plain HTTP (JSON) so
that each test exercises one kubectl command; creating them through kubectl is tested on
its own (apply, create). Assertions read kubectl's output, not just its exit code.
"""

import json
import os
import re
import select
import shutil
import subprocess
import time
import unittest

import yaml

from e2e.apiserver import apiserver_fixture
from e2e.apiserver.apiserver_fixture import ApiServer, kubectl, pending
from tools.internal import bazel_unittest

WAIT_SECONDS = 20

WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                  "shortNames": ["wd"]},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer", "description": "How big the widget is."},
                        "color": {"type": "string"}}},
                    "status": {"type": "object",
                               "x-kubernetes-preserve-unknown-fields": True}}}},
        }],
    },
}


def crd_yaml(plural, kind, group="example.com"):
    crd = json.loads(json.dumps(WIDGET_CRD))
    crd["metadata"]["name"] = "%s.%s" % (plural, group)
    crd["spec"]["group"] = group
    crd["spec"]["names"] = {"plural": plural, "singular": kind.lower(), "kind": kind}
    return yaml.safe_dump(crd)


def widget(name, namespace, size=1, labels=None, finalizers=None, owner=None):
    metadata = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = labels
    if finalizers:
        metadata["finalizers"] = finalizers
    if owner:
        metadata["ownerReferences"] = [owner]
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": metadata,
            "spec": {"size": size, "color": "red"}}


def extra_kubectls():
    listed = re.split(r"[:,]", os.environ.get("CTRLHOST_E2E_KUBECTLS", ""))
    return [path for path in listed if path.strip()]



def namespaced_crd(group, singular, kind, version):
    """A namespaced CRD of `group` with one served storage version v1 (`version` adds its
    schema and subresources); its plural is `singular` + "s"."""
    plural = singular + "s"
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": plural + "." + group},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": plural, "singular": singular, "kind": kind},
                     "versions": [dict({"name": "v1", "served": True, "storage": True},
                                       **version)]}}

class LineReader:
    """Reads a subprocess's stdout line by line with deadlines (no blocking past them)."""

    def __init__(self, process):
        self.process = process
        self.buffer = b""
        self.lines = []

    def until(self, predicate, timeout=WAIT_SECONDS):
        """Reads lines until predicate(line) is true for one; returns that line."""
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                text = line.decode(errors="replace")
                self.lines.append(text)
                if predicate(text):
                    return text
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError("no matching line before the deadline; lines so far: %r" %
                                     self.lines)
            ready, _, _ = select.select([self.process.stdout], [], [], min(remaining, 0.5))
            if ready:
                chunk = os.read(self.process.stdout.fileno(), 65536)
                if not chunk:
                    raise AssertionError("output ended; lines: %r, exit %s" %
                                         (self.lines, self.process.poll()))
                self.buffer += chunk


class KubectlSuite:
    """The tests; mixed into one unittest.TestCase per kubectl binary (see the bottom)."""

    KUBECTL = "kubectl"
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = ApiServer.start()
        cls.api = cls.server.api
        status, body = cls.api.request("POST", "/apis/apiextensions.k8s.io/v1/"
                                       "customresourcedefinitions", WIDGET_CRD)
        if status != 201:
            raise AssertionError("creating the Widget CRD: %s %s" % (status, body))

    @classmethod
    def tearDownClass(cls):
        if cls.server:
            cls.server.stop()

    def setUp(self):
        # One namespace per test: tests do not see each other's objects.
        self.ns = re.sub(r"[^a-z0-9]+", "-", self._testMethodName.lower()).strip("-")[:50]
        self.api.ensure_namespace(self.ns)

    def tearDown(self):
        self.assertTrue(self.server.alive(), "the server died:\n" + self.server.stderr()[-3000:])

    # Helpers ---------------------------------------------------------------------------

    def kubectl(self, *args, input_text=None, ok=True):
        result = kubectl(self.KUBECTL, self.server.kubeconfig, *args, input_text=input_text)
        if ok:
            self.assertEqual(result.returncode, 0,
                             "kubectl %s\nstdout: %s\nstderr: %s" %
                             (" ".join(args), result.stdout, result.stderr))
        else:
            self.assertNotEqual(result.returncode, 0,
                                "kubectl %s unexpectedly succeeded: %s" %
                                (" ".join(args), result.stdout))
        return result

    def get_json(self, *args):
        return json.loads(self.kubectl("get", "-o", "json", *args).stdout)

    def create_widget(self, name, **kwargs):
        status, body = self.api.request(
            "POST", "/apis/example.com/v1/namespaces/%s/widgets" % self.ns,
            widget(name, self.ns, **kwargs))
        self.assertEqual(status, 201, body)
        return body

    def create(self, path, obj):
        status, body = self.api.request("POST", path, obj)
        self.assertEqual(status, 201, body)
        return body

    def wait_gone(self, *get_args):
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            result = kubectl(self.KUBECTL, self.server.kubeconfig, "get", *get_args)
            if result.returncode != 0 and "NotFound" in result.stderr:
                return
            time.sleep(0.1)  # polling an observable condition, not waiting for time
        self.fail("still there after %ss: %s" % (WAIT_SECONDS, get_args))

    def start_kubectl(self, *args):
        env = dict(os.environ, HOME=apiserver_fixture.temp_root())
        env.pop("KUBECONFIG", None)
        process = subprocess.Popen([self.KUBECTL, "--kubeconfig", self.server.kubeconfig, *args],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   stdin=subprocess.DEVNULL, env=env)
        self.addCleanup(self._stop_process, process)
        return process

    @staticmethod
    def _stop_process(process):
        if process.poll() is None:
            process.kill()
        process.wait(10)
        process.stdout.close()
        process.stderr.close()

    # Discovery ---------------------------------------------------------------------------

    def test_version(self):
        version = json.loads(self.kubectl("version", "-o", "json").stdout)
        self.assertEqual(version["serverVersion"]["major"], "1")
        self.assertRegex(version["serverVersion"]["gitVersion"], r"^v1\.\d+\.\d+")

    def test_api_resources(self):
        out = self.kubectl("api-resources").stdout
        rows = {tuple(line.split()[:1] + line.split()[-3:]) for line in out.splitlines()[1:]}
        for expected in [("namespaces", "v1", "false", "Namespace"),
                         ("configmaps", "v1", "true", "ConfigMap"),
                         ("secrets", "v1", "true", "Secret"),
                         ("deployments", "apps/v1", "true", "Deployment"),
                         ("leases", "coordination.k8s.io/v1", "true", "Lease"),
                         ("customresourcedefinitions", "apiextensions.k8s.io/v1", "false",
                          "CustomResourceDefinition"),
                         ("widgets", "example.com/v1", "true", "Widget")]:
            self.assertIn(expected, rows, out)
        self.assertRegex(out, r"(?m)^widgets\s+wd\s+example.com/v1\s+true\s+Widget\s*$")
        # A CRD created now shows up at once.
        self.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                    yaml.safe_load(crd_yaml("dials", "Dial", "later.example.com")))
        out = self.kubectl("api-resources", "--api-group=later.example.com").stdout
        self.assertRegex(out, r"(?m)^dials\s+later.example.com/v1\s+true\s+Dial\s*$")

    @pending("default-namespace")
    def test_default_namespace_exists(self):
        # A real server always has it, and kubectl uses it when no -n is given.
        out = self.kubectl("get", "namespace", "default", "-o", "name").stdout
        self.assertEqual(out.strip(), "namespace/default")
        self.kubectl("get", "configmaps")

    # Apply -------------------------------------------------------------------------------

    @pending("openapi")
    def test_apply_client_side(self):
        out = self.kubectl("apply", "-f", "-", input_text=crd_yaml("gears", "Gear")).stdout
        self.assertIn("customresourcedefinition.apiextensions.k8s.io/gears.example.com created",
                      out)
        gear = {"apiVersion": "example.com/v1", "kind": "Gear",
                "metadata": {"name": "g1", "namespace": self.ns, "labels": {"a": "1"}},
                "spec": {"size": 3}}
        out = self.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(gear)).stdout
        self.assertEqual(out.strip(), "gear.example.com/g1 created")
        out = self.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(gear)).stdout
        self.assertEqual(out.strip(), "gear.example.com/g1 unchanged")
        gear["spec"]["size"] = 4
        del gear["metadata"]["labels"]
        out = self.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(gear)).stdout
        self.assertEqual(out.strip(), "gear.example.com/g1 configured")
        got = self.get_json("-n", self.ns, "gears", "g1")
        self.assertEqual(got["spec"], {"size": 4})
        self.assertNotIn("labels", got["metadata"])  # removed from the last-applied set
        self.assertIn("kubectl.kubernetes.io/last-applied-configuration",
                      got["metadata"]["annotations"])

    @pending("openapi")
    def test_apply_server_side(self):
        out = self.kubectl("apply", "--server-side", "-f", "-",
                           input_text=crd_yaml("sprockets", "Sprocket")).stdout
        self.assertIn("sprockets.example.com serverside-applied", out)
        sprocket = {"apiVersion": "example.com/v1", "kind": "Sprocket",
                    "metadata": {"name": "s1", "namespace": self.ns},
                    "spec": {"size": 3, "color": "red"}}
        out = self.kubectl("apply", "--server-side", "-f", "-",
                           input_text=yaml.safe_dump(sprocket)).stdout
        self.assertEqual(out.strip(), "sprocket.example.com/s1 serverside-applied")
        # kubectl 1.21+ hides managedFields unless asked; older ones always show them.
        show = (["--show-managed-fields"]
                if "--show-managed-fields" in self.kubectl("get", "--help").stdout else [])
        got = self.get_json("-n", self.ns, "sprocket", "s1", *show)
        managers = {(m["manager"], m["operation"]) for m in got["metadata"]["managedFields"]}
        self.assertIn(("kubectl", "Apply"), managers)
        # Another manager takes spec.color; applying it again conflicts until forced.
        self.kubectl("apply", "--server-side", "--field-manager=other", "-f", "-",
                     input_text=yaml.safe_dump(dict(sprocket, spec={"color": "blue"})),
                     ok=False)
        self.kubectl("apply", "--server-side", "--field-manager=other", "--force-conflicts",
                     "-f", "-", input_text=yaml.safe_dump(dict(sprocket, spec={"color": "blue"})))
        result = self.kubectl("apply", "--server-side", "-f", "-",
                              input_text=yaml.safe_dump(sprocket), ok=False)
        self.assertIn("conflict", result.stderr.lower())
        self.assertIn("other", result.stderr)
        self.assertEqual(self.get_json("-n", self.ns, "sprocket", "s1")["spec"]["color"], "blue")

    # Get ---------------------------------------------------------------------------------

    def test_get_output_formats_and_selectors(self):
        self.create_widget("w-gold", labels={"tier": "gold", "env": "prod"}, size=3)
        self.create_widget("w-silver", labels={"tier": "silver"})
        self.create_widget("w-none")
        got = yaml.safe_load(self.kubectl("get", "-n", self.ns, "widget", "w-gold",
                                          "-o", "yaml").stdout)
        self.assertEqual(got["kind"], "Widget")
        self.assertEqual(got["spec"], {"size": 3, "color": "red"})
        self.assertEqual(got["metadata"]["labels"], {"tier": "gold", "env": "prod"})
        self.assertTrue(got["metadata"]["uid"])
        self.assertEqual(got["metadata"]["generation"], 1)
        listed = self.get_json("-n", self.ns, "widgets")
        self.assertEqual(sorted(i["metadata"]["name"] for i in listed["items"]),
                         ["w-gold", "w-none", "w-silver"])
        table = self.kubectl("get", "-n", self.ns, "wd").stdout.splitlines()
        self.assertEqual(table[0].split(), ["NAME", "AGE"])
        self.assertEqual([row.split()[0] for row in table[1:]], ["w-gold", "w-none", "w-silver"])

        def names(selector):
            return self.kubectl("get", "-n", self.ns, "widgets", "-l", selector,
                                "-o", "name").stdout.split()
        self.assertEqual(names("tier=gold"), ["widget.example.com/w-gold"])
        self.assertEqual(names("tier!=gold"), ["widget.example.com/w-none",
                                               "widget.example.com/w-silver"])
        self.assertEqual(names("tier in (gold,silver),!env"), ["widget.example.com/w-silver"])
        self.assertEqual(names("tier"), ["widget.example.com/w-gold",
                                         "widget.example.com/w-silver"])
        result = self.kubectl("get", "-n", self.ns, "widgets", "-l", "tier in (gold", ok=False)
        self.assertIn("unable to parse requirement", result.stderr)  # kubectl's own parser
        result = self.kubectl("get", "-n", self.ns, "widgets", "nope", ok=False)
        self.assertIn('widgets.example.com "nope" not found', result.stderr)

    @pending("uncompressed-watch")
    def test_get_watch(self):
        self.create_widget("w-before")
        process = self.start_kubectl("get", "-n", self.ns, "widgets", "-w",
                                     "--output-watch-events", "-o", "name")
        lines = LineReader(process)
        # The initial list (kubectl versions differ on whether they prefix it with ADDED).
        lines.until(lambda l: l.split()[-1:] == ["widget.example.com/w-before"])
        # One line per event. kubectl up to 1.2x prints "TYPE name"; newer name printers drop
        # the event type and print the name alone, so the type is checked only when present.
        def event(kind):
            name = "widget.example.com/w-during"
            return lambda l: l.split() in ([kind, name], [name])

        self.create_widget("w-during")
        lines.until(event("ADDED"))
        self.kubectl("label", "-n", self.ns, "widget", "w-during", "seen=yes")
        lines.until(event("MODIFIED"))
        self.kubectl("delete", "-n", self.ns, "widget", "w-during")
        lines.until(event("DELETED"))
        # The default table output streams rows too.
        process = self.start_kubectl("get", "-n", self.ns, "widgets", "-w")
        table = LineReader(process)
        table.until(lambda l: l.split()[:1] == ["w-before"])
        self.create_widget("w-table")
        table.until(lambda l: l.split()[:1] == ["w-table"])

    # Patch, label, annotate, replace ----------------------------------------------------------

    def test_patch_merge_and_json(self):
        self.create_widget("w1", size=1)
        out = self.kubectl("patch", "-n", self.ns, "widget", "w1", "--type=merge",
                           "-p", '{"spec":{"size":5,"color":null}}').stdout
        self.assertEqual(out.strip(), "widget.example.com/w1 patched")
        got = self.get_json("-n", self.ns, "widget", "w1")
        self.assertEqual(got["spec"], {"size": 5})
        self.assertEqual(got["metadata"]["generation"], 2)
        self.kubectl("patch", "-n", self.ns, "widget", "w1", "--type=json", "-p",
                     '[{"op":"test","path":"/spec/size","value":5},'
                     '{"op":"add","path":"/spec/color","value":"blue"}]')
        self.assertEqual(self.get_json("-n", self.ns, "widget", "w1")["spec"],
                         {"size": 5, "color": "blue"})
        # A failing `test` op changes nothing.
        result = self.kubectl("patch", "-n", self.ns, "widget", "w1", "--type=json", "-p",
                              '[{"op":"test","path":"/spec/size","value":6},'
                              '{"op":"replace","path":"/spec/color","value":"green"}]', ok=False)
        self.assertIn("test", result.stderr.lower())
        self.assertEqual(self.get_json("-n", self.ns, "widget", "w1")["spec"]["color"], "blue")
        # Strategic merge patch is for built-in kinds only: a custom resource gets 415.
        result = self.kubectl("patch", "-n", self.ns, "widget", "w1", "--type=strategic",
                              "-p", '{"spec":{"size":7}}', ok=False)
        # (kubectl refuses it itself from discovery; either way nothing is patched.)
        self.assertRegex(result.stderr, "UnsupportedMediaType|strategic-merge-patch.*not supported")
        self.assertEqual(self.get_json("-n", self.ns, "widget", "w1")["spec"]["size"], 5)

    def test_duplicate_fields_warn_or_are_refused(self):
        """Attack run, item 3: kubectl sends a merge patch body as written, duplicate members
        included (a JSON Patch it re-encodes). Like kube-apiserver 1.27+, the server warns
        (kubectl prints the Warning header on stderr) and the last value wins; with
        fieldValidation=Strict it refuses the body."""
        self.create("/api/v1/namespaces/%s/configmaps" % self.ns, {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dup"},
            "data": {"a": "0"}})
        result = self.kubectl("patch", "-n", self.ns, "configmap", "dup", "--type=merge",
                              "-p", '{"data":{"a":"1","a":"2"}}')
        self.assertIn('Warning: duplicate field "data.a"', result.stderr)
        self.assertEqual(self.get_json("-n", self.ns, "configmap", "dup")["data"], {"a": "2"})
        # A create body sent as is (--raw): a warning by default, refused when Strict.
        body = ('{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup2"},'
                '"data":{"b":"1","b":"2"}}')
        path = "/api/v1/namespaces/%s/configmaps" % self.ns
        result = self.kubectl("create", "--raw", path + "?fieldValidation=Strict", "-f", "-",
                              input_text=body, ok=False)
        self.assertIn('strict decoding error: duplicate field "data.b"', result.stderr)
        result = self.kubectl("create", "--raw", path, "-f", "-", input_text=body)
        self.assertIn('Warning: duplicate field "data.b"', result.stderr)
        self.assertEqual(self.get_json("-n", self.ns, "configmap", "dup2")["data"], {"b": "2"})

    def test_a_crd_with_cel_rules_is_accepted_with_a_warning(self):
        """Issue 29 item 4: CEL rules (x-kubernetes-validations) are not enforced here; a CRD
        that has them is accepted, and kubectl shows the server's warning saying so."""
        group = "%s.example.com" % self.ns
        crd = namespaced_crd(group, "rule", "Rule", {"schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"spec": {
                "type": "object",
                "properties": {"size": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "self.size <= 10",
                                              "message": "too big"}]}}}}})
        result = self.kubectl("apply", "-f", "-", input_text=json.dumps(crd))
        self.assertIn("Warning: x-kubernetes-validations (CEL) rules are not enforced",
                      result.stderr)
        self.assertIn("spec.versions[0].schema.openAPIV3Schema.properties.spec", result.stderr)
        self.kubectl("delete", "crd", "rules." + group)

    def test_scale_a_custom_resource(self):
        """Issue 29: the scale subresource of a CRD; `kubectl scale` writes spec.replicas
        through it (newer kubectls patch it, older ones read it and put it back)."""
        group = "scale-%s.example.com" % self.ns
        crd = namespaced_crd(group, "pool", "Pool", {
            "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                     "statusReplicasPath": ".status.replicas"}},
            "schema": {"openAPIV3Schema": {"type": "object",
                                           "x-kubernetes-preserve-unknown-fields": True}}})
        self.kubectl("apply", "-f", "-", input_text=json.dumps(crd))
        self.kubectl("apply", "-f", "-", input_text=json.dumps({
            "apiVersion": group + "/v1", "kind": "Pool",
            "metadata": {"name": "p1", "namespace": self.ns}, "spec": {"replicas": 1}}))
        self.kubectl("scale", "-n", self.ns, "pools." + group, "p1", "--replicas=4")
        got = self.get_json("-n", self.ns, "pools." + group, "p1")
        self.assertEqual(got["spec"]["replicas"], 4)
        scale = json.loads(self.kubectl(
            "get", "--raw", "/apis/%s/v1/namespaces/%s/pools/p1/scale" % (group, self.ns)).stdout)
        self.assertEqual((scale["kind"], scale["spec"]["replicas"]), ("Scale", 4))
        self.kubectl("delete", "crd", "pools." + group)

    def test_patch_strategic_builtin(self):
        self.create("/apis/apps/v1/namespaces/%s/deployments" % self.ns, {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d1"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d1"}},
                     "template": {"metadata": {"labels": {"app": "d1"}}, "spec": {
                         "containers": [{"name": "main", "image": "busybox",
                                         "env": [{"name": "A", "value": "1"}]},
                                        {"name": "side", "image": "busybox"}]}}}})
        out = self.kubectl("patch", "-n", self.ns, "deployment", "d1", "--type=strategic", "-p",
                           '{"spec":{"template":{"spec":{"containers":[{"name":"main","env":'
                           '[{"name":"B","value":"2"}]}]}}}}').stdout
        self.assertEqual(out.strip(), "deployment.apps/d1 patched")
        containers = self.get_json("-n", self.ns, "deployment", "d1")["spec"]["template"]["spec"][
            "containers"]
        self.assertEqual([c["name"] for c in containers], ["main", "side"])  # merged by name
        self.assertEqual(sorted(e["name"] for e in containers[0]["env"]), ["A", "B"])
        # The default patch type of kubectl is strategic as well.
        self.kubectl("patch", "-n", self.ns, "deployment", "d1", "-p",
                     '{"metadata":{"labels":{"x":"y"}}}')
        self.assertEqual(self.get_json("-n", self.ns, "deployment", "d1")["metadata"]["labels"],
                         {"x": "y"})

    def test_label_and_annotate(self):
        self.create_widget("w1", labels={"keep": "me"})
        self.assertEqual(self.kubectl("label", "-n", self.ns, "widget", "w1",
                                      "env=prod").stdout.strip(),
                         "widget.example.com/w1 labeled")
        result = self.kubectl("label", "-n", self.ns, "widget", "w1", "env=dev", ok=False)
        self.assertIn("already has a value (prod)", result.stderr)
        self.kubectl("label", "-n", self.ns, "widget", "w1", "env=dev", "--overwrite")
        self.assertEqual(self.get_json("-n", self.ns, "widget", "w1")["metadata"]["labels"],
                         {"keep": "me", "env": "dev"})
        # kubectl before 1.21 says "labeled" for a removal too.
        self.assertRegex(self.kubectl("label", "-n", self.ns, "widget", "w1",
                                      "env-").stdout.strip(),
                         r"^widget.example.com/w1 (un)?labeled$")
        self.kubectl("annotate", "-n", self.ns, "widget", "w1", "note=first")
        result = self.kubectl("annotate", "-n", self.ns, "widget", "w1", "note=second", ok=False)
        self.assertIn("already has a value (first)", result.stderr)
        self.kubectl("annotate", "-n", self.ns, "widget", "w1", "note=second", "--overwrite")
        got = self.get_json("-n", self.ns, "widget", "w1")
        self.assertEqual(got["metadata"]["labels"], {"keep": "me"})
        self.assertEqual(got["metadata"]["annotations"], {"note": "second"})
        self.assertEqual(got["metadata"]["generation"], 1)  # metadata changes keep generation
        self.kubectl("annotate", "-n", self.ns, "widget", "w1", "note-")
        self.assertFalse(self.get_json("-n", self.ns, "widget", "w1")["metadata"]
                         .get("annotations"))

    @pending("openapi")
    def test_replace(self):
        self.create_widget("w1", size=1)
        current = yaml.safe_load(self.kubectl("get", "-n", self.ns, "widget", "w1",
                                              "-o", "yaml").stdout)
        stale = json.loads(json.dumps(current))
        current["spec"]["size"] = 9
        out = self.kubectl("replace", "-f", "-", input_text=yaml.safe_dump(current)).stdout
        self.assertEqual(out.strip(), "widget.example.com/w1 replaced")
        self.assertEqual(self.get_json("-n", self.ns, "widget", "w1")["spec"]["size"], 9)
        stale["spec"]["size"] = 10  # carries the old resourceVersion
        result = self.kubectl("replace", "-f", "-", input_text=yaml.safe_dump(stale), ok=False)
        self.assertIn("Conflict", result.stderr)
        self.assertIn("the object has been modified", result.stderr)
        self.assertEqual(self.get_json("-n", self.ns, "widget", "w1")["spec"]["size"], 9)

    # Deletion ------------------------------------------------------------------------------

    def test_delete_with_finalizer(self):
        self.create_widget("w1", finalizers=["example.com/hold"])
        out = self.kubectl("delete", "-n", self.ns, "widget", "w1", "--wait=false").stdout
        # kubectl 1.33+ names the namespace: '... deleted from NS namespace'.
        self.assertRegex(out.strip(), r'^widget\.example\.com "w1" deleted( from \S+ namespace)?$')
        got = self.get_json("-n", self.ns, "widget", "w1")
        self.assertTrue(got["metadata"].get("deletionTimestamp"), got)
        self.assertEqual(got["metadata"]["finalizers"], ["example.com/hold"])
        self.kubectl("patch", "-n", self.ns, "widget", "w1", "--type=json",
                     "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')
        self.wait_gone("-n", self.ns, "widget", "w1")

    def _set_ready(self, name):
        status = '{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Done"}]}}'
        if self._supports_subresource_flag():
            self.kubectl("patch", "-n", self.ns, "widget", name, "--subresource=status",
                         "--type=merge", "-p", status)
        else:  # kubectl before 1.24 has no --subresource
            code, body = self.api.request(
                "PATCH", "/apis/example.com/v1/namespaces/%s/widgets/%s/status" % (self.ns, name),
                status, content_type="application/merge-patch+json")
            self.assertEqual(code, 200, body)
        got = self.get_json("-n", self.ns, "widget", name)
        self.assertEqual(got["metadata"]["generation"], 1)  # status is not spec
        self.assertEqual(got["status"]["conditions"][0]["reason"], "Done")

    def test_wait_for_condition_already_met(self):
        self.create_widget("w1")
        self._set_ready("w1")
        out = self.kubectl("wait", "-n", self.ns, "--for=condition=Ready", "widget/w1",
                           "--timeout=%ds" % WAIT_SECONDS).stdout
        self.assertEqual(out.strip(), "widget.example.com/w1 condition met")

    @pending("uncompressed-watch")  # kubectl wait watches until the condition comes
    def test_wait_for_condition(self):
        self.create_widget("w1")
        waiter = self.start_kubectl("wait", "-n", self.ns, "--for=condition=Ready",
                                    "widget/w1", "--timeout=%ds" % WAIT_SECONDS)
        self._set_ready("w1")
        stdout, stderr = waiter.communicate(timeout=WAIT_SECONDS + 10)
        self.assertEqual(waiter.returncode, 0, stderr)
        self.assertEqual(stdout.decode().strip(), "widget.example.com/w1 condition met")

    def _supports_subresource_flag(self):
        return "--subresource" in self.kubectl("patch", "--help").stdout

    @pending("protobuf")
    def test_create_and_delete_namespace(self):
        out = self.kubectl("create", "namespace", "doomed-" + self.ns[:40]).stdout
        ns = "doomed-" + self.ns[:40]
        self.assertEqual(out.strip(), "namespace/%s created" % ns)
        self.create("/api/v1/namespaces/%s/configmaps" % ns,
                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}})
        self.create("/apis/example.com/v1/namespaces/%s/widgets" % ns, widget("w1", ns))
        out = self.kubectl("delete", "namespace", ns, "--wait=false").stdout
        self.assertEqual(out.strip(), 'namespace "%s" deleted' % ns)
        self.wait_gone("namespace", ns)
        for path in ("/api/v1/namespaces/%s/configmaps" % ns,
                     "/apis/example.com/v1/namespaces/%s/widgets" % ns):
            status, body = self.api.request("GET", path)
            self.assertEqual((status, body["items"] if status == 200 else None), (200, []), body)

    @pending("protobuf")
    def test_create_configmap_secret_deployment(self):
        self.kubectl("create", "-n", self.ns, "configmap", "c1", "--from-literal=a=1")
        self.assertEqual(self.get_json("-n", self.ns, "configmap", "c1")["data"], {"a": "1"})
        self.kubectl("create", "-n", self.ns, "secret", "generic", "s1", "--from-literal=p=hunter2")
        self.assertEqual(self.get_json("-n", self.ns, "secret", "s1")["data"], {"p": "aHVudGVyMg=="})
        out = self.kubectl("create", "-n", self.ns, "deployment", "d1", "--image=busybox",
                           "--replicas=2").stdout
        self.assertEqual(out.strip(), "deployment.apps/d1 created")
        got = self.get_json("-n", self.ns, "deployment", "d1")
        self.assertEqual(got["spec"]["replicas"], 2)
        self.assertEqual(got["spec"]["template"]["spec"]["containers"][0]["image"], "busybox")
        result = self.kubectl("create", "-n", self.ns, "configmap", "c1", ok=False)
        self.assertIn('configmaps "c1" already exists', result.stderr)

    def test_scale(self):
        self.create("/apis/apps/v1/namespaces/%s/deployments" % self.ns, {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d1"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d1"}},
                     "template": {"metadata": {"labels": {"app": "d1"}}, "spec": {
                         "containers": [{"name": "main", "image": "busybox"}]}}}})
        result = kubectl(self.KUBECTL, self.server.kubeconfig, "scale", "-n", self.ns,
                         "deployment", "d1", "--replicas=3")
        replicas = self.get_json("-n", self.ns, "deployment", "d1")["spec"]["replicas"]
        if result.returncode == 0:
            self.assertEqual(result.stdout.strip(), "deployment.apps/d1 scaled")
            self.assertEqual(replicas, 3)
        else:
            # The scale subresource is not served: a clear 404, and nothing changed.
            self.assertIn("NotFound", result.stderr)
            self.assertEqual(replicas, 1)

    def test_delete_cascade(self):
        def family(parent):
            owner = self.create_widget(parent)
            ref = {"apiVersion": "example.com/v1", "kind": "Widget", "name": parent,
                   "uid": owner["metadata"]["uid"], "controller": True,
                   "blockOwnerDeletion": True}
            for i in range(2):
                self.create("/api/v1/namespaces/%s/configmaps" % self.ns,
                            {"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "%s-child-%d" % (parent, i),
                                          "ownerReferences": [ref]}})

        def children(parent):
            items = self.get_json("-n", self.ns, "configmaps")["items"]
            return [i for i in items if i["metadata"]["name"].startswith(parent + "-child-")]

        for policy in ("background", "foreground"):
            parent = "p-" + policy
            family(parent)
            # --wait=false: kubectl's own wait watches (see test_get_watch); poll instead.
            self.kubectl("delete", "-n", self.ns, "widget", parent, "--cascade=" + policy,
                         "--wait=false")
            self.wait_gone("-n", self.ns, "widget", parent)
            deadline = time.monotonic() + WAIT_SECONDS
            while children(parent) and time.monotonic() < deadline:
                time.sleep(0.1)  # polling the garbage collector's observable result
            self.assertEqual(children(parent), [], policy)
        family("p-orphan")
        self.kubectl("delete", "-n", self.ns, "widget", "p-orphan", "--cascade=orphan",
                     "--wait=false")
        self.wait_gone("-n", self.ns, "widget", "p-orphan")
        orphans = children("p-orphan")
        self.assertEqual(len(orphans), 2)
        for child in orphans:
            self.assertFalse(child["metadata"].get("ownerReferences"), child)

    def test_explain(self):
        served = [path for path in ("/openapi/v2", "/openapi/v3")
                  if self.api.request("GET", path)[0] == 200]
        if not served:
            self.skipTest("the server does not serve /openapi/v2 or /openapi/v3 (404)")
        out = self.kubectl("explain", "widgets.spec").stdout
        self.assertIn("size", out)
        self.assertIn("How big the widget is.", out)
        out = self.kubectl("explain", "configmaps").stdout
        self.assertIn("ConfigMap", out)


def _suite_classes():
    kubectls = []
    default = shutil.which("kubectl")
    if default:
        kubectls.append(default)
    kubectls += [k for k in extra_kubectls() if k not in kubectls]
    classes = {}
    if not kubectls:
        def test_kubectl_found(self):
            self.fail("no kubectl on PATH (tools/setup installs one)")
        classes["NoKubectl"] = type("NoKubectl", (unittest.TestCase,),
                                    {"test_kubectl_found": test_kubectl_found})
    for path in kubectls:
        version = kubectl(path, "/dev/null", "version", "--client", "-o", "json")
        try:
            tag = json.loads(version.stdout)["clientVersion"]["gitVersion"]
        except (ValueError, KeyError):
            tag = "unknown"
        name = "Kubectl_" + re.sub(r"[^A-Za-z0-9]+", "_", tag).strip("_")
        while name in classes:
            name += "_"
        classes[name] = type(name, (KubectlSuite, unittest.TestCase), {"KUBECTL": path})
    return classes


globals().update(_suite_classes())

if __name__ == "__main__":
    bazel_unittest.main()
