// Field-error causes and GoQuote, declared in api_status.h: the StatusCause form of
// apimachinery's field.Error, with the same error bodies.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::kube {
namespace {

std::string ValueString(const nlohmann::json& value) {
  if (value.is_string()) return GoQuote(value.get_ref<const std::string&>());
  if (value.is_null()) return GoQuote("null");
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

StatusCause Cause(absl::string_view reason, absl::string_view field, std::string body,
                  absl::string_view detail) {
  if (!detail.empty()) absl::StrAppend(&body, ": ", detail);
  return {std::string(reason), std::move(body), std::string(field)};
}

}  // namespace

std::string GoQuote(absl::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\a':
        out += "\\a";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\v':
        out += "\\v";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          absl::StrAppendFormat(&out, "\\x%02x", c);
        } else {
          out += ch;  // printable ASCII and UTF-8 bytes pass through, as Go keeps printable runes
        }
    }
  }
  out += "\"";
  return out;
}

StatusCause FieldInvalid(absl::string_view field, const nlohmann::json& value,
                         absl::string_view detail) {
  return Cause("FieldValueInvalid", field, absl::StrCat("Invalid value: ", ValueString(value)),
               detail);
}

StatusCause FieldRequired(absl::string_view field, absl::string_view detail) {
  return Cause("FieldValueRequired", field, "Required value", detail);
}

StatusCause FieldForbidden(absl::string_view field, absl::string_view detail) {
  return Cause("FieldValueForbidden", field, "Forbidden", detail);
}

StatusCause FieldDuplicate(absl::string_view field, const nlohmann::json& value) {
  return Cause("FieldValueDuplicate", field, absl::StrCat("Duplicate value: ", ValueString(value)),
               "");
}

StatusCause FieldNotFound(absl::string_view field, const nlohmann::json& value) {
  return Cause("FieldValueNotFound", field, absl::StrCat("Not found: ", ValueString(value)), "");
}

StatusCause FieldNotSupported(absl::string_view field, const nlohmann::json& value,
                              const std::vector<std::string>& supported) {
  std::vector<std::string> quoted;
  quoted.reserve(supported.size());
  for (const std::string& s : supported) quoted.push_back(GoQuote(s));
  std::string detail;
  if (!quoted.empty()) detail = absl::StrCat("supported values: ", absl::StrJoin(quoted, ", "));
  return Cause("FieldValueNotSupported", field,
               absl::StrCat("Unsupported value: ", ValueString(value)), detail);
}

StatusCause FieldTooLong(absl::string_view field, size_t max_length) {
  return Cause("FieldValueTooLong", field, "Too long",
               absl::StrCat("may not be longer than ", max_length));
}

StatusCause FieldTooMany(absl::string_view field, size_t actual, size_t max_items) {
  return Cause("FieldValueTooMany", field, absl::StrCat("Too many: ", actual),
               absl::StrCat("must have at most ", max_items, " items"));
}

StatusCause FieldInternal(absl::string_view field, absl::string_view detail) {
  return Cause("InternalError", field, "Internal error", detail);
}

}  // namespace ctrlhost::kube
