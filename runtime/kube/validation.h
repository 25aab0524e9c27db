// Kubernetes object-name, label, annotation and ObjectMeta validation.
//
// The rules and messages follow apimachinery (k8s.io/apimachinery/pkg/util/validation and
// pkg/api/validation), so the embedded API server rejects exactly what kube-apiserver rejects
// and says so in the same words. The Is* functions return human-readable problems (empty when
// valid); the Validate* functions return field causes ready for kube::InvalidError.
//
//   std::vector<StatusCause> causes =
//       kube::ValidateObjectMeta(object, kube::NameRule::kDns1123Subdomain, /*namespaced=*/true);
//   if (!causes.empty()) return kube::InvalidError("", "ConfigMap", name, std::move(causes));
//
// All functions are pure and thread-safe.
#ifndef CTRLHOST_RUNTIME_KUBE_VALIDATION_H_
#define CTRLHOST_RUNTIME_KUBE_VALIDATION_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/random/bit_gen_ref.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "runtime/kube/api_status.h"

namespace ctrlhost::kube {

inline constexpr size_t kDns1123LabelMaxLength = 63;
inline constexpr size_t kDns1123SubdomainMaxLength = 253;
inline constexpr size_t kQualifiedNameMaxLength = 63;
inline constexpr size_t kLabelValueMaxLength = 63;
// Sum of the lengths of all annotation keys and values.
inline constexpr size_t kTotalAnnotationSizeLimitBytes = 256 * 1024;
// generateName is cut to this length before the random suffix is appended.
inline constexpr size_t kMaxGeneratedNameLength = 58;
inline constexpr size_t kGeneratedNameSuffixLength = 5;

// Which rule a resource's metadata.name follows.
enum class NameRule {
  kDns1123Subdomain,  // most kinds (ConfigMap, Secret, Deployment, Lease, ...)
  kDns1123Label,      // Namespace, Service
  kPathSegment,       // anything usable in a URL path segment (custom resources default)
};

// apimachinery's IsDNS1123Label / IsDNS1123Subdomain / IsQualifiedName / IsValidLabelValue /
// IsValidPathSegmentName. Each returns the list of problems, empty when valid.
std::vector<std::string> IsDns1123Label(absl::string_view value);
std::vector<std::string> IsDns1123Subdomain(absl::string_view value);
// Label keys, annotation keys (after lowercasing) and finalizer names: `[prefix/]name`, the
// prefix a DNS subdomain, the name ≤ 63 alphanumerics, '-', '_', '.'.
std::vector<std::string> IsQualifiedName(absl::string_view value);
std::vector<std::string> IsValidLabelValue(absl::string_view value);
std::vector<std::string> IsValidPathSegmentName(absl::string_view value);

// Problems with `name` under `rule`. With `prefix` (validating a generateName) a trailing '-'
// is allowed, since a random suffix follows it.
std::vector<std::string> ValidateName(absl::string_view name, NameRule rule, bool prefix);

// Causes for a metadata.labels / metadata.annotations JSON value (must be an object of
// strings; null or absent is fine) at `field`.
std::vector<StatusCause> ValidateLabels(const nlohmann::json& labels, absl::string_view field);
std::vector<StatusCause> ValidateAnnotations(const nlohmann::json& annotations,
                                             absl::string_view field);

// The name the server assigns for `generate_name`: its first 58 bytes plus 5 random characters
// from apimachinery's unambiguous alphabet (no vowels, no 0/1/3).
std::string GenerateName(absl::string_view generate_name, absl::BitGenRef gen);
std::string GenerateName(absl::string_view generate_name);

// Sets metadata.name from metadata.generateName when the name is empty and generateName is a
// non-empty string. Returns whether it assigned a name. Call before ValidateObjectMeta, as
// kube-apiserver does; on an AlreadyExists the caller may call it again to draw a new name.
bool ApplyGenerateName(nlohmann::json& object, absl::BitGenRef gen);
bool ApplyGenerateName(nlohmann::json& object);

// Validates object["metadata"] like apimachinery's ValidateObjectMeta: name required (message
// "name or generateName is required"), name and generateName follow `rule`, namespace present
// (a DNS-1123 label) iff `namespaced`, generation ≥ 0, labels and annotations valid, finalizers
// qualified names (not both "orphan" and "foregroundDeletion"), every ownerReference with
// apiVersion (with a version), kind, name and uid, and at most one controller reference.
// Wrong JSON types (e.g. a numeric name) become causes too; this never throws.
std::vector<StatusCause> ValidateObjectMeta(const nlohmann::json& object, NameRule rule,
                                            bool namespaced);

}  // namespace ctrlhost::kube

#endif  // CTRLHOST_RUNTIME_KUBE_VALIDATION_H_
