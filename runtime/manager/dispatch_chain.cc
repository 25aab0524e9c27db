#include "runtime/manager/dispatch_chain.h"

#include <utility>

namespace ctrlhost::manager {

DispatchChain::DispatchChain(controller::Dispatcher* plugin, Fence* fence, common::Clock* clock)
    : counting_(plugin, clock) {
  outermost_ = &counting_;
  if (fence != nullptr) {
    fenced_ = std::make_unique<FencedDispatcher>(&counting_, fence);
    outermost_ = fenced_.get();
  }
}

std::shared_ptr<RouteDispatcher> DispatchChain::RouteTo(std::string controller,
                                                        std::vector<RouteTarget> targets,
                                                        common::Clock* clock) {
  std::vector<Route> routes;
  routes.reserve(targets.size());
  for (RouteTarget& t : targets) {
    // Aliases the chain's owner: the plugin stays alive while a route can send to it.
    std::shared_ptr<controller::Dispatcher> dispatcher(t.chain, t.chain->dispatcher());
    routes.push_back(Route{std::move(t.name), std::move(t.plugin), std::move(t.selector),
                           std::move(dispatcher)});
  }
  return std::make_shared<RouteDispatcher>(std::move(controller), std::move(routes), clock);
}

}  // namespace ctrlhost::manager
