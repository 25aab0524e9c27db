// The conformance "scenario" controller on the C++ SDK (scenario.py and scenario.js are the same
// controller on the Python and Node SDKs). A Scenario's spec.outcome picks the answer:
//   ok         desire ConfigMap <name> with spec.data, status {phase: Done}
//   requeue    status {phase: Waiting}, requeue after 30 s
//   retryable  a retryable error
//   terminal   a terminal error (and a Warning event)
//   forbidden  desire a Secret: a kind the controller does not own (the host must refuse it)
#include "sdk/cpp/sdk.h"

namespace sdk = ctrlhost::sdk;

sdk::Result Reconcile(const sdk::Request& req) {
  if (!req.exists() || req.deleting()) return sdk::Result();
  const std::string outcome = req.spec().value("outcome", "ok");
  sdk::Result result;
  if (outcome == "requeue") {
    result.Status()["phase"] = "Waiting";
    result.SetRequeueAfter(absl::Seconds(30));
  } else if (outcome == "retryable") {
    return sdk::Result::RetryableError("the scenario asks for a retry");
  } else if (outcome == "terminal") {
    result.Event(sdk::EventType::kWarning, "GivingUp", "the scenario asks to stop");
    result.SetError(sdk::ErrorKind::kTerminal, "the scenario asks to stop");
  } else if (outcome == "forbidden") {
    nlohmann::json& secret = result.Desire(sdk::NewObject("v1", "Secret", req.name()));
    secret["stringData"] = {{"token", "x"}};
  } else {
    nlohmann::json& cm = result.Desire(sdk::NewObject("v1", "ConfigMap", req.name()));
    cm["data"] = req.spec().value("data", nlohmann::json::object());
    result.Status()["phase"] = "Done";
  }
  return result;
}

int main() {
  sdk::Plugin plugin("scenario", "1.0.0");
  plugin.Add(sdk::ControllerBuilder("scenario")
                 .For("e2e.ctrlhost.dev", "v1", "Scenario")
                 .Owns("", "v1", "ConfigMap")
                 .Reconcile(Reconcile));
  return plugin.Run();
}
