"""go_command: a Go command built by sdk/go/build.sh, for Bazel targets that run it (e2e data).

Bazel 4.2 has no Go rules offline; this genrule calls the SDK's build script (GOPATH mode,
Debian's Go packages, generated protocol code outside the tree). It runs unsandboxed (`local`):
Go's build cache lives outside the execution root and makes rebuilds fast.
"""

def go_command(name, srcs, importpath, visibility = None):
    native.genrule(
        name = name + "-build",
        srcs = srcs + ["//sdk/go:srcs", "//proto/ctrlhost/plugin/v1alpha1:plugin_files", "//proto/ctrlhost/admin/v1alpha1:admin_files"],
        outs = [name],
        cmd = "$(location //sdk/go:build.sh) build %s $@" % importpath,
        executable = True,
        local = True,
        tools = ["//sdk/go:build.sh"],
        visibility = visibility or ["//visibility:public"],
        message = "Building Go command " + importpath,
    )
