#include "runtime/controller/apply/event_recorder.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "runtime/common/utf8.h"
#include "runtime/controller/apply/conditions.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::controller::apply {
namespace {

using nlohmann::json;

kube::ResourceRef Events(const std::string& ns, const std::string& name = "") {
  kube::ResourceRef ref;
  ref.version = "v1";
  ref.resource = "events";
  ref.namespace_name = ns;
  ref.name = name;
  return ref;
}

}  // namespace

EventRecorder::EventRecorder(kube::Client* client, EventRecorderOptions options)
    : client_(client), options_(std::move(options)) {}

absl::Status EventRecorder::Record(const InvolvedObject& object, absl::string_view type,
                                   absl::string_view reason, absl::string_view message) {
  // Reasons and messages carry plugin and server text: escaped before they are stored (and
  // compared for aggregation), cut after (the cut never splits a character or goes past the
  // limit, which applies to what is stored).
  const std::string escaped_reason = common::EscapeUnprintable(reason);
  reason = escaped_reason;
  const std::string text = common::TruncateUtf8(
      common::EscapeUnprintable(common::Utf8Prefix(message, 4 * options_.max_message_bytes)),
      options_.max_message_bytes);
  const std::string key =
      absl::StrCat(object.namespace_, "\x1f", object.kind, "\x1f", object.name, "\x1f", object.uid,
                   "\x1f", type, "\x1f", reason, "\x1f", text);
  const absl::Time now = options_.clock->Now();
  Recent recent;
  bool aggregate = false;
  {
    common::MutexLock lock(&mu_);
    auto it = recent_.find(key);
    if (it != recent_.end() && now - it->second.last_seen < options_.aggregation_window) {
      it->second.count++;
      it->second.last_seen = now;
      recent = it->second;
      aggregate = true;
    }
  }
  if (aggregate) {
    const json patch = {{"count", recent.count}, {"lastTimestamp", Rfc3339Time(now)}};
    absl::StatusOr<std::string> patched = client_->Patch(Events(recent.namespace_, recent.name),
                                                         kube::PatchType::kMerge, patch.dump());
    if (patched.ok()) return absl::OkStatus();
    {
      common::MutexLock lock(&mu_);
      recent_.erase(key);
    }
    if (!kube::IsNotFound(patched.status())) return patched.status();
    // The earlier Event is gone: start a new one.
  }
  return Create(key, object, type, reason, text, now);
}

absl::Status EventRecorder::Create(const std::string& key, const InvolvedObject& object,
                                   absl::string_view type, absl::string_view reason,
                                   const std::string& message, absl::Time now) {
  const std::string ns = object.namespace_.empty() ? "default" : object.namespace_;
  json involved = {
      {"apiVersion", object.api_version}, {"kind", object.kind}, {"name", object.name}};
  if (!object.namespace_.empty()) involved["namespace"] = object.namespace_;
  if (!object.uid.empty()) involved["uid"] = object.uid;
  const std::string timestamp = Rfc3339Time(now);
  absl::Status last;
  for (int attempt = 0; attempt < 3; ++attempt) {
    uint64_t sequence;
    {
      common::MutexLock lock(&mu_);
      sequence = ++sequence_;
    }
    // client-go names events "<name>.<unix nanos in hex>"; the sequence keeps names unique
    // within this recorder when the clock does not move (or moves coarsely).
    const std::string name = absl::StrFormat(
        "%s.%x", object.name, static_cast<uint64_t>(absl::ToUnixNanos(now)) + sequence);
    json event = {{"apiVersion", "v1"},
                  {"kind", "Event"},
                  {"metadata", {{"name", name}, {"namespace", ns}}},
                  {"involvedObject", involved},
                  {"type", std::string(type)},
                  {"reason", std::string(reason)},
                  {"message", message},
                  {"source", {{"component", options_.component}}},
                  {"reportingComponent", options_.component},
                  {"firstTimestamp", timestamp},
                  {"lastTimestamp", timestamp},
                  {"count", 1}};
    absl::StatusOr<std::string> created = client_->Create(Events(ns), event.dump());
    if (created.ok()) {
      Remember(key, Recent{ns, name, 1, now}, now);
      return absl::OkStatus();
    }
    last = created.status();
    if (!kube::IsAlreadyExists(last)) break;
  }
  return last;
}

void EventRecorder::Remember(const std::string& key, Recent recent, absl::Time now) {
  common::MutexLock lock(&mu_);
  if (recent_.size() >= options_.max_tracked) {
    absl::erase_if(recent_, [&](const auto& entry) {
      return now - entry.second.last_seen >= options_.aggregation_window;
    });
    if (recent_.size() >= options_.max_tracked) recent_.clear();
  }
  recent_[key] = std::move(recent);
}

}  // namespace ctrlhost::controller::apply
