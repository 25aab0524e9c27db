#include "sdk/cpp/request.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"

namespace ctrlhost::sdk {
namespace {

const nlohmann::json& EmptyObject() {
  static const nlohmann::json* const kEmpty = new nlohmann::json(nlohmann::json::object());
  return *kEmpty;
}

const nlohmann::json& MemberOrEmpty(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) return EmptyObject();
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_object()) return EmptyObject();
  return *it;
}

std::string StringAt(const nlohmann::json& obj, absl::string_view path) {
  const nlohmann::json* v = FindPath(obj, path);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

absl::StatusOr<std::vector<Object>> ParseObjects(
    const google::protobuf::RepeatedPtrField<pluginpb::RawObject>& raws, absl::string_view what) {
  std::vector<Object> out;
  out.reserve(raws.size());
  for (const pluginpb::RawObject& raw : raws) {
    absl::StatusOr<nlohmann::json> json =
        ParseJsonObject(raw.object(), absl::StrCat(what, " ", raw.api_version(), "/", raw.kind()));
    if (!json.ok()) return json.status();
    out.push_back(Object{raw.api_version(), raw.kind(), *std::move(json)});
  }
  return out;
}

std::vector<const Object*> OfKind(const std::vector<Object>& objects, absl::string_view kind,
                                  absl::string_view api_version) {
  std::vector<const Object*> out;
  for (const Object& o : objects) {
    if (o.kind == kind && (api_version.empty() || o.api_version == api_version)) {
      out.push_back(&o);
    }
  }
  return out;
}

}  // namespace

std::string Object::name() const { return StringAt(json, "metadata.name"); }
std::string Object::namespace_() const { return StringAt(json, "metadata.namespace"); }

const nlohmann::json* FindPath(const nlohmann::json& obj, absl::string_view path) {
  const nlohmann::json* cur = &obj;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(std::string(part));
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

std::map<std::string, std::string> StringMap(const nlohmann::json& obj) {
  std::map<std::string, std::string> out;
  if (!obj.is_object()) return out;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (it->is_string()) out[it.key()] = it->get<std::string>();
  }
  return out;
}

absl::StatusOr<nlohmann::json> ParseJsonObject(absl::string_view bytes, absl::string_view what) {
  nlohmann::json json = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr,
                                              /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not valid JSON"));
  }
  if (!json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a JSON object"));
  }
  return json;
}

absl::StatusOr<Request> Request::FromCall(const pluginpb::ReconcileCall& call,
                                          std::shared_ptr<const std::atomic<bool>> cancelled) {
  Request req;
  if (!call.object().empty()) {
    absl::StatusOr<nlohmann::json> obj = ParseJsonObject(call.object(), "primary object");
    if (!obj.ok()) return obj.status();
    req.object_ = *std::move(obj);
  }
  absl::StatusOr<std::vector<Object>> children = ParseObjects(call.children(), "child");
  if (!children.ok()) return children.status();
  absl::StatusOr<std::vector<Object>> related = ParseObjects(call.related_objects(), "related");
  if (!related.ok()) return related.status();
  req.children_ = *std::move(children);
  req.related_ = *std::move(related);
  req.call_ = call;
  // The parsed forms replace the bytes: no need to hold every object twice.
  req.call_.clear_object();
  req.call_.clear_children();
  req.call_.clear_related_objects();
  req.cancelled_ = std::move(cancelled);
  return req;
}

absl::string_view Request::reason_name() const {
  switch (call_.reason()) {
    case pluginpb::REASON_PRIMARY_CHANGED:
      return "PrimaryChanged";
    case pluginpb::REASON_PRIMARY_DELETED:
      return "PrimaryDeleted";
    case pluginpb::REASON_CHILD_CHANGED:
      return "ChildChanged";
    case pluginpb::REASON_RELATED_CHANGED:
      return "RelatedChanged";
    case pluginpb::REASON_REQUEUE:
      return "Requeue";
    case pluginpb::REASON_RETRY:
      return "Retry";
    case pluginpb::REASON_RESYNC:
      return "Resync";
    case pluginpb::REASON_SCHEDULE:
      return "Schedule";
    case pluginpb::REASON_PLUGIN_STARTED:
      return "PluginStarted";
    default:
      return "Unspecified";
  }
}

absl::Time Request::deadline() const {
  if (!call_.has_deadline()) return absl::InfiniteFuture();
  return absl::FromUnixSeconds(call_.deadline().seconds()) +
         absl::Nanoseconds(call_.deadline().nanos());
}

bool Request::deleting() const {
  const nlohmann::json* ts = FindPath(object_, "metadata.deletionTimestamp");
  return ts != nullptr && !ts->is_null();
}

const nlohmann::json& Request::metadata() const { return MemberOrEmpty(object_, "metadata"); }
const nlohmann::json& Request::spec() const { return MemberOrEmpty(object_, "spec"); }
const nlohmann::json& Request::status() const { return MemberOrEmpty(object_, "status"); }
std::string Request::api_version() const { return StringAt(object_, "apiVersion"); }
std::string Request::kind() const { return StringAt(object_, "kind"); }
std::string Request::resource_version() const {
  return StringAt(object_, "metadata.resourceVersion");
}

int64_t Request::generation() const {
  const nlohmann::json* g = FindPath(object_, "metadata.generation");
  return g != nullptr && g->is_number_integer() ? g->get<int64_t>() : 0;
}

std::map<std::string, std::string> Request::labels() const {
  return StringMap(MemberOrEmpty(metadata(), "labels"));
}
std::map<std::string, std::string> Request::annotations() const {
  return StringMap(MemberOrEmpty(metadata(), "annotations"));
}

std::optional<std::string> Request::label(absl::string_view key) const {
  const nlohmann::json& labels = MemberOrEmpty(metadata(), "labels");
  auto it = labels.find(std::string(key));
  if (it == labels.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

std::optional<std::string> Request::annotation(absl::string_view key) const {
  const nlohmann::json& annotations = MemberOrEmpty(metadata(), "annotations");
  auto it = annotations.find(std::string(key));
  if (it == annotations.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

std::vector<const Object*> Request::ChildrenOfKind(absl::string_view kind,
                                                   absl::string_view api_version) const {
  return OfKind(children_, kind, api_version);
}

std::vector<const Object*> Request::RelatedOfKind(absl::string_view kind,
                                                  absl::string_view api_version) const {
  return OfKind(related_, kind, api_version);
}

const nlohmann::json* Request::Child(absl::string_view kind, absl::string_view name) const {
  for (const Object& o : children_) {
    if (o.kind == kind && o.name() == name) return &o.json;
  }
  return nullptr;
}

const nlohmann::json* Request::Related(absl::string_view kind, absl::string_view name,
                                       absl::string_view ns) const {
  for (const Object& o : related_) {
    if (o.kind == kind && o.name() == name && (ns.empty() || o.namespace_() == ns)) {
      return &o.json;
    }
  }
  return nullptr;
}

}  // namespace ctrlhost::sdk
