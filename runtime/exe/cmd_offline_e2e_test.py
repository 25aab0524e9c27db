"""End-to-end test of `ctrlhost test` through the real binary with the real webapp plugin.

What a plugin author's test script sees: stdout holds only the response, exit codes are stable,
and errors name the problem on stderr.
"""

import json
import os
import subprocess
import tempfile
import unittest

from tools.internal import bazel_unittest

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", "."), "ctrlhost")
BINARY = os.path.join(RUNFILES, "runtime", "exe", "ctrlhost")
WEBAPP = os.path.join(RUNFILES, "plugins", "webapp", "webapp")
SAMPLE = os.path.join(RUNFILES, "plugins", "webapp", "testdata", "webapp.yaml")
TIMEOUT_SECONDS = 60


def ctrlhost_test(*args):
    tmp = os.environ.get("TEST_TMPDIR", tempfile.gettempdir())
    env = dict(os.environ)
    env["WEBAPP_RECORD_DIR"] = os.path.join(tmp, "records")
    return subprocess.run([BINARY, "test", "--log-level=warning", *args], capture_output=True,
                          text=True, timeout=TIMEOUT_SECONDS, env=env, cwd=tmp)


class CtrlhostTestCommandTest(unittest.TestCase):

    def test_listed_in_top_level_help(self):
        result = subprocess.run([BINARY, "--help"], capture_output=True, text=True,
                                timeout=TIMEOUT_SECONDS)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("\n  test ", result.stdout)

    def test_webapp_sample_as_json(self):
        result = ctrlhost_test("--plugin", WEBAPP, "--object", SAMPLE, "-o", "json", "--check")
        self.assertEqual(result.returncode, 0, result.stderr)
        response = json.loads(result.stdout)
        kinds = sorted(o["kind"] for o in response["desired_objects"])
        self.assertEqual(kinds, ["ConfigMap", "Deployment", "Service"])
        self.assertEqual(response["status"]["observedGeneration"], 3)

    def test_children_directory(self):
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as children:
            with open(os.path.join(children, "deployment.json"), "w") as f:
                json.dump({"apiVersion": "apps/v1", "kind": "Deployment",
                           "metadata": {"name": "shop", "namespace": "default"},
                           "status": {"readyReplicas": 2}}, f)
            result = ctrlhost_test("--plugin", WEBAPP, "--object", SAMPLE, "--children",
                                   children)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("\n  readyReplicas: 2\n", result.stdout)
        self.assertIn("status: CONDITION_STATUS_TRUE", result.stdout)

    def test_missing_plugin(self):
        result = ctrlhost_test("--plugin", "/nonexistent/plugin", "--object", SAMPLE)
        self.assertEqual(result.returncode, 1)
        self.assertEqual(result.stdout, "")
        self.assertIn("error: plugin /nonexistent/plugin did not become ready", result.stderr)

    def test_unknown_flag(self):
        result = ctrlhost_test("--plugin", WEBAPP, "--object", SAMPLE, "--childern", "x")
        self.assertEqual(result.returncode, 2)
        self.assertIn('unknown flag --childern for "ctrlhost test" (did you mean --children?)',
                      result.stderr)


if __name__ == "__main__":
    bazel_unittest.main()
