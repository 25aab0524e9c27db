#include "runtime/manager/route_dispatcher.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "nlohmann/json.hpp"
#include "runtime/common/logging.h"

namespace ctrlhost::manager {
namespace {

std::string Describe(const Route& route) {
  return absl::StrCat("\"", route.name, "\" (plugin ", route.plugin, ", labelSelector \"",
                      route.selector.ToString(), "\")");
}

// The answer for an object several routes match: the applier records it like a plugin's
// terminal error, with our condition and event instead of the generic ones.
pluginpb::ReconcileResponse AmbiguousAnswer(const std::string& message) {
  pluginpb::ReconcileResponse response;
  response.mutable_error()->set_kind(pluginpb::ERROR_KIND_TERMINAL);
  response.mutable_error()->set_message(message);
  pluginpb::Condition* condition = response.add_conditions();
  condition->set_type("Reconciled");
  condition->set_status(pluginpb::CONDITION_STATUS_FALSE);
  condition->set_reason(kReasonAmbiguousRoute);
  condition->set_message(message);
  pluginpb::Event* event = response.add_events();
  event->set_type(pluginpb::EVENT_TYPE_WARNING);
  event->set_reason(kReasonAmbiguousRoute);
  event->set_message(message);
  return response;
}

}  // namespace

RouteDispatcher::RouteDispatcher(std::string controller, std::vector<Route> routes,
                                 common::Clock* clock)
    : controller_(std::move(controller)),
      routes_(std::move(routes)),
      ambiguous_log_({.per_second = 1, .burst = 10, .clock = clock}) {}

int RouteDispatcher::LastRoute(const std::string& key, bool forget) {
  common::MutexLock lock(&mu_);
  auto it = last_.find(key);
  if (it == last_.end()) return -1;
  const int route = it->second;
  if (forget) last_.erase(it);
  return route;
}

void RouteDispatcher::Forward(int route, const std::string& key, pluginpb::ReconcileCall call,
                              absl::Time deadline, controller::ReconcileCallback done) {
  int was = -1;
  {
    common::MutexLock lock(&mu_);
    ++figures_.routed[routes_[route].name];
    if (!call.object().empty()) {
      auto [it, added] = last_.try_emplace(key, route);
      if (!added) {
        was = it->second;
        it->second = route;
      }
      if (was == route) was = -1;
      if (was >= 0) ++figures_.moved;
    }
  }
  if (was >= 0) {
    common::LogInfo("key moved to another route", {{"controller", controller_},
                                                   {"key", key},
                                                   {"from", routes_[was].name},
                                                   {"to", routes_[route].name},
                                                   {"plugin", routes_[route].plugin}});
  }
  routes_[route].dispatcher->Dispatch(std::move(call), deadline, std::move(done));
}

void RouteDispatcher::Dispatch(pluginpb::ReconcileCall call, absl::Time deadline,
                               controller::ReconcileCallback done) {
  const std::string key =
      call.namespace_().empty() ? call.name() : absl::StrCat(call.namespace_(), "/", call.name());
  if (call.object().empty()) {
    // Gone: its last route hears about it (and forgets it); never reconciled here: the first.
    const int last = LastRoute(key, /*forget=*/true);
    Forward(last >= 0 ? last : 0, key, std::move(call), deadline, std::move(done));
    return;
  }
  const nlohmann::json object = nlohmann::json::parse(call.object(), nullptr, false);
  if (object.is_discarded() || !object.is_object()) {
    done(absl::InvalidArgumentError(
        absl::StrCat("controller ", controller_, ": cannot route ", key, ": object is not JSON")));
    return;
  }
  const kube::Labels labels = kube::LabelsOf(object);
  std::vector<int> matches;
  for (size_t i = 0; i < routes_.size(); ++i) {
    if (routes_[i].selector.Matches(labels)) matches.push_back(static_cast<int>(i));
  }
  if (matches.size() == 1) {
    Forward(matches[0], key, std::move(call), deadline, std::move(done));
    return;
  }
  if (matches.empty()) {
    const auto meta = object.find("metadata");
    const bool deleting = meta != object.end() && meta->is_object() &&
                          meta->contains("deletionTimestamp") &&
                          !(*meta)["deletionTimestamp"].is_null();
    if (deleting) {
      // Its finalizer (the first route's plugin declared it) must be released by someone:
      // the route that last reconciled it, else the first one.
      const int last = LastRoute(key, /*forget=*/false);
      Forward(last >= 0 ? last : 0, key, std::move(call), deadline, std::move(done));
      return;
    }
    {
      common::MutexLock lock(&mu_);
      ++figures_.unrouted;
    }
    common::LogDebug("no route matches the object: not reconciled",
                     {{"controller", controller_}, {"key", key}});
    done(pluginpb::ReconcileResponse());
    return;
  }
  std::vector<std::string> names;
  for (int i : matches) names.push_back(Describe(routes_[i]));
  const std::string message =
      absl::StrCat("the object matches ", matches.size(), " routes of controller \"", controller_,
                   "\": ", absl::StrJoin(names, " and "),
                   "; it is not reconciled until its labels match exactly one (spec.routes)");
  {
    common::MutexLock lock(&mu_);
    ++figures_.ambiguous;
  }
  uint64_t suppressed = 0;
  if (ambiguous_log_.Allow(&suppressed)) {
    common::LogWarning("ambiguous route: object not reconciled", {{"controller", controller_},
                                                                  {"key", key},
                                                                  {"error", message},
                                                                  {"suppressed", suppressed}});
  }
  done(AmbiguousAnswer(message));
}

RouteFigures RouteDispatcher::Figures() const {
  common::MutexLock lock(&mu_);
  return figures_;
}

}  // namespace ctrlhost::manager
