"""tools/fuzzers/build.py links, for every fuzzer, exactly the project sources of the Bazel
closure of //tools/fuzzers:<fuzzer>_fuzzer (the genquery outputs beside this file), less the
ones build.py names in NOT_LINKED: a source added to or taken from a Bazel target, or from
build.py's lists, fails here before it fails (or silently goes unfuzzed) in tools/fuzz."""

import os
import unittest

from tools.fuzzers import build
from tools.internal import bazel_unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SUFFIX = "_fuzzer_closure"


def closure(fuzzer):
    """The workspace .cc and .proto files of a fuzzer's Bazel closure, as repository paths."""
    with open(os.path.join(HERE, fuzzer + SUFFIX)) as f:
        labels = f.read().split()
    files = set()
    for label in labels:
        if not label.startswith("//"):
            continue  # another repository (@bazel_tools, system libraries)
        package, _, name = label[2:].partition(":")
        path = "%s/%s" % (package, name) if package else name
        if path.endswith((".cc", ".proto")):
            files.add(path)
    return files


def linked(fuzzer):
    """What build.py compiles into a fuzzer, as the repository files they come from."""
    return {build.bazel_source(s) for s in build.TARGETS[fuzzer]} | \
        {"tools/fuzzers/%s_fuzzer.cc" % fuzzer}


class BuildListsMatchBazelTest(unittest.TestCase):

    def test_same_fuzzers(self):
        in_bazel = {n[:-len(SUFFIX)] for n in os.listdir(HERE) if n.endswith(SUFFIX)}
        self.assertEqual(in_bazel, set(build.TARGETS),
                         "tools/fuzzers/BUILD.bazel FUZZERS and build.py TARGETS differ")
        self.assertLessEqual(set(build.NOT_LINKED), set(build.TARGETS))

    def test_every_fuzzer_links_its_bazel_closure(self):
        for fuzzer in sorted(build.TARGETS):
            with self.subTest(fuzzer=fuzzer):
                bazel = closure(fuzzer)
                not_linked = set(build.NOT_LINKED.get(fuzzer, []))
                ours = linked(fuzzer)
                if ours & not_linked:
                    self.fail("build.py both links and leaves out %s" % sorted(ours & not_linked))
                missing = bazel - ours - not_linked
                extra = (ours | not_linked) - bazel
                if missing or extra:
                    self.fail(
                        "%s: build.py and //tools/fuzzers:%s_fuzzer drifted apart.\n"
                        "  in the Bazel closure, not in build.py TARGETS or NOT_LINKED: %s\n"
                        "  in build.py, not in the Bazel closure: %s" %
                        (fuzzer, fuzzer, sorted(missing), sorted(extra)))

    def test_generated_sources_map_to_their_proto(self):
        self.assertEqual(build.bazel_source("gen:ctrlhost/plugin/v1alpha1/plugin.pb.cc"),
                         "proto/ctrlhost/plugin/v1alpha1/plugin.proto")
        self.assertEqual(build.bazel_source("gen:runtime/apiserver/kubeproto/core_v1.pb.cc"),
                         "runtime/apiserver/kubeproto/core_v1.proto")
        self.assertEqual(build.bazel_source("runtime/kube/selector.cc"),
                         "runtime/kube/selector.cc")


if __name__ == "__main__":
    bazel_unittest.main()
