#include "plugins/configmap-replicator/replicator.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/kube/selector.h"
#include "sdk/cpp/handlers.h"
#include "sdk/cpp/result.h"

namespace ctrlhost::replicator {
namespace {

// A label value may be at most 63 characters; longer "<ns>.<name>" pairs are cut (the label
// is informational: the owner reference ties a copy to its namespace, not to the source).
std::string ReplicaOf(const std::string& ns, const std::string& name) {
  std::string value = absl::StrCat(ns, ".", name);
  if (value.size() > 63) value.resize(63);
  while (!value.empty() && !std::isalnum(static_cast<unsigned char>(value.back()))) {
    value.pop_back();
  }
  return value;
}

}  // namespace

std::vector<nlohmann::json> DesiredReplicas(const sdk::Request& request,
                                            std::vector<std::string>* problems) {
  const kube::Labels ns_labels = request.labels();
  // Sources sorted by (namespace, name) so that a name claimed by two sources resolves the same
  // way every time: the first wins, the others are reported.
  std::vector<const sdk::Object*> sources = request.RelatedOfKind("ConfigMap", "v1");
  std::sort(sources.begin(), sources.end(), [](const sdk::Object* a, const sdk::Object* b) {
    return std::make_pair(a->namespace_(), a->name()) < std::make_pair(b->namespace_(), b->name());
  });
  std::map<std::string, std::string> claimed;  // copy name -> source
  std::vector<nlohmann::json> out;
  for (const sdk::Object* source : sources) {
    const std::string src_ns = source->namespace_();
    const std::string src_name = source->name();
    if (src_ns == request.name() || src_name.empty()) continue;
    const kube::Labels labels = kube::LabelsOf(source->json);
    auto replicate = labels.find(kReplicateLabel);
    if (replicate == labels.end() || replicate->second != "true") continue;
    std::string selector_text;
    if (const nlohmann::json* a = sdk::FindPath(source->json, "metadata.annotations")) {
      if (a->is_object() && a->contains(kReplicateToAnnotation) &&
          (*a)[kReplicateToAnnotation].is_string()) {
        selector_text = (*a)[kReplicateToAnnotation].get<std::string>();
      }
    }
    absl::StatusOr<kube::LabelSelector> selector = kube::LabelSelector::Parse(selector_text);
    if (!selector.ok()) {
      problems->push_back(absl::StrCat("ConfigMap ", src_ns, "/", src_name, ": annotation ",
                                       kReplicateToAnnotation, ": ", selector.status().message()));
      continue;
    }
    if (!selector->Matches(ns_labels)) continue;
    const std::string source_id = absl::StrCat(src_ns, "/", src_name);
    auto [it, inserted] = claimed.emplace(src_name, source_id);
    if (!inserted) {
      problems->push_back(absl::StrCat("ConfigMap ", source_id, " is not copied: ", it->second,
                                       " already provides \"", src_name, "\""));
      continue;
    }
    nlohmann::json copy = sdk::NewObject("v1", "ConfigMap", src_name);
    copy["metadata"]["namespace"] = request.name();
    copy["metadata"]["labels"] = {{kReplicaOfLabel, ReplicaOf(src_ns, src_name)}};
    copy["data"] = source->json.value("data", nlohmann::json::object());
    if (source->json.contains("binaryData")) copy["binaryData"] = source->json["binaryData"];
    out.push_back(std::move(copy));
  }
  return out;
}

sdk::ControllerBuilder MakeController(const Options& options) {
  // The CRUD style: current copies (children), desired copies, and a plan whose deletes the
  // host performs by pruning.
  sdk::CrudResource copies("v1", "ConfigMap", [](const sdk::Request& request) {
    std::vector<std::string> ignored;
    return absl::StatusOr<std::vector<nlohmann::json>>(DesiredReplicas(request, &ignored));
  });
  sdk::ControllerBuilder builder("configmap-replicator");
  builder.For("", "v1", "Namespace")
      .LabelSelector(options.namespace_selector)
      .Watches("", "v1", "ConfigMap", sdk::Mapping::EnqueueAll(),
               {absl::StrCat(kReplicateLabel, "=true"), /*include_in_requests=*/true})
      .Owns("", "v1", "ConfigMap", {/*delete_absent=*/true})
      .MaxConcurrent(4)
      .Reconcile(
          copies.Build([](const sdk::Request& request, const sdk::CrudPlan&, sdk::Result* result) {
            std::vector<std::string> problems;
            DesiredReplicas(request, &problems);
            for (const std::string& p : problems) {
              result->Event(sdk::EventType::kWarning, "ReplicationSkipped", p);
            }
          }));
  return builder;
}

}  // namespace ctrlhost::replicator
