"""webapp-py and the C++ webapp give the same answers through `ctrlhost test` on the same inputs.

Each case runs the real ctrlhost binary twice (`ctrlhost test --plugin P --object F -o json`),
once per plugin, and compares the whole printed response: desired objects, status, conditions,
events, error and finalized. The external record files the two plugins write are compared byte
for byte.
"""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

import yaml

from tools.internal import bazel_unittest

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", "."), "ctrlhost")
CTRLHOST = os.path.join(RUNFILES, "runtime", "exe", "ctrlhost")
PLUGINS = {
    "cpp": os.path.join(RUNFILES, "plugins", "webapp", "webapp"),
    "py": os.path.join(RUNFILES, "plugins", "webapp-py", "webapp-py"),
}
SAMPLE = os.path.join(RUNFILES, "plugins", "webapp", "testdata", "webapp.yaml")
TIMEOUT = 90


class ParityTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, name, obj):
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(obj, f)
        return path

    def run_both(self, *args, obj=SAMPLE):
        """{"cpp": (exit code, parsed stdout or None, stderr), "py": ...}"""
        out = {}
        for lang, plugin in PLUGINS.items():
            records = os.path.join(self.dir, "records-" + lang)
            proc = subprocess.run(
                [CTRLHOST, "test", "--log-level=warning", "--plugin", plugin, "--object", obj,
                 "--env", "WEBAPP_RECORD_DIR=" + records, "-o", "json", *args],
                capture_output=True, text=True, timeout=TIMEOUT, cwd=self.dir)
            parsed = json.loads(proc.stdout) if proc.stdout.strip() else None
            out[lang] = (proc.returncode, parsed, proc.stderr)
        return out

    def assert_same(self, out):
        self.assertEqual(out["cpp"][0], 0, out["cpp"][2])
        self.assertEqual(out["py"][0], 0, out["py"][2])
        self.assertEqual(out["py"][1], out["cpp"][1])
        return out["py"][1]

    def record(self, lang):
        path = os.path.join(self.dir, "records-" + lang, "default_shop.json")
        if not os.path.exists(path):
            return None
        with open(path, "rb") as f:
            return f.read()

    def test_sample(self):
        resp = self.assert_same(self.run_both("--check"))
        self.assertEqual(sorted(o["kind"] for o in resp["desired_objects"]),
                         ["ConfigMap", "Deployment", "Service"])
        self.assertEqual(resp["status"]["observedGeneration"], 3)
        self.assertEqual(len(resp["conditions"]), 2)
        self.assertIsNotNone(self.record("py"))
        self.assertEqual(self.record("py"), self.record("cpp"))

    def test_ready_children(self):
        self.write("children/deployment.json", {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "shop", "namespace": "default"},
            "status": {"readyReplicas": 2}})
        resp = self.assert_same(self.run_both("--children", os.path.join(self.dir, "children")))
        self.assertEqual(resp["status"]["readyReplicas"], 2)
        ready = [c for c in resp["conditions"] if c["type"] == "Ready"][0]
        self.assertEqual(ready["reason"], "AllReplicasReady")

    def test_invalid_specs(self):
        with open(SAMPLE, encoding="utf-8") as f:
            sample = yaml.safe_load(f)
        for i, patch in enumerate([{"image": ""}, {"replicas": 1001}, {"port": 0},
                                   {"port": "http"}, {"env": {"A": 1}}, {"config": [1]},
                                   {"replicas": 1.5}, {"env": None, "config": {"ü": "ß ☃"}}]):
            obj = json.loads(json.dumps(sample))
            obj["spec"].update(patch)
            path = self.write("bad-%d.json" % i, obj)
            with self.subTest(patch=patch):
                self.assert_same(self.run_both(obj=path))

    def test_finalizing(self):
        self.assert_same(self.run_both())  # writes both records
        resp = self.assert_same(self.run_both("--finalizing"))
        self.assertTrue(resp["finalized"])
        self.assertIsNone(self.record("py"))
        self.assertIsNone(self.record("cpp"))

    def test_unwritable_record_dir(self):
        out = {}
        for lang, plugin in PLUGINS.items():
            proc = subprocess.run(
                [CTRLHOST, "test", "--log-level=warning", "--plugin", plugin, "--object", SAMPLE,
                 "--env", "WEBAPP_RECORD_DIR=/proc/ctrlhost-no-such-dir", "-o", "json"],
                capture_output=True, text=True, timeout=TIMEOUT, cwd=self.dir)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            out[lang] = json.loads(proc.stdout)
        self.assertEqual(out["py"], out["cpp"])
        self.assertEqual(out["py"]["error"]["kind"], "ERROR_KIND_RETRYABLE")


if __name__ == "__main__":
    bazel_unittest.main()
