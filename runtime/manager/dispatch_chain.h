// DispatchChain: the dispatchers a reconcile passes through between a controller's runner and a
// plugin, built in one place (the manager builds one per plugin, once, when the plugin starts).
//
// For one plugin, outermost first:
//
//   runner → [FencedDispatcher] → CountingDispatcher → PluginSlot → Supervisor → Session
//
// and for a routed controller (spec.routes), one RouteDispatcher in front of the chains of the
// plugins it routes to (RouteTo):
//
//   runner → RouteDispatcher → the matching route's plugin chain (as above)
//
// Why this order:
// - The fence (fence.h: the operator's own Lease, else the host-wide one; none without leader
//   election) is outermost, so that a reconcile refused by a closed fence never reaches the
//   plugin and is not a plugin request in the ctrlhost_plugin_* figures, and so that a trip
//   answers every reconcile in flight at once (UNAVAILABLE) while the counter still waits for,
//   and counts, the plugin's own answer.
// - The counter sits right on the plugin's stable dispatcher (PluginSlot: hot swaps and canaries
//   happen behind it), so the figures are per plugin whatever generation serves.
// - A route chooses among plugins, so it goes in front of whole chains, each with its own fence
//   and counter.
//
// A new stage goes into the constructor, in its place in the order above, and into this comment.
// (A shadow is not a stage: it is another instance of the plugin, so it lives in PluginSlot,
// which sends it a copy of each call.)
//
//   DispatchChain chain(slot.get(), fence, clock);   // fence may be null
//   deps.dispatcher = chain.dispatcher();            // what a ControllerGroup's runners call
//   chain.Figures();                                 // ctrlhost_plugin_* of this plugin
//
// Thread-safety: thread-safe (every stage is); constant after construction.
#ifndef CTRLHOST_RUNTIME_MANAGER_DISPATCH_CHAIN_H_
#define CTRLHOST_RUNTIME_MANAGER_DISPATCH_CHAIN_H_

#include <memory>
#include <string>
#include <vector>

#include "runtime/common/clock.h"
#include "runtime/controller/reconcile.h"
#include "runtime/kube/selector.h"
#include "runtime/manager/counting_dispatcher.h"
#include "runtime/manager/fence.h"
#include "runtime/manager/route_dispatcher.h"

namespace ctrlhost::manager {

class DispatchChain {
 public:
  // `plugin` is the plugin's stable dispatcher (its PluginSlot); `fence` the fence its
  // operator's reconciles go through, or null. Both borrowed: they must outlive the chain and
  // every callback it calls. `clock` is borrowed (null: real).
  DispatchChain(controller::Dispatcher* plugin, Fence* fence, common::Clock* clock);
  DispatchChain(const DispatchChain&) = delete;
  DispatchChain& operator=(const DispatchChain&) = delete;

  // The outermost stage: what a controller group's runners dispatch to.
  controller::Dispatcher* dispatcher() const { return outermost_; }
  // What the plugin was asked and answered (the ctrlhost_plugin_* figures): every request that
  // passed the fence.
  PluginRequestFigures Figures() const { return counting_.Figures(); }
  bool fenced() const { return fenced_ != nullptr; }

  // One route of a routed controller: objects `selector` matches go to `chain`, shared so that
  // what owns the chain (the target plugin) outlives every request forwarded to it (pass an
  // aliasing pointer to the plugin).
  struct RouteTarget {
    std::string name;
    std::string plugin;
    kube::LabelSelector selector = kube::LabelSelector::Everything();
    std::shared_ptr<const DispatchChain> chain;
  };
  // The dispatcher of a routed controller: a RouteDispatcher over the targets' chains (see
  // route_dispatcher.h for how one is chosen). `targets` must not be empty.
  static std::shared_ptr<RouteDispatcher> RouteTo(std::string controller,
                                                  std::vector<RouteTarget> targets,
                                                  common::Clock* clock);

 private:
  CountingDispatcher counting_;
  std::unique_ptr<FencedDispatcher> fenced_;     // null without a fence
  controller::Dispatcher* outermost_ = nullptr;  // fenced_, else &counting_
};

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_DISPATCH_CHAIN_H_
