#include "sdk/cpp/replay.h"

#include <openssl/evp.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "sdk/cpp/host_judgement.h"
#include "sdk/cpp/result.h"

namespace ctrlhost::sdk::testing {
namespace {

using nlohmann::json;

// The members of a normalized answer, in the order a difference names them.
constexpr const char* kMembers[] = {"desired", "patches",      "status", "conditions",
                                    "events",  "requeueAfter", "error",  "finalized"};

std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The JSON value of `data`, or its text when it is not JSON.
json ParseOrText(const std::string& data) {
  json value = json::parse(data, nullptr, /*allow_exceptions=*/false);
  return value.is_discarded() ? json(data) : value;
}

// What the host records instead of a Secret's value: "sha256:" and the lowercase hex SHA-256
// of a string's UTF-8 bytes; "redacted" for a value that is not a string. A value that is a
// digest already is kept: a controller that copies a Secret's value from a replayed call (which
// carries digests) answers as it did when recorded.
json SecretDigest(const json& value) {
  if (!value.is_string()) return "redacted";
  const std::string& text = value.get_ref<const std::string&>();
  if (text.size() == 71 && absl::StartsWith(text, "sha256:") &&
      std::all_of(text.begin() + 7, text.end(),
                  [](char c) { return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f'); })) {
    return value;
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha256(), nullptr) != 1) {
    return "redacted";  // never for SHA-256; redacting is the safe side
  }
  return absl::StrCat("sha256:", absl::BytesToHexString(absl::string_view(
                                     reinterpret_cast<const char*>(digest), size)));
}

void RedactValues(json* values) {
  if (!values->is_object()) return;
  for (auto& [key, value] : values->items()) value = SecretDigest(value);
}

void RedactMembers(json* obj) {
  for (const char* member : {"data", "stringData"}) {
    if (obj->contains(member)) RedactValues(&(*obj)[member]);
  }
}

// A JSON patch operation on /data or /stringData (its object's values), or on one key under
// them (its value).
void RedactJsonPatchOp(json* op) {
  if (!op->is_object() || !op->contains("value") || !(*op)["path"].is_string()) return;
  const std::string path = (*op)["path"];
  if (path == "/data" || path == "/stringData") {
    RedactValues(&(*op)["value"]);
  } else if (absl::StartsWith(path, "/data/") || absl::StartsWith(path, "/stringData/")) {
    (*op)["value"] = SecretDigest((*op)["value"]);
  }
}

void RedactPatch(pluginpb::Patch* patch) {
  json body = json::parse(patch->patch(), nullptr, false);
  if (patch->type() == pluginpb::PATCH_TYPE_MERGE_PATCH && body.is_object()) {
    RedactMembers(&body);
  } else if (patch->type() == pluginpb::PATCH_TYPE_JSON_PATCH && body.is_array()) {
    for (json& op : body) RedactJsonPatchOp(&op);
  } else {
    return;
  }
  patch->set_patch(Dump(body));
}

// The host's redaction of an answer: desired v1 Secrets, and patches of Secrets (owned ones,
// or the primary when it is a Secret).
void RedactResponse(pluginpb::ReconcileResponse* response, bool primary_is_secret) {
  for (std::string& raw : *response->mutable_desired_objects()) {
    json obj = json::parse(raw, nullptr, false);
    if (!obj.is_object() || obj.value("apiVersion", json()) != "v1" ||
        obj.value("kind", json()) != "Secret") {
      continue;
    }
    RedactMembers(&obj);
    raw = Dump(obj);
  }
  for (pluginpb::Patch& patch : *response->mutable_patches()) {
    const bool secret = patch.target() == pluginpb::PATCH_TARGET_OWNED
                            ? patch.api_version() == "v1" && patch.kind() == "Secret"
                            : patch.target() == pluginpb::PATCH_TARGET_PRIMARY && primary_is_secret;
    if (secret) RedactPatch(&patch);
  }
}

// The names of enum values in a normalized answer.
using EnumNames = std::pair<int, const char*>;
constexpr EnumNames kConditionStatus[] = {{pluginpb::CONDITION_STATUS_TRUE, "True"},
                                          {pluginpb::CONDITION_STATUS_FALSE, "False"},
                                          {pluginpb::CONDITION_STATUS_UNKNOWN, "Unknown"}};
constexpr EnumNames kEventType[] = {{pluginpb::EVENT_TYPE_NORMAL, "Normal"},
                                    {pluginpb::EVENT_TYPE_WARNING, "Warning"}};
constexpr EnumNames kErrorKind[] = {{pluginpb::ERROR_KIND_RETRYABLE, "retryable"},
                                    {pluginpb::ERROR_KIND_TERMINAL, "terminal"}};
constexpr EnumNames kPatchTarget[] = {{pluginpb::PATCH_TARGET_PRIMARY, "primary"},
                                      {pluginpb::PATCH_TARGET_PRIMARY_STATUS, "status"},
                                      {pluginpb::PATCH_TARGET_OWNED, "owned"}};
constexpr EnumNames kPatchType[] = {{pluginpb::PATCH_TYPE_JSON_PATCH, "json"},
                                    {pluginpb::PATCH_TYPE_MERGE_PATCH, "merge"}};

// `value` by its name; an unknown one stays its number.
template <size_t N>
json EnumName(const EnumNames (&names)[N], int value) {
  for (const EnumNames& n : names) {
    if (n.first == value) return n.second;
  }
  return value;
}

double Seconds(const google::protobuf::Duration& d) { return d.seconds() + d.nanos() / 1e9; }

// "<apiVersion> <kind> <namespace>/<name>" ("<apiVersion> <kind> <name>" without a namespace);
// "desired_objects[i]" for something that is not a JSON object.
std::string DesiredKey(const json& obj, size_t index) {
  if (!obj.is_object()) return absl::StrCat("desired_objects[", index, "]");
  auto text = [](const json& v) { return v.is_string() ? v.get<std::string>() : Dump(v); };
  const json meta = obj.value("metadata", json::object());
  const json ns = meta.is_object() ? meta.value("namespace", json("")) : json("");
  std::string name = meta.is_object() ? text(meta.value("name", json())) : "null";
  if (ns.is_string() && !ns.get<std::string>().empty()) name = absl::StrCat(text(ns), "/", name);
  return absl::StrCat(text(obj.value("apiVersion", json())), " ", text(obj.value("kind", json())),
                      " ", name);
}

// `obj` without the members whose value is "".
json WithoutEmpty(json obj) {
  for (auto it = obj.begin(); it != obj.end();) {
    it = *it == "" ? obj.erase(it) : std::next(it);
  }
  return obj;
}

json NormalizePatch(const pluginpb::Patch& p) {
  return WithoutEmpty({{"target", EnumName(kPatchTarget, p.target())},
                       {"apiVersion", p.api_version()},
                       {"kind", p.kind()},
                       {"name", p.name()},
                       {"type", EnumName(kPatchType, p.type())},
                       {"body", ParseOrText(p.patch())},
                       {"resourceVersion", p.resource_version()}});
}

// The answer as the JSON document a replay compares; empty members are left out.
json Normalize(const pluginpb::ReconcileResponse& r) {
  json out = json::object();
  json desired = json::object();
  for (int i = 0; i < r.desired_objects_size(); ++i) {
    json obj = ParseOrText(r.desired_objects(i));
    std::string key = DesiredKey(obj, i);
    while (desired.contains(key)) key += " (again)";  // the same object twice: both count
    desired[key] = std::move(obj);
  }
  if (!desired.empty()) out["desired"] = std::move(desired);
  for (const pluginpb::Patch& p : r.patches()) out["patches"].push_back(NormalizePatch(p));
  if (!r.status().empty()) out["status"] = ParseOrText(r.status());
  for (const pluginpb::Condition& c : r.conditions()) {
    out["conditions"][c.type()] = {{"status", EnumName(kConditionStatus, c.status())},
                                   {"reason", c.reason()},
                                   {"message", c.message()}};
  }
  for (const pluginpb::Event& e : r.events()) {
    out["events"].push_back({{"type", EnumName(kEventType, e.type())},
                             {"reason", e.reason()},
                             {"message", e.message()}});
  }
  if (r.has_requeue_after()) out["requeueAfter"] = Seconds(r.requeue_after());
  if (r.has_error()) {
    json error = WithoutEmpty(
        {{"kind", EnumName(kErrorKind, r.error().kind())}, {"reason", r.error().reason()}});
    if (r.error().has_retry_after()) error["retryAfter"] = Seconds(r.error().retry_after());
    out["error"] = std::move(error);
  }
  if (r.finalized()) out["finalized"] = true;
  return out;
}

// One operation of the JSON patch between two values, with the value it removes or replaces.
struct DiffOp {
  std::string op, path;
  json old, value;
};

std::string Pointer(const std::string& path, const std::string& key) {
  return absl::StrCat(path, "/", absl::StrReplaceAll(key, {{"~", "~0"}, {"/", "~1"}}));
}

// The patch that turns `before` into `after` (add, remove, replace), descending into objects
// and arrays so that each operation is small.
void JsonDiff(const json& before, const json& after, const std::string& path,
              std::vector<DiffOp>* ops) {
  if (before == after) return;
  if (before.is_object() && after.is_object()) {
    for (auto& [k, v] : before.items()) {
      if (!after.contains(k)) ops->push_back({"remove", Pointer(path, k), v, json()});
    }
    for (auto& [k, v] : after.items()) {
      if (before.contains(k)) {
        JsonDiff(before[k], v, Pointer(path, k), ops);
      } else {
        ops->push_back({"add", Pointer(path, k), json(), v});
      }
    }
    return;
  }
  if (before.is_array() && after.is_array()) {
    const size_t common = std::min(before.size(), after.size());
    for (size_t i = 0; i < common; ++i) {
      JsonDiff(before[i], after[i], Pointer(path, std::to_string(i)), ops);
    }
    for (size_t i = before.size(); i > common; --i) {
      ops->push_back({"remove", Pointer(path, std::to_string(i - 1)), before[i - 1], json()});
    }
    for (size_t i = common; i < after.size(); ++i) {
      ops->push_back({"add", Pointer(path, std::to_string(i)), json(), after[i]});
    }
    return;
  }
  ops->push_back({"replace", path, before, after});
}

// The difference between the record's answer and the new one; nullopt when they are the same.
std::optional<ReplayDifference> Compare(const pluginpb::ControllerSpec& spec,
                                        const pluginpb::ReconcileRecord& record,
                                        const pluginpb::ReconcileResponse& response) {
  const json recorded = Normalize(record.response());
  const json replayed = Normalize(response);
  if (recorded == replayed) return std::nullopt;
  ReplayDifference d;
  d.sequence = record.sequence();
  const pluginpb::ReconcileCall& call = record.call();
  d.key =
      call.namespace_().empty() ? call.name() : absl::StrCat(call.namespace_(), "/", call.name());
  d.recorded = json::object();
  d.replayed = json::object();
  for (const char* m : kMembers) {
    const json none;
    const json& a = recorded.contains(m) ? recorded[m] : none;
    const json& b = replayed.contains(m) ? replayed[m] : none;
    if (recorded.contains(m) == replayed.contains(m) && a == b) continue;
    d.members.push_back(m);
    if (recorded.contains(m)) d.recorded[m] = a;
    if (replayed.contains(m)) d.replayed[m] = b;
  }
  std::vector<DiffOp> ops;
  JsonDiff(d.recorded, d.replayed, "", &ops);
  d.patch = json::array();
  for (const DiffOp& op : ops) {
    json o = {{"op", op.op}, {"path", op.path}};
    if (op.op != "remove") o["value"] = op.value;
    d.patch.push_back(std::move(o));
  }
  if (std::string why = JudgeRequest(spec, call); !why.empty()) {
    d.not_sent = absl::StrCat("the host would not send this request: ", why);
  }
  d.refused = JudgeResponse(spec, call, {}, response);
  return d;
}

std::set<pluginpb::Capability> CapabilitiesOf(const pluginpb::ReconcileRecord& record) {
  if (record.capabilities().empty()) return AllSdkCapabilities();
  std::set<pluginpb::Capability> out;
  for (int c : record.capabilities()) out.insert(static_cast<pluginpb::Capability>(c));
  return out;
}

// The controller that answers the records of the named recorded controller.
using PickFn = std::function<absl::StatusOr<const sdk::Controller*>(const std::string& name)>;

// Replays one file into `result`, and rewrites it when asked.
absl::Status ReplayFile(const std::string& path, const ReplayOptions& options, const PickFn& pick,
                        ReplayResult* result) {
  absl::StatusOr<RecordingFile> file = ReadRecording(path);
  if (!file.ok()) return file.status();
  const pluginpb::RecordedController& recorded = file->header.controller();
  if (!options.controller.empty() && recorded.name() != options.controller) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": holds controller ", recorded.name(), ", not ", options.controller));
  }
  absl::StatusOr<const sdk::Controller*> controller = pick(recorded.name());
  if (!controller.ok()) {
    return absl::Status(controller.status().code(),
                        absl::StrCat(path, ": ", controller.status().message()));
  }
  const bool primary_is_secret =
      recorded.primary().group().empty() && recorded.primary().kind() == "Secret";
  std::map<size_t, pluginpb::ReconcileRecord> replaced;
  for (size_t i = 0; i < file->records.size(); ++i) {
    const pluginpb::ReconcileRecord& record = file->records[i].record;
    if (record.has_failure()) {
      ++result->skipped;
      continue;
    }
    ++result->compared;
    pluginpb::ReconcileResponse response =
        Invoke(**controller, record.response().request_id(), record.call(), CapabilitiesOf(record));
    if (!file->header.secret_data()) RedactResponse(&response, primary_is_secret);
    std::optional<ReplayDifference> d = Compare((*controller)->spec(), record, response);
    if (!d.has_value()) {
      ++result->same;
      continue;
    }
    d->file = path;
    d->offset = file->records[i].offset;
    ++result->different;
    result->differences.push_back(*std::move(d));
    pluginpb::ReconcileRecord updated = record;
    *updated.mutable_response() = std::move(response);
    replaced.emplace(i, std::move(updated));
  }
  if (!options.update || replaced.empty()) return absl::OkStatus();
  result->updated.push_back(path);
  return RewriteRecording(*file, replaced);
}

absl::StatusOr<ReplayResult> ReplayAll(const std::string& path, const ReplayOptions& options,
                                       const PickFn& pick) {
  absl::StatusOr<std::vector<std::string>> files = FindRecording(path, options.controller);
  if (!files.ok()) return files.status();
  ReplayResult result;
  result.files = *files;
  for (const std::string& file : *files) {
    if (absl::Status s = ReplayFile(file, options, pick, &result); !s.ok()) return s;
  }
  return result;
}

::testing::AssertionResult AsAssertion(const absl::StatusOr<ReplayResult>& result,
                                       const ReplayOptions& options) {
  if (!result.ok()) return ::testing::AssertionFailure() << result.status().message();
  if (result->different == 0 || options.update) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << result->Summary(20);
}

std::string Show(const json& value) {
  std::string text = Dump(value);
  if (text.size() > 300) text = text.substr(0, 300) + "...";
  return text;
}

}  // namespace

std::string ReplayDifference::ToString() const {
  std::string out = absl::StrCat(file, ": record at offset ", offset, " (sequence ", sequence, ") ",
                                 key, ": ", absl::StrJoin(members, ", "), " differ");
  std::vector<DiffOp> ops;
  JsonDiff(recorded, replayed, "", &ops);
  for (const DiffOp& op : ops) {
    if (op.op == "add") {
      absl::StrAppend(&out, "\n    + ", op.path, ": ", Show(op.value));
    } else if (op.op == "remove") {
      absl::StrAppend(&out, "\n    - ", op.path, ": ", Show(op.old));
    } else {
      absl::StrAppend(&out, "\n    ~ ", op.path, ": ", Show(op.old), " -> ", Show(op.value));
    }
  }
  if (!not_sent.empty()) absl::StrAppend(&out, "\n    ", not_sent);
  if (!refused.empty()) {
    absl::StrAppend(&out, "\n    the host would refuse the replayed answer: ", refused);
  }
  return out;
}

std::string ReplayResult::Summary(size_t max_differences) const {
  std::string out = absl::StrCat(different, " of ", compared, " replayed answers differ (", same,
                                 " same, ", skipped, " skipped, ", files.size(), " files)");
  for (size_t i = 0; i < differences.size(); ++i) {
    if (i == max_differences) {
      absl::StrAppend(&out, "\n... and ", differences.size() - max_differences, " more");
      break;
    }
    absl::StrAppend(&out, "\n", differences[i].ToString());
  }
  return out;
}

absl::StatusOr<ReplayResult> Replay(const sdk::Controller& controller, const std::string& path,
                                    const ReplayOptions& options) {
  ReplayOptions named = options;
  if (named.controller.empty()) named.controller = controller.name();
  return ReplayAll(path, named, [&](const std::string&) { return &controller; });
}

absl::StatusOr<ReplayResult> Replay(const sdk::Plugin& plugin, const std::string& path,
                                    const ReplayOptions& options) {
  return ReplayAll(
      path, options, [&](const std::string& name) -> absl::StatusOr<const sdk::Controller*> {
        const sdk::Controller* c = plugin.Find(name);
        if (c != nullptr) return c;
        return absl::NotFoundError(
            absl::StrCat("plugin \"", plugin.name(), "\" has no controller \"", name, "\""));
      });
}

::testing::AssertionResult ReplayMatches(const sdk::Controller& controller, const std::string& path,
                                         const ReplayOptions& options) {
  return AsAssertion(Replay(controller, path, options), options);
}

::testing::AssertionResult ReplayMatches(const sdk::Plugin& plugin, const std::string& path,
                                         const ReplayOptions& options) {
  return AsAssertion(Replay(plugin, path, options), options);
}

}  // namespace ctrlhost::sdk::testing
