// Limits on what one request body may make the embedded API server do, shared by every parser
// of outside input (JSON, YAML and protobuf bodies, the patch engines).
//
// The engines (patches, defaulting, validation, nlohmann::json copies and comparisons) recurse
// once per nesting level, so a deeply nested body would overflow a request thread's stack and
// take the whole process down. Every body is therefore checked before it is parsed:
//
//   RETURN_IF_ERROR(CheckJsonTextNesting(body, "the request body"));
//   nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
//
// kube-apiserver refuses JSON nested deeper than 10,000 levels (Go's encoding/json); ctrlhost
// refuses more than kMaxNestingDepth (1,000): no Kubernetes object comes close (a Deployment is
// about 12 levels deep), and 1,000 levels fit a request thread's stack under the sanitizers.
//
// All functions are pure and thread-safe.
#ifndef CTRLHOST_RUNTIME_APISERVER_BODY_LIMITS_H_
#define CTRLHOST_RUNTIME_APISERVER_BODY_LIMITS_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::apiserver {

// Deepest nesting of arrays and objects accepted in any body (JSON, YAML, protobuf-embedded
// JSON, patches).
inline constexpr int kMaxNestingDepth = 1000;

// Largest stored object (its compact JSON) a write may produce, whatever the route (a patch can
// grow an object past the request body limit): like etcd's request limit behind
// kube-apiserver, a bigger object is 413 RequestEntityTooLarge. The request body limit
// (3 MiB) plus room for the fields the server sets (managedFields, status).
inline constexpr size_t kMaxObjectBytes = 4 * 1024 * 1024;

// The deepest nesting of arrays/objects in a JSON text (brackets inside strings ignored),
// scanning without recursion; stops counting past `stop_after`. Malformed text gives a
// meaningless but finite answer (the parser then refuses it).
int JsonTextNestingDepth(absl::string_view text, int stop_after = kMaxNestingDepth);

// 400 BadRequest "<what> is nested too deeply (more than 1000 levels)" when the JSON text
// `text` nests deeper than kMaxNestingDepth.
absl::Status CheckJsonTextNesting(absl::string_view text, absl::string_view what);

// The same check on a parsed value (without recursion).
absl::Status CheckNestingDepth(const nlohmann::json& value, absl::string_view what);

// An estimate of the size of `value`: its compact JSON (escapes not counted), with every value
// counted as at least 16 bytes (its in-memory size, which bounds what copies cost), and its
// nesting depth
// (a scalar is 0, `[]` is 1), computed without recursion. Stops as soon as the byte estimate
// passes `stop_after` (then bytes > stop_after and depth is partial), so the cost is bounded by
// `stop_after` whatever the value's size.
struct JsonMeasure {
  size_t bytes = 0;
  int depth = 0;
};
JsonMeasure MeasureJson(const nlohmann::json& value, size_t stop_after);

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF).
bool IsValidUtf8(absl::string_view s);

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_BODY_LIMITS_H_
