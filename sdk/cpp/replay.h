// Replaying a recording: run a controller (or a whole Plugin) on the reconciles a host recorded
// (`ctrlhost run --record`) and report where its answers differ from the recorded ones.
//
//   TEST(GreeterTest, AnswersAsRecorded) {
//     EXPECT_TRUE(sdk::testing::ReplayMatches(*controller, "testdata/recording"));
//   }
//   absl::StatusOr<sdk::testing::ReplayResult> res =
//       sdk::testing::Replay(plugin, "testdata/recording", {.controller = "greeter"});
//
// Each recorded call goes through the serving path (sdk::Invoke) with the capabilities recorded
// with it; records whose dispatch failed (no answer) are skipped and counted. Unless the
// recording holds Secret data, the new answer gets the host's redaction first (the values of
// desired Secrets' data and stringData, and of patches of Secrets, become "sha256:<hex>"). Both
// answers are then normalized to a JSON document and compared as JSON values, so key order, 1
// vs 1.0, the order of desired objects and an error's message do not count: "desired" (keyed
// "<apiVersion> <kind> <namespace>/<name>"), "patches", "status", "conditions" (by type), "events",
// "requeueAfter" (seconds), "error" (kind, reason, retryAfter), "finalized". The rules and texts
// are the same in every SDK and in `ctrlhost replay`. A difference also carries the host's
// judgement (host_judgement.h) of the new answer and of the call under the new declaration.
//
// The recording (recording.h) is a .ctrlrec file, a directory of them, or a directory with one
// subdirectory per controller. Errors name the file and the byte offset.
//
// Thread-safety: plain values; a replay runs on the calling thread.
#ifndef CTRLHOST_SDK_CPP_REPLAY_H_
#define CTRLHOST_SDK_CPP_REPLAY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "sdk/cpp/controller.h"
#include "sdk/cpp/plugin.h"
#include "sdk/cpp/recording.h"

namespace ctrlhost::sdk::testing {

struct ReplayOptions {
  // The recorded controller to replay: it picks DIR/<controller>/ in a directory with one
  // subdirectory per controller, and every file's header must name it. Default: the
  // controller's own name when replaying a Controller; for a Plugin, the only subdirectory and
  // each file's header.
  std::string controller;
  // Rewrite every file with differing answers, the new answers becoming the recorded ones
  // (header, calls, actions and every other field kept; unchanged records keep their bytes),
  // through a temporary file in the same directory renamed over it.
  bool update = false;
};

// One record whose new answer differs from the recorded one.
struct ReplayDifference {
  std::string file;
  uint64_t offset = 0;    // where the record starts in `file`
  uint64_t sequence = 0;  // ReconcileRecord.sequence
  std::string key;        // the primary's "namespace/name" ("name" when cluster-scoped)
  // The differing members of the normalized answers, in the order listed in the file comment,
  // and their values on each side (an object; a member absent from one side is absent there).
  std::vector<std::string> members;
  nlohmann::json recorded;
  nlohmann::json replayed;
  // The JSON patch (RFC 6902) that turns `recorded` into `replayed`.
  nlohmann::json patch;
  // The host's judgement: why it would no longer send the recorded call to the new declaration,
  // and why it would refuse the new answer; empty when it would send it / apply it.
  std::string not_sent;
  std::string refused;

  // The difference for people: where, which members, the changes ("+" added, "-" removed,
  // "~" replaced), then the judgement.
  std::string ToString() const;
};

struct ReplayResult {
  std::vector<std::string> files;    // replayed, in order
  std::vector<std::string> updated;  // rewritten by `update`
  int compared = 0;                  // same + different
  int same = 0;
  int different = 0;
  int skipped = 0;  // records without an answer (the dispatch failed)
  std::vector<ReplayDifference> differences;

  // The totals, then the first `max_differences` differences.
  std::string Summary(size_t max_differences = 20) const;
};

// Replays the recording at `path` against `controller`. InvalidArgument, DataLoss or
// FailedPrecondition for a recording that cannot be read (see recording.h), InvalidArgument for
// a header naming another controller, NotFound for a path without a recording.
absl::StatusOr<ReplayResult> Replay(const sdk::Controller& controller, const std::string& path,
                                    const ReplayOptions& options = {});
// The same with the plugin's controller each file's header names (NotFound when it has none).
absl::StatusOr<ReplayResult> Replay(const sdk::Plugin& plugin, const std::string& path,
                                    const ReplayOptions& options = {});

// The assertion form: success when every answer is the same (or, with `update`, once the
// differences are written); otherwise a failure listing the first 20 differences and the
// totals, or why the recording cannot be replayed.
//   EXPECT_TRUE(sdk::testing::ReplayMatches(*controller, "testdata/recording"));
::testing::AssertionResult ReplayMatches(const sdk::Controller& controller, const std::string& path,
                                         const ReplayOptions& options = {});
::testing::AssertionResult ReplayMatches(const sdk::Plugin& plugin, const std::string& path,
                                         const ReplayOptions& options = {});

}  // namespace ctrlhost::sdk::testing

#endif  // CTRLHOST_SDK_CPP_REPLAY_H_
