// The shared-cache benchmark's plugin (bench/README.md, `shared-cache`): the ctrlhost side of
// the same small controller as clientgo/main.go. Four controllers, one per watched kind
// (ConfigMaps, Secrets, Deployments and the benchmark's custom resource `Gadget`), whose
// reconcile reads the request's object and changes nothing. Served on $CTRLHOST_PLUGIN_ADDRESS
// by the C++ SDK; the host execs and supervises it like any plugin. Controller names are unique
// in a host, so each operator's copy gets its own: "configmaps$SHARED_CACHE_SUFFIX", ...
#include <cstdlib>
#include <string>

#include "sdk/cpp/plugin.h"
#include "sdk/cpp/request.h"
#include "sdk/cpp/result.h"

namespace {

ctrlhost::sdk::Result Reconcile(const ctrlhost::sdk::Request& req) {
  (void)req.exists();
  return ctrlhost::sdk::Result();
}

ctrlhost::sdk::ControllerBuilder Controller(const char* name, const char* group,
                                            const char* version, const char* kind) {
  const char* suffix = std::getenv("SHARED_CACHE_SUFFIX");
  ctrlhost::sdk::ControllerBuilder builder(std::string(name) + (suffix != nullptr ? suffix : ""));
  builder.For(group, version, kind).MaxConcurrent(2).Reconcile(Reconcile);
  return builder;
}

}  // namespace

int main() {
  ctrlhost::sdk::Plugin plugin("shared-cache", "1.0.0");
  plugin.Add(Controller("configmaps", "", "v1", "ConfigMap"));
  plugin.Add(Controller("secrets", "", "v1", "Secret"));
  plugin.Add(Controller("deployments", "apps", "v1", "Deployment"));
  plugin.Add(Controller("gadgets", "shared.bench.ctrlhost.dev", "v1", "Gadget"));
  return plugin.Run();
}
