"""One macro that turns .proto files into C++, Python and Node inputs, offline.

    ctrlhost_proto(
        name = "plugin",
        srcs = ["plugin.proto"],
        deps = ["//proto/ctrlhost/common/v1alpha1:common"],  # other ctrlhost_proto targets
    )

defines, for a package under proto/:
  :plugin_files   the .proto files with those of its deps (Node's @grpc/proto-loader reads these
                  at run time, with proto/ and /usr/include as include directories)
  :plugin_cc      cc_library: protoc + /usr/bin/grpc_cpp_plugin; include as
                  "ctrlhost/plugin/v1alpha1/plugin.grpc.pb.h"; `cc_hdrs` are hand-written
                  headers added to it (pluginpb.h: the namespace's one C++ name)
  :plugin_py      py_library: protoc + /usr/bin/grpc_python_plugin; import as
                  "from ctrlhost.plugin.v1alpha1 import plugin_pb2, plugin_pb2_grpc"
                  (not with python = False: a package whose path would shadow an installed
                  Python package, e.g. grpc/health/v1, whose "grpc" would hide grpcio)

Protos import each other by their path below proto/ ("ctrlhost/plugin/v1alpha1/plugin.proto").
Well-known types come from Debian's /usr/include/google/protobuf.
"""

_PROTO_ROOT = "proto"

def _stem(src):
    return src[:-len(".proto")]

def ctrlhost_proto(name, srcs, deps = [], visibility = ["//visibility:public"], python = True,
                   cc_hdrs = []):
    pkg = native.package_name()
    if not (pkg == _PROTO_ROOT or pkg.startswith(_PROTO_ROOT + "/")):
        fail("ctrlhost_proto must be used in a package under %s/" % _PROTO_ROOT)
    depth = len(pkg.split("/")) - 1
    import_root = "/".join([".."] * depth) if depth else "."

    native.filegroup(
        name = name + "_files",
        srcs = srcs + [d + "_files" for d in deps],
        visibility = visibility,
    )

    protoc = ("/usr/bin/protoc -I%s -I/usr/include " % _PROTO_ROOT +
              " ".join(["$(location %s)" % s for s in srcs]))

    cc_outs = []
    for s in srcs:
        cc_outs += [_stem(s) + ext for ext in [".pb.h", ".pb.cc", ".grpc.pb.h", ".grpc.pb.cc"]]
    native.genrule(
        name = name + "_cc_gen",
        srcs = srcs + [name + "_files"],
        outs = cc_outs,
        cmd = (protoc +
               " --cpp_out=$(GENDIR)/%s" % _PROTO_ROOT +
               " --grpc_out=$(GENDIR)/%s" % _PROTO_ROOT +
               " --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin"),
        message = "protoc (C++) " + pkg,
    )
    native.cc_library(
        name = name + "_cc",
        srcs = [o for o in cc_outs if o.endswith(".cc")],
        hdrs = [o for o in cc_outs if o.endswith(".h")] + cc_hdrs,
        strip_include_prefix = "/" + _PROTO_ROOT,
        deps = [d + "_cc" for d in deps] + [
            "//third_party:grpc++",
            "//third_party:protobuf",
        ],
        visibility = visibility,
    )

    if not python:
        return
    py_outs = []
    for s in srcs:
        py_outs += [_stem(s) + "_pb2.py", _stem(s) + "_pb2_grpc.py"]
    native.genrule(
        name = name + "_py_gen",
        srcs = srcs + [name + "_files"],
        outs = py_outs,
        cmd = (protoc +
               " --python_out=$(GENDIR)/%s" % _PROTO_ROOT +
               " --grpc_python_out=$(GENDIR)/%s" % _PROTO_ROOT +
               " --plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin"),
        message = "protoc (Python) " + pkg,
    )
    native.py_library(
        name = name + "_py",
        srcs = py_outs,
        imports = [import_root],
        deps = [d + "_py" for d in deps],
        visibility = visibility,
    )
