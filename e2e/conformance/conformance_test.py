"""The conformance suite: one set of scenarios, run against the WebApp plugin of every SDK
(C++: plugins/webapp, Go: plugins/webapp-go, Node: plugins/webapp-node, Python:
plugins/webapp-py).

1. Offline, through `ctrlhost test`: on the same inputs every SDK's plugin answers the same
   desired objects, status, conditions, events, errors and finalizer release (compared with the
   C++ reference after sorting keys), for a fresh WebApp, a ready one, an invalid spec (terminal
   error) and a finalizing one; the external record files are byte for byte the same.
2. Live, through `ctrlhost run` with kubectl-visible effects: a WebApp converges under each
   language, and hot swaps between languages (C++ -> Go -> Python -> Node -> C++) under a stream of
   updates lose no key and never relist a watch. conformance_kube_test runs this part against
   real Kubernetes 1.20 (e2e/kube); part 1 involves no API server and runs once.
3. The scenario controller (e2e/conformance/scenario) in each language answers the controller
   model's pieces alike offline (requeue, errors, a forbidden change, DependentChain context
   flags, resource builders, stage callbacks, the standard operator status, resource sets), and
   live its standard status is read by `kubectl wait --for=condition=Available` through an upgrade and a
   persistent failure (OperatorStatusLiveTest, both servers). Background tasks
   (TaskConformanceTest, both servers): under each language the scenario's task fails on its
   first run, is restarted and reported alike in /debug/dump, and its enqueues are the only
   trigger that gets a changed external token reconciled.
"""

import json
import os
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from e2e.apiserver import apiserver_fixture
from e2e.host import host_fixture
from tools.internal import bazel_unittest

SAMPLE = host_fixture.runfile("plugins/webapp/testdata/webapp.yaml")
INVALID = host_fixture.runfile("e2e/conformance/testdata/invalid.yaml")
MALFORMED = host_fixture.runfile("e2e/conformance/testdata/malformed.yaml")
CHILDREN = os.path.dirname(
    host_fixture.runfile("e2e/conformance/testdata/children/deployment.yaml"))
CRD = host_fixture.runfile("plugins/webapp/deploy/crd.yaml")

# Language -> plugin executable (runfiles). A language whose plugin is not built is skipped.
PLUGINS = {
    "cpp": host_fixture.runfile("plugins/webapp/webapp"),
    "go": host_fixture.runfile("plugins/webapp-go/webapp-go"),
    "node": host_fixture.runfile("plugins/webapp-node/webapp-node"),
    "python": host_fixture.runfile("plugins/webapp-py/webapp-py"),
}
AVAILABLE = {lang: path for lang, path in PLUGINS.items() if os.path.exists(path)}

# The "scenario" controller (e2e/conformance/scenario) in each language: one outcome per input.
SCENARIO_PLUGINS = {
    "cpp": host_fixture.runfile("e2e/conformance/scenario/scenario-cpp"),
    "go": host_fixture.runfile("e2e/conformance/scenario/scenario-go"),
    "node": host_fixture.runfile("e2e/conformance/scenario/scenario-node"),
    "python": host_fixture.runfile("e2e/conformance/scenario/scenario-py"),
}


CHAIN_CHILDREN = os.path.dirname(
    host_fixture.runfile("e2e/conformance/testdata/scenarios/chain-children/configmaps.yaml"))


CALLBACK_CHILDREN = os.path.dirname(
    host_fixture.runfile("e2e/conformance/testdata/scenarios/callbacks-children/configmaps.yaml"))


STATUS_CHILDREN = os.path.dirname(
    host_fixture.runfile("e2e/conformance/testdata/scenarios/status-children/configmap.yaml"))
SCENARIO_CRD = host_fixture.runfile("e2e/conformance/testdata/scenario-crd.yaml")


# Issue 18's pieces (context flags, resource builders, stage callbacks, the standard operator
# status, resource sets): asked of every SDK's scenario plugin.
ISSUE_18_LANGUAGES = ("cpp", "go", "node", "python")


def scenario(outcome):
    return host_fixture.runfile("e2e/conformance/testdata/scenarios/%s.yaml" % outcome)


def ctrlhost_test(plugin, record_dir, *args):
    env = dict(os.environ)
    env["WEBAPP_RECORD_DIR"] = record_dir
    result = subprocess.run([apiserver_fixture.binary_path(), "test", "--log-level=warning",
                             "--plugin", plugin, "-o", "json", "--check", *args],
                            capture_output=True, text=True, timeout=120, env=env)
    return result


OFFLINE_ONLY_ONCE = unittest.skipIf(host_fixture.real_kube(),
                                    "offline (no API server): runs in conformance_test")


@OFFLINE_ONLY_ONCE
class OfflineConformanceTest(unittest.TestCase):
    """Scenario 1: the same answers on the same inputs."""

    def compare(self, name, *args, record_dir=None, ignore_messages=False):
        tmp = tempfile.mkdtemp(prefix="conf-", dir=os.environ.get("TEST_TMPDIR"))
        answers = {}
        for lang, plugin in AVAILABLE.items():
            result = ctrlhost_test(plugin, record_dir or os.path.join(tmp, lang), *args)
            self.assertEqual(result.returncode, 0, "%s %s: %s" % (lang, name, result.stderr))
            answers[lang] = json.loads(result.stdout)
            if ignore_messages:
                # The operating system's words for a failure differ per language runtime; the
                # outcome (kind, reason, what was written) must not.
                answers[lang].get("error", {}).pop("message", None)
                for event in answers[lang].get("events", []):
                    event.pop("message", None)
                for condition in answers[lang].get("conditions", []):
                    condition.pop("message", None)
        reference = json.dumps(answers["cpp"], sort_keys=True, indent=1)
        for lang, answer in answers.items():
            self.assertEqual(json.dumps(answer, sort_keys=True, indent=1), reference,
                             "%s answers %s differently from the C++ reference" % (lang, name))
        return answers["cpp"], tmp

    def test_every_language_is_built(self):
        self.assertEqual(sorted(AVAILABLE), ["cpp", "go", "node", "python"])

    def test_fresh_webapp(self):
        answer, tmp = self.compare("fresh", "--object", SAMPLE)
        kinds = sorted(o["kind"] for o in answer["desired_objects"])
        self.assertEqual(kinds, ["ConfigMap", "Deployment", "Service"])
        conditions = {c["type"]: c["status"] for c in answer["conditions"]}
        self.assertEqual(conditions["Ready"], "CONDITION_STATUS_FALSE")
        # The external record files are byte for byte the same in every language.
        records = {}
        for lang in AVAILABLE:
            with open(os.path.join(tmp, lang, "default_shop.json"), "rb") as f:
                records[lang] = f.read()
        self.assertEqual(len(set(records.values())), 1, records)

    def test_ready_children(self):
        answer, _ = self.compare("ready", "--object", SAMPLE, "--children", CHILDREN)
        self.assertEqual(answer["status"]["readyReplicas"], 2)

    def test_invalid_spec_is_terminal(self):
        answer, _ = self.compare("invalid", "--object", INVALID)
        self.assertEqual(answer["error"]["kind"], "ERROR_KIND_TERMINAL")
        self.assertTrue(any(e["type"] == "EVENT_TYPE_WARNING" for e in answer.get("events", [])),
                        answer)

    def test_malformed_object_is_a_terminal_error(self):
        answer, _ = self.compare("malformed", "--object", MALFORMED)
        self.assertEqual(answer["error"]["kind"], "ERROR_KIND_TERMINAL", answer)

    def test_external_failure_is_retryable(self):
        # The record directory is a file: writing the external record fails in every language.
        blocker = os.path.join(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")), "file")
        with open(blocker, "w") as f:
            f.write("not a directory")
        answer, _ = self.compare("unwritable", "--object", SAMPLE, record_dir=blocker,
                                 ignore_messages=True)
        self.assertEqual(answer["error"]["kind"], "ERROR_KIND_RETRYABLE", answer)

    def test_finalizing_releases_the_finalizer(self):
        answer, _ = self.compare("finalizing", "--object", SAMPLE, "--finalizing")
        self.assertTrue(answer.get("finalized"), answer)


@OFFLINE_ONLY_ONCE
class GoldenAnswersTest(unittest.TestCase):
    """The bring-your-own-language entry point (check_plugin.py, no Bazel needed): every SDK's
    plugins match the golden answers, which come from the C++ reference (so they cannot rot)."""

    def test_every_language_matches_the_golden_answers(self):
        for lang in sorted(AVAILABLE):
            result = subprocess.run(
                ["/usr/bin/python3", host_fixture.runfile("e2e/conformance/check_plugin.py"),
                 "--ctrlhost", apiserver_fixture.binary_path(), "--webapp", AVAILABLE[lang],
                 "--scenario", SCENARIO_PLUGINS[lang]],
                capture_output=True, text=True, timeout=600)
            self.assertEqual(result.returncode, 0, "%s:\n%s%s" % (lang, result.stdout,
                                                                   result.stderr))
            self.assertIn("10 checked, 0 failed", result.stdout)


@OFFLINE_ONLY_ONCE
class ScenarioConformanceTest(unittest.TestCase):
    """Outcomes the WebApp never produces, answered alike by every SDK: requeue_after, retryable
    and terminal errors, and a forbidden change that the host must refuse (`--check`)."""

    def answers(self, outcome, *args, expected_exit=0, languages=None):
        answers = {}
        for lang, plugin in SCENARIO_PLUGINS.items():
            if languages is not None and lang not in languages:
                continue
            result = subprocess.run(
                [apiserver_fixture.binary_path(), "test", "--log-level=warning", "--plugin",
                 plugin, "-o", "json", "--check", "--object", scenario(outcome), *args],
                capture_output=True, text=True, timeout=120)
            self.assertEqual(result.returncode, expected_exit,
                             "%s %s: %s" % (lang, outcome, result.stderr))
            answers[lang] = json.loads(result.stdout)
            answers[lang].pop("request_id", None)
        reference = json.dumps(answers["cpp"], sort_keys=True)
        for lang, answer in answers.items():
            self.assertEqual(json.dumps(answer, sort_keys=True), reference,
                             "%s answers %s differently from C++" % (lang, outcome))
        return answers["cpp"]

    def test_ok(self):
        answer = self.answers("ok")
        self.assertEqual(answer["desired_objects"][0]["data"], {"greeting": "hello"})

    def test_requeue_after(self):
        answer = self.answers("requeue")
        self.assertEqual(answer["requeue_after"], "30s")
        self.assertEqual(answer["status"], {"phase": "Waiting"})

    def test_retryable_error(self):
        self.assertEqual(self.answers("retryable")["error"]["kind"], "ERROR_KIND_RETRYABLE")

    def test_retryable_error_with_reason_and_retry_after(self):
        # Issue 19: raised the idiomatic way in each language, answered identically.
        self.assertEqual(self.answers("retry-after")["error"],
                         {"kind": "ERROR_KIND_RETRYABLE",
                          "message": "the scenario's quota is used up",
                          "reason": "QuotaExceeded", "retry_after": "45s"})

    def test_terminal_error(self):
        answer = self.answers("terminal")
        self.assertEqual(answer["error"]["kind"], "ERROR_KIND_TERMINAL")
        self.assertEqual(answer["events"][0]["type"], "EVENT_TYPE_WARNING")

    def test_forbidden_change_is_refused_by_the_host(self):
        # `--check` runs the applier's validation: exit 3, the same refusal for every language.
        answer = self.answers("forbidden", expected_exit=3)
        self.assertEqual(answer["desired_objects"][0]["kind"], "Secret")

    def test_default_labels_skip_children_of_the_primarys_kind(self):
        # First contact (a Go plugin's author): a child of the primary's own kind that got the
        # primary's labels by default matched the controller's label selector and became a
        # primary itself. Every SDK copies them to children of other kinds only.
        answer = self.answers("labels")
        desired = {o["kind"]: o for o in answer["desired_objects"]}
        self.assertEqual(desired["ConfigMap"]["metadata"]["labels"],
                         {"team": "a", "selected": "yes"})
        self.assertEqual(desired["Scenario"]["metadata"],
                         {"name": "s-labels-child", "namespace": "default"})

    # Context flags in a DependentChain (issue 18 piece 2): steps cancel the pass or their own
    # resource, flags set by earlier steps are read by later ones, skipped resources that exist
    # are kept as they are, and the condition says what was skipped.
    def test_chain_cancel_pass(self):
        answer = self.answers("chain-pass", "--children", CHAIN_CHILDREN,
                              languages=ISSUE_18_LANGUAGES)
        desired = {o["metadata"]["name"]: o for o in answer["desired_objects"]}
        self.assertEqual(sorted(desired), ["s-chain-a", "s-chain-b", "s-chain-c"])
        self.assertEqual(desired["s-chain-a"]["data"], {"v": "new"})
        self.assertEqual(desired["s-chain-b"]["data"], {"v": "new"})  # the canceller's own
        self.assertEqual(desired["s-chain-c"]["data"], {"v": "old"})  # kept as it is
        self.assertEqual(answer["status"]["cancelled"], ["c"])
        self.assertEqual(answer["status"]["flags"],
                         {"seen-a": True, "seen-b": True, "updateAllowed": True})
        condition = {c["type"]: c for c in answer["conditions"]}["DependentsReady"]
        self.assertEqual(condition["reason"], "Cancelled")
        self.assertEqual(condition["message"],
                         "b cancelled the pass: spec.cancelPass; skipped: c; waiting for b")

    def test_chain_state_after_a_failed_step_is_not_ready(self):
        # The first dependent's step fails before anything is pending: every SDK's chain state
        # says not ready and names the failed dependent (issue 18 follow-up).
        answer = self.answers("chain-fail", "--children", CHAIN_CHILDREN,
                              languages=ISSUE_18_LANGUAGES)
        self.assertEqual(answer["error"], {"kind": "ERROR_KIND_TERMINAL",
                                           "message": "dependent a: spec.failStep"})
        self.assertEqual(answer["status"], {"phase": "Done", "cancelled": [], "flags": {},
                                            "allReady": False, "failedAt": "a"})
        self.assertNotIn("DependentsReady", [c["type"] for c in answer.get("conditions", [])])

    def test_builders(self):
        # Resource builders (issue 18 piece 6): every builder's output and the config hash of
        # keys whose UTF-8 order differs from JavaScript's, identical in every language.
        answer = self.answers("builders", languages=ISSUE_18_LANGUAGES)
        built = answer["status"]["built"]
        self.assertEqual([o["kind"] for o in built],
                         ["Deployment", "Service", "ConfigMap", "Secret", "ServiceAccount",
                          "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"])
        self.assertEqual(built[0]["spec"]["template"]["metadata"]["annotations"],
                         {"ctrlhost.dev/config-hash": answer["status"]["configHash"]})
        self.assertEqual([p["protocol"] for p in built[1]["spec"]["ports"]], ["TCP", "UDP"])
        self.assertEqual(built[2]["metadata"]["ownerReferences"][0]["uid"],
                         "7a0c7a1e-0000-4000-8000-000000000012")

    # Stage callbacks (issue 18 piece 3): per kind and stage in registration order, pre-stage
    # changes in the answer, an error that stops the step and names the callback.
    def test_stage_callbacks(self):
        answer = self.answers("callbacks", "--children", CALLBACK_CHILDREN,
                              languages=ISSUE_18_LANGUAGES)
        self.assertEqual(answer["status"]["log"], [
            "pre-update:s-cb-a", "post-update:s-cb-a", "pre-create:s-cb-b",
            "post-create:s-cb-b", "pre-delete:s-cb-c", "post-delete:s-cb-c"])
        desired = {o["metadata"]["name"]: o for o in answer["desired_objects"]}
        self.assertEqual(sorted(desired), ["s-cb-a", "s-cb-b"])
        self.assertEqual(desired["s-cb-b"]["metadata"]["labels"], {"stage": "pre-create"})

    def test_stage_callback_error_names_the_callback(self):
        answer = self.answers("callbacks-fail", "--children", CALLBACK_CHILDREN,
                              languages=ISSUE_18_LANGUAGES)
        self.assertEqual(answer["error"], {
            "kind": "ERROR_KIND_TERMINAL",
            "message": "dependent b: callback guard at pre-create: spec.failAt"})
        self.assertEqual(answer["status"]["log"], [
            "pre-update:s-cb-a", "post-update:s-cb-a", "pre-create:s-cb-b"])

    # Resource sets (issue 18 piece 1): exactly one set per object, with its context; none:
    # skipped and counted; several: a terminal error, Reconciled=False and a Warning event, all
    # naming the sets (AmbiguousRoute).
    def test_resource_set_runs_the_one_that_handles_the_object(self):
        v1 = self.answers("route-v1", languages=ISSUE_18_LANGUAGES)
        self.assertEqual(v1["status"], {"phase": "Done", "set": "v1", "context": {}})
        self.assertEqual(v1["desired_objects"][0]["data"], {"set": "v1"})
        v2 = self.answers("route-v2", languages=ISSUE_18_LANGUAGES)
        self.assertEqual(v2["status"], {"phase": "Done", "set": "v2",
                                        "context": {"replicas": 2, "set": "v2"}})

    def test_resource_sets_none_is_skipped_and_counted(self):
        answer = self.answers("route-none", languages=ISSUE_18_LANGUAGES)
        self.assertEqual(answer["status"], {"skipped": 1})
        self.assertNotIn("desired_objects", answer)
        self.assertNotIn("error", answer)

    def test_resource_sets_several_are_an_ambiguous_route(self):
        answer = self.answers("route-ambiguous", languages=ISSUE_18_LANGUAGES)
        message = ('the object matches 2 resource sets: "v2", "canary"; '
                   'exactly one must handle it')
        self.assertEqual(answer["error"], {"kind": "ERROR_KIND_TERMINAL", "message": message})
        self.assertEqual(answer["conditions"], [{
            "type": "Reconciled", "status": "CONDITION_STATUS_FALSE", "reason": "AmbiguousRoute",
            "message": message}])
        self.assertEqual(answer["events"], [{
            "type": "EVENT_TYPE_WARNING", "reason": "AmbiguousRoute", "message": message}])
        self.assertNotIn("desired_objects", answer)

    # The standard operator status (issue 18 piece 4).
    def test_operator_status_deploying(self):
        answer = self.answers("status", languages=ISSUE_18_LANGUAGES)
        self.assertEqual(answer["status"], {
            "phase": "Deploying", "operatorVersion": "1.0.0", "targetVersion": "1.0.0",
            "observedGeneration": 1})
        conditions = {c["type"]: (c["status"], c["reason"]) for c in answer["conditions"]}
        self.assertEqual(conditions["Available"], ("CONDITION_STATUS_FALSE", "Deploying"))
        self.assertEqual(conditions["Reconciling"], ("CONDITION_STATUS_TRUE", "Deploying"))

    def test_operator_status_upgrade_keeps_available(self):
        answer = self.answers("status-upgrade", "--children", STATUS_CHILDREN,
                              languages=ISSUE_18_LANGUAGES)
        self.assertEqual(answer["status"]["phase"], "Upgrading")
        self.assertNotIn("observedVersion", answer["status"])
        conditions = {c["type"]: (c["status"], c["reason"]) for c in answer["conditions"]}
        self.assertEqual(conditions["Available"],
                         ("CONDITION_STATUS_TRUE", "PreviousVersionAvailable"))
        self.assertEqual(conditions["Degraded"], ("CONDITION_STATUS_FALSE", "AsExpected"))

    def test_chain_cancel_resource_and_flags(self):
        answer = self.answers("chain-resource", "--children", CHAIN_CHILDREN,
                              languages=ISSUE_18_LANGUAGES)
        desired = {o["metadata"]["name"]: o for o in answer["desired_objects"]}
        # b does not exist and cancelled itself: not created; c exists and updates are not
        # allowed (a's flag): kept with its current data.
        self.assertEqual(sorted(desired), ["s-chain-a", "s-chain-c"])
        self.assertEqual(desired["s-chain-c"]["data"], {"v": "old"})
        self.assertEqual(answer["status"]["cancelled"], ["b", "c"])
        self.assertEqual(answer["status"]["flags"],
                         {"seen-a": True, "seen-b": True, "seen-c": True,
                          "updateAllowed": False})
        condition = {c["type"]: c for c in answer["conditions"]}["DependentsReady"]
        self.assertEqual(condition["message"],
                         "skipped: b (spec.cancelResource), c (updates not allowed)")


SCENARIO_OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: scenario
spec:
  plugins:
    - name: scenario
      exec:
        command: {command}
"""


class OperatorStatusLiveTest(unittest.TestCase):
    """The standard operator status as tools read it: `kubectl wait --for=condition=Available`
    and the versions through an upgrade and a persistent failure, under each language's scenario
    plugin in turn (hot swaps), against the embedded server and (conformance_kube_test) real
    Kubernetes."""

    @classmethod
    def setUpClass(cls):
        cls.host = host_fixture.start_host(
            SCENARIO_OPERATOR.format(command=SCENARIO_PLUGINS["cpp"]))
        cls.host.kubectl("apply", "-f", SCENARIO_CRD, check=True)
        cls.host.wait_for(lambda: cls.host.endpoint("/readyz")[0] == 200, "controller ready")

    @classmethod
    def tearDownClass(cls):
        code = cls.host.stop()
        assert code == 0, "ctrlhost exited %s\n%s" % (code, cls.host.log()[-4000:])

    def kubectl_ok(self, *args, input_text=None):
        result = self.host.kubectl(*args, input_text=input_text)
        self.assertEqual(result.returncode, 0, "kubectl %s: %s%s\n%s" % (
            " ".join(args), result.stdout, result.stderr, self.host.log()[-3000:]))
        return result.stdout

    def scenario_status(self, name):
        obj = self.host.get("/apis/e2e.ctrlhost.dev/v1/namespaces/default/scenarios/" + name)
        return (obj or {}).get("status", {})

    def test_kubectl_wait_reads_the_standard_status(self):
        for lang in ("cpp", "go", "python", "node"):
            if lang != "cpp":
                swap = self.host.ctrlhost("plugin", "swap", "scenario/scenario", "--timeout",
                                          "60s", "--command", SCENARIO_PLUGINS[lang])
                self.assertEqual(swap.returncode, 0, swap.stdout + swap.stderr)
            name = "status-" + lang
            self.kubectl_ok("apply", "-f", "-", input_text=json.dumps({
                "apiVersion": "e2e.ctrlhost.dev/v1", "kind": "Scenario",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"outcome": "status", "version": "1.0.0"}}))
            self.kubectl_ok("wait", "--for=condition=Available", "scenario/" + name,
                            "--timeout=90s")
            status = self.scenario_status(name)
            self.assertEqual((status["phase"], status["observedVersion"]), ("Deployed", "1.0.0"))
            self.kubectl_ok("wait", "--for=condition=Reconciling=False", "scenario/" + name,
                            "--timeout=30s")
            # An upgrade: Deployed again at the new version, never Degraded.
            self.kubectl_ok("patch", "scenario", name, "--type=merge", "-p",
                            '{"spec": {"version": "2.0.0"}}')
            self.kubectl_ok("wait", "--for=jsonpath={.status.observedVersion}=2.0.0",
                            "scenario/" + name, "--timeout=90s")
            status = self.scenario_status(name)
            self.assertEqual(status["phase"], "Deployed")
            conditions = {c["type"]: c for c in status["conditions"]}
            self.assertEqual(conditions["Degraded"]["status"], "False")
            self.assertEqual(conditions["Available"]["status"], "True")
            self.assertIn("lastTransitionTime", conditions["Available"])
            # A persistent failure: Degraded and Stalled, phase Error.
            self.kubectl_ok("patch", "scenario", name, "--type=merge", "-p",
                            '{"spec": {"failure": "the backend refuses us"}}')
            self.kubectl_ok("wait", "--for=condition=Degraded", "scenario/" + name,
                            "--timeout=90s")
            status = self.scenario_status(name)
            self.assertEqual(status["phase"], "Error")
            stalled = {c["type"]: c for c in status["conditions"]}["Stalled"]
            self.assertEqual((stalled["status"], stalled["message"]),
                             ("True", "the backend refuses us"))


TASK_OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: scenario
spec:
  plugins:
    - name: scenario
      exec:
        command: {command}
        env:
          SCENARIO_TASK_FILE: {task_file}
"""


class TaskConformanceTest(unittest.TestCase):
    """Background tasks alike in every language (scenario outcome "task"), one host per
    language: the host starts the task with the controller, a task that fails is restarted and
    reported in /debug/dump, and what it enqueues is reconciled. (A fresh host each: a swap to a
    plugin with another Describe replaces the controllers, which stops and starts the new
    instance's tasks once more and resets their restart count.)"""

    def setUp(self):
        # Plugin-readable, apart from the host's data directory (Landlock hides that one).
        self.dir = tempfile.mkdtemp(prefix="task-conformance-",
                                    dir=os.environ.get("TEST_TMPDIR"))
        os.chmod(self.dir, 0o755)
        self.task_file = os.path.join(self.dir, "tokens")

    def write_tokens(self, tokens):
        with open(self.task_file + ".tmp", "w", encoding="utf-8") as f:
            f.write("".join("%s %s\n" % item for item in sorted(tokens.items())))
        os.chmod(self.task_file + ".tmp", 0o644)
        os.rename(self.task_file + ".tmp", self.task_file)

    @staticmethod
    def token_of(host, name):
        cm = host.get("/api/v1/namespaces/default/configmaps/" + name)
        return (cm or {}).get("data", {}).get("token")

    @staticmethod
    def poke_task(host):
        """The task's entry in /debug/dump once it runs again after its failed first run."""
        status, text = host.endpoint("/debug/dump")
        if status != 200:
            return None
        import yaml  # pylint: disable=import-outside-toplevel (Debian's python3-yaml)
        for controller in yaml.safe_load(text)["plugins"][0].get("backgroundTasks", []):
            for task in controller.get("tasks", []):
                if (task["name"] == "poke" and task["state"] == "running"
                        and task["restarts"] >= 1):
                    return controller, task
        return None

    def run_language(self, lang, tokens):
        host = host_fixture.start_host(TASK_OPERATOR.format(
            command=SCENARIO_PLUGINS[lang], task_file=self.task_file))
        try:
            host.kubectl("apply", "-f", SCENARIO_CRD, check=True)
            controller, task = host.wait_for(lambda: self.poke_task(host),
                                             "%s: poke restarted" % lang)
            self.assertIn("scenario task fails on its first run", task["lastError"], lang)
            self.assertIn("background task failed", host.log(), lang)
            name = "task-" + lang
            host.kubectl("apply", "-f", "-", check=True, input_text=json.dumps({
                "apiVersion": "e2e.ctrlhost.dev/v1", "kind": "Scenario",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"outcome": "task"}}))
            host.wait_for(lambda: self.token_of(host, name) == "", "%s: first reconcile" % lang)
            # Only the task's enqueue reconciles the object after its token changes.
            tokens["default/" + name] = "token-" + lang
            self.write_tokens(tokens)
            host.wait_for(lambda: self.token_of(host, name) == "token-" + lang,
                          "%s: the enqueued object reconciled" % lang)
            obj = host.get("/apis/e2e.ctrlhost.dev/v1/namespaces/default/scenarios/" + name)
            controller = host.wait_for(
                lambda: (lambda c: c if c[0]["enqueued"] >= 1 else None)(self.poke_task(host)),
                "%s: enqueue counted" % lang)[0]
            return (controller["controller"], controller["running"], task["name"],
                    task["state"], dict(obj["status"], token="-"))
        finally:
            code = host.stop()
            self.assertEqual(code, 0, "ctrlhost exited %s\n%s" % (code, host.log()[-4000:]))

    def test_tasks_restart_report_and_enqueue_alike(self):
        tokens = {}
        seen = {lang: self.run_language(lang, tokens)
                for lang in ("cpp", "go", "python", "node")}
        self.assertEqual(seen["cpp"][:4], ("scenario", True, "poke", "running"))
        self.assertEqual(seen["cpp"][4]["phase"], "Done")
        self.maxDiff = None
        self.assertEqual(seen, {lang: seen["cpp"] for lang in seen})


OPERATOR = """\
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: conformance
spec:
  plugins:
    - name: webapp
      exec:
        command: {command}
        env:
          WEBAPP_RECORD_DIR: {records}
"""


class LiveConformanceTest(unittest.TestCase):
    """Scenario 2: the host runs each language's plugin in turn, swapping under load."""

    @classmethod
    def setUpClass(cls):
        cls.records = tempfile.mkdtemp(prefix="records-", dir=os.environ.get("TEST_TMPDIR"))
        cls.host = host_fixture.start_host(OPERATOR.format(command=AVAILABLE["cpp"],
                                                           records=cls.records))
        cls.host.kubectl("apply", "-f", CRD, check=True)
        cls.host.wait_for(lambda: cls.host.endpoint("/readyz")[0] == 200, "controller ready")

    @classmethod
    def tearDownClass(cls):
        code = cls.host.stop()
        assert code == 0, "ctrlhost exited %s\n%s" % (code, cls.host.log()[-4000:])

    def apply(self, name, replicas):
        body = {"apiVersion": "apps.ctrlhost.dev/v1alpha1", "kind": "WebApp",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"image": "nginx:1.25", "replicas": replicas}}
        status, _ = self.host.api.request(
            "PATCH", "/apis/apps.ctrlhost.dev/v1alpha1/namespaces/default/webapps/%s"
            "?fieldManager=conformance&force=true" % name, body, "application/apply-patch+yaml")
        return status

    def deployment_replicas(self, name):
        d = self.host.get("/apis/apps/v1/namespaces/default/deployments/" + name) or {}
        return d.get("spec", {}).get("replicas")

    def test_swaps_between_languages_lose_nothing(self):
        names = ["app-%02d" % i for i in range(40)]
        last = {}
        for name in names:
            self.assertIn(self.apply(name, 1), (200, 201))
            last[name] = 1
        stop = threading.Event()
        errors = []

        def updater():
            replicas = 1
            while not stop.is_set():
                replicas = replicas % 9 + 1
                for name in names:
                    if stop.is_set():
                        return
                    status = self.apply(name, replicas)
                    if status not in (200, 201):
                        errors.append((name, status))
                    last[name] = replicas

        thread = threading.Thread(target=updater)
        thread.start()
        order = [lang for lang in ("go", "python", "node", "cpp") if lang in AVAILABLE]
        try:
            for lang in order:
                result = self.host.ctrlhost(
                    "plugin", "swap", "conformance/webapp", "--timeout", "60s",
                    "--command", AVAILABLE[lang], "--env", "WEBAPP_RECORD_DIR=" + self.records)
                self.assertEqual(result.returncode, 0,
                                 "swap to %s: %s%s" % (lang, result.stdout, result.stderr))
                time.sleep(1)
        finally:
            stop.set()
            thread.join(60)
        self.assertEqual(errors, [])
        for name in names:
            self.host.wait_for(lambda: self.deployment_replicas(name) == last[name],
                               "%s converged to %s replicas" % (name, last[name]), timeout=90)
            web = self.host.get("/apis/apps.ctrlhost.dev/v1alpha1/namespaces/default/webapps/"
                                + name)
            self.host.wait_for(
                lambda: (self.host.get("/apis/apps.ctrlhost.dev/v1alpha1/namespaces/default/"
                                       "webapps/" + name) or {}).get("status", {})
                .get("observedGeneration") == web["metadata"]["generation"],
                name + " status observed")
        self.assertEqual(self.host.metric("ctrlhost_watch_relists_total"), 0)
        # Deleting under the last language runs its finalizer (the record goes away).
        self.host.kubectl("delete", "webapp", names[0], "--wait=true", "--timeout=60s",
                          check=True)
        self.assertFalse(os.path.exists(os.path.join(self.records, "default_%s.json" % names[0])))

    def plugin_status(self):
        listing = self.host.ctrlhost("plugin", "list", "-o", "json")
        self.assertEqual(listing.returncode, 0, listing.stderr)
        return json.loads(listing.stdout)["plugins"][0]

    def test_zz_sigterm_during_in_flight_work_loses_nothing(self):
        # For each language: SIGTERM its plugin process (a descendant of this test, by PID) while
        # updates stream in; the plugin finishes what it holds and exits, the host restarts it,
        # and every object still converges.
        names = ["term-%02d" % i for i in range(20)]
        for lang in [lang for lang in ("go", "node", "python", "cpp") if lang in AVAILABLE]:
            result = self.host.ctrlhost(
                "plugin", "swap", "conformance/webapp", "--timeout", "60s",
                "--command", AVAILABLE[lang], "--env", "WEBAPP_RECORD_DIR=" + self.records)
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            before = self.plugin_status()
            replicas = {"go": 2, "node": 3, "python": 4, "cpp": 5}[lang]
            for name in names[:10]:
                self.assertIn(self.apply(name, replicas), (200, 201))
            os.kill(int(before["pid"]), signal.SIGTERM)
            for name in names[10:]:
                self.assertIn(self.apply(name, replicas), (200, 201))
            restarts = int(before.get("restarts", 0))
            self.host.wait_for(
                lambda: int(self.plugin_status().get("restarts", 0)) > restarts
                and self.plugin_status()["state"] == "PLUGIN_STATE_READY",
                "%s plugin restarted after SIGTERM" % lang, timeout=90)
            for name in names:
                self.host.wait_for(lambda: self.deployment_replicas(name) == replicas,
                                   "%s converged under %s" % (name, lang), timeout=90)


if __name__ == "__main__":
    bazel_unittest.main()
