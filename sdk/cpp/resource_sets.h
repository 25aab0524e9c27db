// Resource sets: one controller, several ways of reconciling, chosen per object (operatorkit's
// ResourceRouter / ResourceSet). Each set says which objects it handles and builds a per-object
// context its reconcile reads; for each object exactly one set runs.
//
//   sdk::ResourceRouter router;
//   router.Add({"v1", [](const sdk::Request& r) { return r.Label("version") != "v2"; },
//               ReconcileV1});
//   router.Add({"v2", [](const sdk::Request& r) { return r.Label("version") == "v2"; },
//               ReconcileV2,
//               [](const sdk::Request& r) -> absl::StatusOr<nlohmann::json> {
//                 return nlohmann::json{{"replicas", 3}};
//               }});
//   plugin.Add(sdk::ControllerBuilder("webapps").For(...).Reconcile(router.Build()));
//
// Per object (the same in the C++, Python and Node SDKs; the conformance suite checks it):
// - exactly one set's `handles` is true: its `init_context` (none: an empty JSON object) then
//   its `reconcile(request, context)` run, and their result is the answer; an init_context
//   error is the answer (Result::FromStatus);
// - none: the object is skipped: an empty answer, `skipped()` counts it, a debug line is logged
//   (stderr, when CTRLHOST_LOG_LEVEL=debug);
// - several: nothing runs; the answer is a terminal error, the condition Reconciled=False with
//   reason AmbiguousRoute and a Warning event AmbiguousRoute, all with the message
//   `the object matches 2 resource sets: "v2", "canary"; exactly one must handle it`;
// - a request whose object is gone (empty) asks no set: an empty answer, not counted.
//
// Thread-safety: configure (Add) before serving; Route/Build's function and skipped() are then
// thread-safe (the count is atomic; the sets are read-only).
#ifndef CTRLHOST_SDK_CPP_RESOURCE_SETS_H_
#define CTRLHOST_SDK_CPP_RESOURCE_SETS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "sdk/cpp/controller.h"
#include "sdk/cpp/request.h"
#include "sdk/cpp/result.h"

namespace ctrlhost::sdk {

inline constexpr char kReasonAmbiguousRoute[] = "AmbiguousRoute";

struct ResourceSet {
  std::string name;                             // non-empty, unique in the router
  std::function<bool(const Request&)> handles;  // required
  std::function<Result(const Request&, const nlohmann::json& context)> reconcile;  // required
  std::function<absl::StatusOr<nlohmann::json>(const Request&)> init_context;      // null: {}
};

class ResourceRouter {
 public:
  ResourceRouter();

  // InvalidArgument for an empty or duplicate name or a missing handles/reconcile (the set is
  // not added).
  absl::Status Add(ResourceSet set);

  // The answer for `request` (see the file comment).
  Result Route(const Request& request) const;
  // Route as a controller's reconcile function; it shares this router's sets and count.
  ReconcileFn Build() const;

  // Objects no set handled, since the router was made.
  uint64_t skipped() const;

 private:
  struct State {
    std::vector<ResourceSet> sets;
    std::atomic<uint64_t> skipped{0};
  };
  std::shared_ptr<State> state_;
};

}  // namespace ctrlhost::sdk

#endif  // CTRLHOST_SDK_CPP_RESOURCE_SETS_H_
