#include "sdk/cpp/resource_sets.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ctrlhost::sdk {
namespace {

bool DebugLogging() {
  const char* level = std::getenv("CTRLHOST_LOG_LEVEL");
  return level != nullptr && std::strcmp(level, "debug") == 0;
}

}  // namespace

ResourceRouter::ResourceRouter() : state_(std::make_shared<State>()) {}

absl::Status ResourceRouter::Add(ResourceSet set) {
  if (set.name.empty()) return absl::InvalidArgumentError("a resource set needs a name");
  if (!set.handles || !set.reconcile) {
    return absl::InvalidArgumentError(
        absl::StrCat("resource set \"", set.name, "\" needs handles and reconcile"));
  }
  for (const ResourceSet& s : state_->sets) {
    if (s.name == set.name) {
      return absl::InvalidArgumentError(
          absl::StrCat("resource set \"", set.name, "\" is already defined"));
    }
  }
  state_->sets.push_back(std::move(set));
  return absl::OkStatus();
}

Result ResourceRouter::Route(const Request& request) const {
  if (!request.exists()) return Result();
  std::vector<const ResourceSet*> matches;
  for (const ResourceSet& set : state_->sets) {
    if (set.handles(request)) matches.push_back(&set);
  }
  if (matches.size() == 1) {
    const ResourceSet& set = *matches[0];
    nlohmann::json context = nlohmann::json::object();
    if (set.init_context) {
      absl::StatusOr<nlohmann::json> made = set.init_context(request);
      if (!made.ok()) return Result::FromStatus(made.status());
      context = *std::move(made);
    }
    return set.reconcile(request, context);
  }
  if (matches.empty()) {
    state_->skipped.fetch_add(1, std::memory_order_relaxed);
    if (DebugLogging()) {
      std::fprintf(stderr, "DEBUG no resource set handles the object: skipped key=%s/%s\n",
                   request.namespace_().c_str(), request.name().c_str());
    }
    return Result();
  }
  std::vector<std::string> names;
  for (const ResourceSet* set : matches) names.push_back(absl::StrCat("\"", set->name, "\""));
  const std::string message =
      absl::StrCat("the object matches ", matches.size(),
                   " resource sets: ", absl::StrJoin(names, ", "), "; exactly one must handle it");
  Result result = Result::TerminalError(message);
  result.SetCondition("Reconciled", false, kReasonAmbiguousRoute, message);
  result.Event(EventType::kWarning, kReasonAmbiguousRoute, message);
  return result;
}

ReconcileFn ResourceRouter::Build() const {
  ResourceRouter router = *this;  // shares state_
  return [router](const Request& request) { return router.Route(request); };
}

uint64_t ResourceRouter::skipped() const { return state_->skipped.load(std::memory_order_relaxed); }

}  // namespace ctrlhost::sdk
