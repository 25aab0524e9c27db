// Helpers for the storage tests: temp databases and one-line mutators.
#ifndef CTRLHOST_RUNTIME_APISERVER_STORAGE_TESTING_STORE_TEST_UTIL_H_
#define CTRLHOST_RUNTIME_APISERVER_STORAGE_TESTING_STORE_TEST_UTIL_H_

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/apiserver/storage/store.h"

namespace ctrlhost::apiserver::testing {

// A fresh directory under $TEST_TMPDIR (or /tmp) for one test's database.
inline std::string NewTempDir() {
  const char* root = std::getenv("TEST_TMPDIR");
  std::string pattern = absl::StrCat(root != nullptr ? root : "/tmp", "/storage-XXXXXX");
  char* dir = mkdtemp(pattern.data());
  return dir != nullptr ? std::string(dir) : std::string();
}

// Puts `value` whatever the current state.
inline Mutator PutValue(std::string value) {
  return [value = std::move(value)](const StoredObject*, int64_t) -> absl::StatusOr<Mutation> {
    return Mutation{Mutation::Op::kPut, value};
  };
}

// Puts {"v":"<value>","rv":<revision>}: the value records the revision it was written at.
inline Mutator PutWithRevision(std::string value) {
  return [value = std::move(value)](const StoredObject*,
                                    int64_t revision) -> absl::StatusOr<Mutation> {
    return Mutation{Mutation::Op::kPut,
                    absl::StrCat("{\"v\":\"", value, "\",\"rv\":", revision, "}")};
  };
}

// Deletes, with `final_value` as the final state ("" = the current value).
inline Mutator DeleteValue(std::string final_value = "") {
  return [final_value = std::move(final_value)](const StoredObject*,
                                                int64_t) -> absl::StatusOr<Mutation> {
    return Mutation{Mutation::Op::kDelete, final_value};
  };
}

// Polls `condition` until it holds or `timeout` (real time) passes. For conditions another
// thread makes true; never for waiting on time itself.
template <typename Condition>
bool WaitFor(Condition condition, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

}  // namespace ctrlhost::apiserver::testing

#endif  // CTRLHOST_RUNTIME_APISERVER_STORAGE_TESTING_STORE_TEST_UTIL_H_
