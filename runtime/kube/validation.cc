#include "runtime/kube/validation.h"

#include <cstdint>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ctrlhost::kube {
namespace {

constexpr absl::string_view kDns1123LabelFmt = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
constexpr absl::string_view kDns1123LabelErrMsg =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character";
constexpr absl::string_view kDns1123SubdomainFmt =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
constexpr absl::string_view kDns1123SubdomainErrMsg =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character";
constexpr absl::string_view kQualifiedNameFmt = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
constexpr absl::string_view kQualifiedNameErrMsg =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character";
constexpr absl::string_view kLabelValueFmt = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
constexpr absl::string_view kLabelValueErrMsg =
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character";

// apimachinery's util/rand alphabet: no vowels (no words) and no easily confused digits.
constexpr absl::string_view kNameSuffixAlphabet = "bcdfghjklmnpqrstvwxz2456789";

// apimachinery's RegexError: the message, examples and the regular expression.
std::string RegexError(absl::string_view msg, absl::string_view fmt,
                       std::initializer_list<absl::string_view> examples) {
  std::string out(msg);
  if (examples.size() == 0) {
    absl::StrAppend(&out, " (regex used for validation is '", fmt, "')");
    return out;
  }
  out += " (e.g. ";
  bool first = true;
  for (absl::string_view example : examples) {
    if (!first) out += " or ";
    first = false;
    absl::StrAppend(&out, "'", example, "', ");
  }
  absl::StrAppend(&out, "regex used for validation is '", fmt, "')");
  return out;
}

std::string MaxLenError(size_t length) {
  return absl::StrCat("must be no more than ", length, " characters");
}

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool IsAlnum(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)); }

// [a-z0-9]([-a-z0-9]*[a-z0-9])?
bool MatchesDns1123Label(absl::string_view v) {
  if (v.empty() || !IsLowerAlnum(v.front()) || !IsLowerAlnum(v.back())) return false;
  for (char c : v) {
    if (!IsLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

bool MatchesDns1123Subdomain(absl::string_view v) {
  if (v.empty()) return false;
  for (absl::string_view part : absl::StrSplit(v, '.')) {
    if (!MatchesDns1123Label(part)) return false;
  }
  return true;
}

// ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]
bool MatchesQualifiedNamePart(absl::string_view v) {
  if (v.empty() || !IsAlnum(v.front()) || !IsAlnum(v.back())) return false;
  for (char c : v) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

std::vector<std::string> Prefixed(std::vector<std::string> msgs, absl::string_view prefix) {
  for (std::string& m : msgs) m = absl::StrCat(prefix, m);
  return msgs;
}

// apimachinery's maskTrailingDash: a generateName may end in '-', the suffix follows it.
std::string MaskTrailingDash(absl::string_view name) {
  if (name.size() > 1 && absl::EndsWith(name, "-")) {
    return absl::StrCat(name.substr(0, name.size() - 2), "a");
  }
  return std::string(name);
}

std::string Child(absl::string_view parent, absl::string_view child) {
  return absl::StrCat(parent, ".", child);
}

// A string member of a JSON object; causes a type complaint when present with another type.
std::string StringMember(const nlohmann::json& obj, const char* key, absl::string_view path,
                         std::vector<StatusCause>& causes) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return "";
  if (!it->is_string()) {
    causes.push_back(FieldInvalid(Child(path, key), *it, "must be a string"));
    return "";
  }
  return it->get<std::string>();
}

void ValidateFinalizers(const nlohmann::json& finalizers, absl::string_view field,
                        std::vector<StatusCause>& causes) {
  if (finalizers.is_null()) return;
  if (!finalizers.is_array()) {
    causes.push_back(FieldInvalid(field, finalizers, "must be a list of strings"));
    return;
  }
  bool orphan = false;
  bool foreground = false;
  for (const nlohmann::json& f : finalizers) {
    if (!f.is_string()) {
      causes.push_back(FieldInvalid(field, f, "must be a string"));
      continue;
    }
    const std::string& name = f.get_ref<const std::string&>();
    for (const std::string& msg : IsQualifiedName(name)) {
      causes.push_back(FieldInvalid(field, name, msg));
    }
    orphan |= name == "orphan";
    foreground |= name == "foregroundDeletion";
  }
  if (orphan && foreground) {
    causes.push_back(FieldInvalid(field, finalizers,
                                  "finalizer orphan and foregroundDeletion cannot be both set"));
  }
}

void ValidateOwnerReferences(const nlohmann::json& refs, absl::string_view field,
                             std::vector<StatusCause>& causes) {
  if (refs.is_null()) return;
  if (!refs.is_array()) {
    causes.push_back(FieldInvalid(field, refs, "must be a list of owner references"));
    return;
  }
  std::string first_controller;
  for (const nlohmann::json& ref : refs) {
    if (!ref.is_object()) {
      causes.push_back(FieldInvalid(field, ref, "must be an object"));
      continue;
    }
    std::string api_version = StringMember(ref, "apiVersion", field, causes);
    std::string kind = StringMember(ref, "kind", field, causes);
    std::string name = StringMember(ref, "name", field, causes);
    std::string uid = StringMember(ref, "uid", field, causes);
    // "group/version" or "version"; only the version part must be non-empty.
    absl::string_view version = api_version;
    if (size_t slash = version.rfind('/'); slash != absl::string_view::npos) {
      version = version.substr(slash + 1);
    }
    if (version.empty()) {
      causes.push_back(
          FieldInvalid(Child(field, "apiVersion"), api_version, "version must not be empty"));
    }
    if (kind.empty()) {
      causes.push_back(FieldInvalid(Child(field, "kind"), kind, "kind must not be empty"));
    }
    if (name.empty()) {
      causes.push_back(FieldInvalid(Child(field, "name"), name, "name must not be empty"));
    }
    if (uid.empty()) {
      causes.push_back(FieldInvalid(Child(field, "uid"), uid, "uid must not be empty"));
    }
    auto controller = ref.find("controller");
    if (controller != ref.end() && !controller->is_null() && !controller->is_boolean()) {
      causes.push_back(FieldInvalid(Child(field, "controller"), *controller, "must be a boolean"));
    } else if (controller != ref.end() && controller->is_boolean() && controller->get<bool>()) {
      std::string current = absl::StrCat(kind, "/", name);
      if (first_controller.empty()) {
        first_controller = current;
      } else {
        causes.push_back(FieldInvalid(
            field, refs,
            absl::StrCat("Only one reference can have Controller set to true. Found \"true\" "
                         "in references for ",
                         first_controller, " and ", current)));
      }
    }
  }
}

}  // namespace

std::vector<std::string> IsDns1123Label(absl::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > kDns1123LabelMaxLength) errs.push_back(MaxLenError(kDns1123LabelMaxLength));
  if (!MatchesDns1123Label(value)) {
    errs.push_back(RegexError(kDns1123LabelErrMsg, kDns1123LabelFmt, {"my-name", "123-abc"}));
  }
  return errs;
}

std::vector<std::string> IsDns1123Subdomain(absl::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > kDns1123SubdomainMaxLength) {
    errs.push_back(MaxLenError(kDns1123SubdomainMaxLength));
  }
  if (!MatchesDns1123Subdomain(value)) {
    errs.push_back(RegexError(kDns1123SubdomainErrMsg, kDns1123SubdomainFmt, {"example.com"}));
  }
  return errs;
}

std::vector<std::string> IsQualifiedName(absl::string_view value) {
  std::vector<std::string> errs;
  std::vector<absl::string_view> parts = absl::StrSplit(value, '/');
  absl::string_view name;
  if (parts.size() == 1) {
    name = parts[0];
  } else if (parts.size() == 2) {
    absl::string_view prefix = parts[0];
    name = parts[1];
    if (prefix.empty()) {
      errs.push_back("prefix part must be non-empty");
    } else {
      for (std::string& m : Prefixed(IsDns1123Subdomain(prefix), "prefix part ")) {
        errs.push_back(std::move(m));
      }
    }
  } else {
    errs.push_back(absl::StrCat(
        "a qualified name ",
        RegexError(kQualifiedNameErrMsg, kQualifiedNameFmt, {"MyName", "my.name", "123-abc"}),
        " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"));
    return errs;
  }
  if (name.empty()) {
    errs.push_back("name part must be non-empty");
  } else if (name.size() > kQualifiedNameMaxLength) {
    errs.push_back(absl::StrCat("name part ", MaxLenError(kQualifiedNameMaxLength)));
  }
  if (!MatchesQualifiedNamePart(name)) {
    errs.push_back(absl::StrCat("name part ", RegexError(kQualifiedNameErrMsg, kQualifiedNameFmt,
                                                         {"MyName", "my.name", "123-abc"})));
  }
  return errs;
}

std::vector<std::string> IsValidLabelValue(absl::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > kLabelValueMaxLength) errs.push_back(MaxLenError(kLabelValueMaxLength));
  if (!value.empty() && !MatchesQualifiedNamePart(value)) {
    errs.push_back(RegexError(kLabelValueErrMsg, kLabelValueFmt, {"MyValue", "my_value", "12345"}));
  }
  return errs;
}

std::vector<std::string> IsValidPathSegmentName(absl::string_view value) {
  if (value == "." || value == "..") return {absl::StrCat("may not be '", value, "'")};
  std::vector<std::string> errs;
  if (absl::StrContains(value, '/')) errs.push_back("may not contain '/'");
  if (absl::StrContains(value, '%')) errs.push_back("may not contain '%'");
  return errs;
}

std::vector<std::string> ValidateName(absl::string_view name, NameRule rule, bool prefix) {
  std::string masked = prefix ? MaskTrailingDash(name) : std::string(name);
  switch (rule) {
    case NameRule::kDns1123Subdomain:
      return IsDns1123Subdomain(masked);
    case NameRule::kDns1123Label:
      return IsDns1123Label(masked);
    case NameRule::kPathSegment:
      return IsValidPathSegmentName(masked);
  }
  return {};
}

std::vector<StatusCause> ValidateLabels(const nlohmann::json& labels, absl::string_view field) {
  std::vector<StatusCause> causes;
  if (labels.is_null()) return causes;
  if (!labels.is_object()) {
    causes.push_back(FieldInvalid(field, labels, "must be a map of string keys to strings"));
    return causes;
  }
  for (auto it = labels.begin(); it != labels.end(); ++it) {
    for (const std::string& msg : IsQualifiedName(it.key())) {
      causes.push_back(FieldInvalid(field, it.key(), msg));
    }
    if (!it.value().is_string()) {
      causes.push_back(FieldInvalid(field, it.value(), "label values must be strings"));
      continue;
    }
    const std::string& value = it.value().get_ref<const std::string&>();
    for (const std::string& msg : IsValidLabelValue(value)) {
      causes.push_back(FieldInvalid(field, value, msg));
    }
  }
  return causes;
}

std::vector<StatusCause> ValidateAnnotations(const nlohmann::json& annotations,
                                             absl::string_view field) {
  std::vector<StatusCause> causes;
  if (annotations.is_null()) return causes;
  if (!annotations.is_object()) {
    causes.push_back(FieldInvalid(field, annotations, "must be a map of string keys to strings"));
    return causes;
  }
  uint64_t total = 0;
  for (auto it = annotations.begin(); it != annotations.end(); ++it) {
    // Annotation keys are qualified names in which case does not matter.
    for (const std::string& msg : IsQualifiedName(absl::AsciiStrToLower(it.key()))) {
      causes.push_back(FieldInvalid(field, it.key(), msg));
    }
    total += it.key().size();
    if (!it.value().is_string()) {
      causes.push_back(FieldInvalid(field, it.value(), "annotation values must be strings"));
      continue;
    }
    total += it.value().get_ref<const std::string&>().size();
  }
  if (total > kTotalAnnotationSizeLimitBytes) {
    causes.push_back(FieldTooLong(field, kTotalAnnotationSizeLimitBytes));
  }
  return causes;
}

std::string GenerateName(absl::string_view generate_name, absl::BitGenRef gen) {
  std::string name(generate_name.substr(0, kMaxGeneratedNameLength));
  for (size_t i = 0; i < kGeneratedNameSuffixLength; ++i) {
    name += kNameSuffixAlphabet[absl::Uniform<size_t>(gen, 0, kNameSuffixAlphabet.size())];
  }
  return name;
}

std::string GenerateName(absl::string_view generate_name) {
  absl::BitGen gen;
  return GenerateName(generate_name, gen);
}

bool ApplyGenerateName(nlohmann::json& object, absl::BitGenRef gen) {
  if (!object.is_object()) return false;
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return false;
  auto generate = meta->find("generateName");
  if (generate == meta->end() || !generate->is_string() ||
      generate->get_ref<const std::string&>().empty()) {
    return false;
  }
  auto name = meta->find("name");
  if (name != meta->end() && !name->is_null() &&
      !(name->is_string() && name->get_ref<const std::string&>().empty())) {
    return false;
  }
  (*meta)["name"] = GenerateName(generate->get_ref<const std::string&>(), gen);
  return true;
}

bool ApplyGenerateName(nlohmann::json& object) {
  absl::BitGen gen;
  return ApplyGenerateName(object, gen);
}

std::vector<StatusCause> ValidateObjectMeta(const nlohmann::json& object, NameRule rule,
                                            bool namespaced) {
  std::vector<StatusCause> causes;
  static const nlohmann::json kEmpty = nlohmann::json::object();
  const nlohmann::json* meta = &kEmpty;
  if (object.is_object()) {
    auto it = object.find("metadata");
    if (it != object.end() && it->is_object()) {
      meta = &*it;
    } else if (it != object.end() && !it->is_null()) {
      causes.push_back(FieldInvalid("metadata", *it, "must be an object"));
    }
  }
  const nlohmann::json& m = *meta;
  const absl::string_view path = "metadata";

  std::string generate_name = StringMember(m, "generateName", path, causes);
  if (!generate_name.empty()) {
    for (const std::string& msg : ValidateName(generate_name, rule, /*prefix=*/true)) {
      causes.push_back(FieldInvalid("metadata.generateName", generate_name, msg));
    }
  }
  std::string name = StringMember(m, "name", path, causes);
  if (name.empty()) {
    causes.push_back(FieldRequired("metadata.name", "name or generateName is required"));
  } else {
    for (const std::string& msg : ValidateName(name, rule, /*prefix=*/false)) {
      causes.push_back(FieldInvalid("metadata.name", name, msg));
    }
  }

  std::string ns = StringMember(m, "namespace", path, causes);
  if (namespaced) {
    if (ns.empty()) {
      causes.push_back(FieldRequired("metadata.namespace", ""));
    } else {
      for (const std::string& msg : IsDns1123Label(ns)) {
        causes.push_back(FieldInvalid("metadata.namespace", ns, msg));
      }
    }
  } else if (!ns.empty()) {
    causes.push_back(FieldForbidden("metadata.namespace", "not allowed on this type"));
  }

  if (auto gen = m.find("generation"); gen != m.end() && !gen->is_null()) {
    if (!gen->is_number_integer()) {
      causes.push_back(FieldInvalid("metadata.generation", *gen, "must be an integer"));
    } else if (gen->get<int64_t>() < 0) {
      causes.push_back(
          FieldInvalid("metadata.generation", *gen, "must be greater than or equal to 0"));
    }
  }

  auto member = [&m](const char* key) -> const nlohmann::json& {
    static const nlohmann::json kNull;
    auto it = m.find(key);
    return it == m.end() ? kNull : *it;
  };
  for (StatusCause& c : ValidateLabels(member("labels"), "metadata.labels")) {
    causes.push_back(std::move(c));
  }
  for (StatusCause& c : ValidateAnnotations(member("annotations"), "metadata.annotations")) {
    causes.push_back(std::move(c));
  }
  ValidateOwnerReferences(member("ownerReferences"), "metadata.ownerReferences", causes);
  ValidateFinalizers(member("finalizers"), "metadata.finalizers", causes);
  return causes;
}

}  // namespace ctrlhost::kube
