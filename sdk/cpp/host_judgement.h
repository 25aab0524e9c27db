// The live host's judgement of a reconcile, for the offline harness (testing.h).
//
// What the host would not send (a primary its label selector or namespaces exclude, a child of
// a kind it does not own or controlled by another object) and what it would refuse to apply
// (docs/protocol.md section 6: desired objects and OWNED patches of kinds the controller does
// not own, children outside the primary's namespace, status or conditions on a kind without a
// status subresource, an existing object the primary does not control: NotControlled). The same
// rules and messages as the host (runtime/controller/apply/validate.cc, the applier's ownership
// check, `ctrlhost test --check`) and the other SDKs' harnesses
// (sdk/go/ctrlhosttest/host_judgement.go); the cases all of them pass are
// sdk/testdata/host_judgement_cases.json.
//
// Pure functions of their arguments.
#ifndef CTRLHOST_SDK_CPP_HOST_JUDGEMENT_H_
#define CTRLHOST_SDK_CPP_HOST_JUDGEMENT_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::sdk::testing {

// Whether built-in kind group/kind serves a status subresource: the built-in kinds operators
// touch that have none (no status at all) are listed; every other kind, custom ones included,
// is taken to have one. The host's own list (runtime/common/builtin_kinds.h), which
// `ctrlhost test --check` uses.
bool HasStatusSubresource(absl::string_view group, absl::string_view kind);

// Gives each child of `call` that has no ownerReferences at all the controller reference to the
// primary the host sets when it applies a child (one with some is taken as written). Nothing
// for the deletion notice of a gone primary.
void AddControllerReferences(const pluginpb::ControllerSpec& spec, pluginpb::ReconcileCall* call);

// Why the host would never send `call` to the controller `spec` (empty: it would).
std::string JudgeRequest(const pluginpb::ControllerSpec& spec, const pluginpb::ReconcileCall& call);

// Why the host would refuse `response` to `call` (empty: it would apply it). `existing`: objects
// in the cluster that are not the primary's children; desiring one the primary does not control
// is refused.
std::string JudgeResponse(const pluginpb::ControllerSpec& spec, const pluginpb::ReconcileCall& call,
                          const std::vector<nlohmann::json>& existing,
                          const pluginpb::ReconcileResponse& response);

// kubectl's label selector syntax (a=b, a==b, a!=b, a in (x,y), a notin (x), a, !a;
// requirements joined by commas) matched against `labels`. InvalidArgument for a bad selector.
absl::StatusOr<bool> MatchesSelector(absl::string_view selector,
                                     const std::map<std::string, std::string>& labels);

}  // namespace ctrlhost::sdk::testing

#endif  // CTRLHOST_SDK_CPP_HOST_JUDGEMENT_H_
