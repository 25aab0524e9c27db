"""ctrlhost_cc_plugin: the binary of a plugin built with the C++ SDK.

    load("//sdk/cpp:plugin.bzl", "ctrlhost_cc_plugin")

    ctrlhost_cc_plugin(
        name = "hello",
        srcs = ["hello.cc"],
        deps = ["//sdk/cpp:sdk"],
    )

A cc_binary, linked statically by default (glibc, libstdc++, gRPC, protobuf, Abseil, OpenSSL:
Debian ships every one as an archive). A host runs a plugin process per operator, and a
dynamically linked one maps the pages of some sixty shared libraries that its loader touches
(their symbol tables and relocations), which each process counts in its RSS: an idle plugin is
15.3 MiB RSS linked dynamically and 7.7 MiB statically (bench/README.md, `shared-cache`). A
static plugin also needs no shared library in its image. Names still resolve: glibc's static
getaddrinfo reads /etc/hosts and DNS itself; only NSS modules such as LDAP are out of reach
(`static = False` for a plugin that needs them).

Sanitizer builds (`--config=asan`, `tsan`, `ubsan`) link dynamically, as the sanitizers'
runtimes need, and TSan builds carry the suppressions for Debian's uninstrumented libraries.
"""

def ctrlhost_cc_plugin(name, deps = [], linkopts = [], static = True, **kwargs):
    """A plugin's cc_binary: statically linked unless `static` is False or a sanitizer runs."""
    static_linkopts = select({
        "//tools/build:asan": [],
        "//tools/build:tsan": [],
        "//tools/build:ubsan": [],
        "//conditions:default": ["-static"],
    }) if static else []
    native.cc_binary(
        name = name,
        deps = deps + select({
            "//tools/build:tsan": ["//runtime/common:tsan_suppressions"],
            "//conditions:default": [],
        }),
        linkopts = linkopts + static_linkopts,
        **kwargs
    )
