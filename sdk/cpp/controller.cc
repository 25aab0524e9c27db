#include "sdk/cpp/controller.h"

#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"

namespace ctrlhost::sdk {
namespace {

// Lowercase RFC 1123 label: [a-z0-9-], starts and ends alphanumeric, at most 63 characters.
bool ValidControllerName(absl::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  for (char c : name) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-')) return false;
  }
  return name.front() != '-' && name.back() != '-';
}

google::protobuf::Duration ToProtoDuration(absl::Duration d) {
  google::protobuf::Duration out;
  const int64_t seconds = absl::IDivDuration(d, absl::Seconds(1), &d);
  out.set_seconds(seconds);
  out.set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(d)));
  return out;
}

}  // namespace

std::string ApiVersion(const pluginpb::GroupVersionKind& gvk) {
  return gvk.group().empty() ? gvk.version() : absl::StrCat(gvk.group(), "/", gvk.version());
}

pluginpb::GroupVersionKind Gvk(absl::string_view group, absl::string_view version,
                               absl::string_view kind) {
  pluginpb::GroupVersionKind gvk;
  gvk.set_group(std::string(group));
  gvk.set_version(std::string(version));
  gvk.set_kind(std::string(kind));
  return gvk;
}

Mapping Mapping::OwnerReference(bool controller_only) {
  Mapping m;
  m.proto_.mutable_owner_reference()->set_controller_only(controller_only);
  return m;
}

Mapping Mapping::NameLabel(absl::string_view label) {
  Mapping m;
  m.proto_.mutable_label()->set_name_label(std::string(label));
  return m;
}

Mapping Mapping::PrimarySelector(absl::string_view path) {
  Mapping m;
  m.proto_.mutable_label()->set_primary_selector_path(std::string(path));
  return m;
}

Mapping Mapping::FieldPath(absl::string_view path) {
  Mapping m;
  m.proto_.mutable_field_path()->set_primary_field_path(std::string(path));
  return m;
}

Mapping Mapping::EnqueueAll(bool same_namespace_only) {
  Mapping m;
  m.proto_.mutable_enqueue_all()->set_same_namespace_only(same_namespace_only);
  return m;
}

std::vector<pluginpb::Capability> Controller::RequiredCapabilities() const {
  std::set<pluginpb::Capability> caps;
  const pluginpb::RequestContents& rc = spec_.request_contents();
  if (rc.children()) caps.insert(pluginpb::CAPABILITY_CHILDREN);
  if (rc.related_objects()) caps.insert(pluginpb::CAPABILITY_RELATED_OBJECTS);
  if (rc.metadata_only_kinds_size() > 0) caps.insert(pluginpb::CAPABILITY_METADATA_ONLY);
  if (spec_.schedules_size() > 0) caps.insert(pluginpb::CAPABILITY_SCHEDULES);
  if (spec_.background_tasks_size() > 0) caps.insert(pluginpb::CAPABILITY_BACKGROUND_TASKS);
  for (const pluginpb::OwnedKind& o : spec_.owns()) {
    if (o.delete_absent()) caps.insert(pluginpb::CAPABILITY_SERVER_SIDE_APPLY);
  }
  return {caps.begin(), caps.end()};
}

ControllerBuilder::ControllerBuilder(absl::string_view name) { spec_.set_name(std::string(name)); }

ControllerBuilder& ControllerBuilder::For(absl::string_view group, absl::string_view version,
                                          absl::string_view kind) {
  *spec_.mutable_primary() = Gvk(group, version, kind);
  return *this;
}

ControllerBuilder& ControllerBuilder::Owns(absl::string_view group, absl::string_view version,
                                           absl::string_view kind, OwnsOptions options) {
  pluginpb::OwnedKind* owned = spec_.add_owns();
  *owned->mutable_kind() = Gvk(group, version, kind);
  owned->set_delete_absent(options.delete_absent);
  owned->set_cluster_scoped(options.cluster_scoped);
  return *this;
}

ControllerBuilder& ControllerBuilder::Watches(absl::string_view group, absl::string_view version,
                                              absl::string_view kind, const Mapping& mapping,
                                              WatchOptions options) {
  pluginpb::WatchedKind* watched = spec_.add_watches();
  *watched->mutable_kind() = Gvk(group, version, kind);
  mapping.ApplyTo(watched);
  watched->set_label_selector(options.label_selector);
  watched->set_include_in_requests(options.include_in_requests);
  return *this;
}

ControllerBuilder& ControllerBuilder::Finalizer(absl::string_view finalizer) {
  spec_.set_finalizer(std::string(finalizer));
  return *this;
}

ControllerBuilder& ControllerBuilder::MaxConcurrent(uint32_t n) {
  spec_.set_max_concurrent_reconciles(n);
  return *this;
}

ControllerBuilder& ControllerBuilder::Resync(absl::Duration period) {
  resync_ = period;
  return *this;
}

ControllerBuilder& ControllerBuilder::Namespaces(std::vector<std::string> namespaces) {
  spec_.clear_namespaces();
  for (std::string& ns : namespaces) spec_.add_namespaces(std::move(ns));
  return *this;
}

ControllerBuilder& ControllerBuilder::LabelSelector(absl::string_view selector) {
  spec_.set_label_selector(std::string(selector));
  return *this;
}

ControllerBuilder& ControllerBuilder::Schedule(absl::string_view cron,
                                               absl::string_view time_zone) {
  pluginpb::Schedule* s = spec_.add_schedules();
  s->set_cron(std::string(cron));
  s->set_time_zone(std::string(time_zone));
  return *this;
}

ControllerBuilder& ControllerBuilder::RequestContents(RequestOptions options) {
  request_options_ = std::move(options);
  return *this;
}

ControllerBuilder& ControllerBuilder::Predicates(PredicateOptions options) {
  spec_.mutable_predicates()->set_primary_status_changes(options.primary_status_changes);
  spec_.mutable_predicates()->set_ignore_child_status_changes(options.ignore_child_status_changes);
  return *this;
}

ControllerBuilder& ControllerBuilder::Reconcile(ReconcileFn fn) {
  reconcile_ = std::move(fn);
  return *this;
}

ControllerBuilder& ControllerBuilder::BackgroundTask(absl::string_view name, TaskFn fn) {
  spec_.add_background_tasks()->set_name(std::string(name));
  tasks_.emplace_back(std::string(name), std::move(fn));
  return *this;
}

pluginpb::ControllerSpec ControllerBuilder::Spec() const {
  pluginpb::ControllerSpec spec = spec_;
  bool any_included = false;
  for (const pluginpb::WatchedKind& w : spec.watches()) any_included |= w.include_in_requests();
  pluginpb::RequestContents* rc = spec.mutable_request_contents();
  rc->set_children(request_options_.children.value_or(spec.owns_size() > 0));
  rc->set_related_objects(request_options_.related_objects.value_or(any_included));
  for (const pluginpb::GroupVersionKind& gvk : request_options_.metadata_only_kinds) {
    *rc->add_metadata_only_kinds() = gvk;
  }
  for (const std::string& f : request_options_.strip_fields) rc->add_strip_fields(f);
  if (resync_.has_value() && *resync_ > absl::ZeroDuration()) {
    *spec.mutable_resync_period() = ToProtoDuration(*resync_);
  }
  return spec;
}

absl::StatusOr<std::shared_ptr<const Controller>> ControllerBuilder::Build() const {
  const std::string where = absl::StrCat("controller \"", spec_.name(), "\": ");
  if (!ValidControllerName(spec_.name())) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "name must be a lowercase RFC 1123 label ([a-z0-9-], <= 63)"));
  }
  if (spec_.primary().version().empty() || spec_.primary().kind().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "For(group, version, kind) is missing"));
  }
  for (const pluginpb::OwnedKind& o : spec_.owns()) {
    if (o.kind().version().empty() || o.kind().kind().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "an Owns() kind needs version, kind"));
    }
  }
  for (const pluginpb::WatchedKind& w : spec_.watches()) {
    if (w.kind().version().empty() || w.kind().kind().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "a Watches() kind needs version, kind"));
    }
    if (w.mapping_case() == pluginpb::WatchedKind::MAPPING_NOT_SET) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "Watches(", w.kind().kind(), ") needs a mapping"));
    }
  }
  if (!spec_.finalizer().empty() && !absl::StrContains(spec_.finalizer(), '/')) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "finalizer \"", spec_.finalizer(),
                     "\" must be qualified with a domain, e.g. example.com/cleanup"));
  }
  if (resync_.has_value() && *resync_ < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "negative resync period"));
  }
  if (!reconcile_) {
    return absl::InvalidArgumentError(absl::StrCat(where, "no Reconcile(fn)"));
  }
  for (size_t i = 0; i < tasks_.size(); ++i) {
    const std::string& task = tasks_[i].first;
    if (!ValidControllerName(task)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "background task \"", task, "\": name must be a lowercase RFC 1123 label"));
    }
    if (!tasks_[i].second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "background task \"", task, "\" has no function"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (tasks_[j].first == task) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "background task \"", task, "\" declared twice"));
      }
    }
  }
  return std::make_shared<const Controller>(Spec(), reconcile_, tasks_);
}

pluginpb::ReconcileResponse Invoke(const Controller& controller, uint64_t request_id,
                                   const pluginpb::ReconcileCall& call,
                                   const std::set<pluginpb::Capability>& capabilities,
                                   std::shared_ptr<const std::atomic<bool>> cancelled) {
  absl::StatusOr<Request> request = Request::FromCall(call, std::move(cancelled));
  if (!request.ok()) {
    return ErrorResponse(request_id, pluginpb::ERROR_KIND_RETRYABLE,
                         absl::StrCat("cannot read the request: ", request.status().message()));
  }
  std::string failure;
  try {
    Result result = controller.Reconcile(*request);
    absl::StatusOr<pluginpb::ReconcileResponse> response =
        result.ToResponse(*request, request_id, capabilities);
    if (response.ok()) return *std::move(response);
    failure = absl::StrCat("invalid reconcile result: ", response.status().message());
  } catch (const std::exception& e) {
    failure = absl::StrCat("reconcile threw: ", e.what());
  } catch (...) {
    failure = "reconcile threw a non-standard exception";
  }
  return ErrorResponse(request_id, pluginpb::ERROR_KIND_RETRYABLE, failure);
}

}  // namespace ctrlhost::sdk
