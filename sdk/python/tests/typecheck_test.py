"""The SDK's type hints, checked with Debian's mypy (tools/deps/debian.txt), and code written
against the SDK (the example plugin, plugins/webapp-py, plugins/versioned-app-py) checked
against them.

mypy.ini beside the package holds the settings: the SDK must be fully annotated; the generated
protocol modules and grpcio/protobuf (no stubs in Debian) are Any. A second test feeds mypy a
call that drifted from the SDK's signatures and expects it to be refused, so the check cannot pass
by seeing nothing.
"""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

from tools.internal import bazel_unittest


def _root():
    """The runfiles root under Bazel (else the source tree)."""
    srcdir = os.environ.get("TEST_SRCDIR")
    if srcdir:
        return os.path.join(srcdir, os.environ.get("TEST_WORKSPACE", "ctrlhost"))
    return os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


ROOT = _root()
CONFIG = os.path.join(ROOT, "sdk", "python", "mypy.ini")
CHECKED = [
    "sdk/python/ctrlhost_sdk",
    "sdk/python/tests/example_plugin.py",
    "plugins/webapp-py/webapp.py",
    "plugins/webapp-py/main.py",
    "plugins/versioned-app-py/versioned_app.py",
]


def _mypy(*paths):
    # Module names come from MYPYPATH alone (--explicit-package-bases, run from a scratch
    # directory): Bazel's runfiles hold __init__.py files in every directory, which would make
    # plugins/webapp-py look like a package with an invalid name.
    scratch = os.environ.get("TEST_TMPDIR", tempfile.gettempdir())
    cache = os.path.join(scratch, "mypy-cache")
    env = dict(os.environ)
    env["MYPYPATH"] = os.pathsep.join([os.path.join(ROOT, "sdk", "python"),
                                       os.path.join(ROOT, "plugins", "webapp-py"),
                                       os.path.join(ROOT, "plugins", "versioned-app-py")])
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", CONFIG, "--cache-dir", cache,
         "--no-error-summary", "--explicit-package-bases",
         *[os.path.join(ROOT, p) for p in paths]],
        cwd=scratch, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=600, check=False)


class TypecheckTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        probe = subprocess.run([sys.executable, "-m", "mypy", "--version"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               check=False)
        if probe.returncode != 0:
            raise AssertionError("mypy is missing for %s: install Debian's mypy (tools/setup "
                                 "does, from tools/deps/debian.txt)\n%s"
                                 % (sys.executable, probe.stdout))

    def test_sdk_and_its_users_typecheck(self):
        result = _mypy(*CHECKED)
        self.assertEqual(result.returncode, 0, "mypy found problems:\n" + result.stdout)

    def test_a_call_that_drifted_from_the_sdk_is_refused(self):
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp:
            drifted = os.path.join(tmp, "drifted.py")
            with open(drifted, "w") as f:
                f.write(textwrap.dedent("""\
                    from ctrlhost_sdk import Controller, Request, Result

                    c = Controller("drift").for_("example.com", "v1", "Drift")

                    @c.reconcile
                    async def reconcile(req: Request) -> Result:
                        result = Result()
                        result.set_condition("Ready", True)   # reason is required
                        result.requeue_after = "soon"         # seconds or a timedelta
                        name: int = req.name                  # a str
                        return result
                    """))
            result = _mypy(drifted)
        self.assertNotEqual(result.returncode, 0, result.stdout)
        self.assertIn('Missing positional argument "reason"', result.stdout)
        self.assertIn('variable has type "Union[float, timedelta, None]"', result.stdout)
        self.assertIn('expression has type "str", variable has type "int"', result.stdout)


if __name__ == "__main__":
    bazel_unittest.main()
