"""Every .cc and .h under runtime/ within the length limits of tools/internal/source_length.py:
at most 800 lines per file and 120 lines per function (data tables do not count as functions;
see that file). A failure names each offender as file:line, what, and its length; split it along
its responsibilities rather than raising a limit.

The sources reach this test as data: each runtime/ package's `cc_sources` filegroup, listed in
tools/internal/BUILD.bazel. A new runtime/ package adds its filegroup there; the test also fails
when it can see the source tree (a local run) and finds a .cc or .h that is not in its data."""

import os
import unittest

from tools.internal import bazel_unittest
from tools.internal import source_length

# Known offenders being split elsewhere, one entry per file ("path": "what"): every finding in an
# entry's file is tolerated, and an entry whose file no longer offends fails the test, so that the
# entry is removed as soon as the split lands. Empty, and meant to stay so: split the file or
# function rather than adding to it.
ALLOWED = {}


def _runfiles_root():
    return os.path.join(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"])


def _sources_under(root):
    """Paths relative to root of the .cc and .h files under root/runtime."""
    found = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, "runtime"), followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(("bazel-", ".")))
        for name in sorted(filenames):
            if name.endswith((".cc", ".h")):
                found.append(os.path.relpath(os.path.join(dirpath, name), root))
    return found


def _source_tree(root, some_source):
    """The checkout the runfile some_source links to, or None when it links to none (a copy)."""
    real = os.path.realpath(os.path.join(root, some_source))
    suffix = os.sep + some_source
    if real == os.path.join(root, some_source) or not real.endswith(suffix):
        return None
    tree = real[:-len(suffix)]
    return tree if os.path.isdir(os.path.join(tree, "runtime")) else None


class RuntimeSourceLengthTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.root = _runfiles_root()
        cls.sources = _sources_under(cls.root)

    def test_the_data_holds_the_runtime_sources(self):
        self.assertIn("runtime/config/load.h", self.sources)
        self.assertGreater(len(self.sources), 100)

    def test_no_source_is_too_long(self):
        findings = []
        for path in self.sources:
            with open(os.path.join(self.root, path), encoding="utf-8") as f:
                findings.extend(source_length.check_file(path, f.read()))
        offending = {f.path for f in findings}
        reported = [str(f) for f in findings if f.path not in ALLOWED]
        stale = sorted(set(ALLOWED) - offending)
        message = ""
        if reported:
            message += "Too long (split along responsibilities):\n  " + "\n  ".join(reported)
        if stale:
            message += ("\nNo longer too long, remove from ALLOWED in %s:\n  " %
                        os.path.basename(__file__) + "\n  ".join(stale))
        self.assertFalse(message, message)

    def test_every_runtime_source_in_the_checkout_is_in_the_data(self):
        tree = _source_tree(self.root, "runtime/config/load.h")
        if tree is None:
            self.skipTest("the runfiles are copies: the checkout is not visible")
        missing = sorted(set(_sources_under(tree)) - set(self.sources))
        self.assertFalse(
            missing, "Not in the data of //tools/internal:runtime_source_length_test (add the "
            "package's cc_sources filegroup to it):\n  " + "\n  ".join(missing))


if __name__ == "__main__":
    bazel_unittest.main()
