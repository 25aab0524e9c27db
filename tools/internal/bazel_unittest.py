"""unittest.main() for py_test targets, plus the per-test JUnit XML Bazel keeps as test.xml.

Without it Bazel knows a py_test only by its exit status and writes a test.xml with a single
<testcase> for the whole target, so tools/test counted a file of twenty tests, three of them
skipped, as one passed test. With it, each test method is one <testcase>, with a <failure>,
<error> or <skipped message="reason"> child when it did not pass.

    from tools.internal import bazel_unittest

    if __name__ == "__main__":
        bazel_unittest.main()

Guarantees:
  - main() is unittest.main(): the same command-line arguments (-v, -k, -f, test names), the
    same output, the same exit status (0 when every test passed or was skipped).
  - When $XML_OUTPUT_FILE is set (Bazel sets it for every test) the XML is written there after
    the tests ran, before the process exits; when it is not set, nothing is written.
  - A test whose subtests fail is one <testcase> with one <failure> or <error> holding all of
    their tracebacks; a failing setUpClass/setUpModule (or a SkipTest raised there) is a
    <testcase> of its own, named as unittest names it ("setUpClass (module.Class)"). An expected
    failure counts as passed, an unexpected success as a failure (as wasSuccessful() does).
Assumptions: the process is not killed before the tests end. If it is (a crash, os._exit, a
Bazel timeout), no XML is written and Bazel writes its own one-case test.xml from the exit status.
"""

import collections
import os
import sys
import time
import unittest
import xml.etree.ElementTree as ET


class _Case:
    """What happened to one test: the tracebacks of its errors and failures, its skip reason."""

    def __init__(self, name, classname):
        self.name = name
        self.classname = classname
        self.started = None
        self.seconds = 0.0
        self.errors = []
        self.failures = []
        self.skip_reason = None


def _module_name(module):
    # A py_test's test file runs as __main__: name its classes after the file instead.
    if module == "__main__":
        return os.path.splitext(os.path.basename(sys.argv[0]))[0] or module
    return module


class _RecordingResult(unittest.TextTestResult):
    """A TextTestResult (same output) that also records each test as a _Case, in run order."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cases = collections.OrderedDict()

    def _case(self, test):
        test = getattr(test, "test_case", test)  # a subtest is reported under its test
        key = test.id()
        if key not in self.cases:
            if isinstance(test, unittest.TestCase):
                cls = type(test)
                self.cases[key] = _Case(test._testMethodName,
                                        f"{_module_name(cls.__module__)}.{cls.__qualname__}")
            else:
                # unittest's _ErrorHolder: setUpClass, tearDownModule, ... of a class or module.
                self.cases[key] = _Case(str(test), "")
        return self.cases[key]

    def startTest(self, test):
        super().startTest(test)
        self._case(test).started = time.monotonic()

    def stopTest(self, test):
        super().stopTest(test)
        case = self._case(test)
        if case.started is not None:
            case.seconds = time.monotonic() - case.started

    def addError(self, test, err):
        super().addError(test, err)
        self._case(test).errors.append(self._exc_info_to_string(err, test))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._case(test).failures.append(self._exc_info_to_string(err, test))

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is None:
            return
        text = f"{subtest}\n{self._exc_info_to_string(err, test)}"
        if issubclass(err[0], test.failureException):
            self._case(test).failures.append(text)
        else:
            self._case(test).errors.append(text)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        case = self._case(test)
        case.skip_reason = reason if case.skip_reason is None else case.skip_reason

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._case(test).failures.append("unexpected success (the test is marked expectedFailure)")


def _last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def junit_xml(suite_name, cases):
    """The JUnit XML document (an ElementTree) for the given _Case list."""
    counts = collections.Counter()
    total_seconds = sum(case.seconds for case in cases)
    suite = ET.Element("testsuite", name=suite_name)
    for case in cases:
        element = ET.SubElement(suite, "testcase", name=case.name, classname=case.classname,
                                time=f"{case.seconds:.3f}")
        if case.errors or case.failures:
            kind = "error" if case.errors else "failure"
            texts = case.errors + case.failures
            message = _last_line(texts[0])
            if len(texts) > 1:
                message += f" (and {len(texts) - 1} more)"
            child = ET.SubElement(element, kind, message=message)
            child.text = "\n".join(texts)
            counts["errors" if case.errors else "failures"] += 1
        elif case.skip_reason is not None:
            child = ET.SubElement(element, "skipped", message=case.skip_reason)
            child.text = case.skip_reason
            counts["skipped"] += 1
    attributes = {
        "tests": str(len(cases)),
        "failures": str(counts["failures"]),
        "errors": str(counts["errors"]),
        "skipped": str(counts["skipped"]),
        "time": f"{total_seconds:.3f}",
    }
    suite.attrib.update(attributes)
    root = ET.Element("testsuites", attributes)
    root.append(suite)
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit_xml(path, suite_name, cases):
    """Writes junit_xml() to `path` (through a temporary file: a reader never sees half of it)."""
    temporary = path + ".tmp"
    junit_xml(suite_name, cases).write(temporary, encoding="UTF-8", xml_declaration=True)
    os.replace(temporary, path)


class XmlTestRunner(unittest.TextTestRunner):
    """A TextTestRunner that writes the JUnit XML of its run to $XML_OUTPUT_FILE when set."""

    resultclass = _RecordingResult

    def run(self, test):
        result = super().run(test)
        path = os.environ.get("XML_OUTPUT_FILE")
        if path:
            name = os.environ.get("TEST_TARGET") or _module_name("__main__")
            write_junit_xml(path, name, list(result.cases.values()))
        return result


def main(module="__main__", **kwargs):
    """unittest.main(module, **kwargs), run by XmlTestRunner. Exits as unittest.main() does."""
    kwargs.setdefault("testRunner", XmlTestRunner)
    return unittest.main(module=module, **kwargs)
