// Least-privilege RBAC for a set of operators, derived from what their plugins declare.
//
// The host writes only what a controller's ControllerSpec allows (the applier refuses anything
// else before the first write), and it reads only what it watches, so the rules follow from
// the declarations and the operator file's overrides:
//
//   primary kind      get list watch (where it is watched), patch (finalizers, desired objects
//                     and patches on the primary), status subresource get patch
//   owned kinds       get list watch create patch; delete only with delete_absent (pruning)
//   watched kinds     get list watch, cluster-wide (extra watches are never namespace-bound)
//   events            create patch, where primaries live ("default" for cluster-scoped ones)
//   leases            with leader election (AddLeaderElectionRules): get list watch create
//                     update delete on coordination.k8s.io leases in the Lease's namespace
//                     only (a Role): the elector reads, creates and renews its Lease and
//                     standbys watch it; rings of Leases (--shard-ring, the balance of
//                     per-operator Leases) list their members' and delete long-dead ones
//
// A controller held to exactly one namespace watches its primary and namespaced owned kinds
// there (manager/controller_group.cc) and gets a Role in that namespace; several namespaces are
// watched cluster-wide (reads in the ClusterRole) but written only in those namespaces (Roles);
// no namespace means a ClusterRole. The host never PUTs (update) what its controllers touch
// (only its own Lease) and reads no CRDs; discovery
// (/api, /apis) is open to every authenticated user (system:discovery).
//
// Resource names come from the kinds by Kubernetes' own guess (lowercase plural:
// "WebApp" -> "webapps", "Policy" -> "policies", "Ingress" -> "ingresses"), as for CRDs whose
// plural follows the rule; the scope of a primary is taken as namespaced unless it owns a
// cluster-scoped kind or is a well-known cluster-scoped built-in (Namespace, Node, ...).
//
//   std::vector<DeclaredController> controllers = ...;  // from Describe + the operator file
//   RbacOptions options;  // names, service account
//   std::string yaml = RenderRbac(options, controllers);
//
// Thread-compatible: plain functions of their arguments.
#ifndef CTRLHOST_RUNTIME_EXE_RBAC_H_
#define CTRLHOST_RUNTIME_EXE_RBAC_H_

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"

namespace ctrlhost::exe {

// One controller as the host would run it: the plugin's declaration and the namespaces in
// effect (the operator file's override when it sets any, else the plugin's).
struct DeclaredController {
  pluginpb::ControllerSpec spec;
  std::vector<std::string> namespaces;
};

struct RbacOptions {
  std::string name = "ctrlhost";                       // of the ClusterRole, Roles and bindings
  std::string service_account = "ctrlhost";            // the host's ServiceAccount ...
  std::string service_account_namespace = "ctrlhost";  // ... and its namespace
};

// (apiGroup, resource) -> verbs.
using RuleSet = std::map<std::pair<std::string, std::string>, std::set<std::string>>;

// Rules by scope: "" is the cluster (ClusterRole), any other key a namespace (Role).
using ScopedRules = std::map<std::string, RuleSet>;

// The rules the host needs to run `controllers`.
ScopedRules DeriveRules(const std::vector<DeclaredController>& controllers);

// Adds what `ctrlhost run --leader-elect` needs: get, watch (standbys watch the Lease for its
// release), create and update on coordination.k8s.io leases in `lease_namespace` (a Role; never
// cluster-wide). Not restricted by resourceNames: create cannot be, and the rule stays valid
// whatever --leader-elect-resource-name is.
void AddLeaderElectionRules(const std::string& lease_namespace, ScopedRules& rules);

// Kubernetes' guess of a kind's resource name (k8s.io/apimachinery meta.UnsafeGuessKindToResource).
std::string GuessResource(const std::string& kind);

// The ClusterRole/ClusterRoleBinding (when cluster rules exist) and a Role/RoleBinding per
// namespace, as a YAML stream ("---" separated), sorted so that equal inputs print equal text.
std::string RenderRbac(const RbacOptions& options, const ScopedRules& rules);

}  // namespace ctrlhost::exe

#endif  // CTRLHOST_RUNTIME_EXE_RBAC_H_
