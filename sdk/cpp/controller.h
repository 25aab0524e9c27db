// Declaring a controller: what it reconciles, owns and watches, and its reconcile function.
//
//   sdk::ControllerBuilder("webapp")
//       .For("apps.ctrlhost.dev", "v1alpha1", "WebApp")
//       .Owns("apps", "v1", "Deployment")
//       .Owns("", "v1", "ConfigMap", {.delete_absent = true})
//       .Watches("", "v1", "Secret", sdk::Mapping::NameLabel("apps.ctrlhost.dev/webapp"))
//       .Finalizer("apps.ctrlhost.dev/external-record")
//       .MaxConcurrent(4)
//       .Resync(absl::Minutes(10))
//       .Reconcile([](const sdk::Request& req) { return sdk::Result(); });
//
// The builder produces the protocol's `ControllerSpec` (plugin.proto); `Build()` checks what the
// host would refuse anyway (name syntax, a primary kind, a reconcile function, a finalizer with a
// domain, negative durations) so a mistake shows when the plugin starts, with a precise message.
// Defaults: RequestContents.children is on when the controller owns kinds, related_objects when
// a watch has include_in_requests, and metadata.managedFields is stripped from every object.
//
// Thread-safety: a builder is a plain value. A built Controller is immutable; its reconcile
// function is called concurrently from the SDK's worker threads (never twice at once for one
// key: the host guarantees per-key exclusivity), so it must be safe to call concurrently.
#ifndef CTRLHOST_SDK_CPP_CONTROLLER_H_
#define CTRLHOST_SDK_CPP_CONTROLLER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "sdk/cpp/request.h"
#include "sdk/cpp/result.h"
#include "sdk/cpp/tasks.h"

namespace ctrlhost::sdk {

using ReconcileFn = std::function<Result(const Request&)>;

// How a change of a watched object maps to primaries (WatchedKind.mapping).
class Mapping {
 public:
  // The watched object's owner references name the primary.
  static Mapping OwnerReference(bool controller_only = true);
  // The watched object carries the primary's name in this label.
  static Mapping NameLabel(absl::string_view label);
  // The primary holds a label selector (or a plain label map) at this field path.
  static Mapping PrimarySelector(absl::string_view path);
  // The primary names watched objects at this field path ("spec.volumes[].secret.secretName").
  static Mapping FieldPath(absl::string_view path);
  // Every primary (optionally only those in the watched object's namespace).
  static Mapping EnqueueAll(bool same_namespace_only = false);

  // Writes the mapping into `kind`.
  void ApplyTo(pluginpb::WatchedKind* kind) const { kind->MergeFrom(proto_); }

 private:
  pluginpb::WatchedKind proto_;
};

struct OwnsOptions {
  bool delete_absent = false;   // prune children of this kind missing from desired objects
  bool cluster_scoped = false;  // the owned kind is cluster-scoped
};

struct WatchOptions {
  std::string label_selector;        // narrows the watched objects
  bool include_in_requests = false;  // deliver mapped objects as Request::related()
};

struct RequestOptions {
  std::optional<bool> children;         // unset: on when the controller owns kinds
  std::optional<bool> related_objects;  // unset: on when a watch has include_in_requests
  std::vector<pluginpb::GroupVersionKind> metadata_only_kinds;
  std::vector<std::string> strip_fields = {"metadata.managedFields"};
};

struct PredicateOptions {
  bool primary_status_changes = false;
  bool ignore_child_status_changes = false;
};

// A built controller: its spec and its reconcile function. Immutable, shared read-only.
class Controller {
 public:
  Controller(pluginpb::ControllerSpec spec, ReconcileFn fn,
             std::vector<std::pair<std::string, TaskFn>> tasks = {})
      : spec_(std::move(spec)), reconcile_(std::move(fn)), tasks_(std::move(tasks)) {}

  const std::string& name() const { return spec_.name(); }
  const pluginpb::ControllerSpec& spec() const { return spec_; }
  // Calls the reconcile function. Exceptions are the caller's to catch (the serving loop and
  // the test harness turn them into retryable errors).
  Result Reconcile(const Request& request) const { return reconcile_(request); }
  // The capabilities this controller's spec needs from the host.
  std::vector<pluginpb::Capability> RequiredCapabilities() const;
  // Its background tasks (name, function), in declaration order (tasks.h).
  const std::vector<std::pair<std::string, TaskFn>>& tasks() const { return tasks_; }

 private:
  pluginpb::ControllerSpec spec_;
  ReconcileFn reconcile_;
  std::vector<std::pair<std::string, TaskFn>> tasks_;
};

class ControllerBuilder {
 public:
  explicit ControllerBuilder(absl::string_view name);

  ControllerBuilder& For(absl::string_view group, absl::string_view version,
                         absl::string_view kind);
  ControllerBuilder& Owns(absl::string_view group, absl::string_view version,
                          absl::string_view kind, OwnsOptions options = {});
  ControllerBuilder& Watches(absl::string_view group, absl::string_view version,
                             absl::string_view kind, const Mapping& mapping,
                             WatchOptions options = {});
  ControllerBuilder& Finalizer(absl::string_view finalizer);
  ControllerBuilder& MaxConcurrent(uint32_t n);
  ControllerBuilder& Resync(absl::Duration period);
  ControllerBuilder& Namespaces(std::vector<std::string> namespaces);
  ControllerBuilder& LabelSelector(absl::string_view selector);
  ControllerBuilder& Schedule(absl::string_view cron, absl::string_view time_zone = "");
  ControllerBuilder& RequestContents(RequestOptions options);
  ControllerBuilder& Predicates(PredicateOptions options);
  ControllerBuilder& Reconcile(ReconcileFn fn);
  // A background task that runs while the host runs this controller on this plugin instance
  // (tasks.h). Names: lowercase RFC 1123 labels, unique within the controller.
  ControllerBuilder& BackgroundTask(absl::string_view name, TaskFn fn);

  // The spec as it stands (defaults applied), for inspection.
  pluginpb::ControllerSpec Spec() const;
  // InvalidArgument naming the field when the declaration cannot work.
  absl::StatusOr<std::shared_ptr<const Controller>> Build() const;

 private:
  pluginpb::ControllerSpec spec_;
  RequestOptions request_options_;
  std::optional<absl::Duration> resync_;
  ReconcileFn reconcile_;
  std::vector<std::pair<std::string, TaskFn>> tasks_;
};

// Runs one reconcile end to end, as the serving loop does: parses the call, calls the
// controller (an exception becomes a retryable error), validates the Result against the request
// and the capabilities in effect (an invalid Result becomes a retryable error naming the
// problem). Never throws; always returns a response carrying `request_id`.
pluginpb::ReconcileResponse Invoke(const Controller& controller, uint64_t request_id,
                                   const pluginpb::ReconcileCall& call,
                                   const std::set<pluginpb::Capability>& capabilities,
                                   std::shared_ptr<const std::atomic<bool>> cancelled = {});

// "group/version", or "version" for the core group.
std::string ApiVersion(const pluginpb::GroupVersionKind& gvk);
pluginpb::GroupVersionKind Gvk(absl::string_view group, absl::string_view version,
                               absl::string_view kind);

}  // namespace ctrlhost::sdk

#endif  // CTRLHOST_SDK_CPP_CONTROLLER_H_
