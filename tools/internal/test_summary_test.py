"""tools/internal/test_summary.py on synthetic logs: every way a stage can fail while its output
looks fine (a build error under --keep_going that leaves tests out, a Bazel exit code no target
line explains, a runner that ran no test) must count a failure, and per-case XML counts cases."""

import contextlib
import io
import os
import tempfile
import unittest
from unittest import mock

from tools.internal import bazel_unittest
from tools.internal import test_summary

# What Bazel 4.2 prints (linux-sandbox lines removed, as tools/test does) for
# `bazel test --keep_going --test_summary=short` over a package whose BUILD file does not parse,
# a test whose dependency does not exist, and one that passes: exit code 1, and only the passing
# test has a target line.
LOG_NOT_LOADED_NOT_ANALYZED = """\
INFO: Invocation ID: 90576b8c-de05-4bd3-a9d5-c8a4ccfa8a13
Loading: 0 packages loaded
ERROR: /work/x/probe/a/BUILD.bazel:2:1: syntax error at 'newline': expected ,
ERROR: package contains errors: probe/a
ERROR: error loading package 'probe/f': Label '//nothing:here.bzl' is invalid
WARNING: Target pattern parsing failed.
ERROR: /work/x/probe/b/BUILD.bazel:1:8: no such package 'nonexistent': BUILD file not found
 - /work/x/nonexistent and referenced by '//probe/b:b_test'
WARNING: errors encountered while analyzing target '//probe/b:b_test': it will not be built
INFO: Analysis succeeded for only 1 of 2 top-level targets
INFO: Found 1 test target...
ERROR: command succeeded, but there were errors parsing the target pattern
FAILED: Build did NOT complete successfully
//probe/c:c_test                                             (cached) PASSED in 0.2s

Executed 0 out of 1 test: 1 test passes.
All tests passed but there were other errors during the build.

FAILED: Build did NOT complete successfully
"""

TAP_PASS_AND_SKIP = """\
TAP version 13
# Subtest: ok
ok 1 - ok
# Subtest: skipped
ok 2 - skipped # SKIP pending feature
1..2
# tests 2
# suites 0
# pass 1
# fail 0
# cancelled 0
# skipped 1
# todo 0
# duration_ms 84.618356
"""

# node --test (Node 20) on a directory without test files: exit code 0.
TAP_NO_TEST = """\
TAP version 13
1..0
# tests 0
# suites 0
# pass 0
# fail 0
# cancelled 0
# skipped 0
# todo 0
# duration_ms 3.00512
"""

GO_PASS_SKIP_AND_SUBTESTS = """\
=== RUN   TestReconcile
=== RUN   TestReconcile/create
    --- PASS: TestReconcile/create (0.00s)
=== RUN   TestReconcile/update
    --- PASS: TestReconcile/update (0.00s)
--- PASS: TestReconcile (0.00s)
=== RUN   TestNeedsCluster
    client_test.go:12: no cluster
--- SKIP: TestNeedsCluster (0.00s)
=== RUN   ExampleRequest
--- PASS: ExampleRequest (0.00s)
PASS
ok      ctrlhost.dev/sdk/go     0.021s
"""

GO_NO_TEST = """\
?       ctrlhost.dev/sdk/go     [no test files]
?       ctrlhost.dev/plugins/webapp-go  [no test files]
"""

PER_CASE_XML = """\
<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
  <testsuite name="//pkg:t" tests="5">
    <testcase name="test_a" classname="t.A" time="0.1" />
    <testcase name="test_b" classname="t.A" time="0.1" />
    <testcase name="test_c" classname="t.A" time="0.1">
      <skipped message="pending: openapi">pending: openapi</skipped>
    </testcase>
    <testcase name="test_d" classname="t.A" time="0.1">
      <failure message="AssertionError: 1 != 2">Traceback</failure>
    </testcase>
    <testcase name="test_e" classname="t.A" time="0.1">
      <error message="ValueError: boom">Traceback</error>
    </testcase>
  </testsuite>
</testsuites>
"""

PASSING_XML = """\
<testsuites><testsuite name="t">
  <testcase name="test_a" /><testcase name="test_b" />
  <testcase name="test_c"><skipped message="pending: openapi" /></testcase>
</testsuite></testsuites>
"""

# What Bazel writes when the test wrote no XML of its own: one case for the whole target.
BAZEL_DEFAULT_XML = """\
<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
  <testsuite name="pkg/t" tests="1" failures="0" errors="0">
    <testcase name="pkg/t" status="run" duration="0" time="0"></testcase>
  </testsuite>
</testsuites>
"""


class TempDirTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))

    def write(self, rel, text):
        path = os.path.join(self.dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path

    def call(self, function, *args):
        """(return value, stderr) of function(*args)."""
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            value = function(*args)
        return value, stderr.getvalue()


class XmlCountsTest(TempDirTest):

    def test_counts_each_case_with_failures_errors_and_skips(self):
        path = self.write("t.xml", PER_CASE_XML)
        self.assertEqual(test_summary.xml_counts(path), (2, 2, 1))

    def test_bazel_default_xml_is_one_case(self):
        path = self.write("t.xml", BAZEL_DEFAULT_XML)
        self.assertEqual(test_summary.xml_counts(path), (1, 0, 0))

    def test_missing_or_broken_xml_is_unusable(self):
        self.assertIsNone(test_summary.xml_counts(os.path.join(self.dir, "none.xml")))
        self.assertIsNone(test_summary.xml_counts(self.write("t.xml", "<testsuites>")))

    def test_xml_written_by_bazel_unittest_counts_skips(self):
        passed, skipped = bazel_unittest._Case("test_a", "m.A"), bazel_unittest._Case("b", "m.A")
        skipped.skip_reason = "pending: openapi"
        failed = bazel_unittest._Case("test_c", "m.A")
        failed.failures.append("Traceback\nAssertionError: no")
        path = os.path.join(self.dir, "test.xml")
        bazel_unittest.write_junit_xml(path, "//pkg:t", [passed, skipped, failed])
        self.assertEqual(test_summary.xml_counts(path), (1, 1, 1))


class BazelCountsTest(TempDirTest):

    def counts(self, log_text, exit_code, xml=None):
        """bazel_counts on log_text with testlogs holding `xml` ({target path: XML text})."""
        log = self.write("bazel.log", log_text)
        testlogs = os.path.join(self.dir, "testlogs")
        os.makedirs(testlogs, exist_ok=True)
        for rel, text in (xml or {}).items():
            self.write(os.path.join("testlogs", rel, "test.xml"), text)
        return self.call(test_summary.bazel_counts, log, testlogs, exit_code, "unit")

    def test_clean_run_counts_cases_and_skips_from_xml(self):
        log = ("//pkg:t                                   PASSED in 0.3s\n"
               "//pkg:u                          (cached) PASSED in 0.1s\n")
        counts, stderr = self.counts(log, 0, {"pkg/t": PASSING_XML, "pkg/u": BAZEL_DEFAULT_XML})
        self.assertEqual(counts, (3, 0, 1))
        self.assertEqual(stderr, "")

    def test_build_failure_with_passing_targets_is_a_failure(self):
        counts, stderr = self.counts(LOG_NOT_LOADED_NOT_ANALYZED, 1,
                                     {"probe/c/c_test": BAZEL_DEFAULT_XML})
        self.assertEqual(counts, (1, 1, 0))
        self.assertIn("//probe/a (package)", stderr)
        self.assertIn("//probe/f (package)", stderr)
        self.assertIn("//probe/b:b_test", stderr)

    def test_dropped_targets_count_even_beside_a_target_that_failed_to_build(self):
        log = LOG_NOT_LOADED_NOT_ANALYZED + "//probe/e:e_test          FAILED TO BUILD\n"
        counts, stderr = self.counts(log, 1)
        self.assertEqual(counts, (1, 2, 0))
        self.assertIn("//probe/e:e_test FAILED TO BUILD", stderr)
        self.assertIn("//probe/b:b_test", stderr)

    def test_exit_1_with_only_passing_targets_is_a_failure(self):
        log = ("//pkg:t                                   PASSED in 0.3s\n"
               "FAILED: Build did NOT complete successfully\n")
        counts, stderr = self.counts(log, 1, {"pkg/t": PASSING_XML})
        self.assertEqual(counts, (2, 1, 1))
        self.assertIn("exited 1 (the build failed)", stderr)

    def test_exit_1_explained_by_a_target_that_failed_to_build(self):
        log = ("//pkg:t                                   PASSED in 0.3s\n"
               "//pkg:broken                              FAILED TO BUILD\n")
        counts, stderr = self.counts(log, 1, {"pkg/t": PASSING_XML})
        self.assertEqual(counts, (2, 1, 1))
        self.assertNotIn("exited", stderr)

    def test_failed_to_build_ignores_a_stale_test_xml(self):
        # "FAILED TO BUILD" once matched as "FAILED" and read the test.xml of an earlier run.
        log = "//pkg:broken                              FAILED TO BUILD\n"
        counts, _ = self.counts(log, 1, {"pkg/broken": PER_CASE_XML})
        self.assertEqual(counts, (0, 1, 0))

    def test_exit_3_without_a_failing_target_is_a_failure(self):
        counts, stderr = self.counts("//pkg:t                    PASSED in 0.3s\n", 3,
                                     {"pkg/t": BAZEL_DEFAULT_XML})
        self.assertEqual(counts, (1, 1, 0))
        self.assertIn("exited 3", stderr)

    def test_exit_3_explained_by_failing_cases(self):
        counts, stderr = self.counts("//pkg:t                    FAILED in 0.3s\n", 3,
                                     {"pkg/t": PER_CASE_XML})
        self.assertEqual(counts, (2, 2, 1))
        self.assertIn("//pkg:t FAILED", stderr)
        self.assertNotIn("exited", stderr)

    def test_timeout_without_failing_cases_counts_one(self):
        counts, _ = self.counts("//pkg:t                    TIMEOUT in 60.0s\n", 3,
                                {"pkg/t": BAZEL_DEFAULT_XML})
        self.assertEqual(counts, (0, 1, 0))

    def test_other_exit_codes_are_failures(self):
        for code in (2, 8, 36, 37, 99):
            with self.subTest(code=code):
                counts, stderr = self.counts("//pkg:t                    PASSED in 0.3s\n", code,
                                             {"pkg/t": BAZEL_DEFAULT_XML})
                self.assertEqual(counts, (1, 1, 0))
                self.assertIn(f"exited {code}", stderr)

    def test_no_test_target_is_a_failure(self):
        for code in (0, 4):
            with self.subTest(code=code):
                counts, stderr = self.counts("INFO: Build completed successfully\n", code)
                self.assertEqual(counts, (0, 1, 0))
                self.assertIn("no test target ran", stderr)

    def test_passed_target_whose_xml_reports_failures_is_a_failure(self):
        counts, stderr = self.counts("//pkg:t                    PASSED in 0.3s\n", 0,
                                     {"pkg/t": PER_CASE_XML})
        self.assertEqual(counts[1], 2)
        self.assertIn("its test.xml reports 2 failed", stderr)


class TapCountsTest(TempDirTest):

    def counts(self, text, exit_code):
        return self.call(test_summary.tap_counts, self.write("node.log", text), exit_code, "node")

    def test_pass_and_skip(self):
        self.assertEqual(self.counts(TAP_PASS_AND_SKIP, 0), ((1, 0, 1), ""))

    def test_spec_reporter_summary(self):
        text = "\u2139 tests 3\n\u2139 pass 2\n\u2139 fail 0\n\u2139 skipped 0\n\u2139 todo 1\n"
        self.assertEqual(self.counts(text, 0)[0], (2, 0, 1))

    def test_no_test_ran_is_a_failure(self):
        for text in (TAP_NO_TEST, "", "npm ERR! missing script: test\n"):
            with self.subTest(text=text):
                counts, stderr = self.counts(text, 0)
                self.assertEqual(counts, (0, 1, 0))
                self.assertIn("no test ran", stderr)

    def test_cancelled_tests_are_failures(self):
        text = TAP_PASS_AND_SKIP.replace("# cancelled 0", "# cancelled 2")
        self.assertEqual(self.counts(text, 1)[0], (1, 2, 1))

    def test_non_zero_exit_without_failures_is_a_failure(self):
        counts, stderr = self.counts(TAP_PASS_AND_SKIP, 1)
        self.assertEqual(counts, (1, 1, 1))
        self.assertIn("exited 1", stderr)


class GoCountsTest(TempDirTest):

    def counts(self, text, exit_code):
        return self.call(test_summary.go_counts, self.write("go.log", text), exit_code, "go")

    def test_top_level_tests_and_examples_only(self):
        self.assertEqual(self.counts(GO_PASS_SKIP_AND_SUBTESTS, 0), ((2, 0, 1), ""))

    def test_no_test_ran_is_a_failure(self):
        for text in (GO_NO_TEST, ""):
            with self.subTest(text=text):
                counts, stderr = self.counts(text, 0)
                self.assertEqual(counts, (0, 1, 0))
                self.assertIn("no test ran", stderr)

    def test_package_that_did_not_build_is_a_failure(self):
        text = GO_PASS_SKIP_AND_SUBTESTS + "FAIL    ctrlhost.dev/plugins/webapp-go [build failed]\n"
        counts, stderr = self.counts(text, 2)
        self.assertEqual(counts, (2, 1, 1))
        self.assertIn("[build failed]", stderr)

    def test_vet_failure_is_a_failure(self):
        counts, stderr = self.counts("# ctrlhost.dev/sdk/go\nvet: x.go:3: unreachable code\n", 1)
        self.assertEqual(counts, (0, 1, 0))
        self.assertIn("exited 1", stderr)


class FuzzCountsTest(TempDirTest):

    def test_no_target_ran_is_a_failure(self):
        counts, stderr = self.call(test_summary.fuzz_counts, self.write("f.log", ""), 0, "fuzz")
        self.assertEqual(counts, (0, 1, 0))
        self.assertIn("no fuzz target ran", stderr)

    def test_one_per_target(self):
        log = self.write("f.log", "fuzz yaml: ok, 12000 runs\nfuzz http: FAILED (crash)\n")
        self.assertEqual(self.call(test_summary.fuzz_counts, log, 1, "fuzz")[0], (1, 1, 0))


class TotalTest(TempDirTest):

    def stage(self, name, counts, seconds=None):
        path = self.write(f"{name}.counts", counts)
        if seconds is not None:
            self.write(f"{name}.seconds", seconds)
        return path

    def test_table_in_stage_order_then_closing_line(self):
        paths = [self.stage("setup", "0 0 0\n", "1.25\n"),
                 self.stage("unit", "120 0 3\n", "312.5\n"),
                 self.stage("demo", "1 0 0\n", "40.0\n")]
        (text, failed), _ = self.call(test_summary.total, paths)
        lines = text.splitlines()
        self.assertEqual(lines[0].split(), ["stage", "seconds", "passed", "failed", "skipped"])
        self.assertEqual([line.split() for line in lines[1:4]],
                         [["setup", "1.2", "0", "0", "0"], ["unit", "312.5", "120", "0", "3"],
                          ["demo", "40.0", "1", "0", "0"]])
        self.assertEqual(lines[-1], "121 passed, 0 failed, 3 skipped")
        self.assertFalse(failed)

    def test_failures_are_summed(self):
        paths = [self.stage("unit", "10 2 0\n", "3"), self.stage("go", "4 1 1\n", "2")]
        (text, failed), _ = self.call(test_summary.total, paths)
        self.assertEqual(text.splitlines()[-1], "14 passed, 3 failed, 1 skipped")
        self.assertTrue(failed)

    def test_missing_or_broken_counts_are_a_failure(self):
        paths = [self.stage("unit", "10 0 0\n", "3"), self.stage("node", "", "1"),
                 self.stage("go", "4 0\n"), os.path.join(self.dir, "demo.counts")]
        (text, failed), stderr = self.call(test_summary.total, paths)
        self.assertEqual(text.splitlines()[-1], "10 passed, 3 failed, 0 skipped")
        self.assertIn("go", text.splitlines()[3])
        self.assertIn(" - ", text.splitlines()[3] + " ")  # no .seconds file: "-"
        self.assertTrue(failed)
        self.assertIn("[demo] no counts", stderr)


class CommandLineTest(TempDirTest):

    def main(self, *args):
        stdout, stderr = io.StringIO(), io.StringIO()
        with mock.patch("sys.argv", ["test_summary.py", *args]), \
                contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = test_summary.main()
            except SystemExit as e:
                code = e.code
        return code, stdout.getvalue(), stderr.getvalue()

    def test_exit_code_is_required(self):
        code, _, stderr = self.main("--tap", self.write("n.log", TAP_PASS_AND_SKIP))
        self.assertEqual(code, 2)
        self.assertIn("--exit-code is required", stderr)

    def test_stage_counts_and_status(self):
        log = self.write("n.log", TAP_PASS_AND_SKIP)
        self.assertEqual(self.main("--tap", log, "--exit-code", "0")[:2], (0, "1 0 1\n"))
        self.assertEqual(self.main("--tap", log, "--exit-code", "1")[:2], (1, "1 1 1\n"))

    def test_bazel_mode_takes_the_exit_code(self):
        log = self.write("b.log", "//pkg:t                    PASSED in 0.3s\n")
        testlogs = os.path.dirname(self.write("testlogs/pkg/t/test.xml", PASSING_XML))
        testlogs = os.path.dirname(os.path.dirname(testlogs))
        args = ["--bazel-log", log, "--testlogs", testlogs, "--label", "unit", "--exit-code"]
        self.assertEqual(self.main(*args, "0")[:2], (0, "2 0 1\n"))
        self.assertEqual(self.main(*args, "1")[:2], (1, "2 1 1\n"))

    def test_total_prints_the_closing_line_last(self):
        path = self.write("unit.counts", "3 0 1\n")
        code, stdout, _ = self.main("--total", path)
        self.assertEqual(code, 0)
        self.assertEqual(stdout.splitlines()[-1], "3 passed, 0 failed, 1 skipped")


if __name__ == "__main__":
    bazel_unittest.main()
