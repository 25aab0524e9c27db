// meta.k8s.io/v1 Table output, which `kubectl get` asks for: Name and Age for every kind, and
// a CRD's additionalPrinterColumns (simple JSONPaths such as .spec.replicas).
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "runtime/apiserver/handlers_internal.h"
#include "runtime/apiserver/object_util.h"

namespace ctrlhost::apiserver {
namespace {

std::string Age(absl::string_view created, absl::Time now) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, created, &t, &err)) return "<unknown>";
  const int64_t s = absl::ToInt64Seconds(now - t);
  if (s < 0) return "0s";
  if (s < 120) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrCat(s / 60, "m");
  if (s < 48 * 3600) return absl::StrCat(s / 3600, "h");
  return absl::StrCat(s / 86400, "d");
}

nlohmann::json JsonPathValue(const nlohmann::json& obj, absl::string_view path) {
  path = absl::StripPrefix(path, "{");
  path = absl::StripSuffix(path, "}");
  path = absl::StripPrefix(path, ".");
  const nlohmann::json* cur = &obj;
  for (absl::string_view part : absl::StrSplit(path, '.', absl::SkipEmpty())) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(std::string(part));
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return *cur;
}

}  // namespace

bool WantsTable(absl::string_view accept) { return absl::StrContains(accept, "as=Table"); }

nlohmann::json TableOf(const ResourceInfo& r, const std::vector<ObjectPtr>& items, int64_t revision,
                       const std::string& continue_token, absl::Time now) {
  nlohmann::json columns = nlohmann::json::array();
  columns.push_back({{"name", "Name"},
                     {"type", "string"},
                     {"format", "name"},
                     {"description", "Name of the object"},
                     {"priority", 0}});
  for (const auto& c : r.printer_columns) {
    columns.push_back({{"name", c.value("name", "")},
                       {"type", c.value("type", "string")},
                       {"format", c.value("format", "")},
                       {"description", c.value("description", "")},
                       {"priority", c.value("priority", 0)}});
  }
  columns.push_back({{"name", "Age"},
                     {"type", "string"},
                     {"format", ""},
                     {"description", "Time since creation"},
                     {"priority", 0}});
  nlohmann::json rows = nlohmann::json::array();
  for (const ObjectPtr& o : items) {
    nlohmann::json obj = nlohmann::json::parse(o->value, nullptr, false);
    if (obj.is_discarded()) continue;
    obj = ToServed(r, std::move(obj));
    nlohmann::json cells = {MetaString(obj, "name")};
    for (const auto& c : r.printer_columns) {
      nlohmann::json v = JsonPathValue(obj, c.value("jsonPath", ""));
      if (c.value("type", "") == "date" && v.is_string()) v = Age(v.get<std::string>(), now);
      cells.push_back(v);
    }
    cells.push_back(Age(MetaString(obj, "creationTimestamp"), now));
    nlohmann::json partial = {{"kind", "PartialObjectMetadata"},
                              {"apiVersion", "meta.k8s.io/v1"},
                              {"metadata", obj["metadata"]}};
    rows.push_back({{"cells", cells}, {"object", partial}});
  }
  nlohmann::json meta = {{"resourceVersion", std::to_string(revision)}};
  if (!continue_token.empty()) meta["continue"] = continue_token;
  return {{"kind", "Table"},
          {"apiVersion", "meta.k8s.io/v1"},
          {"metadata", meta},
          {"columnDefinitions", columns},
          {"rows", rows}};
}

}  // namespace ctrlhost::apiserver
