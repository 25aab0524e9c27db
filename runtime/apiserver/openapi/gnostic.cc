#include "runtime/apiserver/openapi/gnostic.h"

#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "runtime/common/status_macros.h"

namespace ctrlhost::apiserver::openapi {
namespace {

using nlohmann::json;

// Protobuf wire format: the few primitives the messages need.
class Writer {
 public:
  const std::string& bytes() const { return out_; }

  void String(int field, absl::string_view value) {
    Tag(field, 2);
    Varint(value.size());
    out_.append(value.data(), value.size());
  }
  // proto3 scalar: omitted when false (callers of oneof booleans use ForceBool).
  void Bool(int field, bool value) {
    if (value) ForceBool(field, true);
  }
  void ForceBool(int field, bool value) {
    Tag(field, 0);
    Varint(value ? 1 : 0);
  }
  void Int64(int field, int64_t value) {
    if (value == 0) return;
    Tag(field, 0);
    Varint(static_cast<uint64_t>(value));
  }
  void Double(int field, double value) {
    if (value == 0) return;
    Tag(field, 1);
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  }
  void Message(int field, const Writer& message) { String(field, message.bytes()); }

 private:
  void Tag(int field, int wire_type) { Varint((static_cast<uint64_t>(field) << 3) | wire_type); }
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }

  std::string out_;
};

constexpr int kMaxDepth = 200;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Reads a string member; empty when absent or not a string.
std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}
bool BoolOf(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}
int64_t IntOf(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return 0;
  if (it->is_number_float()) {
    const double d = it->get<double>();
    // Out-of-range conversions are undefined; such bounds mean "no limit" anyway.
    if (!(d > -9.2e18 && d < 9.2e18)) return 0;
    return static_cast<int64_t>(d);
  }
  if (it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX) return INT64_MAX;
  return it->get<int64_t>();
}
double DoubleOf(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0;
}
void Strings(Writer& w, int field, const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return;
  for (const json& v : *it) {
    if (v.is_string()) w.String(field, v.get<std::string>());
  }
}

// gnostic `Any`: the value as YAML text (field 2).
Writer Any(const json& value) {
  Writer w;
  w.String(2, Dump(value));
  return w;
}

// Repeated NamedAny vendor_extension entries for the object's `x-*` keys.
void VendorExtensions(Writer& w, int field, const json& j) {
  for (auto& [key, value] : j.items()) {
    if (!absl::StartsWith(key, "x-")) continue;
    Writer named;
    named.String(1, key);
    named.Message(2, Any(value));
    w.Message(field, named);
  }
}

absl::StatusOr<Writer> Schema(const json& s, int depth) {
  if (depth > kMaxDepth) return absl::InvalidArgumentError("schema nested too deeply");
  Writer w;
  if (!s.is_object()) return w;
  if (std::string ref = Str(s, "$ref"); !ref.empty()) w.String(1, ref);
  w.String(2, Str(s, "format"));
  w.String(3, Str(s, "title"));
  w.String(4, Str(s, "description"));
  if (s.contains("default")) w.Message(5, Any(s["default"]));
  w.Double(6, DoubleOf(s, "multipleOf"));
  w.Double(7, DoubleOf(s, "maximum"));
  w.Bool(8, BoolOf(s, "exclusiveMaximum"));
  w.Double(9, DoubleOf(s, "minimum"));
  w.Bool(10, BoolOf(s, "exclusiveMinimum"));
  w.Int64(11, IntOf(s, "maxLength"));
  w.Int64(12, IntOf(s, "minLength"));
  w.String(13, Str(s, "pattern"));
  w.Int64(14, IntOf(s, "maxItems"));
  w.Int64(15, IntOf(s, "minItems"));
  w.Bool(16, BoolOf(s, "uniqueItems"));
  w.Int64(17, IntOf(s, "maxProperties"));
  w.Int64(18, IntOf(s, "minProperties"));
  Strings(w, 19, s, "required");
  if (auto it = s.find("enum"); it != s.end() && it->is_array()) {
    for (const json& v : *it) w.Message(20, Any(v));
  }
  if (auto it = s.find("additionalProperties"); it != s.end()) {
    Writer item;
    if (it->is_boolean()) {
      item.ForceBool(2, it->get<bool>());
      w.Message(21, item);
    } else if (it->is_object()) {
      ASSIGN_OR_RETURN(Writer sub, Schema(*it, depth + 1));
      item.Message(1, sub);
      w.Message(21, item);
    }
  }
  if (auto it = s.find("type"); it != s.end()) {
    Writer type;
    if (it->is_string()) type.String(1, it->get<std::string>());
    if (it->is_array()) Strings(type, 1, s, "type");
    w.Message(22, type);
  }
  if (auto it = s.find("items"); it != s.end() && (it->is_object() || it->is_array())) {
    Writer items;
    if (it->is_object()) {
      ASSIGN_OR_RETURN(Writer sub, Schema(*it, depth + 1));
      items.Message(1, sub);
    } else {
      for (const json& v : *it) {
        ASSIGN_OR_RETURN(Writer sub, Schema(v, depth + 1));
        items.Message(1, sub);
      }
    }
    w.Message(23, items);
  }
  if (auto it = s.find("allOf"); it != s.end() && it->is_array()) {
    for (const json& v : *it) {
      ASSIGN_OR_RETURN(Writer sub, Schema(v, depth + 1));
      w.Message(24, sub);
    }
  }
  if (auto it = s.find("properties"); it != s.end() && it->is_object()) {
    Writer props;
    for (auto& [name, value] : it->items()) {
      ASSIGN_OR_RETURN(Writer sub, Schema(value, depth + 1));
      Writer named;
      named.String(1, name);
      named.Message(2, sub);
      props.Message(1, named);
    }
    w.Message(25, props);
  }
  w.String(26, Str(s, "discriminator"));
  w.Bool(27, BoolOf(s, "readOnly"));
  if (s.contains("example")) w.Message(30, Any(s["example"]));
  VendorExtensions(w, 31, s);
  return w;
}

absl::StatusOr<Writer> Parameter(const json& p) {
  Writer item;  // ParametersItem
  if (std::string ref = Str(p, "$ref"); !ref.empty()) {
    Writer reference;
    reference.String(1, ref);
    item.Message(2, reference);
    return item;
  }
  const std::string in = Str(p, "in");
  Writer parameter;
  if (in == "body") {
    Writer body;
    body.String(1, Str(p, "description"));
    body.String(2, Str(p, "name"));
    body.String(3, in);
    body.Bool(4, BoolOf(p, "required"));
    if (p.contains("schema")) {
      ASSIGN_OR_RETURN(Writer schema, Schema(p["schema"], 0));
      body.Message(5, schema);
    }
    VendorExtensions(body, 6, p);
    parameter.Message(1, body);
  } else if (in == "query" || in == "path" || in == "header" || in == "formData") {
    // The four sub-schemas share their first fields; they differ from `type` on
    // (query and formData have allow_empty_value = 5 before it).
    const bool has_allow_empty = in == "query" || in == "formData";
    const int type_field = has_allow_empty ? 6 : 5;
    Writer sub;
    sub.Bool(1, BoolOf(p, "required"));
    sub.String(2, in);
    sub.String(3, Str(p, "description"));
    sub.String(4, Str(p, "name"));
    if (has_allow_empty) sub.Bool(5, BoolOf(p, "allowEmptyValue"));
    sub.String(type_field, Str(p, "type"));
    sub.String(type_field + 1, Str(p, "format"));
    sub.Bool(type_field + 14, BoolOf(p, "uniqueItems"));
    VendorExtensions(sub, type_field + 17, p);
    const int oneof_field = in == "header" ? 1 : in == "formData" ? 2 : in == "query" ? 3 : 4;
    Writer non_body;
    non_body.Message(oneof_field, sub);
    parameter.Message(2, non_body);
  } else {
    return absl::InvalidArgumentError("parameter with unknown location \"" + in + "\"");
  }
  item.Message(1, parameter);
  return item;
}

absl::StatusOr<Writer> Operation(const json& op) {
  Writer w;
  Strings(w, 1, op, "tags");
  w.String(2, Str(op, "summary"));
  w.String(3, Str(op, "description"));
  w.String(5, Str(op, "operationId"));
  Strings(w, 6, op, "produces");
  Strings(w, 7, op, "consumes");
  if (auto it = op.find("parameters"); it != op.end() && it->is_array()) {
    for (const json& p : *it) {
      ASSIGN_OR_RETURN(Writer param, Parameter(p));
      w.Message(8, param);
    }
  }
  if (auto it = op.find("responses"); it != op.end() && it->is_object()) {
    Writer responses;
    for (auto& [code, r] : it->items()) {
      if (absl::StartsWith(code, "x-")) continue;
      Writer response;
      response.String(1, Str(r, "description"));
      if (r.contains("schema")) {
        ASSIGN_OR_RETURN(Writer schema, Schema(r["schema"], 0));
        Writer schema_item;
        schema_item.Message(1, schema);
        response.Message(2, schema_item);
      }
      VendorExtensions(response, 5, r);
      Writer value;
      value.Message(1, response);
      Writer named;
      named.String(1, code);
      named.Message(2, value);
      responses.Message(1, named);
    }
    VendorExtensions(responses, 2, *it);
    w.Message(9, responses);
  }
  Strings(w, 10, op, "schemes");
  w.Bool(11, BoolOf(op, "deprecated"));
  VendorExtensions(w, 13, op);
  return w;
}

absl::StatusOr<Writer> PathItem(const json& item) {
  Writer w;
  static const std::pair<const char*, int> kMethods[] = {{"get", 2},    {"put", 3},     {"post", 4},
                                                         {"delete", 5}, {"options", 6}, {"head", 7},
                                                         {"patch", 8}};
  for (const auto& [method, field] : kMethods) {
    auto it = item.find(method);
    if (it == item.end() || !it->is_object()) continue;
    ASSIGN_OR_RETURN(Writer op, Operation(*it));
    w.Message(field, op);
  }
  if (auto it = item.find("parameters"); it != item.end() && it->is_array()) {
    for (const json& p : *it) {
      ASSIGN_OR_RETURN(Writer param, Parameter(p));
      w.Message(9, param);
    }
  }
  VendorExtensions(w, 10, item);
  return w;
}

}  // namespace

absl::StatusOr<std::string> SwaggerToGnostic(const json& swagger) {
  if (!swagger.is_object()) return absl::InvalidArgumentError("swagger document is not an object");
  Writer doc;
  doc.String(1, Str(swagger, "swagger"));
  if (auto it = swagger.find("info"); it != swagger.end() && it->is_object()) {
    Writer info;
    info.String(1, Str(*it, "title"));
    info.String(2, Str(*it, "version"));
    info.String(3, Str(*it, "description"));
    VendorExtensions(info, 7, *it);
    doc.Message(2, info);
  }
  doc.String(3, Str(swagger, "host"));
  doc.String(4, Str(swagger, "basePath"));
  Strings(doc, 5, swagger, "schemes");
  Strings(doc, 6, swagger, "consumes");
  Strings(doc, 7, swagger, "produces");
  // gnostic requires `paths` in a document; write it even when empty.
  Writer paths;
  if (auto it = swagger.find("paths"); it != swagger.end() && it->is_object()) {
    for (auto& [path, item] : it->items()) {
      if (!item.is_object()) continue;
      ASSIGN_OR_RETURN(Writer path_item, PathItem(item));
      Writer named;
      named.String(1, path);
      named.Message(2, path_item);
      paths.Message(2, named);
    }
  }
  doc.Message(8, paths);
  if (auto it = swagger.find("definitions"); it != swagger.end() && it->is_object()) {
    Writer definitions;
    for (auto& [name, schema] : it->items()) {
      ASSIGN_OR_RETURN(Writer s, Schema(schema, 0));
      Writer named;
      named.String(1, name);
      named.Message(2, s);
      definitions.Message(1, named);
    }
    doc.Message(9, definitions);
  }
  if (auto it = swagger.find("security"); it != swagger.end() && it->is_array()) {
    for (const json& requirement : *it) {
      if (!requirement.is_object()) continue;
      Writer req;
      for (auto& [name, scopes] : requirement.items()) {
        Writer array;
        if (scopes.is_array()) {
          for (const json& scope : scopes) {
            if (scope.is_string()) array.String(1, scope.get<std::string>());
          }
        }
        Writer named;
        named.String(1, name);
        named.Message(2, array);
        req.Message(1, named);
      }
      doc.Message(12, req);
    }
  }
  if (auto it = swagger.find("securityDefinitions"); it != swagger.end() && it->is_object()) {
    Writer defs;
    for (auto& [name, def] : it->items()) {
      if (!def.is_object() || Str(def, "type") != "apiKey") continue;
      Writer api_key;
      api_key.String(1, "apiKey");
      api_key.String(2, Str(def, "name"));
      api_key.String(3, Str(def, "in"));
      api_key.String(4, Str(def, "description"));
      Writer item;
      item.Message(2, api_key);
      Writer named;
      named.String(1, name);
      named.Message(2, item);
      defs.Message(1, named);
    }
    doc.Message(13, defs);
  }
  VendorExtensions(doc, 16, swagger);
  return doc.bytes();
}

}  // namespace ctrlhost::apiserver::openapi
