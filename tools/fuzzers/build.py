"""Builds the libFuzzer targets of tools/fuzzers with a cache keyed by content (run by tools/fuzz).

    /usr/bin/python3 tools/fuzzers/build.py --out DIR [TARGET...]   # build, print bin paths
    /usr/bin/python3 tools/fuzzers/build.py --list                  # the targets, one a line

Every object file is stored under DIR/obj/<key>.o where the key is a SHA-256 of what goes into
it: the compiler's version, the flags, the versions of the Debian libraries (pkg-config), the
source's bytes and the bytes of every project header it includes, transitively (quoted
includes found in the tree or in the generated code). So a fresh clone with unchanged sources
reuses the objects an earlier clone built (CI builds a clean clone each time, with ~/.cache
kept), and any change to a source, a header, a flag or the compiler rebuilds exactly what it
reaches. Generated protobuf code lives under DIR/gen/<hash of the .proto files and protoc's
version>/. A binary is relinked when the keys of its objects or the link flags change
(DIR/bin/<target>.key). Writes go to a temporary name first and are renamed into place, so two
runs sharing DIR (two clones) never see half-written files. Objects unused for 30 days are
removed.

The build is the same clang the sanitizer flags need: -fsanitize=fuzzer,address,undefined,
outside Bazel (Bazel here builds with GCC, which has no libFuzzer), from the sources and the
Debian libraries the Bazel targets use.
"""

import argparse
import concurrent.futures
import hashlib
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

KUBEPROTO = ["options", "runtime", "intstr", "resource", "meta_v1", "core_v1", "core_v1_volume",
             "core_v1_pod", "apps_v1", "coordination_v1", "events_v1"]

KUBEPROTO_GEN = ["gen:runtime/apiserver/kubeproto/%s.pb.cc" % p for p in KUBEPROTO]

# The project sources each fuzzer links besides tools/fuzzers/<target>_fuzzer.cc: the .cc files
# of the Bazel closure of //tools/fuzzers:<target>_fuzzer (tools/fuzzers/BUILD.bazel), and for
# each .proto there its generated code ("gen:"), less NOT_LINKED. build_test.py fails when they
# drift apart. To change what a fuzzer links, change its deps in BUILD.bazel (or the runtime
# targets), then copy the closure here:
#   bazel query --noimplicit_deps "kind('source file', deps(//tools/fuzzers:patch_fuzzer))"
KUBEPROTO_LIB = [
    "runtime/apiserver/kubeproto/kubeproto.cc", "runtime/apiserver/body_limits.cc",
    "runtime/kube/api_status.cc", "runtime/kube/field_error.cc",
] + KUBEPROTO_GEN
OBJECT_UTIL = KUBEPROTO_LIB + [
    "runtime/apiserver/object_util.cc", "runtime/apiserver/resource_registry.cc",
    "runtime/apiserver/builtin_resources.cc", "runtime/apiserver/crd.cc",
    "runtime/common/yaml_json.cc", "runtime/kube/validation.cc",
]
PATCH = OBJECT_UTIL + [
    "runtime/apiserver/patch/patch.cc", "runtime/apiserver/patch/strategic_merge.cc",
    "runtime/apiserver/patch/internal/errors.cc", "runtime/apiserver/patch/merge_strategy.cc",
    "runtime/apiserver/patch/apply.cc", "runtime/apiserver/patch/managed_fields.cc",
    "runtime/apiserver/patch/field_set.cc", "runtime/common/logging.cc",
    "runtime/common/utf8.cc",
]
SELECTOR = [
    "runtime/kube/selector.cc", "runtime/kube/field_selector.cc", "runtime/kube/validation.cc",
    "runtime/kube/api_status.cc", "runtime/kube/field_error.cc",
]
KUBECONFIG = [
    "runtime/kube/kubeconfig.cc", "runtime/common/yaml_json.cc", "runtime/common/logging.cc",
    "runtime/common/utf8.cc",
]
OPERATOR_FILE = [
    "runtime/config/load.cc", "runtime/config/operator_spec.cc",
    "runtime/config/internal/fields.cc", "runtime/config/internal/sections.cc",
    "runtime/config/internal/yaml_reader.cc", "runtime/common/yaml_json.cc",
    "runtime/common/paths.cc", "runtime/common/utf8.cc",
] + SELECTOR
PLUGIN_RESPONSE = [
    "runtime/controller/apply/validate.cc", "runtime/kube/validation.cc",
    "runtime/kube/api_status.cc", "runtime/kube/field_error.cc", "runtime/cache/object.cc",
    "runtime/cache/strip.cc", "runtime/common/utf8.cc",
    "gen:ctrlhost/plugin/v1alpha1/plugin.pb.cc",
]

# target -> library sources; the fuzzer itself is tools/fuzzers/<target>_fuzzer.cc.
TARGETS = {
    "body_json": OBJECT_UTIL,
    "body_yaml": OBJECT_UTIL,
    "body_kubeproto": KUBEPROTO_LIB,
    "patch": PATCH,
    "selector": SELECTOR + ["runtime/kube/shard_selector.cc"],
    "jsonpath": ["runtime/apiserver/jsonpath.cc"],
    "list_tokens": [
        "runtime/apiserver/list_tokens.cc", "runtime/kube/api_status.cc",
        "runtime/kube/field_error.cc",
    ],
    "kubeconfig": KUBECONFIG,
    "operator_file": OPERATOR_FILE,
    "plugin_response": PLUGIN_RESPONSE,
}

# Sources of a fuzzer's Bazel closure it does not link, and why. plugin_response: the controller
# seams (controller:reconcile) and apply:validate bring in the cache store and the API client
# (with its request budget, the runner's tenant);
# ValidateResponse calls neither, and rest_client.cc needs cpp-httplib and OpenSSL, which this
# build does not link.
NOT_LINKED = {
    "plugin_response": [
        "runtime/cache/store.cc", "runtime/common/clock.cc", "runtime/common/logging.cc",
        "runtime/common/yaml_json.cc", "runtime/kube/client.cc", "runtime/kube/discovery.cc",
        "runtime/kube/kubeconfig.cc", "runtime/kube/rest_client.cc",
        "runtime/kube/api_tenant.cc", "runtime/kube/fair_limiter.cc",
    ],
}

# Where protoc finds each generated file's .proto (_generate): kubeproto from the repository
# root, the plugin protocol from proto/.
PROTO_ROOTS = {"runtime/": "", "ctrlhost/": "proto/"}


def bazel_source(source):
    """The repository file a source list entry comes from: itself, or a generated file's .proto
    (what Bazel's closure names)."""
    if not source.startswith("gen:"):
        return source
    proto = source[len("gen:"):-len(".pb.cc")] + ".proto"
    for prefix, root in PROTO_ROOTS.items():
        if proto.startswith(prefix):
            return root + proto
    raise ValueError("no proto root for %s" % source)


MODULES = ["absl_base", "absl_flat_hash_map", "absl_flat_hash_set", "absl_node_hash_map",
           "absl_btree", "absl_inlined_vector", "absl_random_random", "absl_status",
           "absl_statusor", "absl_str_format", "absl_strings", "absl_synchronization", "absl_time",
           "absl_optional", "absl_variant", "absl_span", "absl_raw_hash_set", "absl_hash",
           "nlohmann_json", "protobuf", "simdjson", "yaml-cpp"]
COMPILE_FLAGS = ["-std=c++17", "-g", "-O1", "-fno-omit-frame-pointer",
                 "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
                 "-fsanitize=fuzzer-no-link", "-w"]
LINK_FLAGS = ["-fsanitize=fuzzer,address,undefined"]
MAX_AGE_SECONDS = 30 * 24 * 3600
INCLUDE = re.compile(rb'^\s*#\s*include\s*"([^"]+)"', re.M)
KEY_NAME = re.compile(r"^[0-9a-f]{64}\.o$")


def run(cmd, **kwargs):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kwargs).stdout


def sha256(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else p.encode())
        h.update(b"\0")
    return h.hexdigest()


def write_atomically(path, data):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


class Builder:
    def __init__(self, out, jobs):
        self.out = out
        self.jobs = jobs
        for d in ("obj", "gen", "bin"):
            os.makedirs(os.path.join(out, d), exist_ok=True)
        self.clang = run(["clang++", "--version"])
        self.cflags = run(["pkg-config", "--cflags"] + MODULES).split()
        self.libs = run(["pkg-config", "--libs"] + MODULES).split()
        self.versions = run(["pkg-config", "--modversion"] + MODULES)
        self.gen = self._generate()
        self.include_dirs = [ROOT, os.path.join(ROOT, "proto"), self.gen]
        self.flags = COMPILE_FLAGS + ["-I.", "-Iproto", "-I" + self.gen] + self.cflags
        # The compile key leaves out where the cache lives (same content, same object).
        self.flags_key = sha256(self.clang, self.versions,
                                *[f.replace(self.gen, "$GEN") for f in self.flags])
        self.header_hashes = {}

    def _generate(self):
        """protoc output for kubeproto and the plugin protocol, in a directory named by content."""
        kube = ["runtime/apiserver/kubeproto/%s.proto" % p for p in KUBEPROTO]
        plugin = ["proto/ctrlhost/plugin/v1alpha1/plugin.proto"]
        parts = [run(["protoc", "--version"])]
        for p in kube + plugin:
            with open(os.path.join(ROOT, p), "rb") as f:
                parts += [p, f.read()]
        gen = os.path.join(self.out, "gen", sha256(*parts)[:24])
        if not os.path.exists(os.path.join(gen, "done")):
            tmp = "%s.tmp.%d" % (gen, os.getpid())
            os.makedirs(tmp)
            run(["protoc", "-I.", "-I/usr/include", "--cpp_out=" + tmp] + kube, cwd=ROOT)
            run(["protoc", "-Iproto", "-I/usr/include", "--cpp_out=" + tmp] + plugin, cwd=ROOT)
            open(os.path.join(tmp, "done"), "w").close()
            try:
                os.rename(tmp, gen)
            except OSError:  # another run generated the same content first
                subprocess.run(["rm", "-rf", tmp], check=True)
        return gen

    def _path(self, source):
        return os.path.join(self.gen, source[4:]) if source.startswith("gen:") else \
            os.path.join(ROOT, source)

    def _header_closure(self, path, seen):
        """Adds every project header `path` includes, transitively, to `seen`."""
        with open(path, "rb") as f:
            text = f.read()
        for name in INCLUDE.findall(text):
            name = name.decode()
            for base in [os.path.dirname(path)] + self.include_dirs:
                candidate = os.path.normpath(os.path.join(base, name))
                if os.path.isfile(candidate):
                    if candidate not in seen:
                        seen.add(candidate)
                        self._header_closure(candidate, seen)
                    break
            # Not found in the tree: a system header, covered by the library versions.

    def object_key(self, source, cached=True):
        path = self._path(source)
        headers = set()
        self._header_closure(path, headers)
        parts = [self.flags_key, source]
        with open(path, "rb") as f:
            parts.append(f.read())
        # Named and ordered by where they are inside the tree or the generated code, never by
        # absolute path: clones at other paths must compute the same key.
        named = sorted(("gen:" + os.path.relpath(h, self.gen)
                        if h.startswith(self.gen + os.sep) else os.path.relpath(h, ROOT), h)
                       for h in headers)
        for name, h in named:
            if h not in self.header_hashes or not cached:
                with open(h, "rb") as f:
                    self.header_hashes[h] = sha256(f.read())
            parts += [name, self.header_hashes[h]]
        return sha256(*parts)

    def compile(self, source, key):
        obj = os.path.join(self.out, "obj", key + ".o")
        if os.path.exists(obj):
            os.utime(obj)  # used: keeps it from the 30-day cleanup
            return obj, False
        src = self._path(source)
        tmp = "%s.tmp.%d" % (obj, os.getpid())
        result = subprocess.run(["clang++"] + self.flags + ["-c", src, "-o", tmp], cwd=ROOT,
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError("compiling %s failed:\n%s" % (source, result.stderr[-6000:]))
        if self.object_key(source, cached=False) != key:
            os.remove(tmp)  # never store an object under a key its inputs no longer have
            raise RuntimeError("%s or a header it includes changed during the build: run again" %
                               source)
        os.replace(tmp, obj)
        return obj, True

    def encode_seeds(self):
        """Text-format seeds (tools/fuzzers/seeds/<target>/*.txtpb) in wire format under
        DIR/seeds/<target>/, each prefixed with every scenario byte the fuzzer reads first."""
        seeds = os.path.join(ROOT, "tools/fuzzers/seeds/plugin_response")
        out = os.path.join(self.out, "seeds", "plugin_response")
        os.makedirs(out, exist_ok=True)
        for name in sorted(os.listdir(seeds)):
            with open(os.path.join(seeds, name), "rb") as f:
                wire = subprocess.run(
                    ["protoc", "-Iproto", "-I/usr/include",
                     "--encode=ctrlhost.plugin.v1alpha1.ReconcileResponse",
                     "proto/ctrlhost/plugin/v1alpha1/plugin.proto"],
                    stdin=f, cwd=ROOT, check=True, capture_output=True).stdout
            for scenario in range(4):
                write_atomically(os.path.join(out, "%s-%d" % (name[:-len(".txtpb")], scenario)),
                                 bytes([scenario]) + wire)

    def build(self, targets):
        sources = {}
        for t in targets:
            for s in TARGETS[t] + ["tools/fuzzers/%s_fuzzer.cc" % t]:
                sources[s] = None
        keys = {s: self.object_key(s) for s in sources}
        objects = {}
        compiled = 0
        with concurrent.futures.ThreadPoolExecutor(self.jobs) as pool:
            futures = {s: pool.submit(self.compile, s, keys[s]) for s in sources}
            for s, f in futures.items():
                objects[s], fresh = f.result()
                compiled += fresh
        linked = 0
        for t in targets:
            objs = [objects["tools/fuzzers/%s_fuzzer.cc" % t]] + [objects[s] for s in TARGETS[t]]
            key = sha256(self.clang, self.versions, *LINK_FLAGS, *self.libs,
                         *[os.path.basename(o) for o in objs])
            binary = os.path.join(self.out, "bin", t)
            key_file = binary + ".key"
            if os.path.exists(binary) and os.path.exists(key_file) and \
                    open(key_file).read() == key:
                continue
            tmp = "%s.tmp.%d" % (binary, os.getpid())
            result = subprocess.run(["clang++"] + LINK_FLAGS + objs + self.libs + ["-o", tmp],
                                    capture_output=True, text=True)
            if result.returncode != 0:
                raise RuntimeError("linking %s failed:\n%s" % (t, result.stderr[-6000:]))
            os.replace(tmp, binary)
            write_atomically(key_file, key.encode())
            linked += 1
        print("fuzz build: %d objects compiled, %d reused; %d targets linked, %d reused" %
              (compiled, len(sources) - compiled, linked, len(targets) - linked), file=sys.stderr)

    def clean(self):
        """Removes objects unused for 30 days and files of the old mtime-keyed layout."""
        now = time.time()
        obj_dir = os.path.join(self.out, "obj")
        for name in os.listdir(obj_dir):
            path = os.path.join(obj_dir, name)
            try:
                age = now - os.stat(path).st_mtime
                # Temporary files of a run that died (never those of a concurrent run).
                if not KEY_NAME.match(name) and ("tmp" not in name or age > 24 * 3600):
                    os.remove(path)
                elif age > MAX_AGE_SECONDS:
                    os.remove(path)
            except OSError:
                pass


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="cache directory (tools/fuzz: ~/.cache/ctrlhost/fuzz)")
    p.add_argument("--jobs", type=int, default=2, help="compilers at a time (default 2)")
    p.add_argument("--list", action="store_true", help="print the targets and exit")
    p.add_argument("targets", nargs="*")
    a = p.parse_args()
    if a.list:
        print("\n".join(TARGETS))
        return 0
    unknown = [t for t in a.targets if t not in TARGETS]
    if unknown or not a.out:
        print("build.py: unknown target %s (have: %s)" % (", ".join(unknown), " ".join(TARGETS))
              if unknown else "build.py: --out is required", file=sys.stderr)
        return 2
    try:
        builder = Builder(a.out, a.jobs)
        builder.build(a.targets or list(TARGETS))
        builder.encode_seeds()
        builder.clean()
    except (RuntimeError, subprocess.CalledProcessError, OSError) as e:
        detail = getattr(e, "stderr", "") or ""
        print("fuzz build: %s\n%s" % (e, detail), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
