#include "plugins/webapp/webapp.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sdk/cpp/builders.h"
#include "sdk/cpp/handlers.h"
#include "sdk/cpp/result.h"

namespace ctrlhost::webapp {
namespace {

// The validated spec.
struct Spec {
  std::string image;
  int64_t replicas = 1;
  int64_t port = 8080;
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> config;
};

absl::StatusOr<std::map<std::string, std::string>> StringMapAt(const nlohmann::json& spec,
                                                               const char* field) {
  std::map<std::string, std::string> out;
  auto it = spec.find(field);
  if (it == spec.end() || it->is_null()) return out;
  if (!it->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("spec.", field, " must be a map of strings"));
  }
  for (auto e = it->begin(); e != it->end(); ++e) {
    if (!e->is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.", field, ".", e.key(), " must be a string"));
    }
    out[e.key()] = e->get<std::string>();
  }
  return out;
}

absl::StatusOr<int64_t> IntAt(const nlohmann::json& spec, const char* field, int64_t fallback,
                              int64_t min, int64_t max) {
  auto it = spec.find(field);
  if (it == spec.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) {
    return absl::InvalidArgumentError(absl::StrCat("spec.", field, " must be an integer"));
  }
  const int64_t v = it->get<int64_t>();
  if (v < min || v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.", field, " must be between ", min, " and ", max, ", not ", v));
  }
  return v;
}

absl::StatusOr<Spec> ParseSpec(const nlohmann::json& spec) {
  Spec out;
  auto image = spec.find("image");
  if (image == spec.end() || !image->is_string() || image->get<std::string>().empty()) {
    return absl::InvalidArgumentError("spec.image is required (a container image reference)");
  }
  out.image = image->get<std::string>();
  absl::StatusOr<int64_t> replicas = IntAt(spec, "replicas", 1, 0, 1000);
  if (!replicas.ok()) return replicas.status();
  absl::StatusOr<int64_t> port = IntAt(spec, "port", 8080, 1, 65535);
  if (!port.ok()) return port.status();
  absl::StatusOr<std::map<std::string, std::string>> env = StringMapAt(spec, "env");
  if (!env.ok()) return env.status();
  absl::StatusOr<std::map<std::string, std::string>> config = StringMapAt(spec, "config");
  if (!config.ok()) return config.status();
  out.replicas = *replicas;
  out.port = *port;
  out.env = *std::move(env);
  out.config = *std::move(config);
  return out;
}

bool IsDnsName(absl::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-' || c == '.')) return false;
  }
  return absl::ascii_isalnum(s.front()) && absl::ascii_isalnum(s.back());
}

// The children, from the SDK's builders (sdk/cpp/builders.h): the same objects in every
// language's WebApp plugin, checked by e2e/conformance.
absl::Status DesireChildren(const sdk::Request& req, const Spec& spec, sdk::Result* result) {
  const std::string& name = req.name();
  const std::string config_name = name + "-config";
  const nlohmann::json labels = sdk::CommonLabels("webapp", name);
  const nlohmann::json selector = sdk::SelectorLabels("webapp", name);
  const nlohmann::json config = spec.config;
  // The pod template carries the configuration's hash, so pods restart when (and only when)
  // the configuration changes.
  absl::StatusOr<std::string> hash = sdk::ConfigHash(config);
  if (!hash.ok()) return hash.status();
  result->Desire(sdk::BuildConfigMap({.name = config_name, .labels = labels}, config));

  nlohmann::json env = nlohmann::json::array();
  for (const auto& [k, v] : spec.env) env.push_back({{"name", k}, {"value", v}});
  nlohmann::json container = {
      {"name", "web"},
      {"image", spec.image},
      {"ports", {{{"name", "http"}, {"containerPort", spec.port}}}},
      {"envFrom", {{{"configMapRef", {{"name", config_name}}}}}},
  };
  if (!env.empty()) container["env"] = env;
  result->Desire(sdk::BuildDeployment({.name = name,
                                       .labels = labels,
                                       .selector = selector,
                                       .replicas = spec.replicas,
                                       .containers = nlohmann::json::array({container}),
                                       .pod_annotations = {{kConfigHashAnnotation, *hash}}}));
  result->Desire(
      sdk::BuildService({.name = name,
                         .labels = labels,
                         .selector = selector,
                         .ports = {{.name = "http", .port = spec.port, .target_port = "http"}}}));
  return absl::OkStatus();
}

void ReportStatus(const sdk::Request& req, const Spec& spec, sdk::Result* result) {
  int64_t ready = 0;
  if (const nlohmann::json* dep = req.Child("Deployment", req.name())) {
    const nlohmann::json* r = sdk::FindPath(*dep, "status.readyReplicas");
    if (r != nullptr && r->is_number_integer()) ready = r->get<int64_t>();
  }
  nlohmann::json& status = result->Status();
  status["observedGeneration"] = req.generation();
  status["replicas"] = spec.replicas;
  status["readyReplicas"] = ready;
  status["url"] = absl::StrCat("http://", req.name(), ".", req.namespace_(), ".svc:", spec.port);
  const std::string progress = absl::StrCat(ready, "/", spec.replicas, " replicas ready");
  if (ready >= spec.replicas) {
    result->SetCondition("Ready", true, "AllReplicasReady", progress);
    result->SetCondition("Progressing", false, "Stable", progress);
  } else {
    result->SetCondition("Ready", false, "ReplicasNotReady", progress);
    result->SetCondition("Progressing", true, "RollingOut", progress);
  }
}

sdk::Result Upsert(RecordStore* records, const sdk::Request& req) {
  absl::StatusOr<Spec> spec = ParseSpec(req.spec());
  if (!spec.ok()) {
    // Retrying cannot fix the spec; the next edit of the WebApp reconciles it again. Children
    // that exist are kept as they are.
    sdk::Result result = sdk::Result::TerminalError(spec.status().message());
    result.Status()["observedGeneration"] = req.generation();
    result.SetCondition("Ready", false, "InvalidSpec", spec.status().message());
    result.SetCondition("Progressing", false, "InvalidSpec", spec.status().message());
    result.Event(sdk::EventType::kWarning, "InvalidSpec", spec.status().message());
    return result;
  }
  sdk::Result result;
  if (absl::Status s = DesireChildren(req, *spec, &result); !s.ok()) {
    return sdk::Result::FromStatus(s);  // not reached: the spec holds strings only
  }
  ReportStatus(req, *spec, &result);
  const nlohmann::json record = {{"uid", req.uid()},           {"namespace", req.namespace_()},
                                 {"name", req.name()},         {"image", spec->image},
                                 {"replicas", spec->replicas}, {"port", spec->port}};
  if (absl::Status s = records->Write(req.namespace_(), req.name(), record); !s.ok()) {
    // The children and status are still applied; the record is retried with backoff.
    result.SetError(s.code() == absl::StatusCode::kInvalidArgument ? sdk::ErrorKind::kTerminal
                                                                   : sdk::ErrorKind::kRetryable,
                    absl::StrCat("external record: ", s.message()));
  }
  return result;
}

sdk::Result Delete(RecordStore* records, const sdk::Request& req) {
  if (!req.finalizing()) return sdk::Result();  // deletion notice: nothing left to forget
  absl::Status s = records->Remove(req.namespace_(), req.name());
  if (!s.ok()) {
    return sdk::Result::RetryableError(absl::StrCat("removing the external record: ", s.message()));
  }
  sdk::Result result;
  result.Event(sdk::EventType::kNormal, "RecordRemoved", "external record removed");
  return result;  // sdk::Handlers adds Finalized()
}

}  // namespace

std::string RecordStore::DefaultDir() {
  if (const char* dir = std::getenv("WEBAPP_RECORD_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  const char* tmp = std::getenv("TMPDIR");
  return absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/ctrlhost-webapp-records");
}

absl::StatusOr<std::string> RecordStore::PathFor(absl::string_view ns,
                                                 absl::string_view name) const {
  if (!IsDnsName(ns) || !IsDnsName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", ns, "/", name, "\" is not a valid namespace/name"));
  }
  return absl::StrCat(dir_, "/", ns, "_", name, ".json");
}

absl::Status RecordStore::Write(absl::string_view ns, absl::string_view name,
                                const nlohmann::json& record) {
  absl::StatusOr<std::string> path = PathFor(ns, name);
  if (!path.ok()) return path.status();
  const std::string text = record.dump(2) + "\n";
  if (std::optional<nlohmann::json> old = Read(ns, name); old.has_value() && *old == record) {
    return absl::OkStatus();
  }
  if (mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::UnavailableError(absl::StrCat("mkdir ", dir_, ": ", std::strerror(errno)));
  }
  const std::string tmp = *path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.good()) return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path->c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("rename ", tmp, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status RecordStore::Remove(absl::string_view ns, absl::string_view name) {
  absl::StatusOr<std::string> path = PathFor(ns, name);
  if (!path.ok()) return path.status();
  if (std::remove(path->c_str()) != 0 && errno != ENOENT) {
    return absl::UnavailableError(absl::StrCat("remove ", *path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::optional<nlohmann::json> RecordStore::Read(absl::string_view ns,
                                                absl::string_view name) const {
  absl::StatusOr<std::string> path = PathFor(ns, name);
  if (!path.ok()) return std::nullopt;
  std::ifstream in(*path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json json = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return std::nullopt;
  return json;
}

sdk::ControllerBuilder MakeController(RecordStore* records) {
  sdk::ControllerBuilder builder("webapp");
  builder.For(kGroup, kVersion, kKind)
      .Owns("apps", "v1", "Deployment")
      .Owns("", "v1", "Service")
      .Owns("", "v1", "ConfigMap")
      .Finalizer(kFinalizer)
      .MaxConcurrent(4)
      .Reconcile(sdk::Handlers()
                     .OnUpsert([records](const sdk::Request& r) { return Upsert(records, r); })
                     .OnDelete([records](const sdk::Request& r) { return Delete(records, r); })
                     .Build());
  return builder;
}

}  // namespace ctrlhost::webapp
