// The VersionedApp controller (ref.ctrlhost.dev/v1alpha1): the reference plugin that uses every
// piece of the SDK's controller model at once (README.md; Python and Node ports in
// plugins/versioned-app-py and plugins/versioned-app-node answer identically).
//
// A VersionedApp runs spec.image:spec.version. Its children are built with the resource
// builders (builders.h): ConfigMap <name>-config (spec.config), Deployment <name>, Service
// <name>, and for version 2 a ServiceAccount <name> and a metrics port.
//
//  1. Resource sets (resource_sets.h): objects whose spec.version has major 2 go to the set
//     "v2", every other object to "v1" (which refuses majors other than 1 as InvalidSpec).
//  2. Context flags (pass_context.h): the children form a DependentChain; the first step, the
//     ConfigMap's, cancels the rest of the pass while the object is on hold (listed in the hold
//     file): the Deployment and Service are neither created nor changed.
//  3. Stage callbacks (stage_callbacks.h) on the Deployment: pre-update "refuse-downgrade"
//     stops a change to a lower version (terminal error, phase Error, Degraded); post-create
//     "record-created" records a Normal event DeploymentCreated.
//  4. The standard status (operator_status.h): phase, Available/Progressing/Degraded and the
//     kstatus conditions, operatorVersion/targetVersion/observedVersion, observedGeneration.
//     The Deployment counts as ready once it carries the target version (label
//     app.kubernetes.io/version); the test servers run no pods, so readyReplicas is not used.
//  5. A background task "hold-file" polls the hold file ($VERSIONED_APP_HOLD_FILE, one
//     "namespace/name" a line, # comments) every second and enqueues the objects whose hold
//     state changed, so taking an object off hold reconciles it at once.
//  6. Resource builders for every child, with the config-hash pod annotation.
//
// Thread-safety: the reconcile function runs concurrently for different objects (never twice
// for one: the host guarantees it) and shares nothing but constants; the task has its own
// thread and state. ReadHoldFile is a pure function of the file.
#ifndef CTRLHOST_PLUGINS_VERSIONED_APP_VERSIONED_APP_H_
#define CTRLHOST_PLUGINS_VERSIONED_APP_VERSIONED_APP_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sdk/cpp/controller.h"

namespace ctrlhost::versioned_app {

inline constexpr char kGroup[] = "ref.ctrlhost.dev";
inline constexpr char kVersion[] = "v1alpha1";
inline constexpr char kKind[] = "VersionedApp";
// The plugin's own version: status.operatorVersion.
inline constexpr char kOperatorVersion[] = "1.0.0";
inline constexpr char kHoldFileEnv[] = "VERSIONED_APP_HOLD_FILE";

// "MAJOR.MINOR.PATCH", each a decimal number of at most 9 digits.
struct SemVer {
  int major = 0;
  int minor = 0;
  int patch = 0;
  bool operator<(const SemVer& o) const;
};
absl::StatusOr<SemVer> ParseSemVer(absl::string_view text);

// The hold file's keys ("namespace/name"), and the lines that are not one. A missing file is
// an empty list (nothing on hold); an unreadable one is an error.
struct HoldList {
  std::set<std::string> keys;
  std::vector<std::string> malformed;
};
absl::StatusOr<HoldList> ReadHoldFile(const std::string& path);

// The controller "versioned-app". `hold_file` may be empty: nothing is ever on hold and the
// task only waits to be stopped.
sdk::ControllerBuilder MakeController(std::string hold_file);

}  // namespace ctrlhost::versioned_app

#endif  // CTRLHOST_PLUGINS_VERSIONED_APP_VERSIONED_APP_H_
