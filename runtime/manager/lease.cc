#include "runtime/manager/lease.h"

#include <cmath>

#include "absl/status/status.h"

namespace ctrlhost::manager {

using nlohmann::json;

kube::ResourceRef LeaseRef(absl::string_view lease_namespace, absl::string_view name) {
  kube::ResourceRef ref;
  ref.group = "coordination.k8s.io";
  ref.version = "v1";
  ref.resource = "leases";
  ref.namespace_name = std::string(lease_namespace);
  ref.name = std::string(name);
  return ref;
}

int64_t LeaseSeconds(absl::Duration d) {
  return static_cast<int64_t>(std::ceil(absl::ToDoubleSeconds(d)));
}

std::string FormatMicroTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone());
}

std::string StringField(const json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

int64_t IntField(const json& object, const char* key, int64_t fallback) {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

absl::StatusOr<json> GetLease(kube::Client* client, const kube::ResourceRef& ref) {
  absl::StatusOr<std::string> got = client->Get(ref);
  if (!got.ok()) return got.status();
  json lease = json::parse(*got, nullptr, /*allow_exceptions=*/false);
  if (!lease.is_object()) return absl::DataLossError("the API server answered no JSON object");
  return lease;
}

absl::StatusOr<std::string> CreateLease(kube::Client* client, const kube::ResourceRef& ref,
                                        const json& lease) {
  kube::ResourceRef collection = ref;
  collection.name.clear();
  return client->Create(collection, lease.dump());
}

absl::StatusOr<std::string> UpdateLease(kube::Client* client, const kube::ResourceRef& ref,
                                        const json& lease) {
  return client->Update(ref, lease.dump());
}

}  // namespace ctrlhost::manager
