// An in-process test harness: build a request from YAML/JSON fixtures, run a controller (or a
// whole Plugin) on it exactly as the serving loop would, and inspect the answer. No host, no
// gRPC, no threads.
//
//   absl::StatusOr<sdk::testing::RequestBuilder> req =
//       sdk::testing::RequestBuilder::FromFile("plugins/webapp/samples/webapp.yaml");
//   req->Controller("webapp").Child(deployment_json);
//   sdk::testing::Outcome out = sdk::testing::Reconcile(*controller, req->Call());
//   EXPECT_TRUE(out.ok());
//   const nlohmann::json* dep = out.Desired("Deployment", "shop");
//   EXPECT_EQ(out.Condition("Ready")->status(), pluginpb::CONDITION_STATUS_FALSE);
//
// Converging over several rounds: `req->ChildrenFrom(out)` turns the desired objects of one
// answer into the children of the next request (as if the host had applied them), so a test
// can check that a controller settles.
//
// The namespace is ctrlhost::sdk::testing; inside namespace ctrlhost::sdk, write GoogleTest's
// as ::testing.
//
// Thread-safety: plain values; use from one thread.
#ifndef CTRLHOST_SDK_CPP_TESTING_H_
#define CTRLHOST_SDK_CPP_TESTING_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "nlohmann/json.hpp"
#include "sdk/cpp/controller.h"
#include "sdk/cpp/plugin.h"
#include "sdk/cpp/result.h"

namespace ctrlhost::sdk::testing {

// Every document of a YAML (or JSON) file, e.g. a sample with several objects.
absl::StatusOr<std::vector<nlohmann::json>> LoadObjects(const std::string& path);
// One object from YAML or JSON text.
absl::StatusOr<nlohmann::json> ParseObject(absl::string_view yaml);

struct Outcome;

class RequestBuilder {
 public:
  // The primary object; namespace, name and uid of the call come from its metadata (uid
  // defaults to "uid-<name>"). Reason defaults to REASON_PRIMARY_CHANGED, attempt to 1.
  explicit RequestBuilder(nlohmann::json primary);
  static absl::StatusOr<RequestBuilder> FromYaml(absl::string_view yaml);
  // The first document of the file.
  static absl::StatusOr<RequestBuilder> FromFile(const std::string& path);
  // The deletion notice for a primary that is gone (empty object).
  static RequestBuilder Gone(absl::string_view ns, absl::string_view name);

  RequestBuilder& Controller(absl::string_view name);
  RequestBuilder& Child(const nlohmann::json& object);
  RequestBuilder& Related(const nlohmann::json& object);
  // Sets metadata.deletionTimestamp (if absent) and finalizing = true.
  RequestBuilder& Finalizing();
  RequestBuilder& Attempt(uint32_t attempt);
  RequestBuilder& Reason(pluginpb::Reason reason);
  RequestBuilder& Primary(const nlohmann::json& primary);
  // Replaces the children with the non-primary desired objects of `outcome` (namespace and
  // name defaults applied), as the host's cache would show them after applying.
  RequestBuilder& ChildrenFrom(const Outcome& outcome);

  const nlohmann::json& primary() const { return primary_; }
  pluginpb::ReconcileCall Call() const;

 private:
  nlohmann::json primary_;
  bool gone_ = false;
  std::string gone_namespace_, gone_name_;
  pluginpb::ReconcileCall call_;  // controller, reason, attempt, finalizing; objects set by Call()
  std::vector<nlohmann::json> children_;
  std::vector<nlohmann::json> related_;
};

// A response with its JSON parsed, plus lookups.
struct Outcome {
  pluginpb::ReconcileResponse response;
  std::vector<nlohmann::json> desired;  // parsed desired_objects, in order
  nlohmann::json status;                // parsed status patch; null when none

  bool ok() const { return !response.has_error(); }
  bool retryable() const {
    return response.has_error() && response.error().kind() == pluginpb::ERROR_KIND_RETRYABLE;
  }
  bool terminal() const {
    return response.has_error() && response.error().kind() == pluginpb::ERROR_KIND_TERMINAL;
  }
  const std::string& error_message() const { return response.error().message(); }
  bool finalized() const { return response.finalized(); }
  const nlohmann::json* Desired(absl::string_view kind, absl::string_view name) const;
  std::vector<const nlohmann::json*> DesiredOfKind(absl::string_view kind) const;
  const pluginpb::Condition* Condition(absl::string_view type) const;
  bool HasEvent(absl::string_view reason) const;
};

// Runs `controller` on `call` as the serving loop does (sdk::Invoke), with the capabilities
// given (default: all the SDK supports).
Outcome Reconcile(const sdk::Controller& controller, const pluginpb::ReconcileCall& call,
                  const std::set<pluginpb::Capability>& capabilities = AllSdkCapabilities());
// Routes by call.controller() through the plugin (unknown controller: terminal error).
Outcome Reconcile(const sdk::Plugin& plugin, const pluginpb::ReconcileCall& call);

}  // namespace ctrlhost::sdk::testing

#endif  // CTRLHOST_SDK_CPP_TESTING_H_
