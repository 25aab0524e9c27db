// Status propagation macros. Debian's Abseil (20220623) does not ship absl/status macros, so
// these fill the gap with the usual names.
//
//   absl::StatusOr<Config> Load(const std::string& path) {
//     ASSIGN_OR_RETURN(std::string text, ReadFile(path));
//     RETURN_IF_ERROR(Validate(text));
//     return Parse(text);
//   }
//
// Each macro evaluates its argument exactly once.
#ifndef CTRLHOST_RUNTIME_COMMON_STATUS_MACROS_H_
#define CTRLHOST_RUNTIME_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define CTRLHOST_STATUS_CONCAT_INNER_(a, b) a##b
#define CTRLHOST_STATUS_CONCAT_(a, b) CTRLHOST_STATUS_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                              \
  do {                                                     \
    ::absl::Status ctrlhost_status_macro_status_ = (expr); \
    if (!ctrlhost_status_macro_status_.ok()) {             \
      return ctrlhost_status_macro_status_;                \
    }                                                      \
  } while (false)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status, otherwise moves the
// value into `lhs`, which may be a declaration ("auto x") or an existing variable.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  CTRLHOST_ASSIGN_OR_RETURN_IMPL_(CTRLHOST_STATUS_CONCAT_(ctrlhost_statusor_, __LINE__), lhs, rexpr)

#define CTRLHOST_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                    \
  if (!statusor.ok()) {                                       \
    return std::move(statusor).status();                      \
  }                                                           \
  lhs = std::move(statusor).value()

#endif  // CTRLHOST_RUNTIME_COMMON_STATUS_MACROS_H_
