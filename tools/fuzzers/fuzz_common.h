// Shared pieces of the libFuzzer targets in tools/fuzzers (built by tools/fuzz).
//
// Every target feeds untrusted bytes to one parser of outside input and checks what must hold
// for any input: no crash, no sanitizer report, no CHECK, and a result that is either an error
// Status or a value that can be serialized.
#ifndef CTRLHOST_TOOLS_FUZZERS_FUZZ_COMMON_H_
#define CTRLHOST_TOOLS_FUZZERS_FUZZ_COMMON_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::fuzz {

inline absl::string_view Bytes(const uint8_t* data, size_t size) {
  return absl::string_view(reinterpret_cast<const char*>(data), size);
}

// Fails the run (abort, so libFuzzer records the input) when `condition` is false.
inline void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
    std::abort();
  }
}

// Errors from untrusted input must carry an HTTP-ish code (4xx) and never be kInternal or
// kUnknown (those mean "the server is broken").
inline void RequireClientError(const absl::Status& s) {
  Require(!s.ok(), "error expected");
  Require(s.code() != absl::StatusCode::kUnknown, "kUnknown status from untrusted input");
  Require(s.code() != absl::StatusCode::kInternal, "kInternal status from untrusted input");
}

// Serializes like the server does (invalid UTF-8 replaced), which must not throw.
inline std::string Serialize(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ctrlhost::fuzz

#endif  // CTRLHOST_TOOLS_FUZZERS_FUZZ_COMMON_H_
