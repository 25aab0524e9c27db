// libFuzzer target: the host's validation of a plugin's ReconcileResponse
// (runtime/controller/apply/validate.h) on any byte sequence a plugin can send, and what the
// applier does next with the plan and with the error message (JSON dumps, condition message cut
// to 32 KiB). The host must turn every input into a Plan or an error: a crash, a sanitizer
// report or an exception here is a bug. Built and run by tools/fuzz.
//
// Input: byte 0 picks the scenario (controller, primary present / being deleted / gone); the
// rest is a ReconcileResponse in protobuf wire format (seeds: the text-format responses in
// tools/fuzzers/seeds/plugin_response/, encoded under every scenario byte by build.py).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "google/protobuf/stubs/logging.h"
#include "nlohmann/json.hpp"
#include "runtime/cache/object.h"
#include "runtime/common/utf8.h"
#include "runtime/controller/apply/validate.h"

namespace ctrlhost::controller::apply {
namespace {

kube::ResourceMapping Mapping(const std::string& group, const std::string& resource,
                              const std::string& kind, bool namespaced, bool has_status) {
  kube::ResourceMapping m;
  m.group = group;
  m.version = "v1";
  m.resource = resource;
  m.kind = kind;
  m.namespaced = namespaced;
  m.has_status = has_status;
  return m;
}

struct Scenarios {
  Scenarios() {
    webapp.name = "webapp";
    webapp.primary = Mapping("ctrlhost.dev", "webapps", "WebApp", true, true);
    webapp.owns.push_back({Mapping("", "configmaps", "ConfigMap", true, false), true});
    webapp.owns.push_back({Mapping("apps", "deployments", "Deployment", true, true), false});
    webapp.owns.push_back(
        {Mapping("rbac.authorization.k8s.io", "clusterroles", "ClusterRole", false, false), false});
    webapp.finalizer = "ctrlhost.dev/cleanup";
    webapp.field_manager = "ctrlhost-webapp";
    tenant.name = "tenant";
    tenant.primary = Mapping("", "namespaces", "Namespace", false, true);
    tenant.owns.push_back({Mapping("", "configmaps", "ConfigMap", true, false), false});
    tenant.field_manager = "ctrlhost-tenant";
    cache::ObjectParser parser;
    web = *parser.Parse(R"({"apiVersion":"ctrlhost.dev/v1","kind":"WebApp","metadata":{
        "name":"web","namespace":"team","uid":"u-web","generation":1,"resourceVersion":"5"}})");
    deleting = *parser.Parse(R"({"apiVersion":"ctrlhost.dev/v1","kind":"WebApp","metadata":{
        "name":"web","namespace":"team","uid":"u-web","generation":2,"resourceVersion":"6",
        "deletionTimestamp":"2026-11-25T00:00:00Z","finalizers":["ctrlhost.dev/cleanup"]}})");
    ns = *parser.Parse(R"({"apiVersion":"v1","kind":"Namespace","metadata":{
        "name":"team","uid":"u-ns","resourceVersion":"3"}})");
  }
  ControllerInfo webapp;
  ControllerInfo tenant;
  cache::ObjectPtr web, deleting, ns;
};

ReconcileContext ContextFor(const Scenarios& s, uint8_t pick) {
  ReconcileContext context;
  switch (pick % 4) {
    case 0:
      context.controller = &s.webapp;
      context.primary = s.web;
      break;
    case 1:
      context.controller = &s.webapp;
      context.primary = s.deleting;
      break;
    case 2:
      context.controller = &s.webapp;  // the primary is gone
      break;
    default:
      context.controller = &s.tenant;
      context.primary = s.ns;
      break;
  }
  context.namespace_ = context.controller == &s.tenant ? "" : "team";
  context.name = context.controller == &s.tenant ? "team" : "web";
  return context;
}

// What the applier serializes, with nlohmann's default (throwing) error handler.
void DumpLikeTheApplier(const Plan& plan) {
  for (const PlannedApply& a : plan.applies) (void)a.object.dump();
  if (plan.status.has_value()) (void)plan.status->dump();
  for (const PlannedPatch& p : plan.patches) {
    if (!nlohmann::json::accept(p.body)) std::abort();  // the body goes to the API server as is
  }
  // Conditions and events become JSON (conditions.cc, event_recorder.cc).
  for (const pluginpb::Condition& c : plan.conditions) {
    (void)nlohmann::json({{"type", c.type()}, {"reason", c.reason()}, {"message", c.message()}})
        .dump();
  }
  for (const pluginpb::Event& e : plan.events) {
    (void)nlohmann::json({{"reason", e.reason()}, {"message", e.message()}}).dump();
  }
  (void)nlohmann::json(plan.error_message).dump();
}

}  // namespace
}  // namespace ctrlhost::controller::apply

// Protobuf logs every string field with invalid UTF-8 it refuses: silence, not a finding.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ctrlhost::controller::apply;  // NOLINT: a fuzzer entry point
  static const Scenarios* scenarios = new Scenarios();
  if (size == 0) return 0;
  ::ctrlhost::pluginpb::ReconcileResponse response;
  if (!response.ParseFromArray(data + 1, static_cast<int>(size - 1))) return 0;
  const ctrlhost::controller::ReconcileContext context = ContextFor(*scenarios, data[0]);
  absl::StatusOr<Plan> plan = ValidateResponse(context, response);
  if (plan.ok()) {
    DumpLikeTheApplier(*plan);
  } else {
    // RecordFailure: the message, cut to the condition's 32 KiB, goes into a JSON body.
    const std::string message(plan.status().message());
    nlohmann::json condition = {{"message", ctrlhost::common::TruncateUtf8(message, 32768)}};
    (void)condition.dump();
  }
  return 0;
}
