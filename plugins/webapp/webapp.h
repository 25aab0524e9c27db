// The WebApp controller (apps.ctrlhost.dev/v1alpha1): a reference plugin on the C++ SDK.
//
// A WebApp owns a ConfigMap (<name>-config, spec.config), a Deployment (<name>: spec.image,
// spec.replicas, spec.port, spec.env) and a Service (<name>: spec.port). Its status reports
// readyReplicas from the Deployment child, observedGeneration, and the conditions Ready and
// Progressing. The finalizer apps.ctrlhost.dev/external-record stands for cleanup outside the
// cluster: the controller keeps one record file per WebApp in a directory (RecordStore) and
// deletes it when the WebApp is deleted, before answering Finalized.
//
//   sdk::Plugin plugin("webapp", "1.0.0");
//   webapp::RecordStore records(webapp::RecordStore::DefaultDir());
//   plugin.Add(webapp::MakeController(&records));
//   return plugin.Run();
//
// Thread-safety: the reconcile function may run concurrently for different WebApps (never for
// one: the host guarantees per-key exclusivity). RecordStore touches one file per key and is
// safe for that use.
#ifndef CTRLHOST_PLUGINS_WEBAPP_WEBAPP_H_
#define CTRLHOST_PLUGINS_WEBAPP_WEBAPP_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "sdk/cpp/controller.h"

namespace ctrlhost::webapp {

inline constexpr char kGroup[] = "apps.ctrlhost.dev";
inline constexpr char kVersion[] = "v1alpha1";
inline constexpr char kKind[] = "WebApp";
inline constexpr char kFinalizer[] = "apps.ctrlhost.dev/external-record";
// The pod template annotation holding sdk::ConfigHash(spec.config).
inline constexpr char kConfigHashAnnotation[] = "apps.ctrlhost.dev/config-hash";

// One JSON file per WebApp, "<namespace>_<name>.json", written atomically (temporary file and
// rename) and only when its content changes.
class RecordStore {
 public:
  // $WEBAPP_RECORD_DIR, else "$TMPDIR/ctrlhost-webapp-records" (TMPDIR defaulting to /tmp).
  static std::string DefaultDir();
  explicit RecordStore(std::string dir) : dir_(std::move(dir)) {}

  // Creates the directory if needed and writes the record. InvalidArgument for a namespace or
  // name that is not a DNS-1123 name (keeps untrusted names out of the file system path).
  absl::Status Write(absl::string_view ns, absl::string_view name, const nlohmann::json& record);
  // Removes the record; a missing record is not an error.
  absl::Status Remove(absl::string_view ns, absl::string_view name);
  // The record, or nullopt when there is none.
  std::optional<nlohmann::json> Read(absl::string_view ns, absl::string_view name) const;
  absl::StatusOr<std::string> PathFor(absl::string_view ns, absl::string_view name) const;
  const std::string& dir() const { return dir_; }

 private:
  const std::string dir_;
};

// The controller "webapp". `records` is borrowed and must outlive it.
sdk::ControllerBuilder MakeController(RecordStore* records);

}  // namespace ctrlhost::webapp

#endif  // CTRLHOST_PLUGINS_WEBAPP_WEBAPP_H_
