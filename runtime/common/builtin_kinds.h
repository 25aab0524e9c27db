// What ctrlhost knows of Kubernetes' built-in kinds without an API server to ask, shared by the
// host's offline commands (`ctrlhost test --check`, `ctrlhost replay`) and the C++ SDK's testing
// helpers (sdk/cpp/host_judgement.h), so that both judge a plugin's answers alike.
//
//   if (!common::HasStatusSubresource("", "ConfigMap")) ...   // a ConfigMap has no status
#ifndef CTRLHOST_RUNTIME_COMMON_BUILTIN_KINDS_H_
#define CTRLHOST_RUNTIME_COMMON_BUILTIN_KINDS_H_

#include "absl/strings/string_view.h"

namespace ctrlhost::common {

// Whether kind `group`/`kind` serves a status subresource, as discovery would say: the built-in
// kinds operators touch that have none (they have no status at all) are listed; every other
// kind, custom ones included, is taken to have one (a CRD without subresources.status cannot be
// told apart offline). Thread-safe.
bool HasStatusSubresource(absl::string_view group, absl::string_view kind);

}  // namespace ctrlhost::common

#endif  // CTRLHOST_RUNTIME_COMMON_BUILTIN_KINDS_H_
