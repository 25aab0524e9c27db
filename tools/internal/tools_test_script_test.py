"""tools/test itself, run in a scratch copy of the repository where bazel, npm, tools/setup,
tools/demo and the other commands it calls are stubs: the stages it runs are the ones its --help
names, a failing tools/setup stops the run with a counted failure and the closing line, Bazel's
exit status reaches the count, and the demo runs as the README says (from the repository root,
default data directory)."""

import os
import re
import shutil
import stat
import subprocess
import tempfile
import textwrap
import unittest

from tools.internal import bazel_unittest

HERE = os.path.dirname(os.path.abspath(__file__))

BAZEL_PASSED = "//pkg:t                                   PASSED in 0.3s\n"
TAP_ONE_PASS = "# tests 1\n# pass 1\n# fail 0\n# cancelled 0\n# skipped 0\n# todo 0\n"
GO_ONE_PASS = "--- PASS: TestSomething (0.00s)\nok   ctrlhost.dev/sdk/go 0.01s\n"

# Each stub logs its name and arguments to $FAKE_RECORD/calls; the FAKE_* variables say what it
# prints and how it exits.
STUBS = {
    "bin/bazel": """
        echo "bazel $*" >> "$FAKE_RECORD/calls"
        case "$1" in
          test) printf '%s' "$FAKE_BAZEL_OUTPUT"; exit "${FAKE_BAZEL_RC:-0}" ;;
          info) echo "$FAKE_RECORD/testlogs" ;;
        esac
        exit 0
        """,
    "bin/npm": """
        echo "npm $* in $(pwd)" >> "$FAKE_RECORD/calls"
        [[ "$1" == test ]] && printf '%s' "$FAKE_NPM_TEST_OUTPUT"
        exit 0
        """,
    "tools/setup": """
        echo "tools/setup $*" >> "$FAKE_RECORD/calls"
        [[ "${FAKE_SETUP_RC:-0}" == 0 ]] || echo "setup: apt-get failed" >&2
        exit "${FAKE_SETUP_RC:-0}"
        """,
    "tools/kubernetes": "exit 1\n",
    # kubectl 1.36 from sid (the kubectl e2e's sid lane): fetched unless FAKE_NO_SID is set.
    "tools/kubectl-sid": """
        [[ -n "${FAKE_NO_SID:-}" ]] && exit 1
        echo "$FAKE_RECORD/kubectl-sid"
        """,
    "tools/image": 'echo "tools/image $*" >> "$FAKE_RECORD/calls"\n',
    "tools/fuzz": """
        echo "tools/fuzz $*" >> "$FAKE_RECORD/calls"
        echo "fuzz yaml: ok, 100 runs"
        """,
    "sdk/go/build.sh": """
        echo "sdk/go/build.sh $*" >> "$FAKE_RECORD/calls"
        [[ "$1" == test ]] && printf '%s' "$FAKE_GO_OUTPUT"
        exit 0
        """,
    "tools/internal/readme_tour": """
        echo "tools/internal/readme_tour $*" >> "$FAKE_RECORD/calls"
        """,
    "tools/demo": """
        echo "tools/demo $*" >> "$FAKE_RECORD/calls"
        { echo "cwd=$(pwd)"; echo "CTRLHOST_DEMO_DIR=${CTRLHOST_DEMO_DIR-unset}"; } \\
          > "$FAKE_RECORD/demo"
        """,
}
FILES = ["sdk/node/package.json", "sdk/node/tsconfig.json", "e2e/clients/package.json"]


class ToolsTestScriptTest(unittest.TestCase):

    def setUp(self):
        self.scratch = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.root = os.path.join(self.scratch, "repo")
        self.record = os.path.join(self.scratch, "record")
        os.makedirs(os.path.join(self.root, "tools", "internal"))
        os.makedirs(self.record)
        shutil.copy(os.path.join(HERE, "..", "test"), os.path.join(self.root, "tools", "test"))
        shutil.copy(os.path.join(HERE, "test_summary.py"),
                    os.path.join(self.root, "tools", "internal", "test_summary.py"))
        for rel, script in STUBS.items():
            path = os.path.join(self.scratch if rel.startswith("bin/") else self.root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write("#!/usr/bin/env bash\n" + textwrap.dedent(script))
            os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
        for rel in FILES:
            os.makedirs(os.path.dirname(os.path.join(self.root, rel)), exist_ok=True)
            open(os.path.join(self.root, rel), "w").close()
        xml = os.path.join(self.record, "testlogs", "pkg", "t", "test.xml")
        os.makedirs(os.path.dirname(xml))
        with open(xml, "w") as f:
            f.write('<testsuites><testsuite><testcase name="a"/><testcase name="b">'
                    '<skipped message="pending"/></testcase></testsuite></testsuites>')

    def run_tools_test(self, *args, **fake):
        env = {
            "PATH": os.path.join(self.scratch, "bin") + ":/usr/bin:/bin",
            "HOME": self.scratch,
            "FAKE_RECORD": self.record,
            "FAKE_BAZEL_OUTPUT": BAZEL_PASSED,
            "FAKE_NPM_TEST_OUTPUT": TAP_ONE_PASS,
            "FAKE_GO_OUTPUT": GO_ONE_PASS,
        }
        env.update(fake)
        # From elsewhere, as CI and users may: tools/test finds the repository root itself.
        return subprocess.run([os.path.join(self.root, "tools", "test"), *args], env=env,
                              cwd=self.scratch, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=50)

    def calls(self):
        path = os.path.join(self.record, "calls")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return f.read().splitlines()

    @staticmethod
    def table(stdout):
        """{stage: (seconds, passed, failed, skipped)} from the summary, in order."""
        lines = stdout[stdout.index("== summary\n"):].splitlines()[2:-1]
        rows = {}
        for line in lines:
            name, seconds, *counts = line.split()
            rows[name] = (seconds, *(int(c) for c in counts))
        return rows

    def help_stages(self):
        """The stage names `tools/test --help` lists, in its order."""
        run = self.run_tools_test("--help")
        self.assertEqual(run.returncode, 0, run.stderr)
        stages = []
        for line in run.stdout.splitlines():
            m = re.match(r"^ {26}(\S+(?:, \S+)*) {2,}", line)
            if m:
                stages += m.group(1).split(", ")
        return stages, run.stdout

    def test_quick_runs_what_help_says_and_ends_with_table_and_closing_line(self):
        stages, help_text = self.help_stages()
        self.assertEqual(stages, ["setup", "unit", "asan", "tsan", "fuzz", "image", "node", "tsc",
                                  "go", "e2e-clients", "demo", "tour"])
        self.assertIn("tools/test --quick    the same without asan, tsan and fuzz", help_text)
        run = self.run_tools_test("--quick")
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        rows = self.table(run.stdout)
        self.assertEqual(list(rows), [s for s in stages if s not in ("asan", "tsan", "fuzz")])
        for name, (seconds, *_) in rows.items():
            self.assertRegex(seconds, r"^\d+\.\d$", name)
        self.assertEqual(rows["unit"][1:], (1, 0, 1))
        self.assertEqual(rows["demo"][1:], (1, 0, 0))
        self.assertEqual(rows["tour"][1:], (1, 0, 0))
        # unit 1+1 skipped, image 1+1 skipped, node, tsc, go, e2e-clients, demo, tour.
        self.assertEqual(run.stdout.splitlines()[-1], "8 passed, 0 failed, 2 skipped")
        self.assertFalse([c for c in self.calls() if "asan" in c or c.startswith("tools/fuzz")])

    def test_a_missing_sid_lane_counts_as_one_skipped_test_with_its_reason(self):
        run = self.run_tools_test("--quick")
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertNotIn("kubectl 1.36 from Debian sid", run.stdout)
        run = self.run_tools_test("--quick", FAKE_NO_SID="1")
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn("skipped: the kubectl e2e with kubectl 1.36 from Debian sid: not fetched",
                      run.stdout)
        self.assertEqual(self.table(run.stdout)["unit"][1:], (1, 0, 2))
        self.assertEqual(run.stdout.splitlines()[-1], "8 passed, 0 failed, 3 skipped")

    def test_full_run_runs_every_stage_help_names(self):
        stages, _ = self.help_stages()
        run = self.run_tools_test()
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertEqual(list(self.table(run.stdout)), stages)

    def test_failing_setup_stops_the_run_with_one_failure(self):
        run = self.run_tools_test("--quick", FAKE_SETUP_RC="3")
        self.assertEqual(run.returncode, 1)
        self.assertIn("tools/setup --quiet failed (exit 3", run.stderr)
        self.assertEqual(list(self.table(run.stdout)), ["setup"])
        self.assertEqual(run.stdout.splitlines()[-1], "0 passed, 1 failed, 0 skipped")
        self.assertEqual(self.calls(), ["tools/setup --quiet"])

    def test_bazel_build_failure_with_passing_targets_fails_the_run(self):
        run = self.run_tools_test("--quick", FAKE_BAZEL_RC="1")
        self.assertEqual(run.returncode, 1)
        self.assertIn("bazel test exited 1 (the build failed)", run.stderr)
        self.assertEqual(self.table(run.stdout)["unit"][1:], (1, 1, 1))

    def test_stage_that_ran_no_test_fails_the_run(self):
        run = self.run_tools_test("--quick", FAKE_NPM_TEST_OUTPUT="# tests 0\n# pass 0\n",
                                  FAKE_GO_OUTPUT="?   ctrlhost.dev/sdk/go [no test files]\n")
        self.assertEqual(run.returncode, 1)
        rows = self.table(run.stdout)
        self.assertEqual(rows["node"][1:], (0, 1, 0))
        self.assertEqual(rows["e2e-clients"][1:], (0, 1, 0))
        self.assertEqual(rows["go"][1:], (0, 1, 0))

    def test_demo_runs_from_the_root_with_its_default_data_dir(self):
        run = self.run_tools_test("--quick", CTRLHOST_DEMO_DIR="/somewhere/else")
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn("tools/demo --once", self.calls())
        with open(os.path.join(self.record, "demo")) as f:
            self.assertEqual(f.read().splitlines(),
                             [f"cwd={os.path.realpath(self.root)}", "CTRLHOST_DEMO_DIR=unset"])


if __name__ == "__main__":
    bazel_unittest.main()
