// A plain httplib::Server for tests that script what a Kubernetes API server answers (errors,
// retries, hand-written watch streams): add routes as on any httplib::Server, then Start()
// binds 127.0.0.1 port 0 and runs the accept loop on a thread of its own. Start returns once
// that loop runs, so that Stop() (httplib's stop() does nothing before) always ends it.
//
//   kube::testing::ScriptedHttpServer server;
//   server.Get("/api/v1/namespaces", [](const httplib::Request&, httplib::Response& res) {...});
//   absl::StatusOr<int> port = server.Start();
//   ASSERT_TRUE(port.ok()) << port.status();
//   ... RestConfig config; config.host = server.url(); ...
//   server.Stop();  // or let the destructor do it; close clients' keep-alive connections first
//
// Thread-safety: Start and Stop are for the test's thread; handlers run on httplib's threads.
#ifndef CTRLHOST_RUNTIME_KUBE_TESTING_SCRIPTED_HTTP_SERVER_H_
#define CTRLHOST_RUNTIME_KUBE_TESTING_SCRIPTED_HTTP_SERVER_H_

#include <chrono>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "httplib.h"

namespace ctrlhost::kube::testing {

class ScriptedHttpServer : public httplib::Server {
 public:
  ScriptedHttpServer() = default;
  ~ScriptedHttpServer() override { Stop(); }
  ScriptedHttpServer(const ScriptedHttpServer&) = delete;
  ScriptedHttpServer& operator=(const ScriptedHttpServer&) = delete;

  // The bound port. Unavailable when nothing can be bound; DeadlineExceeded when the accept
  // loop did not start within 10 s.
  absl::StatusOr<int> Start() {
    port_ = bind_to_any_port("127.0.0.1");
    if (port_ <= 0) return absl::UnavailableError("cannot listen on 127.0.0.1");
    thread_ = std::thread([this] { listen_after_bind(); });
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (!is_running() && absl::Now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!is_running()) {
      Stop();
      return absl::DeadlineExceededError("the test HTTP server's accept loop did not start");
    }
    return port_;
  }

  // Stops accepting and joins the loop's thread. Idempotent.
  void Stop() {
    stop();
    if (thread_.joinable()) thread_.join();
  }

  int port() const { return port_; }
  std::string url() const { return absl::StrCat("http://127.0.0.1:", port_); }

 private:
  int port_ = 0;
  std::thread thread_;
};

}  // namespace ctrlhost::kube::testing

#endif  // CTRLHOST_RUNTIME_KUBE_TESTING_SCRIPTED_HTTP_SERVER_H_
