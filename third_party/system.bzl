"""Wraps Debian's system libraries as Bazel targets, offline.

`system_libraries` runs pkg-config once per library when the workspace is loaded and writes a
BUILD file of `cc_library` targets carrying the `-D` flags and link options pkg-config gives.
Headers live in /usr/include, which the C++ toolchain already searches. Code depends on the
aliases in //third_party, never on @system directly.
"""

# Target name -> pkg-config modules. Header-only libraries have modules whose --libs is empty.
_LIBRARIES = {
    "absl": [
        "absl_base",
        "absl_cleanup",
        "absl_flat_hash_map",
        "absl_flat_hash_set",
        "absl_node_hash_map",
        "absl_btree",
        "absl_inlined_vector",
        "absl_random_random",
        "absl_status",
        "absl_statusor",
        "absl_str_format",
        "absl_strings",
        "absl_synchronization",
        "absl_time",
        "absl_optional",
        "absl_variant",
        "absl_span",
        "absl_function_ref",
        "absl_any_invocable",
    ],
    "benchmark": ["benchmark"],
    "gmock": ["gmock"],
    "grpc++": ["grpc++", "grpc"],
    "gtest": ["gtest"],
    "gtest_main": ["gtest_main", "gmock"],
    "httplib": ["cpp-httplib"],
    "nlohmann_json": ["nlohmann_json"],
    "openssl": ["openssl"],
    "prometheus": ["prometheus-cpp-core", "prometheus-cpp-pull"],
    "protobuf": ["protobuf"],
    "rapidjson": ["RapidJSON"],
    "simdjson": ["simdjson"],
    "sqlite3": ["sqlite3"],
    "yaml-cpp": ["yaml-cpp"],
    "zlib": ["zlib"],
}

def _pkg_config(ctx, flag, modules):
    result = ctx.execute(["pkg-config", flag] + modules)
    if result.return_code != 0:
        fail("pkg-config %s %s failed (run tools/setup to install the Debian packages): %s" %
             (flag, " ".join(modules), result.stderr))
    return result.stdout.strip().split(" ")

def _dedupe(items):
    seen = {}
    out = []
    for item in items:
        if item and item not in seen:
            seen[item] = True
            out.append(item)
    return out

def _system_libraries_impl(ctx):
    if ctx.which("pkg-config") == None:
        fail("pkg-config is missing: run tools/setup")
    lines = ['package(default_visibility = ["//visibility:public"])', ""]
    for name, modules in _LIBRARIES.items():
        defines = []
        for flag in _pkg_config(ctx, "--cflags", modules):
            if flag.startswith("-D"):
                defines.append(flag[2:])
        # Keep every occurrence of a library in order except exact repeats of the same token;
        # shared libraries carry their own dependencies, so order only matters among ours.
        linkopts = _dedupe(_pkg_config(ctx, "--libs", modules))
        lines.append("cc_library(")
        lines.append("    name = %r," % name)
        lines.append("    defines = %r," % _dedupe(defines))
        lines.append("    linkopts = %r," % linkopts)
        lines.append(")")
        lines.append("")
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)
    ctx.file("BUILD.bazel", "\n".join(lines))

system_libraries = repository_rule(
    implementation = _system_libraries_impl,
    local = True,
    environ = ["PKG_CONFIG_PATH"],
)
