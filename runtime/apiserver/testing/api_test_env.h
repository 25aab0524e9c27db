// Test fixture for the embedded API server's handlers: a real Store in a fresh directory under
// $TEST_TMPDIR, the registry, the handlers and (optionally) the built-in controllers, driven
// through ApiHandlers::Handle() without any transport.
//
//   ApiTestEnv env;                                  // FakeClock, no controllers
//   env.CreateNamespace("ns1");
//   ApiResponse r = env.Post("/api/v1/namespaces/ns1/configmaps", R"({"kind":"ConfigMap",...})");
//   EXPECT_EQ(r.code, 201);
//   nlohmann::json cm = ApiTestEnv::Json(r);
//
// WatchReader pumps a watch response's stream on its own thread and collects the events.
//
// Thread-compatible: one test thread drives an ApiTestEnv; WatchReader is thread-safe.
#ifndef CTRLHOST_RUNTIME_APISERVER_TESTING_API_TEST_ENV_H_
#define CTRLHOST_RUNTIME_APISERVER_TESTING_API_TEST_ENV_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/controllers.h"
#include "runtime/apiserver/handlers.h"
#include "runtime/apiserver/resource_registry.h"
#include "runtime/apiserver/storage/store.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::apiserver::testing {

// A fresh directory under $TEST_TMPDIR (or /tmp).
std::string NewTempDir();

// Polls `condition` until it holds or `timeout` (real time) passes. For conditions another
// thread (the controllers, a watch pump) makes true; never for waiting on time itself.
bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout = absl::Seconds(20));

struct ApiTestEnvOptions {
  bool controllers = false;  // run the built-in controllers (CRDs, namespaces, GC)
  HandlerOptions handler_options;
  // StoreOptions::watch_window_events (0: the store's default).
  size_t watch_window_events = 0;
  // Reuse this directory (restart tests); "" makes a new one.
  std::string dir;
};

class ApiTestEnv {
 public:
  explicit ApiTestEnv(ApiTestEnvOptions options = {});
  ~ApiTestEnv();
  ApiTestEnv(const ApiTestEnv&) = delete;
  ApiTestEnv& operator=(const ApiTestEnv&) = delete;

  ApiResponse Do(const std::string& method, const std::string& path, const std::string& body = "",
                 const std::string& content_type = "application/json",
                 const std::vector<std::pair<std::string, std::string>>& query = {},
                 const std::string& accept = "application/json");
  ApiResponse Get(const std::string& path,
                  const std::vector<std::pair<std::string, std::string>>& query = {}) {
    return Do("GET", path, "", "", query);
  }
  ApiResponse Post(const std::string& path, const std::string& body) {
    return Do("POST", path, body);
  }
  ApiResponse Post(const std::string& path, const nlohmann::json& body) {
    return Do("POST", path, body.dump());
  }
  ApiResponse Put(const std::string& path, const nlohmann::json& body) {
    return Do("PUT", path, body.dump());
  }
  ApiResponse Patch(const std::string& path, const std::string& content_type,
                    const std::string& body,
                    const std::vector<std::pair<std::string, std::string>>& query = {}) {
    return Do("PATCH", path, body, content_type, query);
  }
  ApiResponse Delete(const std::string& path,
                     const std::vector<std::pair<std::string, std::string>>& query = {},
                     const std::string& body = "") {
    return Do("DELETE", path, body, "application/json", query);
  }

  // Creates namespace `name` (fails the test if it cannot).
  void CreateNamespace(const std::string& name);
  // Creates a ConfigMap in `ns` with `labels` and `data`; returns the created object.
  nlohmann::json CreateConfigMap(const std::string& ns, const std::string& name,
                                 const nlohmann::json& labels = nlohmann::json::object(),
                                 const nlohmann::json& data = nlohmann::json::object());

  // The body parsed as JSON (null when it is not JSON).
  static nlohmann::json Json(const ApiResponse& r);

  common::FakeClock& clock() { return clock_; }
  Store& store() { return *store_; }
  ResourceRegistry& registry() { return *registry_; }
  ApiHandlers& handlers() { return *handlers_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  common::FakeClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ResourceRegistry> registry_;
  std::unique_ptr<ApiHandlers> handlers_;
  std::unique_ptr<Controllers> controllers_;
};

// Runs a watch response's stream on a thread, collecting the events it writes.
class WatchReader {
 public:
  // `clock` (borrowed, may be null) is the env's FakeClock: Stop() advances it so that a pump
  // blocked waiting for events returns.
  WatchReader(ApiResponse response, common::FakeClock* clock);
  ~WatchReader();  // Stop()s
  WatchReader(const WatchReader&) = delete;
  WatchReader& operator=(const WatchReader&) = delete;

  // Waits (bounded, real time) until at least `n` events arrived; returns them all.
  std::vector<nlohmann::json> WaitForEvents(size_t n, absl::Duration timeout = absl::Seconds(20));
  std::vector<nlohmann::json> Events();
  // True once the stream function returned false (the watch is over).
  bool Finished();
  bool WaitFinished(absl::Duration timeout = absl::Seconds(20));
  // Ends the pump loop (advancing the fake clock until it notices) and joins its thread.
  void Stop();

 private:
  void Run();

  ApiResponse response_;
  common::FakeClock* const clock_;
  common::Mutex mu_;
  std::vector<nlohmann::json> events_ ABSL_GUARDED_BY(mu_);
  std::string partial_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// Expects `r` to be a failure answered with a metav1.Status of `code` and `reason`.
void ExpectStatus(const ApiResponse& r, int code, const std::string& reason);

}  // namespace ctrlhost::apiserver::testing

#endif  // CTRLHOST_RUNTIME_APISERVER_TESTING_API_TEST_ENV_H_
