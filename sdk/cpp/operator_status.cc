#include "sdk/cpp/operator_status.h"

#include "absl/strings/str_cat.h"

namespace ctrlhost::sdk {
namespace {

bool WasAvailable(const Request& request) {
  const nlohmann::json* conditions = FindPath(request.object(), "status.conditions");
  if (conditions == nullptr || !conditions->is_array()) return false;
  for (const nlohmann::json& c : *conditions) {
    if (c.is_object() && c.value("type", nlohmann::json()) == "Available") {
      return c.value("status", nlohmann::json()) == "True";
    }
  }
  return false;
}

std::string PreviousObservedVersion(const Request& request) {
  const nlohmann::json* v = FindPath(request.object(), "status.observedVersion");
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

}  // namespace

void SetOperatorStatus(const Request& request, const OperatorStatusInput& input, Result* result) {
  const std::string target =
      input.target_version.empty() ? input.operator_version : input.target_version;
  const std::string previous = PreviousObservedVersion(request);
  nlohmann::json& status = result->Status();
  status["operatorVersion"] = input.operator_version;
  status["targetVersion"] = target;
  status["observedGeneration"] = request.generation();
  auto set = [&](const char* type, bool value, const std::string& reason,
                 const std::string& message) {
    result->SetCondition(type, value, reason, message);
  };
  const std::string waiting = input.message.empty() ? "not every child is ready" : input.message;
  if (request.deleting()) {
    status["phase"] = "Deleting";
    set("Available", false, "Deleting", "the object is being deleted");
    set("Progressing", true, "Deleting", "the object is being deleted");
    set("Degraded", false, "AsExpected", "");
    set("Ready", false, "Deleting", "the object is being deleted");
    set("Reconciling", true, "Deleting", "the object is being deleted");
    set("Stalled", false, "AsExpected", "");
  } else if (!input.failure.empty()) {
    status["phase"] = "Error";
    set("Available", input.children_ready, input.children_ready ? "AsExpected" : "NotReady",
        input.children_ready ? "" : waiting);
    set("Progressing", false, input.failure_reason, input.failure);
    set("Degraded", true, input.failure_reason, input.failure);
    set("Ready", false, input.failure_reason, input.failure);
    set("Reconciling", false, input.failure_reason, input.failure);
    set("Stalled", true, input.failure_reason, input.failure);
  } else if (input.children_ready) {
    const std::string message = absl::StrCat("every child is ready at version ", target);
    status["phase"] = "Deployed";
    status["observedVersion"] = target;
    set("Available", true, "AsExpected", message);
    set("Progressing", false, "AsExpected", message);
    set("Degraded", false, "AsExpected", "");
    set("Ready", true, "AsExpected", message);
    set("Reconciling", false, "AsExpected", "");
    set("Stalled", false, "AsExpected", "");
  } else if (!previous.empty() && previous != target) {
    const std::string message =
        absl::StrCat("upgrading from ", previous, " to ", target, ": ", waiting);
    const bool available = WasAvailable(request);
    status["phase"] = "Upgrading";
    set("Available", available, available ? "PreviousVersionAvailable" : "Upgrading", message);
    set("Progressing", true, "Upgrading", message);
    set("Degraded", false, "AsExpected", "");
    set("Ready", false, "Upgrading", message);
    set("Reconciling", true, "Upgrading", message);
    set("Stalled", false, "AsExpected", "");
  } else {
    status["phase"] = "Deploying";
    set("Available", false, "Deploying", waiting);
    set("Progressing", true, "Deploying", waiting);
    set("Degraded", false, "AsExpected", "");
    set("Ready", false, "Deploying", waiting);
    set("Reconciling", true, "Deploying", waiting);
    set("Stalled", false, "AsExpected", "");
  }
}

}  // namespace ctrlhost::sdk
