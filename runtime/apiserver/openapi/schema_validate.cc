// Validate() of schema.h: value validation of a custom resource against its structural schema.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "runtime/apiserver/openapi/schema.h"
#include "runtime/apiserver/openapi/schema_internal.h"

namespace ctrlhost::apiserver::openapi {
namespace {

using internal::Child;
using internal::Index;
using internal::IsTrue;
using internal::IsTypeMeta;
using internal::kMaxSchemaDepth;
using internal::ObjectMember;
using kube::StatusCause;
using nlohmann::json;

// Longest string matched against a `pattern` (see schema.h).
constexpr size_t kMaxPatternInput = 4096;

std::string TypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::string:
      return "string";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer";
    case json::value_t::number_float:
      return "number";
    case json::value_t::array:
      return "array";
    default:
      return "object";
  }
}

bool IsInteger(const json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && std::floor(d) == d;
}

bool HasType(const json& v, absl::string_view type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "integer") return IsInteger(v);
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  return true;  // an unknown type name constrains nothing
}

// A number as Go's %v prints a float64 bound: "0", "1.5", "1e+20".
std::string FormatNumber(const json& n) {
  if (n.is_number_integer()) return n.dump();
  const double d = n.get<double>();
  if (std::floor(d) == d && std::fabs(d) < 1e15) return absl::StrCat(static_cast<int64_t>(d));
  return n.dump();
}

// Number of UTF-8 characters (what Kubernetes counts for min/maxLength).
size_t CharCount(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

bool Digits(absl::string_view s, size_t from, size_t count) {
  if (from + count > s.size()) return false;
  for (size_t i = from; i < from + count; ++i) {
    if (!absl::ascii_isdigit(s[i])) return false;
  }
  return true;
}

bool IsDate(absl::string_view s) {
  return s.size() == 10 && Digits(s, 0, 4) && s[4] == '-' && Digits(s, 5, 2) && s[7] == '-' &&
         Digits(s, 8, 2) && s.substr(5, 2) >= "01" && s.substr(5, 2) <= "12" &&
         s.substr(8, 2) >= "01" && s.substr(8, 2) <= "31";
}

// RFC 3339 date-time: 2006-01-02T15:04:05(.frac)?(Z|+07:00).
bool IsDateTime(absl::string_view s) {
  if (s.size() < 20 || !IsDate(s.substr(0, 10))) return false;
  if (s[10] != 'T' && s[10] != 't' && s[10] != ' ') return false;
  if (!Digits(s, 11, 2) || s[13] != ':' || !Digits(s, 14, 2) || s[16] != ':' || !Digits(s, 17, 2)) {
    return false;
  }
  size_t i = 19;
  if (i < s.size() && s[i] == '.') {
    ++i;
    const size_t start = i;
    while (i < s.size() && absl::ascii_isdigit(s[i])) ++i;
    if (i == start) return false;
  }
  absl::string_view zone = s.substr(i);
  if (zone == "Z" || zone == "z") return true;
  return zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && Digits(zone, 1, 2) &&
         zone[3] == ':' && Digits(zone, 4, 2);
}

bool IsByte(absl::string_view s) {
  if (s.size() % 4 != 0) return false;
  size_t pad = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '=') {
      ++pad;
      continue;
    }
    if (pad > 0) return false;
    if (!absl::ascii_isalnum(c) && c != '+' && c != '/') return false;
  }
  return pad <= 2;
}

bool IsUuid(absl::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (s[i] != '-') return false;
    } else if (!absl::ascii_isxdigit(s[i])) {
      return false;
    }
  }
  return true;
}

bool IsIpv4(absl::string_view s) {
  int parts = 0;
  size_t i = 0;
  while (true) {
    size_t start = i;
    int value = 0;
    while (i < s.size() && absl::ascii_isdigit(s[i]) && i - start < 3)
      value = value * 10 + (s[i++] - '0');
    if (i == start || value > 255 || (i - start > 1 && s[start] == '0')) return false;
    ++parts;
    if (i == s.size()) break;
    if (s[i] != '.' || parts == 4) return false;
    ++i;
  }
  return parts == 4;
}

class Validator {
 public:
  std::vector<StatusCause> causes;

  void Node(const json& schema, const json& value, const std::string& path, int depth) {
    if (depth > kMaxSchemaDepth || !schema.is_object()) return;
    const bool int_or_string = IsTrue(schema, "x-kubernetes-int-or-string");
    auto type_it = schema.find("type");
    const std::string type =
        type_it != schema.end() && type_it->is_string() ? type_it->get<std::string>() : "";
    if (value.is_null()) {
      if (IsTrue(schema, "nullable")) return;
      if (int_or_string) {
        TypeError(path, "integer,string", value);
      } else if (!type.empty()) {
        TypeError(path, type, value);
      }
      return;
    }
    if (int_or_string) {
      if (!IsInteger(value) && !value.is_string()) return TypeError(path, "integer,string", value);
    } else if (!type.empty() && !HasType(value, type)) {
      return TypeError(path, type, value);
    }
    Enum(schema, value, path);
    if (value.is_number()) Number(schema, value, path);
    if (value.is_string()) String(schema, value.get_ref<const std::string&>(), path);
    if (value.is_number()) NumberFormat(schema, value, path);
    if (value.is_array()) Array(schema, value, path, depth);
    if (value.is_object()) Object(schema, value, path, /*root=*/false, depth);
    Combinators(schema, value, path, depth);
  }

  void Object(const json& schema, const json& obj, const std::string& path, bool root, int depth) {
    const std::string shown = path.empty() ? "body" : path;
    if (auto n = IntKeyword(schema, "minProperties"); n && obj.size() < static_cast<size_t>(*n)) {
      causes.push_back(kube::FieldInvalid(
          path, obj.size(),
          absl::StrCat(shown, " in body should have at least ", *n, " properties")));
    }
    if (auto n = IntKeyword(schema, "maxProperties"); n && obj.size() > static_cast<size_t>(*n)) {
      causes.push_back(kube::FieldInvalid(
          path, obj.size(),
          absl::StrCat(shown, " in body should have at most ", *n, " properties")));
    }
    auto required = schema.find("required");
    if (required != schema.end() && required->is_array()) {
      for (const json& name : *required) {
        if (!name.is_string()) continue;
        const std::string& n = name.get_ref<const std::string&>();
        if (root && IsTypeMeta(n)) continue;
        if (!obj.contains(n)) causes.push_back(kube::FieldRequired(Child(path, n), ""));
      }
    }
    const json* props = ObjectMember(schema, "properties");
    const json* additional = ObjectMember(schema, "additionalProperties");
    for (auto& [key, v] : obj.items()) {
      if (root && IsTypeMeta(key)) continue;
      if (props != nullptr) {
        auto it = props->find(key);
        if (it != props->end()) {
          Node(*it, v, Child(path, key), depth + 1);
          continue;
        }
      }
      if (additional != nullptr) Node(*additional, v, Child(path, key), depth + 1);
    }
    if (root) Combinators(schema, obj, path, depth);
  }

 private:
  static std::optional<int64_t> IntKeyword(const json& schema, const char* key) {
    auto it = schema.find(key);
    if (it == schema.end() || !it->is_number() || !IsInteger(*it)) return std::nullopt;
    const double d = it->get<double>();
    if (d < 0 || d > 9e15) return std::nullopt;
    return static_cast<int64_t>(d);
  }

  void TypeError(const std::string& path, const std::string& type, const json& value) {
    const std::string name = TypeName(value);
    causes.push_back(kube::FieldInvalid(
        path, name,
        absl::StrCat(path, " in body must be of type ", type, ": ", kube::GoQuote(name))));
  }

  void Enum(const json& schema, const json& value, const std::string& path) {
    auto it = schema.find("enum");
    if (it == schema.end() || !it->is_array()) return;
    std::vector<std::string> supported;
    for (const json& e : *it) {
      if (e == value ||
          (e.is_number() && value.is_number() && e.get<double>() == value.get<double>())) {
        return;
      }
      supported.push_back(e.is_string() ? e.get<std::string>() : e.dump());
    }
    causes.push_back(kube::FieldNotSupported(path, value, supported));
  }

  void Number(const json& schema, const json& value, const std::string& path) {
    const double v = value.get<double>();
    auto bound = [&](const char* key) -> const json* {
      auto it = schema.find(key);
      return it != schema.end() && it->is_number() ? &*it : nullptr;
    };
    if (const json* min = bound("minimum")) {
      const bool exclusive = IsTrue(schema, "exclusiveMinimum");
      if (exclusive ? v <= min->get<double>() : v < min->get<double>()) {
        causes.push_back(
            kube::FieldInvalid(path, value,
                               absl::StrCat(path, " in body should be greater than ",
                                            exclusive ? "" : "or equal to ", FormatNumber(*min))));
      }
    }
    if (const json* max = bound("maximum")) {
      const bool exclusive = IsTrue(schema, "exclusiveMaximum");
      if (exclusive ? v >= max->get<double>() : v > max->get<double>()) {
        causes.push_back(
            kube::FieldInvalid(path, value,
                               absl::StrCat(path, " in body should be less than ",
                                            exclusive ? "" : "or equal to ", FormatNumber(*max))));
      }
    }
    if (const json* m = bound("multipleOf"); m != nullptr && m->get<double>() > 0) {
      const double q = v / m->get<double>();
      if (!std::isfinite(q) || std::fabs(q - std::round(q)) > 1e-9) {
        causes.push_back(kube::FieldInvalid(
            path, value,
            absl::StrCat(path, " in body should be a multiple of ", FormatNumber(*m))));
      }
    }
  }

  void NumberFormat(const json& schema, const json& value, const std::string& path) {
    auto it = schema.find("format");
    if (it == schema.end() || !it->is_string() || !IsInteger(value)) return;
    bool ok = true;
    if (*it == "int32") {
      const double d = value.get<double>();
      ok = d >= -2147483648.0 && d <= 2147483647.0;
    } else if (*it == "int64") {
      ok = !(value.is_number_unsigned() && value.get<uint64_t>() > INT64_MAX) &&
           !(value.is_number_float() && std::fabs(value.get<double>()) >= 9.2233720368547758e18);
    } else {
      return;
    }
    if (!ok) {
      causes.push_back(
          kube::FieldInvalid(path, value,
                             absl::StrCat(path, " in body must be of type ", it->get<std::string>(),
                                          ": ", kube::GoQuote(value.dump()))));
    }
  }

  void String(const json& schema, const std::string& s, const std::string& path) {
    const size_t chars = CharCount(s);
    if (auto n = IntKeyword(schema, "minLength"); n && chars < static_cast<size_t>(*n)) {
      causes.push_back(kube::FieldInvalid(
          path, s, absl::StrCat(path, " in body should be at least ", *n, " chars long")));
    }
    if (auto n = IntKeyword(schema, "maxLength"); n && chars > static_cast<size_t>(*n)) {
      causes.push_back(kube::FieldTooLong(path, static_cast<size_t>(*n)));
    }
    auto pattern = schema.find("pattern");
    if (pattern != schema.end() && pattern->is_string()) {
      const std::string& p = pattern->get_ref<const std::string&>();
      if (s.size() > kMaxPatternInput) {
        causes.push_back(kube::FieldInvalid(
            path, s.substr(0, 64) + "...",
            absl::StrCat(path, " in body is longer than ", kMaxPatternInput,
                         " bytes, the most the server matches against '", p, "'")));
      } else {
        try {
          if (!std::regex_search(s, std::regex(p, std::regex::ECMAScript))) {
            causes.push_back(
                kube::FieldInvalid(path, s, absl::StrCat(path, " in body should match '", p, "'")));
          }
        } catch (const std::regex_error&) {
          // An invalid pattern is the CRD's fault, not the object's: not enforced.
        }
      }
    }
    auto format = schema.find("format");
    if (format == schema.end() || !format->is_string()) return;
    const std::string& f = format->get_ref<const std::string&>();
    bool ok = true;
    if (f == "date-time") {
      ok = IsDateTime(s);
    } else if (f == "date") {
      ok = IsDate(s);
    } else if (f == "byte") {
      ok = IsByte(s);
    } else if (f == "uuid") {
      ok = IsUuid(s);
    } else if (f == "ipv4") {
      ok = IsIpv4(s);
    }
    if (!ok) {
      causes.push_back(kube::FieldInvalid(
          path, s, absl::StrCat(path, " in body must be of type ", f, ": ", kube::GoQuote(s))));
    }
  }

  void Array(const json& schema, const json& arr, const std::string& path, int depth) {
    if (auto n = IntKeyword(schema, "minItems"); n && arr.size() < static_cast<size_t>(*n)) {
      causes.push_back(kube::FieldInvalid(
          path, arr.size(), absl::StrCat(path, " in body should have at least ", *n, " items")));
    }
    if (auto n = IntKeyword(schema, "maxItems"); n && arr.size() > static_cast<size_t>(*n)) {
      causes.push_back(kube::FieldTooMany(path, arr.size(), static_cast<size_t>(*n)));
    }
    auto list_type = schema.find("x-kubernetes-list-type");
    const bool set = list_type != schema.end() && *list_type == "set";
    const bool map = list_type != schema.end() && *list_type == "map";
    if (IsTrue(schema, "uniqueItems") || set) {
      for (size_t i = 1; i < arr.size(); ++i) {
        for (size_t j = 0; j < i; ++j) {
          if (arr[i] == arr[j]) {
            causes.push_back(kube::FieldDuplicate(Index(path, i), arr[i]));
            break;
          }
        }
      }
    }
    auto keys = schema.find("x-kubernetes-list-map-keys");
    if (map && keys != schema.end() && keys->is_array()) {
      std::vector<json> seen;
      for (size_t i = 0; i < arr.size(); ++i) {
        if (!arr[i].is_object()) continue;
        json key = json::object();
        for (const json& k : *keys) {
          if (!k.is_string()) continue;
          auto it = arr[i].find(k.get<std::string>());
          if (it != arr[i].end()) key[k.get<std::string>()] = *it;
        }
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
          causes.push_back(kube::FieldDuplicate(Index(path, i), key));
        } else {
          seen.push_back(std::move(key));
        }
      }
    }
    const json* items = ObjectMember(schema, "items");
    if (items == nullptr) return;
    for (size_t i = 0; i < arr.size(); ++i) Node(*items, arr[i], Index(path, i), depth + 1);
  }

  // allOf, anyOf, oneOf and not: value validations next to the structural schema.
  void Combinators(const json& schema, const json& value, const std::string& path, int depth) {
    auto sub_causes = [&](const json& sub) {
      Validator v;
      v.Node(sub, value, path, depth + 1);
      return v.causes;
    };
    const std::string shown = path.empty() ? "body" : path;
    if (auto it = schema.find("allOf"); it != schema.end() && it->is_array()) {
      for (const json& sub : *it) {
        for (StatusCause& c : sub_causes(sub)) causes.push_back(std::move(c));
      }
    }
    if (auto it = schema.find("anyOf"); it != schema.end() && it->is_array() && !it->empty()) {
      bool any = false;
      for (const json& sub : *it) any = any || sub_causes(sub).empty();
      if (!any) {
        causes.push_back(kube::FieldInvalid(
            path, value,
            absl::StrCat(shown, " in body must validate at least one schema (anyOf)")));
      }
    }
    if (auto it = schema.find("oneOf"); it != schema.end() && it->is_array() && !it->empty()) {
      int passed = 0;
      for (const json& sub : *it) passed += sub_causes(sub).empty();
      if (passed != 1) {
        causes.push_back(kube::FieldInvalid(
            path, value,
            absl::StrCat(shown, " in body must validate one and only one schema (oneOf)")));
      }
    }
    if (auto it = schema.find("not"); it != schema.end() && it->is_object()) {
      if (sub_causes(*it).empty()) {
        causes.push_back(kube::FieldInvalid(
            path, value, absl::StrCat(shown, " in body must not validate the schema (not)")));
      }
    }
  }
};

}  // namespace

std::vector<StatusCause> Validate(const json& schema, const json& object) {
  Validator v;
  if (!schema.is_object() || !object.is_object()) return v.causes;
  v.Object(schema, object, "", /*root=*/true, 0);
  return v.causes;
}

}  // namespace ctrlhost::apiserver::openapi
