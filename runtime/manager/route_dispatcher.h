// RouteDispatcher: the dispatcher of a routed controller (the operator file's spec.routes), which
// sends each reconcile to the plugin of the route whose label selector matches the object.
//
// The routed controller has one runner (one queue, one cache) whatever the number of plugins
// behind it; this dispatcher only decides where each request goes. The runner never sends a key
// again before its previous request was answered or failed, so a key is never at two plugins at
// once, and a key whose labels changed moves to its new plugin only after the request in flight
// at the old one finished: the same argument as PluginSlot's cut-over (plugin_slot.h).
//
//   RouteDispatcher routes("chaos", {{"v1", "chaos-v1", *LabelSelector::Parse("version!=v2"), d1},
//                                    {"v2", "chaos-v2", *LabelSelector::Parse("version=v2"), d2}},
//                          clock);
//   runner uses &routes.
//
// Per object (labels as the request's object carries them, i.e. the host's cache):
//   - one route matches: the request goes to that route's dispatcher;
//   - several match: nothing is sent; the call is answered at once with a terminal error, the
//     condition Reconciled=False reason AmbiguousRoute and a Warning event AmbiguousRoute, all
//     naming the routes, which the applier writes like a plugin's answer;
//   - none matches: nothing is sent; answered with an empty response (skipped, counted, debug
//     log), except for an object being deleted, which goes to the route that last reconciled it
//     (the first route when none did, e.g. after a restart) so that its finalizer is released;
//   - the object is gone (empty): the request goes to the route that last reconciled the key
//     (the first route when none did), which then forgets it.
//
// Thread-safety: thread-safe. Constant after construction: the routes. `mu_` guards the last
// route of each key and the counters; it is never held while forwarding or answering.
#ifndef CTRLHOST_RUNTIME_MANAGER_ROUTE_DISPATCHER_H_
#define CTRLHOST_RUNTIME_MANAGER_ROUTE_DISPATCHER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/clock.h"
#include "runtime/common/log_limiter.h"
#include "runtime/common/mutex.h"
#include "runtime/controller/reconcile.h"
#include "runtime/kube/selector.h"

namespace ctrlhost::manager {

inline constexpr char kReasonAmbiguousRoute[] = "AmbiguousRoute";

struct Route {
  std::string name;    // unique among the controller's routes
  std::string plugin;  // for messages
  kube::LabelSelector selector = kube::LabelSelector::Everything();
  // Where matching requests go (the plugin's fenced, counting dispatcher). Shared so that the
  // plugin it belongs to outlives every request this dispatcher forwarded to it.
  std::shared_ptr<controller::Dispatcher> dispatcher;
};

// For /debug/dump and tests.
struct RouteFigures {
  std::map<std::string, uint64_t> routed;  // requests sent, by route name
  uint64_t unrouted = 0;                   // objects no route matched (not reconciled)
  uint64_t ambiguous = 0;                  // objects several routes matched (not reconciled)
  uint64_t moved = 0;                      // keys sent to another route than the last time
};

class RouteDispatcher : public controller::Dispatcher {
 public:
  // `routes` must not be empty; each has a dispatcher. `clock` is borrowed (null: real).
  RouteDispatcher(std::string controller, std::vector<Route> routes, common::Clock* clock);
  RouteDispatcher(const RouteDispatcher&) = delete;
  RouteDispatcher& operator=(const RouteDispatcher&) = delete;

  void Dispatch(pluginpb::ReconcileCall call, absl::Time deadline,
                controller::ReconcileCallback done) override;

  RouteFigures Figures() const;
  const std::string& controller() const { return controller_; }

 private:
  // The index of the route that last reconciled `key` (-1: none); `forget` erases it.
  int LastRoute(const std::string& key, bool forget);
  void Forward(int route, const std::string& key, pluginpb::ReconcileCall call, absl::Time deadline,
               controller::ReconcileCallback done);

  // Constant after construction.
  const std::string controller_;
  const std::vector<Route> routes_;

  common::LogLimiter ambiguous_log_;

  mutable common::Mutex mu_;
  absl::flat_hash_map<std::string, int> last_ ABSL_GUARDED_BY(mu_);  // key -> route index
  RouteFigures figures_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_ROUTE_DISPATCHER_H_
