// Paths given on the command line or in an operator file, made absolute once where they are
// read, so that nothing downstream (the plugin sandbox, socket addresses, a plugin's working
// directory, the environment handed to plugins) ever sees a relative path whose meaning depends
// on the working directory of whoever reads it.
//
//   plan.data_dir = common::AbsolutePath(flags.data_dir);        // ".ctrlhost" ->
//   "/home/u/.ctrlhost" exec.command = common::AbsoluteCommand(exec.command);         // "webapp"
//   stays (looked up in PATH)
//
// Thread-safe: pure functions of their argument and the process's working directory.
#ifndef CTRLHOST_RUNTIME_COMMON_PATHS_H_
#define CTRLHOST_RUNTIME_COMMON_PATHS_H_

#include <string>

#include "absl/status/status.h"

namespace ctrlhost::common {

// `path` made absolute against the working directory and lexically normalized ("a/./b/../c" ->
// "/cwd/a/c"); symlinks are not resolved. Empty stays empty (it means "not given"); when the
// working directory cannot be read, `path` normalized.
std::string AbsolutePath(const std::string& path);

// A command as execve and PATH lookup see it: a bare name ("python3", no '/') stays as it is and
// is looked up in PATH when it runs; a path with a '/' is made absolute (AbsolutePath).
std::string AbsoluteCommand(const std::string& command);

// Creates the directory `path` and its missing parents, each new one with mode 0700 (the host's
// data dir holds credentials); an existing directory is left as it is. FAILED_PRECONDITION when
// `path` or a parent exists and is not a directory, PERMISSION_DENIED when one cannot be created
// for lack of rights; the message names the directory and the reason.
absl::Status CreatePrivateDirectory(const std::string& path);

}  // namespace ctrlhost::common

#endif  // CTRLHOST_RUNTIME_COMMON_PATHS_H_
