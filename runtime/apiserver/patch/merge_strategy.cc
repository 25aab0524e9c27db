#include "runtime/apiserver/patch/merge_strategy.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ctrlhost::apiserver {
namespace {

FieldStrategy MergeByKey(absl::string_view key) {
  FieldStrategy s;
  s.merge = true;
  s.merge_key = std::string(key);
  return s;
}

FieldStrategy PrimitiveSet() {
  FieldStrategy s;
  s.merge = true;
  return s;
}

FieldStrategy RetainKeys() {
  FieldStrategy s;
  s.retain_keys = true;
  return s;
}

std::string Join(absl::string_view prefix, absl::string_view path) {
  return prefix.empty() ? std::string(path) : absl::StrCat(prefix, ".", path);
}

// PodSpec as declared in k8s.io/api/core/v1/types.go, under `prefix`.
void AddPodSpec(MergeStrategy& s, absl::string_view prefix) {
  FieldStrategy volumes = MergeByKey("name");
  volumes.retain_keys = true;
  s.Set(Join(prefix, "volumes"), volumes);
  for (absl::string_view list : {"initContainers", "containers", "ephemeralContainers"}) {
    const std::string c = Join(prefix, list);
    s.Set(c, MergeByKey("name"));
    s.Set(c + ".ports", MergeByKey("containerPort"));
    s.Set(c + ".env", MergeByKey("name"));
    s.Set(c + ".volumeMounts", MergeByKey("mountPath"));
    s.Set(c + ".volumeDevices", MergeByKey("devicePath"));
  }
  s.Set(Join(prefix, "imagePullSecrets"), MergeByKey("name"));
  s.Set(Join(prefix, "hostAliases"), MergeByKey("ip"));
  s.Set(Join(prefix, "topologySpreadConstraints"), MergeByKey("topologyKey"));
  s.Set(Join(prefix, "schedulingGates"), MergeByKey("name"));
  FieldStrategy claims = MergeByKey("name");
  claims.retain_keys = true;
  s.Set(Join(prefix, "resourceClaims"), claims);
  // tolerations, readinessGates, args, command, envFrom: no strategy, atomic.
}

MergeStrategy WithMeta() {
  MergeStrategy s;
  s.AddObjectMeta("");
  return s;
}

MergeStrategy* MakeDeployment() {
  auto* s = new MergeStrategy(WithMeta());
  s->Set("spec.strategy", RetainKeys());
  s->AddObjectMeta("spec.template");
  AddPodSpec(*s, "spec.template.spec");
  s->Set("status.conditions", MergeByKey("type"));
  return s;
}

MergeStrategy* MakeService() {
  auto* s = new MergeStrategy(WithMeta());
  s->Set("spec.ports", MergeByKey("port"));
  s->Set("status.conditions", MergeByKey("type"));
  return s;
}

MergeStrategy* MakeNamespace() {
  auto* s = new MergeStrategy(WithMeta());
  s->Set("status.conditions", MergeByKey("type"));
  return s;
}

MergeStrategy* MakeServiceAccount() {
  auto* s = new MergeStrategy(WithMeta());
  s->Set("secrets", MergeByKey("name"));
  return s;
}

}  // namespace

const MergeStrategy::Node* MergeStrategy::Node::Child(absl::string_view name) const {
  auto it = children.find(name);
  return it == children.end() ? nullptr : it->second.get();
}

const MergeStrategy::Node* MergeStrategy::Node::Find(absl::string_view path) const {
  const Node* node = this;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    node = node->Child(part);
    if (node == nullptr) return nullptr;
  }
  return node;
}

MergeStrategy& MergeStrategy::Set(absl::string_view path, FieldStrategy strategy) {
  Node* node = &root_;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    auto it = node->children.find(part);
    if (it == node->children.end()) {
      it = node->children.emplace(std::string(part), std::make_unique<Node>()).first;
    }
    node = it->second.get();
  }
  node->strategy = std::move(strategy);
  return *this;
}

MergeStrategy& MergeStrategy::AddObjectMeta(absl::string_view prefix) {
  const std::string meta = Join(prefix, "metadata");
  Set(meta + ".ownerReferences", MergeByKey("uid"));
  Set(meta + ".finalizers", PrimitiveSet());
  return *this;
}

const MergeStrategy* BuiltinMergeStrategy(absl::string_view group, absl::string_view kind) {
  // Built once, never destroyed: callers may hold the pointer for the life of the process.
  static const MergeStrategy* const kMetaOnly = new MergeStrategy(WithMeta());
  static const MergeStrategy* const kDeployment = MakeDeployment();
  static const MergeStrategy* const kService = MakeService();
  static const MergeStrategy* const kNamespace = MakeNamespace();
  static const MergeStrategy* const kServiceAccount = MakeServiceAccount();
  if (group.empty()) {
    if (kind == "ConfigMap" || kind == "Secret" || kind == "Event") return kMetaOnly;
    if (kind == "Service") return kService;
    if (kind == "Namespace") return kNamespace;
    if (kind == "ServiceAccount") return kServiceAccount;
    return nullptr;
  }
  if (group == "apps" && kind == "Deployment") return kDeployment;
  if (group == "coordination.k8s.io" && kind == "Lease") return kMetaOnly;
  if (group == "events.k8s.io" && kind == "Event") return kMetaOnly;
  return nullptr;
}

}  // namespace ctrlhost::apiserver
