// Small operations on Kubernetes objects held as nlohmann::json, shared by the handlers and the
// built-in controllers of the embedded API server.
#ifndef CTRLHOST_RUNTIME_APISERVER_OBJECT_UTIL_H_
#define CTRLHOST_RUNTIME_APISERVER_OBJECT_UTIL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/resource_registry.h"

namespace ctrlhost::apiserver {

// A random RFC 4122 version 4 UUID.
std::string NewUid();
// Five characters from the alphabet Kubernetes uses for generateName suffixes.
std::string RandomNameSuffix();
// RFC 3339 with seconds precision in UTC: "2026-11-21T23:00:00Z".
std::string FormatTimestamp(absl::Time t);

// Parses a JSON request body; errors are BadRequest naming the parse problem.
absl::StatusOr<nlohmann::json> ParseJsonBody(absl::string_view body);
// The dotted paths ("metadata.name", "data.k", "spec.ports[0].port") of object members a
// JSON text gives more than once (at most 20); empty for invalid JSON. The parser keeps the last
// value of each; kube-apiserver (1.25+) warns about each duplicate, or refuses the body with
// fieldValidation=Strict.
std::vector<std::string> DuplicateJsonFields(absl::string_view body);

// Parses a JSON or YAML body according to its content type (application/json,
// application/yaml); others are UnsupportedMediaType.
absl::StatusOr<nlohmann::json> ParseObjectBody(absl::string_view content_type,
                                               absl::string_view body);

// metadata.labels as a map (empty when absent or malformed).
std::map<std::string, std::string> LabelsOf(const nlohmann::json& object);
// The labels of the object `json` (as LabelsOf would give after a full parse); used by the
// store to index objects. Reads only metadata.labels without building a JSON tree.
std::map<std::string, std::string> ExtractLabels(absl::string_view json);

// metadata.uid ("" when absent) and the uids of metadata.ownerReferences of the object `json`,
// read without building a JSON tree (as cheap as a scan: the built-in controllers read them
// from every written object). `ok` is false when `json` is not a JSON object.
struct OwnershipFields {
  bool ok = false;
  std::string uid;
  std::vector<std::string> owner_uids;
};
OwnershipFields ReadOwnership(absl::string_view json);

// String field of metadata, "" when absent.
std::string MetaString(const nlohmann::json& object, const char* field);
bool HasFinalizer(const nlohmann::json& object, absl::string_view finalizer);
void RemoveFinalizer(nlohmann::json& object, absl::string_view finalizer);
bool IsBeingDeleted(const nlohmann::json& object);

// The object as served at `r`'s version from its stored form, and back.
nlohmann::json ToServed(const ResourceInfo& r, nlohmann::json stored);
nlohmann::json ToStored(const ResourceInfo& r, nlohmann::json served);

// Everything of an object except metadata and status: what `metadata.generation` tracks.
bool SpecChanged(const nlohmann::json& a, const nlohmann::json& b);
// True if the two objects are equal apart from resourceVersion and managedFields timestamps.
bool SameObject(const nlohmann::json& a, const nlohmann::json& b);

// The value of a dotted field path ("metadata.name", "involvedObject.kind") as a string for
// field selectors: strings as is, numbers and booleans printed, absent as "".
std::string FieldValue(const nlohmann::json& object, absl::string_view path);

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_OBJECT_UTIL_H_
