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
// The reconcile is judged as the live host judges it (host_judgement.h; the same rules and
// messages as the host and the Go, Python and Node harnesses): children given without
// ownerReferences get the controller reference to the primary, as the host's always carry it;
// a request the host would never send (the primary outside the controller's label selector or
// namespaces, a child of a kind it does not own or controlled by another object) is not run and
// sets Outcome::not_sent; an answer the host would refuse (a desired object or OWNED patch of a
// kind the controller does not own, a child outside the primary's namespace, status or
// conditions on a ConfigMap, desiring an Existing object the primary does not control:
// NotControlled) sets Outcome::refused. Either makes ok() false and is error_message().
//
// Converging over several rounds: `req->ChildrenFrom(out)` turns the desired objects of one
// answer into the children of the next request (as if the host had applied them), so a test
// can check that a controller settles.
//
// Replaying a recording of a live host against a new build: replay.h (included here).
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
#include "sdk/cpp/replay.h"
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
  // An object that exists in the cluster but is not the primary's child (no controller, or
  // another one): not in the request; an answer desiring it is refused (NotControlled).
  RequestBuilder& Existing(const nlohmann::json& object);
  // Sets metadata.deletionTimestamp (if absent) and finalizing = true.
  RequestBuilder& Finalizing();
  RequestBuilder& Attempt(uint32_t attempt);
  RequestBuilder& Reason(pluginpb::Reason reason);
  RequestBuilder& Primary(const nlohmann::json& primary);
  // Replaces the children with the non-primary desired objects of `outcome` (namespace and
  // name defaults applied), as the host's cache would show them after applying.
  RequestBuilder& ChildrenFrom(const Outcome& outcome);

  const nlohmann::json& primary() const { return primary_; }
  const std::vector<nlohmann::json>& existing() const { return existing_; }
  // The call as built (children as given; Reconcile adds the host's owner references).
  pluginpb::ReconcileCall Call() const;

 private:
  nlohmann::json primary_;
  bool gone_ = false;
  std::string gone_namespace_, gone_name_;
  pluginpb::ReconcileCall call_;  // controller, reason, attempt, finalizing; objects set by Call()
  std::vector<nlohmann::json> children_;
  std::vector<nlohmann::json> related_;
  std::vector<nlohmann::json> existing_;
};

// A response with its JSON parsed, plus lookups.
struct Outcome {
  pluginpb::ReconcileResponse response;
  std::vector<nlohmann::json> desired;  // parsed desired_objects, in order
  nlohmann::json status;                // parsed status patch; null when none
  // Why the live host would never send the request (then the controller did not run), or
  // would refuse this answer (the host's message, e.g. "desired_objects[0]: kind v1 Secret is
  // not owned by controller greeter"); empty when it would send it and apply the answer.
  std::string not_sent;
  std::string refused;

  // No error answer, and the host would send the request and apply the answer.
  bool ok() const { return !response.has_error() && not_sent.empty() && refused.empty(); }
  bool retryable() const {
    return response.has_error() && response.error().kind() == pluginpb::ERROR_KIND_RETRYABLE;
  }
  bool terminal() const {
    return response.has_error() && response.error().kind() == pluginpb::ERROR_KIND_TERMINAL;
  }
  // Why not ok(): the host's judgement when it has one, else the answer's error message.
  std::string error_message() const;
  bool finalized() const { return response.finalized(); }
  const nlohmann::json* Desired(absl::string_view kind, absl::string_view name) const;
  std::vector<const nlohmann::json*> DesiredOfKind(absl::string_view kind) const;
  const pluginpb::Condition* Condition(absl::string_view type) const;
  bool HasEvent(absl::string_view reason) const;
};

// Runs `controller` on `call` as the serving loop does (sdk::Invoke), with the capabilities
// given (default: all the SDK supports), judged as the host does.
Outcome Reconcile(const sdk::Controller& controller, const pluginpb::ReconcileCall& call,
                  const std::set<pluginpb::Capability>& capabilities = AllSdkCapabilities());
// The same with the builder's call and Existing objects.
Outcome Reconcile(const sdk::Controller& controller, const RequestBuilder& request,
                  const std::set<pluginpb::Capability>& capabilities = AllSdkCapabilities());
// Routes by call.controller() through the plugin (unknown controller: terminal error), judged
// as the host does.
Outcome Reconcile(const sdk::Plugin& plugin, const pluginpb::ReconcileCall& call);

}  // namespace ctrlhost::sdk::testing

#endif  // CTRLHOST_SDK_CPP_TESTING_H_
