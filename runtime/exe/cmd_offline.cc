#include "runtime/exe/cmd_offline.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "google/protobuf/util/json_util.h"
#include "runtime/cache/object.h"
#include "runtime/common/builtin_kinds.h"
#include "runtime/common/logging.h"
#include "runtime/common/mutex.h"
#include "runtime/common/yaml_json.h"
#include "runtime/controller/apply/validate.h"
#include "runtime/controller/reconcile.h"
#include "runtime/exe/command.h"
#include "runtime/exe/flags.h"
#include "runtime/kube/selector.h"
#include "runtime/plugin/supervisor.h"

namespace ctrlhost::exe {
namespace {

namespace fs = std::filesystem;

// Unix socket paths are limited to 108 bytes; a long $TMPDIR (Bazel's test sandbox) falls back
// to /tmp so that DIR/NAME-1.sock always fits.
constexpr size_t kMaxTmpDirForSockets = 60;
// How long the plugin gets to exit after SIGTERM before SIGKILL.
constexpr absl::Duration kStopGrace = absl::Seconds(5);
// Extra time, beyond --timeout, before we stop waiting for the supervisor or the session: they
// enforce --timeout themselves, this only bounds the wait if they did not.
constexpr absl::Duration kWaitSlack = absl::Seconds(10);

std::string GroupOf(absl::string_view api_version) {
  const size_t slash = api_version.find('/');
  return slash == absl::string_view::npos ? "" : std::string(api_version.substr(0, slash));
}

std::string ApiVersion(const pluginpb::GroupVersionKind& gvk) {
  return gvk.group().empty() ? gvk.version() : absl::StrCat(gvk.group(), "/", gvk.version());
}

std::string ControllerList(const pluginpb::DescribeResponse& describe) {
  std::vector<std::string> names;
  for (const pluginpb::ControllerSpec& c : describe.controllers()) {
    names.push_back(
        absl::StrCat(c.name(), " (", ApiVersion(c.primary()), " ", c.primary().kind(), ")"));
  }
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

const std::string* StringAt(const nlohmann::json& object, const char* field) {
  auto it = object.find(field);
  return it != object.end() && it->is_string() ? it->get_ptr<const std::string*>() : nullptr;
}

// Deeper JSON is shown as text: nlohmann's dump and destructor recurse, and a plugin's answer
// must not be able to overflow our stack.
constexpr int kMaxJsonDepth = 512;

// True when `text` nests arrays/objects deeper than kMaxJsonDepth (brackets in strings ignored).
bool TooDeep(const std::string& text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

// A bytes field as the JSON it holds; text that is not JSON (or nests too deep) stays a
// (UTF-8 sanitised) string.
nlohmann::json DecodeJsonBytes(const std::string& bytes) {
  if (!TooDeep(bytes)) {
    nlohmann::json value = nlohmann::json::parse(bytes, nullptr, /*allow_exceptions=*/false);
    if (!value.is_discarded()) return value;
  }
  const std::string quoted =
      nlohmann::json(bytes).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return nlohmann::json::parse(quoted, nullptr, /*allow_exceptions=*/false);
}

// The socket directory: fresh, private (mkdtemp creates it 0700), removed by the destructor.
class TempDir {
 public:
  static absl::StatusOr<std::unique_ptr<TempDir>> Create() {
    std::string base = "/tmp";
    const char* tmp = std::getenv("TMPDIR");
    if (tmp != nullptr && *tmp != '\0' && std::strlen(tmp) <= kMaxTmpDirForSockets) base = tmp;
    std::string templ = absl::StrCat(base, "/ctrlhost-test-XXXXXX");
    if (mkdtemp(templ.data()) == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("cannot create a socket directory under ",
                                                        base, ": ", std::strerror(errno)));
    }
    return std::unique_ptr<TempDir>(new TempDir(std::move(templ)));
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  const std::string path_;
};

// The plugin's name for logs and its socket: the command's base name as an RFC 1123 label.
std::string PluginName(const std::string& command) {
  std::string name = absl::AsciiStrToLower(fs::path(command).filename().string());
  for (char& c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) c = '-';
  }
  name = name.substr(0, 32);
  name.erase(0, name.find_first_not_of('-'));
  while (!name.empty() && name.back() == '-') name.pop_back();
  return name.empty() ? "plugin" : name;
}

std::string NewTraceId() {
  std::random_device random;
  const uint64_t high = (uint64_t{random()} << 32) | random();
  const uint64_t low = (uint64_t{random()} << 32) | random();
  return absl::StrFormat("%016x%016x", high, low);
}

bool Owns(const pluginpb::ControllerSpec& spec, absl::string_view api_version,
          absl::string_view kind) {
  const std::string group = GroupOf(api_version);
  return std::any_of(spec.owns().begin(), spec.owns().end(), [&](const pluginpb::OwnedKind& owned) {
    return owned.kind().group() == group && owned.kind().kind() == kind;
  });
}

pluginpb::RawObject ToRawObject(const FixtureDocument& doc) {
  pluginpb::RawObject raw;
  raw.set_api_version(*StringAt(doc.object, "apiVersion"));
  raw.set_kind(*StringAt(doc.object, "kind"));
  raw.set_object(doc.object.dump());
  return raw;
}

// What the host does for a finalizing request: the object has a deletionTimestamp and still
// carries the controller's finalizer. Fills in what the fixture leaves out.
void MakeFinalizing(const pluginpb::ControllerSpec& spec, nlohmann::json* object) {
  nlohmann::json& meta = (*object)["metadata"];
  if (!meta.contains("deletionTimestamp")) {
    meta["deletionTimestamp"] =
        absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
  }
  if (spec.finalizer().empty()) return;
  nlohmann::json& finalizers = meta["finalizers"];
  if (!finalizers.is_array()) finalizers = nlohmann::json::array();
  if (std::find(finalizers.begin(), finalizers.end(), spec.finalizer()) == finalizers.end()) {
    finalizers.push_back(spec.finalizer());
  }
}

kube::ResourceMapping MappingOf(const pluginpb::GroupVersionKind& gvk, bool namespaced) {
  kube::ResourceMapping mapping;
  mapping.group = gvk.group();
  mapping.version = gvk.version();
  mapping.kind = gvk.kind();
  // Only used to build request paths, which --check never sends.
  mapping.resource = absl::StrCat(absl::AsciiStrToLower(gvk.kind()), "s");
  mapping.namespaced = namespaced;
  // The applier refuses status and conditions for a primary without one, as against a cluster.
  mapping.has_status = common::HasStatusSubresource(gvk.group(), gvk.kind());
  return mapping;
}

// The controller owner reference of a fixture object, or null.
const nlohmann::json* ControllerRef(const nlohmann::json& object) {
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return nullptr;
  auto refs = meta->find("ownerReferences");
  if (refs == meta->end() || !refs->is_array()) return nullptr;
  for (const nlohmann::json& ref : *refs) {
    auto controller = ref.find("controller");
    if (ref.is_object() && controller != ref.end() && *controller == true) return &ref;
  }
  return nullptr;
}

// How a child fixture relates to the primary, as the host's owner-uid index would see it.
enum class Control { kNoOwnerReferences, kPrimary, kOther };
Control ControlOf(const nlohmann::json& child, const pluginpb::ControllerSpec& spec,
                  const nlohmann::json& primary) {
  auto meta = child.find("metadata");
  if (meta == child.end() || !meta->is_object() || !meta->contains("ownerReferences")) {
    return Control::kNoOwnerReferences;
  }
  const nlohmann::json* ref = ControllerRef(child);
  if (ref == nullptr) return Control::kOther;
  const std::string* uid = StringAt(primary["metadata"], "uid");
  if (uid != nullptr && !uid->empty()) {
    const std::string* ref_uid = StringAt(*ref, "uid");
    return ref_uid != nullptr && *ref_uid == *uid ? Control::kPrimary : Control::kOther;
  }
  // A fixture primary without a uid: its kind and name identify it.
  const std::string* api_version = StringAt(*ref, "apiVersion");
  const std::string* kind = StringAt(*ref, "kind");
  const std::string* name = StringAt(*ref, "name");
  return api_version != nullptr && kind != nullptr && name != nullptr &&
                 GroupOf(*api_version) == spec.primary().group() &&
                 *kind == spec.primary().kind() && *name == *StringAt(primary["metadata"], "name")
             ? Control::kPrimary
             : Control::kOther;
}

// `child` with the controller owner reference to the primary that the host sets when it applies
// a child (the host passes only children the primary controls).
void AddControllerReference(const pluginpb::ControllerSpec& spec, const nlohmann::json& primary,
                            nlohmann::json* child) {
  nlohmann::json ref = {{"apiVersion", ApiVersion(spec.primary())},
                        {"kind", spec.primary().kind()},
                        {"name", *StringAt(primary["metadata"], "name")},
                        {"controller", true},
                        {"blockOwnerDeletion", true}};
  if (const std::string* uid = StringAt(primary["metadata"], "uid")) ref["uid"] = *uid;
  (*child)["metadata"]["ownerReferences"] = nlohmann::json::array({std::move(ref)});
}

// Why the host would never reconcile `object` with controller `spec` (its watch filters the
// primary kind by the label selector, the runner by the namespaces), or OK.
absl::Status CheckSelected(const pluginpb::ControllerSpec& spec, const nlohmann::json& object) {
  if (!spec.label_selector().empty()) {
    absl::StatusOr<kube::LabelSelector> selector =
        kube::LabelSelector::Parse(spec.label_selector());
    if (!selector.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("controller ", spec.name(),
                                                     ": label selector \"", spec.label_selector(),
                                                     "\": ", selector.status().message()));
    }
    const kube::Labels labels = kube::LabelsOf(object);
    if (!selector->Matches(labels)) {
      std::vector<std::string> pairs;
      for (const auto& [key, value] : labels) pairs.push_back(absl::StrCat(key, "=", value));
      return absl::FailedPreconditionError(absl::StrCat(
          "the object's labels {", absl::StrJoin(pairs, ","), "} do not match controller ",
          spec.name(), "'s label selector \"", spec.label_selector(),
          "\": the host would never reconcile it (give the fixture the labels)"));
    }
  }
  const std::string* ns = StringAt(object["metadata"], "namespace");
  if (ns != nullptr && !ns->empty() && spec.namespaces_size() > 0 &&
      std::find(spec.namespaces().begin(), spec.namespaces().end(), *ns) ==
          spec.namespaces().end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "namespace \"", *ns, "\" is not one of controller ", spec.name(), "'s namespaces (",
        absl::StrJoin(spec.namespaces(), ", "), "): the host would never reconcile the object"));
  }
  return absl::OkStatus();
}

// The applier's validation, with scopes taken from the fixture (a primary with a namespace is
// namespaced) and the plugin's declarations (OwnedKind.cluster_scoped) instead of discovery;
// then its ownership check against `not_controlled`, the child fixtures the primary does not
// control (they exist in the "cluster" the fixtures describe).
absl::Status CheckResponse(const pluginpb::ControllerSpec& spec, const std::string& plugin_name,
                           const nlohmann::json& object, uint32_t attempt,
                           const std::string& trace_id, const pluginpb::ReconcileResponse& response,
                           std::optional<controller::Capabilities> capabilities,
                           const std::vector<FixtureDocument>& not_controlled) {
  const std::string* ns = StringAt(object["metadata"], "namespace");
  controller::ControllerInfo info;
  info.plugin = plugin_name;
  info.name = spec.name();
  info.primary = MappingOf(spec.primary(), ns != nullptr && !ns->empty());
  for (const pluginpb::OwnedKind& owned : spec.owns()) {
    info.owns.push_back({MappingOf(owned.kind(), !owned.cluster_scoped()), owned.delete_absent()});
  }
  info.finalizer = spec.finalizer();
  info.field_manager = absl::StrCat("ctrlhost-", spec.name());
  cache::ObjectParser parser;
  absl::StatusOr<std::shared_ptr<const cache::Object>> primary = parser.Parse(object.dump());
  if (!primary.ok()) return primary.status();
  controller::ReconcileContext context;
  context.controller = &info;
  context.namespace_ = ns != nullptr ? *ns : "";
  context.name = std::string((*primary)->name());
  context.primary = *primary;
  context.attempt = attempt - 1;  // the context counts retries, the request attempts
  context.trace_id = trace_id;
  context.capabilities = std::move(capabilities);
  absl::StatusOr<controller::apply::Plan> plan =
      controller::apply::ValidateResponse(context, response);
  if (!plan.ok()) return plan.status();
  for (size_t i = 0; i < plan->applies.size(); ++i) {
    const controller::apply::PlannedApply& a = plan->applies[i];
    if (a.is_primary) continue;
    for (const FixtureDocument& doc : not_controlled) {
      const std::string* ns = StringAt(doc.object["metadata"], "namespace");
      const std::string* name = StringAt(doc.object["metadata"], "name");
      if (GroupOf(*StringAt(doc.object, "apiVersion")) != a.group ||
          *StringAt(doc.object, "kind") != a.kind || name == nullptr || *name != a.ref.name ||
          (ns != nullptr && !ns->empty() ? *ns : a.ref.namespace_name) != a.ref.namespace_name) {
        continue;
      }
      const nlohmann::json* ref = ControllerRef(doc.object);
      const std::string* uid = ref == nullptr ? nullptr : StringAt(*ref, "uid");
      return absl::FailedPreconditionError(
          controller::apply::NotControlledMessage(context, i, a, uid != nullptr ? *uid : ""));
    }
  }
  return absl::OkStatus();
}

// Waits for the one callback of a Dispatch. Thread-safe: the callback runs on a gRPC or session
// thread; `mu` guards `result`.
struct ResponseWaiter {
  common::Mutex mu;
  common::CondVar cv;
  std::optional<controller::DispatchResult> result ABSL_GUARDED_BY(mu);
};

}  // namespace

absl::StatusOr<const pluginpb::ControllerSpec*> PickController(
    const pluginpb::DescribeResponse& describe, absl::string_view name,
    absl::string_view api_version, absl::string_view kind) {
  if (!name.empty()) {
    for (const pluginpb::ControllerSpec& c : describe.controllers()) {
      if (c.name() == name) return &c;
    }
    return absl::NotFoundError(absl::StrCat("the plugin has no controller named \"", name,
                                            "\"; its controllers: ", ControllerList(describe)));
  }
  const std::string group = GroupOf(api_version);
  std::vector<const pluginpb::ControllerSpec*> matches;
  for (const pluginpb::ControllerSpec& c : describe.controllers()) {
    if (c.primary().group() == group && c.primary().kind() == kind) matches.push_back(&c);
  }
  if (matches.size() == 1) return matches[0];
  if (matches.empty()) {
    return absl::NotFoundError(absl::StrCat("no controller of the plugin reconciles ", api_version,
                                            " ", kind,
                                            "; its controllers: ", ControllerList(describe)));
  }
  std::vector<std::string> names;
  for (const pluginpb::ControllerSpec* c : matches) names.push_back(c->name());
  return absl::FailedPreconditionError(
      absl::StrCat("several controllers of the plugin reconcile ", api_version, " ", kind, ": ",
                   absl::StrJoin(names, ", "), "; choose one with --controller"));
}

absl::StatusOr<nlohmann::json> ResponseToJson(const pluginpb::ReconcileResponse& response) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string text;
  if (!google::protobuf::util::MessageToJsonString(response, &text, options).ok()) {
    return absl::InternalError("cannot render the response as JSON");
  }
  nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return absl::InternalError("cannot render the response as JSON");
  if (response.desired_objects_size() > 0) {
    nlohmann::json& desired = json["desired_objects"];
    desired = nlohmann::json::array();
    for (const std::string& bytes : response.desired_objects()) {
      desired.push_back(DecodeJsonBytes(bytes));
    }
  }
  if (!response.status().empty()) json["status"] = DecodeJsonBytes(response.status());
  for (int i = 0; i < response.patches_size(); ++i) {
    if (!response.patches(i).patch().empty()) {
      json["patches"][i]["patch"] = DecodeJsonBytes(response.patches(i).patch());
    }
  }
  return json;
}

namespace {

// The flags of `ctrlhost test`.
struct TestFlags {
  std::string plugin_command, object_path, children_dir, related_dir, controller_name;
  std::string output = "yaml";
  std::vector<std::string> plugin_args, env;
  bool finalizing = false, check = false;
  int64_t attempt = 1;
  absl::Duration timeout = absl::Seconds(30);
  absl::Duration ready_timeout = absl::Seconds(30);
};

void AddTestFlags(FlagSet& flags, TestFlags& f) {
  flags.AddString("plugin", &f.plugin_command, "Plugin executable (path, or name in PATH)")
      .ValueName("CMD")
      .Required();
  flags.AddStrings("arg", &f.plugin_args, "Argument for --plugin, in order").ValueName("ARG");
  flags.AddStrings("env", &f.env, "Environment variable for --plugin").ValueName("KEY=VALUE");
  flags.AddString("object", &f.object_path, "The primary object: one YAML or JSON document")
      .ValueName("FILE")
      .Required();
  flags
      .AddString("children", &f.children_dir,
                 "Directory of *.yaml, *.yml, *.json documents: those of the controller's owned "
                 "kinds are the request's children")
      .ValueName("DIR");
  flags
      .AddString("related", &f.related_dir,
                 "Directory of *.yaml, *.yml, *.json documents sent as related objects")
      .ValueName("DIR");
  flags
      .AddString("controller", &f.controller_name,
                 "Controller to call (default: the one whose primary kind is the object's)")
      .ValueName("NAME");
  flags.AddBool("finalizing", &f.finalizing,
                "Send a finalizing request (the object gets a deletionTimestamp and the "
                "controller's finalizer if it lacks them)");
  flags
      .AddInt("attempt", &f.attempt, 1, std::numeric_limits<uint32_t>::max(),
              "Attempt number of the request (1: first try)")
      .ValueName("N");
  flags.AddDuration("timeout", &f.timeout, "Deadline for the plugin's answer")
      .MinDuration(absl::Milliseconds(1));
  flags
      .AddDuration("ready-timeout", &f.ready_timeout,
                   "Deadline for the plugin to start and answer Describe and health")
      .MinDuration(absl::Milliseconds(1));
  flags.AddEnum("output", &f.output, {"yaml", "json"}, "Output format").Short('o');
  flags.AddBool("check", &f.check,
                "Also validate the response as the host's applier does before writing; exit 3 "
                "when it would be refused");
}

// The fixtures of a run: the primary object, the children and the related objects.
struct Fixtures {
  nlohmann::json object;
  std::vector<FixtureDocument> children, related;
};

// Fixtures first: a typo in a file should not cost a plugin start.
absl::StatusOr<Fixtures> LoadFixtures(const TestFlags& f) {
  absl::StatusOr<std::vector<FixtureDocument>> objects = LoadFixtureFile(f.object_path);
  if (!objects.ok()) return objects.status();
  if (objects->size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        f.object_path, ": expected exactly one object, found ", objects->size(), " documents"));
  }
  Fixtures fixtures;
  fixtures.object = std::move((*objects)[0].object);
  for (auto [dir, docs] : {std::make_pair(&f.children_dir, &fixtures.children),
                           std::make_pair(&f.related_dir, &fixtures.related)}) {
    if (dir->empty()) continue;
    absl::StatusOr<std::vector<FixtureDocument>> loaded = LoadFixtureDir(*dir);
    if (!loaded.ok()) return loaded.status();
    *docs = std::move(*loaded);
  }
  return fixtures;
}

// The plugin started as the host starts it, once READY; stopped again when it did not become
// ready (an error naming why).
absl::StatusOr<std::unique_ptr<plugin::Supervisor>> StartReadyPlugin(
    plugin::SupervisorOptions options, const std::string& plugin_command,
    absl::Duration ready_timeout) {
  absl::StatusOr<std::unique_ptr<plugin::Supervisor>> supervisor =
      plugin::Supervisor::Start(std::move(options));
  if (!supervisor.ok()) {
    return absl::Status(
        supervisor.status().code(),
        absl::StrCat("cannot start plugin ", plugin_command, ": ", supervisor.status().message()));
  }
  plugin::Supervisor& instance = **supervisor;
  // The first instance either becomes READY or fails (FAILED, or BACKOFF after a crash or a
  // failed handshake): no restart is waited for, one failure is the answer.
  instance.WaitFor(
      [](const plugin::PluginStatus& s) { return s.state != plugin::PluginState::kStarting; },
      ready_timeout + kWaitSlack);
  plugin::PluginStatus status = instance.status();
  if (status.state != plugin::PluginState::kReady || status.describe == nullptr) {
    instance.Stop(kStopGrace);
    const std::string why =
        status.state == plugin::PluginState::kStarting
            ? absl::StrCat("not ready after ", absl::FormatDuration(ready_timeout))
            : std::string(status.last_error.message());
    return absl::UnavailableError(
        absl::StrCat("plugin ", plugin_command, " did not become ready: ", why));
  }
  return supervisor;
}

// Adds the children fixtures to `call` as the host would pass them; returns the fixtures that
// are not passed because the primary does not control them.
std::vector<FixtureDocument> AddChildren(const pluginpb::ControllerSpec& spec,
                                         const nlohmann::json& object,
                                         const std::vector<FixtureDocument>& children,
                                         pluginpb::ReconcileCall& call) {
  // As the host's children: objects of owned kinds that the primary controls. A fixture without
  // ownerReferences is taken as the child the host applied, with the controller reference it
  // set; one whose references do not make the primary its controller is not a child (the host
  // would not pass it, and --check refuses a response that desires it: NotControlled).
  std::vector<FixtureDocument> not_controlled;
  for (const FixtureDocument& doc : children) {
    pluginpb::RawObject raw = ToRawObject(doc);
    if (!Owns(spec, raw.api_version(), raw.kind())) {
      common::LogWarning("fixture skipped: its kind is not owned by the controller",
                         {{"file", doc.origin},
                          {"kind", absl::StrCat(raw.api_version(), " ", raw.kind())},
                          {"controller", spec.name()}});
      continue;
    }
    switch (ControlOf(doc.object, spec, object)) {
      case Control::kNoOwnerReferences: {
        nlohmann::json child = doc.object;
        AddControllerReference(spec, object, &child);
        raw.set_object(child.dump());
        break;
      }
      case Control::kPrimary:
        break;
      case Control::kOther:
        common::LogWarning(
            "fixture not passed as a child: the primary is not its controller (the host passes "
            "only children the primary controls, and refuses to apply over this object: "
            "NotControlled)",
            {{"file", doc.origin}, {"controller", spec.name()}});
        not_controlled.push_back(doc);
        continue;
    }
    *call.add_children() = raw;
  }
  return not_controlled;
}

// The plugin's answer to one dispatched call, with the capabilities in effect on its connection.
struct Answer {
  absl::StatusOr<pluginpb::ReconcileResponse> response =
      absl::DeadlineExceededError("no answer from the plugin");
  std::optional<controller::Capabilities> capabilities;
};

Answer Dispatch(plugin::Supervisor& instance, pluginpb::ReconcileCall call,
                absl::Duration timeout) {
  auto waiter = std::make_shared<ResponseWaiter>();
  const absl::Time deadline = absl::Now() + timeout;
  instance.Dispatch(std::move(call), deadline, [waiter](controller::DispatchResult result) {
    common::MutexLock lock(&waiter->mu);
    waiter->result = std::move(result);
    waiter->cv.SignalAll();
  });
  Answer answer;
  common::MutexLock lock(&waiter->mu);
  while (!waiter->result.has_value()) {
    if (waiter->cv.WaitWithDeadline(&waiter->mu, deadline + kWaitSlack)) break;
  }
  if (waiter->result.has_value()) {
    answer.response = waiter->result->response;
    answer.capabilities = waiter->result->capabilities;
  }
  return answer;
}

// Prints the response as YAML or JSON (`output`).
absl::Status PrintResponse(const pluginpb::ReconcileResponse& response, const std::string& output,
                           std::ostream& out) {
  absl::StatusOr<nlohmann::json> json = ResponseToJson(response);
  if (!json.ok()) return json.status();
  if (output == "json") {
    out << json->dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    const std::string yaml = common::JsonToYaml(*json);
    out << yaml;
    if (yaml.empty() || yaml.back() != '\n') out << "\n";
  }
  return absl::OkStatus();
}

}  // namespace

struct OfflinePlugin::State {
  std::unique_ptr<TempDir> socket_dir;
  std::unique_ptr<plugin::Supervisor> supervisor;
};

OfflinePlugin::OfflinePlugin(std::unique_ptr<State> state) : state_(std::move(state)) {}

OfflinePlugin::~OfflinePlugin() { state_->supervisor->Stop(kStopGrace); }

absl::StatusOr<std::unique_ptr<OfflinePlugin>> OfflinePlugin::Start(
    const std::string& command, const std::vector<std::string>& args,
    const std::vector<std::pair<std::string, std::string>>& env, absl::Duration ready_timeout) {
  auto state = std::make_unique<State>();
  absl::StatusOr<std::unique_ptr<TempDir>> socket_dir = TempDir::Create();
  if (!socket_dir.ok()) return socket_dir.status();
  state->socket_dir = *std::move(socket_dir);
  plugin::SupervisorOptions options;
  options.name = PluginName(command);
  options.source.exec.command = command;
  options.source.exec.args = args;
  options.source.exec.env = env;
  options.socket_dir = state->socket_dir->path();
  options.handshake.deadline = ready_timeout;
  options.default_stop_grace = kStopGrace;
  absl::StatusOr<std::unique_ptr<plugin::Supervisor>> supervisor =
      StartReadyPlugin(std::move(options), command, ready_timeout);
  if (!supervisor.ok()) return supervisor.status();
  state->supervisor = *std::move(supervisor);
  const plugin::PluginStatus status = state->supervisor->status();
  std::unique_ptr<OfflinePlugin> p(new OfflinePlugin(std::move(state)));
  p->describe_ = *status.describe;
  return p;
}

void OfflinePlugin::Dispatch(pluginpb::ReconcileCall call, absl::Time deadline,
                             controller::ReconcileCallback done) {
  state_->supervisor->Dispatch(std::move(call), deadline, std::move(done));
}

int RunTestCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FlagSet flags(
      "ctrlhost test",
      "Runs one reconcile of a plugin against fixture files, without any API server, and prints "
      "the plugin's ReconcileResponse (desired objects, patches, status, conditions, events, "
      "requeue, error). The plugin is started as the host starts it, over a Unix socket in a "
      "fresh private directory, and stopped with SIGTERM afterwards. The controller is "
      "--controller "
      "or the one whose primary kind is the object's. Exit codes: 0 the plugin answered, 1 a "
      "fixture or the plugin failed, 2 usage error, 3 --check found the response invalid.");
  TestFlags f;
  AddTestFlags(flags, f);
  CommonFlags common;
  AddCommonFlags(flags, &common);
  if (std::optional<int> exit = ParseCommandLine(flags, common, args, out, err)) return *exit;
  auto usage = [&](absl::string_view message) { return UsageError(flags.command(), message, err); };
  if (f.plugin_command.empty()) return usage("--plugin must not be empty");
  if (f.object_path.empty()) return usage("--object must not be empty");
  if (flags.IsSet("children") && f.children_dir.empty())
    return usage("--children must not be empty");
  if (flags.IsSet("related") && f.related_dir.empty()) return usage("--related must not be empty");
  plugin::SupervisorOptions options;
  for (const std::string& pair : f.env) {
    std::pair<std::string, std::string> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
    if (kv.first.empty() || pair.find('=') == std::string::npos) {
      return usage(absl::StrCat("invalid value \"", pair, "\" for --env: expected KEY=VALUE"));
    }
    options.source.exec.env.push_back(std::move(kv));
  }

  absl::StatusOr<Fixtures> fixtures = LoadFixtures(f);
  if (!fixtures.ok()) return Failure(fixtures.status().message(), err);
  nlohmann::json& object = fixtures->object;

  absl::StatusOr<std::unique_ptr<TempDir>> socket_dir = TempDir::Create();
  if (!socket_dir.ok()) return Failure(socket_dir.status().message(), err);
  const std::string name = PluginName(f.plugin_command);
  options.name = name;
  options.source.exec.command = f.plugin_command;
  options.source.exec.args = f.plugin_args;
  options.socket_dir = (*socket_dir)->path();
  options.handshake.deadline = f.ready_timeout;
  options.default_stop_grace = kStopGrace;
  absl::StatusOr<std::unique_ptr<plugin::Supervisor>> supervisor =
      StartReadyPlugin(std::move(options), f.plugin_command, f.ready_timeout);
  if (!supervisor.ok()) return Failure(supervisor.status().message(), err);
  plugin::Supervisor& instance = **supervisor;
  plugin::PluginStatus status = instance.status();

  const std::string api_version = *StringAt(object, "apiVersion");
  const std::string kind = *StringAt(object, "kind");
  absl::StatusOr<const pluginpb::ControllerSpec*> picked =
      PickController(*status.describe, f.controller_name, api_version, kind);
  if (!picked.ok()) {
    instance.Stop(kStopGrace);
    return Failure(picked.status().message(), err);
  }
  const pluginpb::ControllerSpec& spec = **picked;
  if (absl::Status s = CheckSelected(spec, object); !s.ok()) {
    instance.Stop(kStopGrace);
    return Failure(s.message(), err);
  }
  if (f.finalizing) MakeFinalizing(spec, &object);

  pluginpb::ReconcileCall call;
  call.set_controller(spec.name());
  const nlohmann::json& meta = object["metadata"];
  if (const std::string* ns = StringAt(meta, "namespace")) call.set_namespace_(*ns);
  call.set_name(*StringAt(meta, "name"));
  if (const std::string* uid = StringAt(meta, "uid")) call.set_uid(*uid);
  call.set_reason(pluginpb::REASON_PRIMARY_CHANGED);
  call.set_object(object.dump());
  const std::vector<FixtureDocument> not_controlled =
      AddChildren(spec, object, fixtures->children, call);
  for (const FixtureDocument& doc : fixtures->related) {
    *call.add_related_objects() = ToRawObject(doc);
  }
  call.set_finalizing(f.finalizing);
  call.set_attempt(static_cast<uint32_t>(f.attempt));
  call.set_trace_id(NewTraceId());
  const std::string trace_id = call.trace_id();

  Answer answer = Dispatch(instance, std::move(call), f.timeout);
  const absl::StatusOr<pluginpb::ReconcileResponse>& response = answer.response;
  // A crash shows as a broken stream (UNAVAILABLE); the supervisor learns how the process ended
  // a moment later, when it reaps it.
  if (!response.ok() && absl::IsUnavailable(response.status())) {
    instance.WaitFor(
        [](const plugin::PluginStatus& s) { return s.state != plugin::PluginState::kReady; },
        kStopGrace);
  }
  const absl::Status ended = instance.status().last_error;
  instance.Stop(kStopGrace);
  if (!response.ok()) {
    std::string message = absl::StrCat("plugin ", f.plugin_command, " failed the reconcile of ",
                                       kind, " ", meta.value("name", ""), " (controller ",
                                       spec.name(), "): ", response.status().message());
    if (!ended.ok() && ended.message() != response.status().message()) {
      absl::StrAppend(&message, " (", ended.message(), ")");
    }
    return Failure(message, err);
  }

  if (absl::Status s = PrintResponse(*response, f.output, out); !s.ok()) {
    return Failure(s.message(), err);
  }
  if (f.check) {
    if (absl::Status s =
            CheckResponse(spec, name, object, static_cast<uint32_t>(f.attempt), trace_id, *response,
                          std::move(answer.capabilities), not_controlled);
        !s.ok()) {
      err << "error: the host would refuse this response: " << s.message() << "\n";
      return kExitInvalidResponse;
    }
  }
  return kExitOk;
}

}  // namespace ctrlhost::exe
