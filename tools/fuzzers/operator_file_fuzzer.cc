// Operator files (`ctrlhost run -f`): ParseOperators on any text, then the diff the file
// watcher computes between two loaded sets. A parsed set must diff as empty against itself and
// as "all added" against nothing; errors must be InvalidArgument with "file:line:column:" lines.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "runtime/config/load.h"
#include "runtime/config/operator_spec.h"
#include "tools/fuzzers/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ctrlhost;
  auto ops = config::ParseOperators(fuzz::Bytes(data, size), "fuzz.yaml");
  if (!ops.ok()) {
    fuzz::RequireClientError(ops.status());
    fuzz::Require(ops.status().code() == absl::StatusCode::kInvalidArgument,
                  "operator file errors are InvalidArgument");
    fuzz::Require(absl::StartsWith(ops.status().message(), "fuzz.yaml:"),
                  "operator file errors start with the file name");
    return 0;
  }
  fuzz::Require(config::Diff(*ops, *ops).empty(), "a set differs from itself");
  const config::OperatorSetDiff added = config::Diff({}, *ops);
  fuzz::Require(added.added.size() == ops->size() && added.removed.empty(),
                "every operator of a set is added to an empty one");
  return 0;
}
