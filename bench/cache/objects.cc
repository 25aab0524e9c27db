#include "bench/cache/objects.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::bench {

// Deterministic filler text of `n` characters.
std::string Filler(size_t n, int64_t seed) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789 -_";
  std::string s(n, ' ');
  uint64_t x = static_cast<uint64_t>(seed) * 6364136223846793005ULL + 1442695040888963407ULL;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    s[i] = kAlphabet[(x >> 33) % (sizeof(kAlphabet) - 1)];
  }
  return s;
}

// A ~1 KB ConfigMap (stored size, with the server's metadata).
std::string ConfigMapJson(int64_t i) {
  nlohmann::json o = {{"apiVersion", "v1"},
                      {"kind", "ConfigMap"},
                      {"metadata",
                       {{"name", absl::StrFormat("cm-%06d", i)},
                        {"namespace", kNamespace},
                        {"labels", {{"app", "bench"}, {"shard", std::to_string(i % 16)}}}}},
                      {"data", {{"config.yaml", Filler(700, i)}, {"mode", "fast"}}}};
  return o.dump();
}

// A ~5 KB Pod-like object: a container spec and status of ~2.5 KB and managedFields of ~2.5 KB
// (two managers, fieldsV1 trees like a Deployment-owned Pod's).
std::string PodLikeJson(int64_t i, const std::string& owner_uid) {
  nlohmann::json env = nlohmann::json::array();
  for (int e = 0; e < 16; ++e) {
    env.push_back({{"name", absl::StrCat("ENV_VAR_", e)}, {"value", Filler(90, i * 100 + e)}});
  }
  nlohmann::json fields = nlohmann::json::object();
  for (int e = 0; e < 16; ++e) {
    fields[absl::StrCat("k:{\"name\":\"ENV_VAR_", e, "\"}")] = {
        {".", nlohmann::json::object()},
        {"f:name", nlohmann::json::object()},
        {"f:value", nlohmann::json::object()}};
  }
  nlohmann::json spec_fields = {
      {"f:containers",
       {{"k:{\"name\":\"app\"}",
         {{".", nlohmann::json::object()},
          {"f:env", fields},
          {"f:image", nlohmann::json::object()},
          {"f:imagePullPolicy", nlohmann::json::object()},
          {"f:name", nlohmann::json::object()},
          {"f:resources", {{"f:limits", {{"f:cpu", nlohmann::json::object()}}}}}}}}},
      {"f:dnsPolicy", nlohmann::json::object()},
      {"f:restartPolicy", nlohmann::json::object()}};
  nlohmann::json status_fields = {{"f:conditions",
                                   {{"k:{\"type\":\"Ready\"}",
                                     {{".", nlohmann::json::object()},
                                      {"f:lastTransitionTime", nlohmann::json::object()},
                                      {"f:status", nlohmann::json::object()},
                                      {"f:type", nlohmann::json::object()}}}}},
                                  {"f:hostIP", nlohmann::json::object()},
                                  {"f:phase", nlohmann::json::object()},
                                  {"f:podIP", nlohmann::json::object()},
                                  {"f:startTime", nlohmann::json::object()}};
  nlohmann::json managed = nlohmann::json::array(
      {{{"manager", "kube-controller-manager"},
        {"operation", "Update"},
        {"apiVersion", "v1"},
        {"time", "2026-11-22T01:00:00Z"},
        {"fieldsType", "FieldsV1"},
        {"fieldsV1",
         {{"f:metadata",
           {{"f:labels", {{".", nlohmann::json::object()}, {"f:app", nlohmann::json::object()}}},
            {"f:ownerReferences",
             {{".", nlohmann::json::object()},
              {absl::StrCat("k:{\"uid\":\"", owner_uid, "\"}"), nlohmann::json::object()}}}}},
          {"f:spec", spec_fields}}}},
       {{"manager", "kubelet"},
        {"operation", "Update"},
        {"apiVersion", "v1"},
        {"time", "2026-11-22T01:00:05Z"},
        {"fieldsType", "FieldsV1"},
        {"subresource", "status"},
        {"fieldsV1", {{"f:status", status_fields}}}}});
  nlohmann::json o = {{"apiVersion", absl::StrCat(kGroup, "/v1")},
                      {"kind", "PodLike"},
                      {"metadata",
                       {{"name", absl::StrFormat("pod-%06d", i)},
                        {"namespace", kNamespace},
                        {"labels", {{"app", "web"}, {"pod-template-hash", "7d9f8c6b5"}}},
                        {"ownerReferences",
                         {{{"apiVersion", "apps/v1"},
                           {"kind", "ReplicaSet"},
                           {"name", "web-7d9f8c6b5"},
                           {"uid", owner_uid},
                           {"controller", true}}}},
                        {"managedFields", managed}}},
                      {"spec",
                       {{"containers",
                         {{{"name", "app"},
                           {"image", "registry.example.com/web/app:1.2.3"},
                           {"imagePullPolicy", "IfNotPresent"},
                           {"env", env},
                           {"resources", {{"limits", {{"cpu", "500m"}}}}}}}},
                        {"dnsPolicy", "ClusterFirst"},
                        {"restartPolicy", "Always"},
                        {"nodeName", absl::StrCat("node-", i % 50)}}},
                      {"status",
                       {{"phase", "Running"},
                        {"hostIP", "10.0.0.1"},
                        {"podIP", absl::StrCat("10.1.", (i / 250) % 250, ".", i % 250)},
                        {"startTime", "2026-11-22T01:00:00Z"},
                        {"conditions",
                         {{{"type", "Ready"},
                           {"status", "True"},
                           {"lastTransitionTime", "2026-11-22T01:00:05Z"}}}}}}};
  return o.dump();
}

}  // namespace ctrlhost::bench
