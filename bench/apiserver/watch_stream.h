// Client side of a Kubernetes watch stream for the apiserver benchmark: splits the chunked body
// of `GET ...?watch=true` into event lines, extracts what the benchmark checks (type, name,
// resourceVersion) and verifies the delivery contract: every acknowledged write arrives exactly
// once, in resourceVersion order.
//
//   WatchStreamParser parser;
//   parser.Feed(chunk, [&](const WatchLine& line) { checker.Add(line.resource_version); ... });
//   if (!parser.status().ok()) ...;     // a malformed line stops the stream
//   absl::Status s = checker.Verify(acked_revisions);
//
// Only the fields the benchmark needs are extracted (with simdjson's on-demand parser), so a
// watcher costs the client little CPU next to the server it measures.
//
// Thread-safety: thread-compatible (one watcher thread owns each parser and checker).
#ifndef CTRLHOST_BENCH_APISERVER_WATCH_STREAM_H_
#define CTRLHOST_BENCH_APISERVER_WATCH_STREAM_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ctrlhost::bench {

// One event of a watch stream.
struct WatchLine {
  std::string type;              // ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
  std::string name;              // object.metadata.name ("" for ERROR)
  int64_t resource_version = 0;  // object.metadata.resourceVersion (0 when absent)
};

// Parses one JSON event line. InvalidArgument for anything that is not an event object.
absl::StatusOr<WatchLine> ParseWatchLine(absl::string_view line);

// The resourceVersion of an object body (e.g. a create's response). InvalidArgument when the
// body has no numeric metadata.resourceVersion.
absl::StatusOr<int64_t> ParseResourceVersion(absl::string_view object_json);

// Reassembles lines from arbitrary chunks. Thread-compatible.
class WatchStreamParser {
 public:
  // Calls `on_line` for each complete line in order; returns false (and keeps the error in
  // status()) at the first malformed line; everything after it is ignored.
  bool Feed(absl::string_view chunk, const std::function<void(const WatchLine&)>& on_line);
  const absl::Status& status() const { return status_; }
  // Bytes of an unfinished line held back.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  std::string pending_;
  absl::Status status_;
};

// Checks one watcher's events against the writes. Thread-compatible.
class DeliveryChecker {
 public:
  // Records an event's resourceVersion; remembers the first out-of-order or repeated one.
  void Add(int64_t resource_version);
  int64_t count() const { return count_; }
  int64_t last() const { return last_; }
  // OK iff events arrived in strictly increasing order, each is in `expected`, and every
  // element of `expected` arrived (so: each exactly once). The message names the first problem.
  absl::Status Verify(const absl::flat_hash_set<int64_t>& expected) const;

 private:
  int64_t count_ = 0;
  int64_t last_ = 0;
  int64_t first_disorder_ = 0;  // the first resourceVersion not above its predecessor, or 0
  std::vector<int64_t> seen_;
};

}  // namespace ctrlhost::bench

#endif  // CTRLHOST_BENCH_APISERVER_WATCH_STREAM_H_
