"""The VersionedApp plugin in C++, Python and Node gives the same answers through `ctrlhost test`
on the same inputs: for every path of the controller (v1 and v2 sets, each step of the chain,
the hold, the refused downgrade, invalid specs) the whole printed response
(desired objects, status, conditions, events, error) and the exit code are compared with the C++
plugin's. The e2e test (e2e/host/versioned_app_e2e_test.py) checks the live behaviour; this one
covers the error paths the live scenario does not reach."""

import copy
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import yaml  # Debian's python3-yaml

from tools.internal import bazel_unittest

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", "."), "ctrlhost")
CTRLHOST = os.path.join(RUNFILES, "runtime", "exe", "ctrlhost")
PLUGINS = {
    "cpp": os.path.join(RUNFILES, "plugins", "versioned-app", "versioned-app"),
    "py": os.path.join(RUNFILES, "plugins", "versioned-app-py", "versioned-app-py"),
    "node": os.path.join(RUNFILES, "plugins", "versioned-app-node", "versioned-app-node"),
}
SAMPLE = os.path.join(RUNFILES, "plugins", "versioned-app", "samples", "versionedapp.yaml")
TIMEOUT = 90


class ParityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(SAMPLE, encoding="utf-8") as f:
            cls.sample = yaml.safe_load(f)

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.hold = os.path.join(self.dir, "hold")
        self.rounds = 0

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def primary(self, **spec):
        obj = copy.deepcopy(self.sample)
        obj["spec"].update(spec)
        return obj

    def answers(self, primary, children=(), extra=()):
        """Every language's (exit code, parsed response); asserts they are all the C++ one's."""
        self.rounds += 1
        round_dir = os.path.join(self.dir, "round-%d" % self.rounds)
        children_dir = os.path.join(round_dir, "children")
        os.makedirs(children_dir)
        for i, child in enumerate(children):
            with open(os.path.join(children_dir, "%02d.json" % i), "w", encoding="utf-8") as f:
                json.dump(child, f)
        object_path = os.path.join(round_dir, "object.json")
        with open(object_path, "w", encoding="utf-8") as f:
            json.dump(primary, f)
        out = {}
        for lang, plugin in PLUGINS.items():
            args = [CTRLHOST, "test", "--log-level=warning", "--plugin", plugin, "--object",
                    object_path, "--env", "VERSIONED_APP_HOLD_FILE=" + self.hold, "-o", "json",
                    *extra]
            if children:
                args += ["--children", children_dir]
            proc = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT,
                                  cwd=self.dir)
            parsed = json.loads(proc.stdout) if proc.stdout.strip() else None
            if parsed is not None:
                parsed.pop("request_id", None)
            out[lang] = (proc.returncode, parsed, proc.stderr)
        for lang in PLUGINS:
            self.assertEqual(out[lang][:2], out["cpp"][:2],
                             "%s differs from cpp (stderr: %s)" % (lang, out[lang][2]))
        return out["cpp"][:2]

    @staticmethod
    def children_of(response):
        """The desired objects as the cache would hold them after the apply."""
        children = []
        for obj in response.get("desired_objects", []):
            obj = copy.deepcopy(obj)
            obj["metadata"].setdefault("namespace", "default")
            children.append(obj)
        return children

    def converge(self, primary, children=()):
        children = list(children)
        for _ in range(5):
            code, response = self.answers(primary, children)
            self.assertEqual(code, 0)
            now = self.children_of(response)
            by_key = {(c["kind"], c["metadata"]["name"]): c for c in children}
            by_key.update({(c["kind"], c["metadata"]["name"]): c for c in now})
            if list(by_key.values()) == children:
                return response, children
            children = list(by_key.values())
        return response, children

    def test_v1_walks_the_chain_to_deployed(self):
        response, children = self.converge(self.primary())
        self.assertEqual(response["status"]["phase"], "Deployed")
        self.assertEqual(response["status"]["resourceSet"], "v1")
        self.assertEqual(len(children), 3)

    def test_v2_adds_its_children_and_upgrades(self):
        _, children = self.converge(self.primary())
        upgraded = self.primary(version="2.0.0")
        upgraded["status"] = {"observedVersion": "1.4.0",
                              "conditions": [{"type": "Available", "status": "True"}]}
        response, children = self.converge(upgraded, children)
        self.assertEqual(response["status"]["resourceSet"], "v2")
        self.assertEqual(response["status"]["phase"], "Deployed")
        self.assertEqual(len(children), 4)  # the ServiceAccount

    def test_downgrade_is_refused_alike(self):
        _, children = self.converge(self.primary(version="2.1.0"))
        code, response = self.answers(self.primary(version="1.9.0"), children)
        self.assertEqual(code, 0)
        self.assertEqual(response["error"]["kind"], "ERROR_KIND_TERMINAL")
        self.assertIn("downgrade from 2.1.0 to 1.9.0 refused", response["error"]["message"])

    def test_hold_cancels_the_pass_alike(self):
        with open(self.hold, "w", encoding="utf-8") as f:
            f.write("# held\ndefault/shop\nNot/A/Key\n")
        response, children = self.converge(self.primary())
        self.assertEqual([c["kind"] for c in children], ["ConfigMap"])
        self.assertEqual(response["status"]["phase"], "Deploying")

    def test_invalid_specs_are_terminal_alike(self):
        for spec in ({"version": "1.2"}, {"version": "3.0.0"}, {"version": 5},
                     {"version": "01.2.3x"}, {"replicas": 101}, {"replicas": "2"},
                     {"image": ""}, {"config": {"A": 1}}, {"config": ["A"]}):
            code, response = self.answers(self.primary(**spec))
            self.assertEqual(code, 0, spec)
            self.assertEqual(response["error"]["kind"], "ERROR_KIND_TERMINAL", spec)
            self.assertEqual(response["status"]["phase"], "Error", spec)


if __name__ == "__main__":
    bazel_unittest.main()
