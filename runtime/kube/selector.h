// Label and field selectors with Kubernetes' syntax, semantics and error messages.
//
// Label selectors (apimachinery pkg/labels): comma-separated requirements, all of which must
// hold: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a` (exists), `!a` (does not
// exist), `a>1`, `a<1` (integer comparison). Whitespace between tokens is ignored. `!=` and
// `notin` also match objects without the label. Keys and values are validated like label keys
// and values.
//
// Field selectors (apimachinery pkg/fields): comma-separated `field=value`, `field==value`,
// `field!=value`; in values `\\`, `\,` and `\=` escape the three special characters. A field
// the object does not have reads as the empty string.
//
//   ASSIGN_OR_RETURN(kube::LabelSelector sel, kube::LabelSelector::Parse("app=web,tier!=db"));
//   if (sel.Matches(labels)) ...
//   ASSIGN_OR_RETURN(kube::FieldSelector fs, kube::FieldSelector::Parse("metadata.name=x"));
//   RETURN_IF_ERROR(fs.ValidateFields({"metadata.name", "metadata.namespace"}));
//   if (auto name = fs.RequiresExactMatch("metadata.name")) { /* direct lookup */ }
//
// Parse errors are kube::BadRequestError statuses (InvalidArgument, HTTP 400), ready to be
// returned by the API server. Selectors are immutable values: const methods are thread-safe.
#ifndef CTRLHOST_RUNTIME_KUBE_SELECTOR_H_
#define CTRLHOST_RUNTIME_KUBE_SELECTOR_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::kube {

// An object's labels. The storage layer uses the same type.
using Labels = std::map<std::string, std::string>;
// An object's selectable fields, e.g. {"metadata.name": "web", "metadata.namespace": "d"}.
using Fields = std::map<std::string, std::string>;

// The string labels of an object's metadata.labels (entries that are not strings are skipped;
// validation rejects them elsewhere).
Labels LabelsOf(const nlohmann::json& object);

enum class SelectorOperator {
  kEquals,  // `=` and `==`
  kNotEquals,
  kIn,
  kNotIn,
  kExists,
  kDoesNotExist,
  kGreaterThan,
  kLessThan,
};

// One requirement of a label selector. Values are sorted and unique.
struct LabelRequirement {
  std::string key;
  SelectorOperator op = SelectorOperator::kExists;
  std::vector<std::string> values;

  bool Matches(const Labels& labels) const;
  std::string ToString() const;
  bool operator==(const LabelRequirement& other) const {
    return key == other.key && op == other.op && values == other.values;
  }
};

class LabelSelector {
 public:
  // Parses the kubectl / `?labelSelector=` syntax. "" selects everything.
  static absl::StatusOr<LabelSelector> Parse(absl::string_view text);
  // A metav1.LabelSelector ({"matchLabels": {...}, "matchExpressions": [{"key", "operator",
  // "values"}]}). null selects nothing, {} selects everything, like LabelSelectorAsSelector.
  static absl::StatusOr<LabelSelector> FromJson(const nlohmann::json& selector);
  // `k1=v1,k2=v2` for every entry of `labels` (keys and values are not validated).
  static LabelSelector FromLabels(const Labels& labels);
  static LabelSelector Everything() { return LabelSelector(); }
  static LabelSelector Nothing();

  bool Matches(const Labels& labels) const;
  // True when the selector has no requirements and so matches everything.
  bool Empty() const { return !nothing_ && requirements_.empty(); }
  // Canonical text: requirements sorted by key, values sorted, `==` written `=`, no spaces
  // except around in/notin. Parse(ToString()) gives an equal selector. Nothing() prints "".
  std::string ToString() const;
  // The value `key` must equal for the selector to match (a single `=` or one-value `in`).
  std::optional<std::string> RequiresExactMatch(absl::string_view key) const;

  const std::vector<LabelRequirement>& requirements() const { return requirements_; }
  bool operator==(const LabelSelector& other) const {
    return nothing_ == other.nothing_ && requirements_ == other.requirements_;
  }

 private:
  LabelSelector() = default;
  void Sort();

  std::vector<LabelRequirement> requirements_;
  bool nothing_ = false;
};

class FieldSelector {
 public:
  struct Term {
    std::string field;
    bool equals = true;  // false for `!=`
    std::string value;   // unescaped
    bool operator==(const Term& other) const {
      return field == other.field && equals == other.equals && value == other.value;
    }
  };

  // Parses `?fieldSelector=` syntax. "" selects everything. Surrounding whitespace of each
  // field and value is ignored.
  static absl::StatusOr<FieldSelector> Parse(absl::string_view text);
  static FieldSelector Everything() { return FieldSelector(); }

  bool Matches(const Fields& fields) const;
  bool Empty() const { return terms_.empty(); }
  // Terms sorted, values escaped: Parse(ToString()) gives an equal selector.
  std::string ToString() const;
  // The value `field` must equal (from a `=`/`==` term), which lets a server look it up
  // directly instead of filtering.
  std::optional<std::string> RequiresExactMatch(absl::string_view field) const;
  // BadRequest `field label not supported: spec.foo` for the first field not in `supported`.
  absl::Status ValidateFields(const absl::flat_hash_set<std::string>& supported) const;

  const std::vector<Term>& terms() const { return terms_; }
  bool operator==(const FieldSelector& other) const { return terms_ == other.terms_; }

 private:
  FieldSelector() = default;

  std::vector<Term> terms_;
};

// apimachinery's fields.EscapeValue / UnescapeValue.
std::string EscapeFieldValue(absl::string_view value);
absl::StatusOr<std::string> UnescapeFieldValue(absl::string_view value);

}  // namespace ctrlhost::kube

#endif  // CTRLHOST_RUNTIME_KUBE_SELECTOR_H_
