#include "runtime/apiserver/body_limits.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {

int JsonTextNestingDepth(absl::string_view text, int stop_after) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > stop_after) return max_depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

namespace {

absl::Status TooDeep(absl::string_view what) {
  return kube::BadRequestError(
      absl::StrCat(what, " is nested too deeply (more than ", kMaxNestingDepth, " levels)"));
}

}  // namespace

absl::Status CheckJsonTextNesting(absl::string_view text, absl::string_view what) {
  if (JsonTextNestingDepth(text) > kMaxNestingDepth) return TooDeep(what);
  return absl::OkStatus();
}

absl::Status CheckNestingDepth(const nlohmann::json& value, absl::string_view what) {
  std::vector<std::pair<const nlohmann::json*, int>> pending = {{&value, 1}};
  while (!pending.empty()) {
    auto [node, depth] = pending.back();
    pending.pop_back();
    if (!node->is_structured()) continue;
    if (depth > kMaxNestingDepth) return TooDeep(what);
    for (const nlohmann::json& child : *node) pending.emplace_back(&child, depth + 1);
  }
  return absl::OkStatus();
}

JsonMeasure MeasureJson(const nlohmann::json& value, size_t stop_after) {
  JsonMeasure m;
  std::vector<std::pair<const nlohmann::json*, int>> pending = {{&value, 0}};
  while (!pending.empty()) {
    auto [node, depth] = pending.back();
    pending.pop_back();
    switch (node->type()) {
      case nlohmann::json::value_t::object:
        m.depth = std::max(m.depth, depth + 1);
        m.bytes += 16;
        for (auto it = node->begin(); it != node->end(); ++it) {
          m.bytes += it.key().size() + 4;  // "key": and a comma
          pending.emplace_back(&it.value(), depth + 1);
        }
        break;
      case nlohmann::json::value_t::array:
        m.depth = std::max(m.depth, depth + 1);
        m.bytes += 16;
        for (const nlohmann::json& child : *node) pending.emplace_back(&child, depth + 1);
        break;
      case nlohmann::json::value_t::string:
        m.bytes += std::max<size_t>(node->get_ref<const std::string&>().size() + 2, 16);
        break;
      case nlohmann::json::value_t::binary:
        m.bytes += node->get_binary().size() * 2;
        break;
      default:
        m.bytes += 16;  // numbers, booleans, null
        break;
    }
    if (m.bytes > stop_after) return m;
  }
  return m;
}

bool IsValidUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong encodings, surrogates and code points past U+10FFFF are invalid.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
      return false;
    }
    i += len;
  }
  return true;
}

}  // namespace ctrlhost::apiserver
