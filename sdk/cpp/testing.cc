#include "sdk/cpp/testing.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/yaml_json.h"
#include "sdk/cpp/host_judgement.h"

namespace ctrlhost::sdk::testing {
namespace {

std::string Dump(const nlohmann::json& json) {
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string StringAt(const nlohmann::json& obj, absl::string_view path) {
  const nlohmann::json* v = FindPath(obj, path);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

void AddRaw(const nlohmann::json& obj,
            google::protobuf::RepeatedPtrField<pluginpb::RawObject>* out) {
  pluginpb::RawObject* raw = out->Add();
  raw->set_api_version(StringAt(obj, "apiVersion"));
  raw->set_kind(StringAt(obj, "kind"));
  raw->set_object(Dump(obj));
}

Outcome Parse(pluginpb::ReconcileResponse response) {
  Outcome out;
  for (const std::string& d : response.desired_objects()) {
    out.desired.push_back(nlohmann::json::parse(d, nullptr, /*allow_exceptions=*/false));
  }
  if (!response.status().empty()) {
    out.status = nlohmann::json::parse(response.status(), nullptr, false);
  }
  out.response = std::move(response);
  return out;
}

// Judges the request, runs it through `run` when the host would send it, judges the answer.
template <typename RunFn>
Outcome Judged(const pluginpb::ControllerSpec& spec, pluginpb::ReconcileCall call,
               const std::vector<nlohmann::json>& existing, RunFn run) {
  AddControllerReferences(spec, &call);
  std::string not_sent = JudgeRequest(spec, call);
  if (!not_sent.empty()) {
    Outcome out;
    out.not_sent = absl::StrCat("the host would not send this request: ", not_sent);
    return out;
  }
  Outcome out = Parse(run(call));
  std::string refused = JudgeResponse(spec, call, existing, out.response);
  if (!refused.empty()) out.refused = absl::StrCat("the host would refuse this answer: ", refused);
  return out;
}

}  // namespace

absl::StatusOr<std::vector<nlohmann::json>> LoadObjects(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<nlohmann::json>> docs = common::YamlDocumentsToJson(text.str());
  if (!docs.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", docs.status().message()));
  }
  return docs;
}

absl::StatusOr<nlohmann::json> ParseObject(absl::string_view yaml) {
  absl::StatusOr<nlohmann::json> obj = common::YamlToJson(yaml);
  if (!obj.ok()) return obj.status();
  if (!obj->is_object()) return absl::InvalidArgumentError("the document is not an object");
  return obj;
}

RequestBuilder::RequestBuilder(nlohmann::json primary) : primary_(std::move(primary)) {
  call_.set_reason(pluginpb::REASON_PRIMARY_CHANGED);
  call_.set_attempt(1);
}

absl::StatusOr<RequestBuilder> RequestBuilder::FromYaml(absl::string_view yaml) {
  absl::StatusOr<nlohmann::json> obj = ParseObject(yaml);
  if (!obj.ok()) return obj.status();
  return RequestBuilder(*std::move(obj));
}

absl::StatusOr<RequestBuilder> RequestBuilder::FromFile(const std::string& path) {
  absl::StatusOr<std::vector<nlohmann::json>> docs = LoadObjects(path);
  if (!docs.ok()) return docs.status();
  if (docs->empty() || !(*docs)[0].is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no object"));
  }
  return RequestBuilder((*docs)[0]);
}

RequestBuilder RequestBuilder::Gone(absl::string_view ns, absl::string_view name) {
  RequestBuilder b{nlohmann::json()};
  b.gone_ = true;
  b.gone_namespace_ = std::string(ns);
  b.gone_name_ = std::string(name);
  b.call_.set_reason(pluginpb::REASON_PRIMARY_DELETED);
  return b;
}

RequestBuilder& RequestBuilder::Controller(absl::string_view name) {
  call_.set_controller(std::string(name));
  return *this;
}

RequestBuilder& RequestBuilder::Child(const nlohmann::json& object) {
  children_.push_back(object);
  return *this;
}

RequestBuilder& RequestBuilder::Related(const nlohmann::json& object) {
  related_.push_back(object);
  return *this;
}

RequestBuilder& RequestBuilder::Existing(const nlohmann::json& object) {
  existing_.push_back(object);
  return *this;
}

RequestBuilder& RequestBuilder::Finalizing() {
  if (primary_.is_object()) {
    nlohmann::json& meta = primary_["metadata"];
    if (!meta.is_object()) meta = nlohmann::json::object();
    if (!meta.contains("deletionTimestamp")) meta["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  }
  call_.set_finalizing(true);
  return *this;
}

RequestBuilder& RequestBuilder::Attempt(uint32_t attempt) {
  call_.set_attempt(attempt);
  return *this;
}

RequestBuilder& RequestBuilder::Reason(pluginpb::Reason reason) {
  call_.set_reason(reason);
  return *this;
}

RequestBuilder& RequestBuilder::Primary(const nlohmann::json& primary) {
  primary_ = primary;
  return *this;
}

RequestBuilder& RequestBuilder::ChildrenFrom(const Outcome& outcome) {
  children_.clear();
  const std::string ns = StringAt(primary_, "metadata.namespace");
  for (const nlohmann::json& d : outcome.desired) {
    if (!d.is_object()) continue;
    if (StringAt(d, "kind") == StringAt(primary_, "kind") &&
        StringAt(d, "metadata.name") == StringAt(primary_, "metadata.name")) {
      continue;  // the primary itself
    }
    nlohmann::json child = d;
    if (!ns.empty() && StringAt(child, "metadata.namespace").empty()) {
      child["metadata"]["namespace"] = ns;
    }
    children_.push_back(std::move(child));
  }
  return *this;
}

pluginpb::ReconcileCall RequestBuilder::Call() const {
  pluginpb::ReconcileCall call = call_;
  if (gone_) {
    call.set_namespace_(gone_namespace_);
    call.set_name(gone_name_);
    call.set_uid(absl::StrCat("uid-", gone_name_));
  } else {
    call.set_namespace_(StringAt(primary_, "metadata.namespace"));
    call.set_name(StringAt(primary_, "metadata.name"));
    std::string uid = StringAt(primary_, "metadata.uid");
    call.set_uid(uid.empty() ? absl::StrCat("uid-", call.name()) : uid);
    call.set_object(Dump(primary_));
  }
  for (const nlohmann::json& c : children_) AddRaw(c, call.mutable_children());
  for (const nlohmann::json& r : related_) AddRaw(r, call.mutable_related_objects());
  return call;
}

const nlohmann::json* Outcome::Desired(absl::string_view kind, absl::string_view name) const {
  for (const nlohmann::json& d : desired) {
    if (StringAt(d, "kind") == kind && StringAt(d, "metadata.name") == name) return &d;
  }
  return nullptr;
}

std::vector<const nlohmann::json*> Outcome::DesiredOfKind(absl::string_view kind) const {
  std::vector<const nlohmann::json*> out;
  for (const nlohmann::json& d : desired) {
    if (StringAt(d, "kind") == kind) out.push_back(&d);
  }
  return out;
}

const pluginpb::Condition* Outcome::Condition(absl::string_view type) const {
  for (const pluginpb::Condition& c : response.conditions()) {
    if (c.type() == type) return &c;
  }
  return nullptr;
}

bool Outcome::HasEvent(absl::string_view reason) const {
  for (const pluginpb::Event& e : response.events()) {
    if (e.reason() == reason) return true;
  }
  return false;
}

std::string Outcome::error_message() const {
  if (!not_sent.empty()) return not_sent;
  if (!refused.empty()) return refused;
  return response.error().message();
}

Outcome Reconcile(const sdk::Controller& controller, const pluginpb::ReconcileCall& call,
                  const std::set<pluginpb::Capability>& capabilities) {
  return Judged(controller.spec(), call, {}, [&](const pluginpb::ReconcileCall& judged) {
    return Invoke(controller, /*request_id=*/1, judged, capabilities);
  });
}

Outcome Reconcile(const sdk::Controller& controller, const RequestBuilder& request,
                  const std::set<pluginpb::Capability>& capabilities) {
  return Judged(controller.spec(), request.Call(), request.existing(),
                [&](const pluginpb::ReconcileCall& judged) {
                  return Invoke(controller, /*request_id=*/1, judged, capabilities);
                });
}

Outcome Reconcile(const sdk::Plugin& plugin, const pluginpb::ReconcileCall& call) {
  const sdk::Controller* controller = plugin.Find(call.controller());
  if (controller == nullptr) return Parse(plugin.Handle(/*request_id=*/1, call));
  return Judged(controller->spec(), call, {}, [&](const pluginpb::ReconcileCall& judged) {
    return plugin.Handle(/*request_id=*/1, judged);
  });
}

}  // namespace ctrlhost::sdk::testing
