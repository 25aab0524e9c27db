// The configmap-replicator controller: copies labelled ConfigMaps into matching namespaces.
//
// A source ConfigMap carries the label ctrlhost.dev/replicate=true and the annotation
// ctrlhost.dev/replicate-to: <namespace label selector> (kubectl syntax, e.g. "team in (a,b)";
// "" or absent: every namespace). The controller's primary is the Namespace: for each namespace
// it desires a copy of every source whose selector matches the namespace's labels, except
// sources in that namespace itself. Copies have the source's name, data and binaryData, and the
// label ctrlhost.dev/replica-of=<source namespace>.<source name>; the host prunes copies that
// are no longer desired (Owns ConfigMap with delete_absent).
//
// Why the Namespace is the primary: a plugin may write only its primary's namespace, and for a
// Namespace primary that is the namespace itself, so every write stays inside the protocol's
// rules. Sources arrive as related objects (Watches ConfigMap with the replicate label, mapped
// with enqueue-all, include_in_requests), so a new or changed source reconciles every namespace
// and a new namespace gets its copies on its first reconcile.
//
// Thread-safety: the reconcile function is pure and may run concurrently.
#ifndef CTRLHOST_PLUGINS_CONFIGMAP_REPLICATOR_REPLICATOR_H_
#define CTRLHOST_PLUGINS_CONFIGMAP_REPLICATOR_REPLICATOR_H_

#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "sdk/cpp/controller.h"
#include "sdk/cpp/request.h"

namespace ctrlhost::replicator {

inline constexpr char kReplicateLabel[] = "ctrlhost.dev/replicate";
inline constexpr char kReplicateToAnnotation[] = "ctrlhost.dev/replicate-to";
inline constexpr char kReplicaOfLabel[] = "ctrlhost.dev/replica-of";

struct Options {
  // Only namespaces matching this label selector are primaries ("" = all).
  std::string namespace_selector;
};

// The copies namespace `request` should hold. Sources with an invalid selector are skipped and
// reported in `problems` (one line each, for Warning events).
std::vector<nlohmann::json> DesiredReplicas(const sdk::Request& request,
                                            std::vector<std::string>* problems);

// The controller "configmap-replicator".
sdk::ControllerBuilder MakeController(const Options& options = {});

}  // namespace ctrlhost::replicator

#endif  // CTRLHOST_PLUGINS_CONFIGMAP_REPLICATOR_REPLICATOR_H_
