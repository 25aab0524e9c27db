// The configmap-replicator plugin: serves its controller on $CTRLHOST_PLUGIN_ADDRESS.
// REPLICATOR_NAMESPACE_SELECTOR (optional) limits the namespaces it copies into.
#include <cstdlib>

#include "plugins/configmap-replicator/replicator.h"
#include "sdk/cpp/plugin.h"

int main() {
  ctrlhost::replicator::Options options;
  if (const char* sel = std::getenv("REPLICATOR_NAMESPACE_SELECTOR")) {
    options.namespace_selector = sel;
  }
  ctrlhost::sdk::Plugin plugin("configmap-replicator", "1.0.0");
  plugin.Add(ctrlhost::replicator::MakeController(options));
  return plugin.Run();
}
