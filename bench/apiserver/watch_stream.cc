#include "bench/apiserver/watch_stream.h"

#include <simdjson.h>

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ctrlhost::bench {
namespace {

// simdjson reads up to SIMDJSON_PADDING bytes past the end: copy into a padded buffer. One per
// thread, reused, so a watcher allocates nothing per event once warmed up.
simdjson::padded_string_view Padded(absl::string_view text) {
  thread_local std::vector<char> buffer;
  buffer.resize(text.size() + simdjson::SIMDJSON_PADDING);
  std::memcpy(buffer.data(), text.data(), text.size());
  std::memset(buffer.data() + text.size(), 0, simdjson::SIMDJSON_PADDING);
  return simdjson::padded_string_view(buffer.data(), text.size(), buffer.size());
}

simdjson::ondemand::parser& Parser() {
  thread_local simdjson::ondemand::parser parser;
  return parser;
}

absl::StatusOr<int64_t> RevisionOf(simdjson::ondemand::value metadata) {
  std::string_view rv;
  if (metadata["resourceVersion"].get_string().get(rv) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("metadata.resourceVersion is missing or not a string");
  }
  int64_t revision = 0;
  if (!absl::SimpleAtoi(absl::string_view(rv.data(), rv.size()), &revision) || revision <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata.resourceVersion is not a positive integer: ",
                     absl::string_view(rv.data(), rv.size())));
  }
  return revision;
}

}  // namespace

absl::StatusOr<WatchLine> ParseWatchLine(absl::string_view line) {
  simdjson::ondemand::document doc;
  if (Parser().iterate(Padded(line)).get(doc) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("watch line is not JSON");
  }
  WatchLine out;
  std::string_view type;
  if (doc["type"].get_string().get(type) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("watch line has no string \"type\"");
  }
  out.type.assign(type.data(), type.size());
  simdjson::ondemand::value object;
  if (doc["object"].get(object) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("watch line has no \"object\"");
  }
  if (out.type == "ERROR") return out;
  simdjson::ondemand::value metadata;
  if (object["metadata"].get(metadata) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("watch event object has no metadata");
  }
  std::string_view name;
  if (metadata["name"].get_string().get(name) == simdjson::SUCCESS) {
    out.name.assign(name.data(), name.size());
  }
  absl::StatusOr<int64_t> rv = RevisionOf(metadata);
  if (!rv.ok()) return rv.status();
  out.resource_version = *rv;
  return out;
}

absl::StatusOr<int64_t> ParseResourceVersion(absl::string_view object_json) {
  simdjson::ondemand::document doc;
  if (Parser().iterate(Padded(object_json)).get(doc) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("object is not JSON");
  }
  simdjson::ondemand::value metadata;
  if (doc["metadata"].get(metadata) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("object has no metadata");
  }
  return RevisionOf(metadata);
}

bool WatchStreamParser::Feed(absl::string_view chunk,
                             const std::function<void(const WatchLine&)>& on_line) {
  if (!status_.ok()) return false;
  pending_.append(chunk.data(), chunk.size());
  size_t start = 0;
  while (true) {
    const size_t end = pending_.find('\n', start);
    if (end == std::string::npos) break;
    const absl::string_view line(pending_.data() + start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    absl::StatusOr<WatchLine> parsed = ParseWatchLine(line);
    if (!parsed.ok()) {
      status_ = parsed.status();
      pending_.clear();
      return false;
    }
    on_line(*parsed);
  }
  pending_.erase(0, start);
  return true;
}

void DeliveryChecker::Add(int64_t resource_version) {
  if (resource_version <= last_ && first_disorder_ == 0) first_disorder_ = resource_version;
  last_ = resource_version;
  ++count_;
  seen_.push_back(resource_version);
}

absl::Status DeliveryChecker::Verify(const absl::flat_hash_set<int64_t>& expected) const {
  if (first_disorder_ != 0) {
    return absl::DataLossError(absl::StrCat("resourceVersion ", first_disorder_,
                                            " arrived after a version not below it (repeat or "
                                            "reorder)"));
  }
  for (int64_t rv : seen_) {
    if (!expected.contains(rv)) {
      return absl::DataLossError(absl::StrCat("resourceVersion ", rv, " was never written"));
    }
  }
  // Strictly increasing and all in `expected`: distinct members, so equal counts mean equal sets.
  if (seen_.size() != expected.size()) {
    return absl::DataLossError(
        absl::StrCat("received ", seen_.size(), " of ", expected.size(), " events"));
  }
  return absl::OkStatus();
}

}  // namespace ctrlhost::bench
