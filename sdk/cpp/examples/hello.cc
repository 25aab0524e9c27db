// The minimal plugin of sdk/cpp/README.md: copies every ConfigMap labelled hello=true to
// "<name>-hello" in the same namespace and records an event (a ConfigMap has no status, so no
// condition: the host would refuse one).
#include "sdk/cpp/sdk.h"

namespace sdk = ctrlhost::sdk;

sdk::Result Reconcile(const sdk::Request& req) {
  if (!req.exists() || req.deleting()) return sdk::Result();  // nothing to do for the gone
  sdk::Result result;
  nlohmann::json& copy = result.Desire(sdk::NewObject("v1", "ConfigMap", req.name() + "-hello"));
  // Labels of its own: a ConfigMap child of a ConfigMap gets none of the primary's by default
  // (with hello=true the copy would be a primary too); these say what it is.
  copy["metadata"]["labels"] = {{"hello-copy", "true"}};
  copy["data"] = req.object().value("data", nlohmann::json::object());
  result.Event(sdk::EventType::kNormal, "Copied", "copy is up to date");
  return result;
}

int main() {
  sdk::Plugin plugin("hello", "1.0.0");
  plugin.Add(sdk::ControllerBuilder("hello")
                 .For("", "v1", "ConfigMap")
                 .LabelSelector("hello=true")
                 .Owns("", "v1", "ConfigMap")
                 .Reconcile(Reconcile));
  return plugin.Run();
}
