#include "runtime/controller/type_meta.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "simdjson.h"

namespace ctrlhost::controller {
namespace {

// A JSON string literal (invalid UTF-8 replaced, never an exception).
std::string Quote(absl::string_view s) {
  return nlohmann::json(std::string(s))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string WithTypeMeta(absl::string_view json, absl::string_view api_version,
                         absl::string_view kind) {
  thread_local simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (parser.parse(json.data(), json.size()).get_object().get(object) != simdjson::SUCCESS) {
    return std::string(json);
  }
  const bool has_api_version = object["apiVersion"].error() == simdjson::SUCCESS;
  const bool has_kind = object["kind"].error() == simdjson::SUCCESS;
  if (has_api_version && has_kind) return std::string(json);
  std::string members;
  if (!has_api_version) {
    absl::StrAppend(&members, "\"apiVersion\":", Quote(api_version));
  }
  if (!has_kind) {
    if (!members.empty()) members += ',';
    absl::StrAppend(&members, "\"kind\":", Quote(kind));
  }
  if (object.size() > 0) members += ',';
  // A valid JSON object starts with '{' after optional whitespace.
  const size_t brace = json.find('{');
  return absl::StrCat(json.substr(0, brace + 1), members, json.substr(brace + 1));
}

std::string ShapeObject(absl::string_view json, absl::string_view api_version,
                        absl::string_view kind, bool metadata_only,
                        const std::vector<FieldPath>& strip) {
  if (!metadata_only && strip.empty()) return WithTypeMeta(json, api_version, kind);
  nlohmann::json object =
      nlohmann::json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded() || !object.is_object()) return std::string(json);
  if (!object.contains("apiVersion")) object["apiVersion"] = std::string(api_version);
  if (!object.contains("kind")) object["kind"] = std::string(kind);
  if (metadata_only) {
    nlohmann::json reduced = nlohmann::json::object();
    for (const char* field : {"apiVersion", "kind", "metadata"}) {
      auto it = object.find(field);
      if (it != object.end()) reduced[field] = std::move(*it);
    }
    object = std::move(reduced);
  }
  for (const FieldPath& path : strip) path.Erase(&object);
  return object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ctrlhost::controller
