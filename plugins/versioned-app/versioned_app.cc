#include "plugins/versioned-app/versioned_app.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "sdk/cpp/builders.h"
#include "sdk/cpp/handlers.h"
#include "sdk/cpp/operator_status.h"
#include "sdk/cpp/resource_sets.h"
#include "sdk/cpp/result.h"
#include "sdk/cpp/stage_callbacks.h"
#include "sdk/cpp/tasks.h"

namespace ctrlhost::versioned_app {
namespace {

constexpr char kApp[] = "versioned-app";
constexpr char kVersionLabel[] = "app.kubernetes.io/version";
constexpr char kDefaultImage[] = "registry.example/app";
constexpr int64_t kMetricsPort = 9090;

// The validated spec.
struct Spec {
  std::string version;
  SemVer semver;
  std::string image;
  int64_t replicas = 1;
  nlohmann::json config = nlohmann::json::object();
};

absl::StatusOr<Spec> ParseSpec(const nlohmann::json& spec) {
  Spec out;
  auto version = spec.find("version");
  if (version == spec.end() || !version->is_string()) {
    return absl::InvalidArgumentError("spec.version is required (MAJOR.MINOR.PATCH)");
  }
  out.version = version->get<std::string>();
  absl::StatusOr<SemVer> semver = ParseSemVer(out.version);
  if (!semver.ok()) return semver.status();
  out.semver = *semver;
  out.image = kDefaultImage;
  if (auto image = spec.find("image"); image != spec.end() && !image->is_null()) {
    if (!image->is_string() || image->get<std::string>().empty()) {
      return absl::InvalidArgumentError("spec.image must be a non-empty string");
    }
    out.image = image->get<std::string>();
  }
  if (auto replicas = spec.find("replicas"); replicas != spec.end() && !replicas->is_null()) {
    if (!replicas->is_number_integer() || replicas->get<int64_t>() < 0 ||
        replicas->get<int64_t>() > 100) {
      return absl::InvalidArgumentError("spec.replicas must be an integer from 0 to 100");
    }
    out.replicas = replicas->get<int64_t>();
  }
  if (auto config = spec.find("config"); config != spec.end() && !config->is_null()) {
    if (!config->is_object()) {
      return absl::InvalidArgumentError("spec.config must be a map of strings");
    }
    for (auto it = config->begin(); it != config->end(); ++it) {
      if (!it->is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("spec.config.", it.key(), " must be a string"));
      }
    }
    out.config = *config;
  }
  return out;
}

bool IsDnsPart(absl::string_view s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (char c : s) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-' || c == '.')) return false;
  }
  return absl::ascii_isalnum(s.front()) && absl::ascii_isalnum(s.back());
}

// The major version when spec.version parses, else -1.
int MajorOf(const sdk::Request& req) {
  auto it = req.spec().find("version");
  if (it == req.spec().end() || !it->is_string()) return -1;
  absl::StatusOr<SemVer> v = ParseSemVer(it->get<std::string>());
  return v.ok() ? v->major : -1;
}

std::string VersionLabelOf(const nlohmann::json& obj) {
  const nlohmann::json* label = sdk::FindPath(obj, "metadata.labels");
  if (label == nullptr || !label->is_object()) return "";
  auto it = label->find(kVersionLabel);
  return it != label->end() && it->is_string() ? it->get<std::string>() : "";
}

// The answer for a spec no retry can fix: terminal error, Warning event, phase Error.
sdk::Result InvalidSpec(const sdk::Request& req, absl::string_view message) {
  sdk::Result result = sdk::Result::TerminalError(message);
  result.Event(sdk::EventType::kWarning, "InvalidSpec", message);
  sdk::SetOperatorStatus(req,
                         {.operator_version = kOperatorVersion,
                          .failure = std::string(message),
                          .failure_reason = "InvalidSpec"},
                         &result);
  return result;
}

// What the stage callbacks of one reconcile tell its status step.
struct PassNotes {
  std::vector<std::string> created;  // post-create messages
  std::string refused;               // the refused downgrade, if any
};

sdk::StageCallbacks DeploymentCallbacks(const std::shared_ptr<PassNotes>& notes,
                                        const std::string& set) {
  sdk::StageCallbacks callbacks;
  callbacks.On("apps/v1", "Deployment", sdk::Stage::kPreUpdate, "refuse-downgrade",
               [notes](const sdk::Request&, sdk::Stage, nlohmann::json* desired,
                       const nlohmann::json* current) -> absl::Status {
                 const std::string from = VersionLabelOf(*current);
                 const std::string to = VersionLabelOf(*desired);
                 absl::StatusOr<SemVer> old_version = ParseSemVer(from);
                 absl::StatusOr<SemVer> new_version = ParseSemVer(to);
                 if (!old_version.ok() || !new_version.ok() || !(*new_version < *old_version)) {
                   return absl::OkStatus();
                 }
                 notes->refused = absl::StrCat("downgrade from ", from, " to ", to, " refused");
                 return absl::InvalidArgumentError(notes->refused);
               });
  callbacks.On("apps/v1", "Deployment", sdk::Stage::kPostCreate, "record-created",
               [notes, set](const sdk::Request&, sdk::Stage, nlohmann::json* desired,
                            const nlohmann::json*) -> absl::Status {
                 notes->created.push_back(absl::StrCat(
                     "Deployment ", (*desired)["metadata"].value("name", ""), " created at ",
                     VersionLabelOf(*desired), " by resource set ", set));
                 return absl::OkStatus();
               });
  return callbacks;
}

sdk::Result Reconcile(const std::string& hold_file, const sdk::Request& req,
                      const nlohmann::json& context) {
  if (!req.exists() || req.deleting()) return sdk::Result();  // children go by owner reference
  const std::string set = context.value("set", "");
  absl::StatusOr<Spec> parsed = ParseSpec(req.spec());
  if (!parsed.ok()) return InvalidSpec(req, parsed.status().message());
  const Spec spec = *std::move(parsed);
  if (set == "v1" && spec.semver.major != 1) {
    return InvalidSpec(req, absl::StrCat("spec.version ", spec.version, ": major version ",
                                         spec.semver.major, " is not served (1 or 2)"));
  }
  bool held = false;
  if (!hold_file.empty()) {
    absl::StatusOr<HoldList> holds = ReadHoldFile(hold_file);
    if (!holds.ok()) return sdk::Result::RetryableError(holds.status().message());
    held = holds->keys.count(absl::StrCat(req.namespace_(), "/", req.name())) > 0;
  }

  const std::string name = req.name();
  const std::string config_name = name + "-config";
  const nlohmann::json labels = sdk::CommonLabels(kApp, name);
  // Only the Deployment carries the version: it is what the downgrade check and readiness read.
  nlohmann::json versioned_labels = labels;
  versioned_labels[kVersionLabel] = spec.version;
  const nlohmann::json selector = sdk::SelectorLabels(kApp, name);
  const int64_t metrics_port = context.value("metricsPort", int64_t{0});
  const bool v2 = set == "v2";

  sdk::DependentChain chain;
  sdk::Dependent config{
      "config", "v1", "ConfigMap", [=](const sdk::Request&) -> absl::StatusOr<nlohmann::json> {
        return sdk::BuildConfigMap({.name = config_name, .labels = labels}, spec.config);
      }};
  // The precondition: an object on hold keeps its Deployment and Service as they are.
  config.on_pass = [held](const sdk::Request&, const nlohmann::json&, const nlohmann::json*,
                          sdk::PassContext* ctx) {
    if (held) ctx->CancelPass("on hold in the hold file");
    return absl::OkStatus();
  };
  chain.Add(std::move(config));
  if (v2) {
    chain.Add({"service-account", "v1", "ServiceAccount",
               [=](const sdk::Request&) -> absl::StatusOr<nlohmann::json> {
                 return sdk::BuildServiceAccount({.name = name, .labels = labels});
               }});
  }
  chain.Add({"deployment", "apps/v1", "Deployment",
             [=](const sdk::Request&) -> absl::StatusOr<nlohmann::json> {
               absl::StatusOr<std::string> hash = sdk::ConfigHash(spec.config);
               if (!hash.ok()) return hash.status();
               nlohmann::json ports = {{{"name", "http"}, {"containerPort", 8080}}};
               if (metrics_port > 0) {
                 ports.push_back({{"name", "metrics"}, {"containerPort", metrics_port}});
               }
               nlohmann::json container = {
                   {"name", "app"},
                   {"image", absl::StrCat(spec.image, ":", spec.version)},
                   {"ports", ports},
                   {"envFrom", {{{"configMapRef", {{"name", config_name}}}}}},
               };
               nlohmann::json pod_spec = nlohmann::json::object();
               if (v2) pod_spec["serviceAccountName"] = name;
               return sdk::BuildDeployment(
                   {.name = name,
                    .labels = versioned_labels,
                    .selector = selector,
                    .replicas = spec.replicas,
                    .containers = nlohmann::json::array({container}),
                    .pod_annotations = {{sdk::kConfigHashAnnotation, *hash}},
                    .pod_spec = pod_spec.empty() ? nlohmann::json() : pod_spec});
             },
             nullptr,
             // Ready once it runs the target version (the test servers run no pods).
             [version = spec.version](const nlohmann::json& current) {
               return VersionLabelOf(current) == version;
             }});
  chain.Add(
      {"service", "v1", "Service", [=](const sdk::Request&) -> absl::StatusOr<nlohmann::json> {
         std::vector<sdk::ServicePort> ports = {
             {.name = "http", .port = 80, .target_port = "http"}};
         if (metrics_port > 0) {
           ports.push_back({.name = "metrics", .port = metrics_port, .target_port = "metrics"});
         }
         return sdk::BuildService(
             {.name = name, .labels = labels, .selector = selector, .ports = ports});
       }});
  auto notes = std::make_shared<PassNotes>();
  chain.WithCallbacks(DeploymentCallbacks(notes, set));
  return chain.Build([notes, set, spec, held](const sdk::Request& r, const sdk::ChainState& state,
                                              sdk::Result* result) {
    for (const std::string& message : notes->created) {
      result->Event(sdk::EventType::kNormal, "DeploymentCreated", message);
    }
    const bool failed =
        result->error().has_value() && result->error()->kind == sdk::ErrorKind::kTerminal;
    if (!notes->refused.empty()) {
      result->Event(sdk::EventType::kWarning, "DowngradeRefused", notes->refused);
    }
    // A failed step leaves the chain not ready (ChainState::failed_at), as in every SDK.
    const bool ready = state.all_ready();
    std::string message;
    if (result->error().has_value()) {
      message = "";
    } else if (held) {
      message = "on hold: listed in the hold file";
    } else if (!ready) {
      message = absl::StrCat("waiting for ", absl::StrJoin(state.pending, ", "));
    }
    result->Status()["resourceSet"] = set;
    sdk::SetOperatorStatus(
        r,
        {.operator_version = kOperatorVersion,
         .target_version = spec.version,
         .children_ready = ready,
         .message = message,
         .failure = failed ? result->error()->message : "",
         .failure_reason = notes->refused.empty() ? "ReconcileFailed" : "DowngradeRefused"},
        result);
  })(req);
}

// Polls the hold file and enqueues every object whose hold state changed (all listed ones on
// the first read). Problems with the file are logged once each, not retried faster.
absl::Status PollHoldFile(const std::string& path, sdk::TaskContext& ctx) {
  std::set<std::string> previous;
  std::string last_problem;
  do {
    if (path.empty()) continue;
    absl::StatusOr<HoldList> holds = ReadHoldFile(path);
    std::string problem;
    if (!holds.ok()) {
      problem = std::string(holds.status().message());
    } else if (!holds->malformed.empty()) {
      problem =
          absl::StrCat("hold file ", path,
                       ": not namespace/name, ignored: ", absl::StrJoin(holds->malformed, ", "));
    }
    if (problem != last_problem && !problem.empty()) {
      std::fprintf(stderr, "WARNING versioned-app: %s\n", problem.c_str());
    }
    last_problem = problem;
    if (!holds.ok()) continue;
    std::vector<std::string> changed;
    for (const std::string& key : holds->keys) {
      if (previous.count(key) == 0) changed.push_back(key);
    }
    for (const std::string& key : previous) {
      if (holds->keys.count(key) == 0) changed.push_back(key);
    }
    for (const std::string& key : changed) {
      std::pair<std::string, std::string> parts = absl::StrSplit(key, absl::MaxSplits('/', 1));
      if (absl::Status s = ctx.Enqueue(parts.first, parts.second); !s.ok()) {
        std::fprintf(stderr, "WARNING versioned-app: enqueue %s: %s\n", key.c_str(),
                     std::string(s.message()).c_str());
      }
    }
    previous = std::move(holds->keys);
  } while (!ctx.Wait(absl::Seconds(1)));
  return absl::OkStatus();
}

}  // namespace

bool SemVer::operator<(const SemVer& o) const {
  if (major != o.major) return major < o.major;
  if (minor != o.minor) return minor < o.minor;
  return patch < o.patch;
}

absl::StatusOr<SemVer> ParseSemVer(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, '.');
  auto invalid = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.version \"", text, "\" is not MAJOR.MINOR.PATCH"));
  };
  if (parts.size() != 3) return invalid();
  int numbers[3];
  for (int i = 0; i < 3; ++i) {
    if (parts[i].empty() || parts[i].size() > 9) return invalid();
    for (char c : parts[i]) {
      if (!absl::ascii_isdigit(c)) return invalid();
    }
    if (!absl::SimpleAtoi(parts[i], &numbers[i])) return invalid();
  }
  return SemVer{numbers[0], numbers[1], numbers[2]};
}

absl::StatusOr<HoldList> ReadHoldFile(const std::string& path) {
  HoldList out;
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return out;
    return absl::UnavailableError(absl::StrCat("hold file ", path, ": ", std::strerror(errno)));
  }
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text.front() == '#') continue;
    std::vector<absl::string_view> parts = absl::StrSplit(text, '/');
    if (parts.size() == 2 && IsDnsPart(parts[0], 63) && IsDnsPart(parts[1], 253)) {
      out.keys.insert(std::string(text));
    } else {
      out.malformed.push_back(std::string(text));
    }
  }
  if (in.bad()) return absl::UnavailableError(absl::StrCat("hold file ", path, ": read error"));
  return out;
}

sdk::ControllerBuilder MakeController(std::string hold_file) {
  sdk::ResourceRouter router;
  auto reconcile = [hold_file](const sdk::Request& req, const nlohmann::json& context) {
    return Reconcile(hold_file, req, context);
  };
  // Exactly one set per object: the Add calls cannot fail (distinct names, all functions set).
  (void)router.Add({"v1", [](const sdk::Request& r) { return MajorOf(r) != 2; }, reconcile,
                    [](const sdk::Request&) -> absl::StatusOr<nlohmann::json> {
                      return nlohmann::json{{"set", "v1"}};
                    }});
  (void)router.Add({"v2", [](const sdk::Request& r) { return MajorOf(r) == 2; }, reconcile,
                    [](const sdk::Request&) -> absl::StatusOr<nlohmann::json> {
                      return nlohmann::json{{"set", "v2"}, {"metricsPort", kMetricsPort}};
                    }});
  sdk::ControllerBuilder builder("versioned-app");
  builder.For(kGroup, kVersion, kKind)
      .Owns("apps", "v1", "Deployment")
      .Owns("", "v1", "Service")
      .Owns("", "v1", "ConfigMap")
      .Owns("", "v1", "ServiceAccount")
      .MaxConcurrent(4)
      .Reconcile(router.Build())  // shares the router's sets
      .BackgroundTask("hold-file",
                      [hold_file](sdk::TaskContext& ctx) { return PollHoldFile(hold_file, ctx); });
  return builder;
}

}  // namespace ctrlhost::versioned_app
