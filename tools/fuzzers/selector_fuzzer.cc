// Label, field and shard selectors (?labelSelector=, ?fieldSelector=, ?shardSelector=): parse,
// print, parse again.
#include <string>

#include "runtime/kube/selector.h"
#include "runtime/kube/shard_selector.h"
#include "tools/fuzzers/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ctrlhost;
  const absl::string_view text = fuzz::Bytes(data, size);
  auto labels = kube::LabelSelector::Parse(text);
  if (labels.ok()) {
    // The printed form parses back (the documented round trip).
    auto again = kube::LabelSelector::Parse(labels->ToString());
    fuzz::Require(again.ok(), "LabelSelector::Parse(ToString()) failed");
    labels->Matches({{"app", "web"}, {"tier", "db"}});
  } else {
    fuzz::RequireClientError(labels.status());
  }
  auto shard = kube::ShardSelector::Parse(text);
  if (shard.ok()) {
    // KEP-5866's selector: what Format prints parses back to the same ranges.
    auto again =
        kube::ShardSelector::Parse(kube::ShardSelector::Format(shard->field(), shard->ranges()));
    fuzz::Require(again.ok(), "ShardSelector::Parse(Format()) failed");
    fuzz::Require(again->ranges().size() == shard->ranges().size(),
                  "ShardSelector::Format lost a range");
    shard->Matches("0f9b2c1e-5d4a-4e77-9d0e-2a8c3b1f6e55");
  } else {
    fuzz::Require(absl::IsInvalidArgument(shard.status()),
                  "ShardSelector::Parse failed with another code than InvalidArgument");
  }
  auto fields = kube::FieldSelector::Parse(text);
  if (fields.ok()) {
    fields->Matches({{"metadata.name", "x"}, {"metadata.namespace", "default"}});
  } else {
    fuzz::RequireClientError(fields.status());
  }
  return 0;
}
