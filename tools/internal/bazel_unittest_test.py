"""bazel_unittest.main() runs a test file as unittest.main() does (arguments, output, exit status)
and writes one JUnit <testcase> per test to $XML_OUTPUT_FILE, which tools/test then counts."""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
import xml.etree.ElementTree as ET

from tools.internal import bazel_unittest
from tools.internal import test_summary

SAMPLE = textwrap.dedent('''\
    import unittest
    from tools.internal import bazel_unittest


    class Sample(unittest.TestCase):

        def test_passes(self):
            pass

        def test_skips(self):
            self.skipTest("pending: openapi")

        def test_fails(self):
            self.assertEqual(1, 2)

        def test_errors(self):
            raise ValueError("boom")

        def test_subtests(self):
            for i in range(3):
                with self.subTest(i=i):
                    self.assertLess(i, 1)

        @unittest.expectedFailure
        def test_expected_failure(self):
            self.fail("known")

        @unittest.expectedFailure
        def test_unexpected_success(self):
            pass


    @unittest.skip("needs a cluster")
    class Skipped(unittest.TestCase):

        def test_one(self):
            pass


    class BrokenFixture(unittest.TestCase):

        @classmethod
        def setUpClass(cls):
            raise RuntimeError("no fixture")

        def test_never_runs(self):
            pass


    if __name__ == "__main__":
        bazel_unittest.main()
    ''')


class BazelUnittestTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.script = os.path.join(self.dir, "sample_test.py")
        with open(self.script, "w") as f:
            f.write(SAMPLE)
        self.xml = os.path.join(self.dir, "test.xml")

    def run_sample(self, *args, xml=True):
        env = dict(os.environ)
        env.pop("XML_OUTPUT_FILE", None)
        env.pop("TEST_TARGET", None)
        if xml:
            env["XML_OUTPUT_FILE"] = self.xml
        # The directory that holds tools/internal/bazel_unittest.py's "tools" package.
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
            bazel_unittest.__file__))))
        env["PYTHONPATH"] = root
        return subprocess.run([sys.executable, self.script, *args], env=env, cwd=self.dir,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=60)

    def cases(self):
        """{test name: (outcome element tag or "passed", its message)} from the XML."""
        result = {}
        for case in ET.parse(self.xml).getroot().iter("testcase"):
            children = [c for c in case if c.tag in ("failure", "error", "skipped")]
            self.assertLessEqual(len(children), 1, ET.tostring(case))
            outcome = (children[0].tag, children[0].get("message")) if children else ("passed",
                                                                                       None)
            result[case.get("name")] = outcome
        return result

    def test_one_case_per_test_with_its_outcome(self):
        run = self.run_sample()
        self.assertEqual(run.returncode, 1, run.stdout)
        cases = self.cases()
        self.assertEqual(cases["test_passes"], ("passed", None))
        self.assertEqual(cases["test_skips"], ("skipped", "pending: openapi"))
        self.assertEqual(cases["test_fails"], ("failure", "AssertionError: 1 != 2"))
        self.assertEqual(cases["test_errors"], ("error", "ValueError: boom"))
        self.assertEqual(cases["test_subtests"][0], "failure")
        self.assertIn("(and 1 more)", cases["test_subtests"][1])
        self.assertEqual(cases["test_expected_failure"], ("passed", None))
        self.assertEqual(cases["test_unexpected_success"][0], "failure")
        self.assertEqual(cases["test_one"], ("skipped", "needs a cluster"))
        self.assertEqual(cases["setUpClass (__main__.BrokenFixture)"],
                         ("error", "RuntimeError: no fixture"))
        self.assertEqual(len(cases), 9)
        # What tools/test counts from it: passes, failures (errors too), skips.
        self.assertEqual(test_summary.xml_counts(self.xml), (2, 5, 2))

    def test_classname_is_the_test_file(self):
        self.run_sample()
        classnames = {c.get("name"): c.get("classname")
                      for c in ET.parse(self.xml).getroot().iter("testcase")}
        self.assertEqual(classnames["test_passes"], "sample_test.Sample")

    def test_arguments_exit_status_and_output_are_unittest_main(self):
        run = self.run_sample("-v", "Sample.test_passes", "Sample.test_skips")
        self.assertEqual(run.returncode, 0, run.stdout)
        self.assertIn("test_skips (__main__.Sample.test_skips) ... skipped 'pending: openapi'",
                      run.stdout)
        self.assertIn("OK (skipped=1)", run.stdout)
        self.assertEqual(self.cases(), {"test_passes": ("passed", None),
                                        "test_skips": ("skipped", "pending: openapi")})
        self.assertEqual(test_summary.xml_counts(self.xml), (1, 0, 1))

        run = self.run_sample("-k", "test_fails")
        self.assertEqual(run.returncode, 1, run.stdout)
        self.assertEqual(list(self.cases()), ["test_fails"])

    def test_no_xml_without_xml_output_file(self):
        run = self.run_sample("Sample.test_passes", xml=False)
        self.assertEqual(run.returncode, 0, run.stdout)
        self.assertEqual(os.listdir(self.dir), ["sample_test.py"])


if __name__ == "__main__":
    bazel_unittest.main()
