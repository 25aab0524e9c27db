// Label and field selectors (?labelSelector=, ?fieldSelector=): parse, print, parse again.
#include <string>

#include "runtime/kube/selector.h"
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
  auto fields = kube::FieldSelector::Parse(text);
  if (fields.ok()) {
    fields->Matches({{"metadata.name", "x"}, {"metadata.namespace", "default"}});
  } else {
    fuzz::RequireClientError(fields.status());
  }
  return 0;
}
