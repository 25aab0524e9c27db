// `ctrlhost replay`: sends every call of a recording (`ctrlhost run --record`, an operator file's
// spec.record) to a plugin started as `ctrlhost test` starts it, and compares each answer with
// the recorded one by what the host would do with it (the comparison of plugin shadows). The
// regression test a plugin author runs in CI: production traffic against a new build.
//
//   $ ctrlhost replay --recording recordings/webapp --command bazel-bin/plugins/webapp/webapp
//   replayed 1000 calls of controller webapp (operator web, plugin webapp) from 2 files:
//   1000 same, 0 different, 0 failed, 0 skipped (no recorded answer)
//
// Each difference is printed with the file, the record's offset and sequence number, the key,
// the members that differ and the JSON patch from the recorded answer to the new one. With
// --update the new answers replace the recorded ones (the files are rewritten in place).
//
// Exit codes: 0 every answer is the same (or --update wrote them), 1 a difference, a plugin
// failure or a recording that cannot be read (the message names the file and the byte offset),
// 2 usage error.
//
// Thread-compatible: runs on the caller's thread (the plugin's supervisor has its own).
#ifndef CTRLHOST_RUNTIME_EXE_CMD_REPLAY_H_
#define CTRLHOST_RUNTIME_EXE_CMD_REPLAY_H_

#include <ostream>
#include <string>
#include <vector>

namespace ctrlhost::exe {

int RunReplayCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ctrlhost::exe

#endif  // CTRLHOST_RUNTIME_EXE_CMD_REPLAY_H_
