// The patch engines on a live Deployment: the first byte picks JSON patch, merge patch,
// strategic merge patch or server-side apply (YAML); the rest is the patch body.
#include <string>

#include "absl/time/time.h"
#include "runtime/apiserver/body_limits.h"
#include "runtime/apiserver/object_util.h"
#include "runtime/apiserver/patch/apply.h"
#include "runtime/apiserver/patch/merge_strategy.h"
#include "runtime/apiserver/patch/patch.h"
#include "tools/fuzzers/fuzz_common.h"

namespace {

const nlohmann::json& Live() {
  static const nlohmann::json* const live = new nlohmann::json(nlohmann::json::parse(R"({
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"},
                 "finalizers": ["a/b"], "resourceVersion": "7"},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
             "template": {"metadata": {"labels": {"app": "web"}},
                          "spec": {"containers": [
                            {"name": "main", "image": "nginx", "ports": [{"containerPort": 80}],
                             "env": [{"name": "A", "value": "1"}]}]}}},
    "status": {"replicas": 2}
  })"));
  return *live;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ctrlhost;
  using namespace ctrlhost::apiserver;
  if (size < 1) return 0;
  const absl::string_view body = fuzz::Bytes(data + 1, size - 1);
  const MergeStrategy* strategy = BuiltinMergeStrategy("apps", "Deployment");
  absl::StatusOr<nlohmann::json> out = absl::InvalidArgumentError("unset");
  switch (data[0] % 4) {
    case 0:
      out = ApplyJsonPatch(Live(), body);
      break;
    case 1:
      out = ApplyMergePatch(Live(), body);
      break;
    case 2:
      out = ApplyStrategicMergePatch(Live(), body, strategy);
      break;
    case 3: {
      auto config = ParseObjectBody("application/yaml", body);
      if (!config.ok()) return 0;
      ApplyOptions opts;
      opts.manager = "fuzz";
      opts.now = absl::FromUnixSeconds(1700000000);
      opts.api_version = "apps/v1";
      opts.kind = "Deployment";
      opts.name = "web";
      opts.namespace_name = "default";
      opts.ignore_status = true;
      opts.force = size % 2 == 0;
      out = ServerSideApply(&Live(), *config, opts, strategy);
      break;
    }
  }
  if (out.ok()) {
    // Whatever a patch produced stays within the limits the server relies on.
    fuzz::Require(CheckNestingDepth(*out, "result").ok(), "patched object nested too deeply");
    fuzz::Serialize(*out);
  } else {
    fuzz::RequireClientError(out.status());
  }
  return 0;
}
