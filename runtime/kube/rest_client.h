// HTTP(S) transport to a Kubernetes API server: TLS with the configured CA / client certificate,
// bearer token (re-read per request so rotated tokens are picked up), a small pool of keep-alive
// connections shared by all threads, a client-side token-bucket rate limiter, a deadline on
// every call, and retries with jittered exponential backoff.
//
//   ASSIGN_OR_RETURN(auto rest, kube::RestClient::Create(config));
//   ASSIGN_OR_RETURN(kube::RestResponse r, rest->Do({.method = "GET", .path = "/version"}));
//
// Retry policy (guarantees): only what can succeed when sent again is retried.
//   - 429 and 503 carrying Retry-After mean the server did not process the request: retried
//     for every method, after max(Retry-After, backoff).
//   - other 5xx carrying Retry-After (the server asks to come back, e.g. kube-apiserver's 504
//     Timeout), 502, 503 and 504 (a proxy or an overloaded / restarting server), and read/write
//     failures after the request may have been sent: retried only for idempotent requests
//     (GET, HEAD, PUT, DELETE, or `idempotent = true`).
//   - 500 without Retry-After is never retried: kube-apiserver answers InternalError for
//     failures that repeat with the same request (an admission webhook, server-side apply
//     refusing the object, e.g. kube 1.20's Service `ports` without `protocol`). Repeating it
//     inside one call only multiplied the requests (5 PATCHes per reconcile); the caller's
//     backoff (the work queue's, per key) retries the whole reconcile instead.
//   - connection failures before anything was sent: retried for every method.
//   - never past the call's deadline: when the next wait would cross it, the last error is
//     returned (kDeadlineExceeded when the deadline itself ran out).
// Non-2xx answers become the absl::Status of kube::FromHttpResponse (Kubernetes Status body).
//
// Rate limit: client-go's defaults (5 QPS, burst 10) are tuned for many controllers sharing
// one apiserver; ctrlhost is one process serving all its controllers, so the default here is
// 50 QPS / burst 100. Streaming calls (watch) take one token when they start.
#ifndef CTRLHOST_RUNTIME_KUBE_REST_CLIENT_H_
#define CTRLHOST_RUNTIME_KUBE_REST_CLIENT_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/kube/fair_limiter.h"
#include "runtime/kube/kubeconfig.h"

namespace httplib {
class ClientImpl;
}

namespace ctrlhost::kube {

struct RestClientOptions {
  double qps = 50;  // <= 0: unlimited
  int burst = 100;
  absl::Duration timeout = absl::Seconds(30);  // per call, when the request sets none
  int max_attempts = 5;                        // first try included
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);
  size_t max_idle_connections = 8;
  std::string user_agent = "ctrlhost";
  common::Clock* clock = common::Clock::Real();  // borrowed; limiter and backoff waits
  // Fencing (leader election): when set, asked before every attempt of a request that is not a
  // GET. An error refuses the request without sending it (the error is returned as is); a time
  // caps the attempt's deadline, so that no write is still being sent once the caller's right
  // to write has run out. Must be thread-safe and must not block.
  std::function<absl::StatusOr<absl::Time>()> write_fence;
};

struct RestRequest {
  std::string method = "GET";
  std::string path;  // with query, e.g. "/api/v1/namespaces/a/configmaps?limit=10"
  std::string body;
  std::string content_type = "application/json";
  absl::Duration timeout = absl::ZeroDuration();  // 0: RestClientOptions::timeout
  bool idempotent = false;  // set for POST/PATCH that are safe to repeat (GET/PUT/DELETE are)
};

struct RestResponse {
  int status = 0;
  std::string body;
  std::string content_type;
};

// Cancels a streaming call from another thread. Thread-safe (mu_).
class StreamCanceller {
 public:
  void Cancel();
  bool cancelled() const;

 private:
  friend class RestClient;
  // Registers the connection a stream is reading from; false when already cancelled.
  bool Attach(httplib::ClientImpl* client);
  void Detach();

  mutable common::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  httplib::ClientImpl* active_ ABSL_GUARDED_BY(mu_) = nullptr;
};

// Thread-safe: any number of threads may call Do/Stream at once; each call holds one pooled
// connection exclusively. The pool is guarded by mu_.
class RestClient {
 public:
  static absl::StatusOr<std::unique_ptr<RestClient>> Create(RestConfig config,
                                                            RestClientOptions options = {});
  ~RestClient();
  RestClient(const RestClient&) = delete;
  RestClient& operator=(const RestClient&) = delete;

  // One request with retries. OK only for 2xx; other codes become Kubernetes statuses.
  absl::StatusOr<RestResponse> Do(const RestRequest& request);

  // A streaming GET (watch): `on_data` receives body bytes as they arrive and returns false to
  // stop. Retries only until the response headers arrive. The timeout bounds connecting and
  // each read (not the whole stream). Returns OK when the server ends the stream, on_data
  // stopped it or `canceller` cancelled it; an error for a non-2xx answer or a broken stream.
  // `on_established`, if set, is called when 2xx response headers arrive (once at most).
  absl::Status Stream(const RestRequest& request,
                      const std::function<bool(absl::string_view)>& on_data,
                      StreamCanceller* canceller = nullptr,
                      const std::function<void()>& on_established = nullptr);

  const RestConfig& config() const { return config_; }
  common::Clock* clock() const { return options_.clock; }
  // Number of HTTP attempts made so far (tests observe retries with it).
  int64_t attempts() const;
  // The request budget (options.qps / burst), shared by weight between the tenants of the
  // requests (api_tenant.h: each attempt is charged to the calling thread's tenant).
  FairLimiter& limiter() { return limiter_; }
  const FairLimiter& limiter() const { return limiter_; }

 private:
  struct TlsMaterial;
  RestClient(RestConfig config, RestClientOptions options, std::unique_ptr<TlsMaterial> tls);

  absl::StatusOr<std::unique_ptr<httplib::ClientImpl>> Acquire();
  void Release(std::unique_ptr<httplib::ClientImpl> client);
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> Headers(
      const RestRequest& request) const;
  absl::Duration Backoff(int attempt);

  // Constant after construction.
  const RestConfig config_;
  const RestClientOptions options_;
  std::string scheme_host_port_;
  std::unique_ptr<TlsMaterial> tls_;
  FairLimiter limiter_;

  mutable common::Mutex mu_;
  std::vector<std::unique_ptr<httplib::ClientImpl>> idle_ ABSL_GUARDED_BY(mu_);
  int64_t attempts_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ctrlhost::kube

#endif  // CTRLHOST_RUNTIME_KUBE_REST_CLIENT_H_
