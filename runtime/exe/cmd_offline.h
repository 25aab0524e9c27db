// `ctrlhost test`: one reconcile of a plugin against fixture files, without any API server, for
// plugin unit tests in any language.
//
//   $ ctrlhost test --plugin bazel-bin/plugins/webapp/webapp
//         --object plugins/webapp/samples/webapp.yaml --children fixtures/children   (one line)
//   desired_objects:
//   - apiVersion: v1
//     kind: ConfigMap
//     ...
//   status:
//     readyReplicas: 2
//     ...
//
// The plugin is started exactly as the host starts it (plugin::Supervisor: a private socket
// directory, CTRLHOST_PLUGIN_ADDRESS, Describe + health within --ready-timeout), the controller is
// the one named by --controller or the one whose primary kind is the object's, and the
// ReconcileResponse is printed as YAML or JSON with its JSON bytes fields (desired_objects,
// status, patches[].patch) shown as objects. The plugin is stopped with SIGTERM afterwards.
//
// Exit codes: 0 the plugin answered (even with a response `error`: that is its answer), 1 a
// fixture could not be read or the plugin failed (handshake, crash, deadline), 2 usage error,
// 3 (--check) the host's applier would refuse the response.
//
// Thread-compatible: runs on the caller's thread (the supervisor has its own threads, joined
// before RunTestCommand returns).
#ifndef CTRLHOST_RUNTIME_EXE_CMD_OFFLINE_H_
#define CTRLHOST_RUNTIME_EXE_CMD_OFFLINE_H_

#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "nlohmann/json.hpp"
#include "runtime/controller/reconcile.h"

namespace ctrlhost::exe {

// Exit code of `ctrlhost test --check` when the response would be refused by the applier.
inline constexpr int kExitInvalidResponse = 3;

int RunTestCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// A plugin started exactly as `ctrlhost test` starts it (as the host does: a fresh private socket
// directory, CTRLHOST_PLUGIN_ADDRESS, Describe and health within `ready_timeout`), for
// `ctrlhost replay`. Stopped with SIGTERM when destroyed. Thread-safe as plugin::Supervisor is.
class OfflinePlugin {
 public:
  // UNAVAILABLE naming the command when it does not start or does not become ready.
  static absl::StatusOr<std::unique_ptr<OfflinePlugin>> Start(
      const std::string& command, const std::vector<std::string>& args,
      const std::vector<std::pair<std::string, std::string>>& env, absl::Duration ready_timeout);
  ~OfflinePlugin();
  OfflinePlugin(const OfflinePlugin&) = delete;
  OfflinePlugin& operator=(const OfflinePlugin&) = delete;

  // Dispatches to the plugin (plugin::Supervisor::Dispatch).
  void Dispatch(pluginpb::ReconcileCall call, absl::Time deadline,
                controller::ReconcileCallback done);
  // Its Describe answer.
  const pluginpb::DescribeResponse& describe() const { return describe_; }

 private:
  struct State;
  explicit OfflinePlugin(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
  pluginpb::DescribeResponse describe_;
};

// One document of a fixture file, with where it came from for messages.
struct FixtureDocument {
  std::string origin;  // "PATH" or "PATH (document N)" when the file holds several
  nlohmann::json object;
};

// Every document of a YAML or JSON file. Each must be an object with string apiVersion and kind;
// empty documents are skipped. InvalidArgument naming the path (and the YAML line/column) for
// malformed input, NotFound when the file does not exist.
absl::StatusOr<std::vector<FixtureDocument>> LoadFixtureFile(const std::string& path);

// Every document of every *.yaml, *.yml and *.json file under `dir` (recursively), files in
// path order. NotFound / InvalidArgument when `dir` is not a directory.
absl::StatusOr<std::vector<FixtureDocument>> LoadFixtureDir(const std::string& dir);

// The controller of `describe` that reconciles `api_version`/`kind`, or the one named `name`
// when `name` is non-empty. NotFound / FailedPrecondition (ambiguous) with a message that lists
// the plugin's controllers.
absl::StatusOr<const pluginpb::ControllerSpec*> PickController(
    const pluginpb::DescribeResponse& describe, absl::string_view name,
    absl::string_view api_version, absl::string_view kind);

// The response as a JSON value: protobuf's JSON mapping with the proto field names, except that
// desired_objects, status and patches[].patch are the JSON values they hold (a bytes field that
// is not valid JSON is shown as its text).
absl::StatusOr<nlohmann::json> ResponseToJson(const pluginpb::ReconcileResponse& response);

}  // namespace ctrlhost::exe

#endif  // CTRLHOST_RUNTIME_EXE_CMD_OFFLINE_H_
