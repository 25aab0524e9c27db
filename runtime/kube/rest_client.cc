#include "runtime/kube/rest_client.h"

#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <poll.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/common/logging.h"
#include "runtime/common/status_macros.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::kube {

// ---- StreamCanceller ----

void StreamCanceller::Cancel() {
  common::MutexLock lock(&mu_);
  cancelled_ = true;
  if (active_ != nullptr) active_->stop();
}

bool StreamCanceller::cancelled() const {
  common::MutexLock lock(&mu_);
  return cancelled_;
}

bool StreamCanceller::Attach(httplib::ClientImpl* client) {
  common::MutexLock lock(&mu_);
  if (cancelled_) return false;
  active_ = client;
  return true;
}

void StreamCanceller::Detach() {
  common::MutexLock lock(&mu_);
  active_ = nullptr;
}

// ---- RestClient ----

// A CA directory that holds no certificates: given to httplib so that it does not add the
// system roots next to the kubeconfig's CA (see Acquire).
constexpr char kNoSystemRoots[] = "/nonexistent/ctrlhost-no-system-roots";

// Parsed certificates, shared by every connection. Constant after construction.
struct RestClient::TlsMaterial {
  std::vector<X509*> ca;
  X509* cert = nullptr;
  EVP_PKEY* key = nullptr;
  ~TlsMaterial() {
    for (X509* c : ca) X509_free(c);
    if (cert != nullptr) X509_free(cert);
    if (key != nullptr) EVP_PKEY_free(key);
  }
};

namespace {

struct HostPort {
  bool tls = true;
  std::string host;
  int port = 443;
};

absl::StatusOr<HostPort> ParseHost(const std::string& url) {
  HostPort out;
  absl::string_view rest = url;
  if (absl::ConsumePrefix(&rest, "https://")) {
    out.tls = true;
    out.port = 443;
  } else if (absl::ConsumePrefix(&rest, "http://")) {
    out.tls = false;
    out.port = 80;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("server \"", url, "\": unsupported scheme"));
  }
  size_t slash = rest.find('/');
  if (slash != absl::string_view::npos) rest = rest.substr(0, slash);
  absl::string_view host = rest;
  absl::string_view port;
  if (absl::StartsWith(rest, "[")) {
    size_t close = rest.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("server \"", url, "\": bad IPv6 host"));
    }
    host = rest.substr(1, close - 1);
    if (close + 1 < rest.size() && rest[close + 1] == ':') port = rest.substr(close + 2);
  } else if (size_t colon = rest.rfind(':'); colon != absl::string_view::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty())
    return absl::InvalidArgumentError(absl::StrCat("server \"", url, "\": no host"));
  out.host = std::string(host);
  if (!port.empty() && (!absl::SimpleAtoi(port, &out.port) || out.port <= 0 || out.port > 65535)) {
    return absl::InvalidArgumentError(absl::StrCat("server \"", url, "\": bad port"));
  }
  return out;
}

absl::StatusOr<std::vector<X509*>> ParseCerts(const std::string& pem, absl::string_view what) {
  std::vector<X509*> out;
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return absl::ResourceExhaustedError("BIO_new_mem_buf");
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) out.push_back(cert);
  BIO_free(bio);
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": no PEM certificate found"));
  }
  return out;
}

bool IdempotentMethod(const std::string& method) {
  return method == "GET" || method == "HEAD" || method == "PUT" || method == "DELETE" ||
         method == "OPTIONS";
}

// Errors where the request never left this process.
bool NothingSent(httplib::Error error) {
  return error == httplib::Error::Connection || error == httplib::Error::ConnectionTimeout ||
         error == httplib::Error::BindIPAddress || error == httplib::Error::SSLConnection;
}

// Whether the server closed an idle keep-alive connection (nothing may arrive on one between
// requests: readable means EOF, or a TLS close_notify before it, which httplib's own check takes
// for a live connection, so the next request on it failed with "connection closed while
// reading"). Servers close idle connections after their keep-alive timeout: the embedded API
// server after 30 s.
bool ClosedByServer(const httplib::ClientImpl& client) {
  const int fd = client.socket();
  if (fd < 0) return false;  // not connected: send() connects
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  return ::poll(&p, 1, 0) != 0;
}

// httplib's names ("Connection", "Read") say little in a log line or /readyz.
std::string DescribeError(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection:
      return "cannot connect (Connection: refused, unreachable or no such host)";
    case httplib::Error::ConnectionTimeout:
      return "cannot connect (ConnectionTimeout)";
    case httplib::Error::SSLConnection:
      return "TLS handshake failed (SSLConnection)";
    case httplib::Error::SSLServerVerification:
      return "the server's certificate is not trusted (SSLServerVerification)";
    case httplib::Error::Read:
      return "connection closed while reading (Read)";
    case httplib::Error::Write:
      return "connection closed while writing (Write)";
    default:
      return httplib::to_string(error);
  }
}

int RetryAfterSeconds(const httplib::Response& res) {
  int seconds = -1;
  if (res.has_header("Retry-After") &&
      absl::SimpleAtoi(absl::StripAsciiWhitespace(res.get_header_value("Retry-After")), &seconds)) {
    return std::max(0, seconds);
  }
  return -1;
}

// Whether an HTTP answer can succeed when the request is sent again (see the policy in
// rest_client.h). `retry_after` is the Retry-After header in seconds, -1 when absent.
bool RetryableAnswer(int status, int retry_after, bool idempotent) {
  if (status == 429) return true;                            // not processed by the server
  if (status == 503 && retry_after >= 0) return true;        // not processed by the server
  if (status >= 500 && retry_after >= 0) return idempotent;  // the server asks to come back
  if (status == 502 || status == 503 || status == 504) return idempotent;  // transient hop
  // 500 without Retry-After: kube-apiserver's InternalError (an admission webhook failing,
  // server-side apply refusing the object, a panic) answers the same request the same way.
  return false;
}

void SetTimeouts(httplib::ClientImpl* client, absl::Duration remaining) {
  const absl::Duration d = std::max(remaining, absl::Milliseconds(1));
  const int64_t usec = absl::ToInt64Microseconds(d);
  client->set_connection_timeout(usec / 1000000, usec % 1000000);
  client->set_read_timeout(usec / 1000000, usec % 1000000);
  client->set_write_timeout(usec / 1000000, usec % 1000000);
}

}  // namespace

absl::StatusOr<std::unique_ptr<RestClient>> RestClient::Create(RestConfig config,
                                                               RestClientOptions options) {
  ASSIGN_OR_RETURN(HostPort hp, ParseHost(config.host));
  auto tls = std::make_unique<TlsMaterial>();
  if (hp.tls) {
    if (!config.ca_pem.empty()) {
      ASSIGN_OR_RETURN(tls->ca, ParseCerts(config.ca_pem, "certificate authority"));
    }
    if (!config.client_cert_pem.empty()) {
      ASSIGN_OR_RETURN(std::vector<X509*> certs,
                       ParseCerts(config.client_cert_pem, "client certificate"));
      tls->cert = certs[0];
      for (size_t i = 1; i < certs.size(); ++i) X509_free(certs[i]);
      BIO* bio = BIO_new_mem_buf(config.client_key_pem.data(),
                                 static_cast<int>(config.client_key_pem.size()));
      if (bio == nullptr) return absl::ResourceExhaustedError("BIO_new_mem_buf");
      tls->key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
      BIO_free(bio);
      if (tls->key == nullptr) {
        return absl::InvalidArgumentError("client key: no PEM private key found");
      }
    }
    if (!config.tls_server_name.empty() && config.tls_server_name != hp.host) {
      common::LogWarning("tls-server-name is not supported; verifying against the host name",
                         {{"host", hp.host}, {"tls_server_name", config.tls_server_name}});
    }
  }
  if (options.max_attempts < 1) options.max_attempts = 1;
  return std::unique_ptr<RestClient>(
      new RestClient(std::move(config), std::move(options), std::move(tls)));
}

RestClient::RestClient(RestConfig config, RestClientOptions options,
                       std::unique_ptr<TlsMaterial> tls)
    : config_(std::move(config)),
      options_(std::move(options)),
      tls_(std::move(tls)),
      limiter_(options_.qps, options_.burst, options_.clock),
      rng_(static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())) | 1) {}

RestClient::~RestClient() = default;

int64_t RestClient::attempts() const {
  common::MutexLock lock(&mu_);
  return attempts_;
}

absl::StatusOr<std::unique_ptr<httplib::ClientImpl>> RestClient::Acquire() {
  std::vector<std::unique_ptr<httplib::ClientImpl>> closed;  // destroyed outside mu_
  {
    common::MutexLock lock(&mu_);
    ++attempts_;
    while (!idle_.empty()) {
      std::unique_ptr<httplib::ClientImpl> client = std::move(idle_.back());
      idle_.pop_back();
      if (!ClosedByServer(*client)) return client;
      closed.push_back(std::move(client));
    }
  }
  ASSIGN_OR_RETURN(HostPort hp, ParseHost(config_.host));
  std::unique_ptr<httplib::ClientImpl> client;
  if (hp.tls) {
    std::unique_ptr<httplib::SSLClient> ssl =
        tls_->cert != nullptr
            ? std::make_unique<httplib::SSLClient>(hp.host, hp.port, tls_->cert, tls_->key)
            : std::make_unique<httplib::SSLClient>(hp.host, hp.port);
    if (!ssl->is_valid()) {
      return absl::InvalidArgumentError("TLS setup failed (client certificate and key?)");
    }
    if (!tls_->ca.empty()) {
      X509_STORE* store = X509_STORE_new();
      if (store == nullptr) return absl::ResourceExhaustedError("X509_STORE_new");
      for (X509* ca : tls_->ca) X509_STORE_add_cert(store, ca);
      ssl->set_ca_cert_store(store);  // takes ownership
      // Trust only the configured CA: without a CA path httplib also loads the system bundle
      // into this store on every new connection (~20 ms of CPU for 144 certificates, and roots
      // the kubeconfig did not ask for). A directory lookup that holds nothing stops that.
      ssl->set_ca_cert_path("", kNoSystemRoots);
    }
    ssl->enable_server_certificate_verification(!config_.insecure_skip_tls_verify);
    client = std::move(ssl);
  } else {
    client = std::make_unique<httplib::ClientImpl>(hp.host, hp.port);
  }
  client->set_keep_alive(true);
  client->set_tcp_nodelay(true);
  return client;
}

void RestClient::Release(std::unique_ptr<httplib::ClientImpl> client) {
  common::MutexLock lock(&mu_);
  if (idle_.size() < options_.max_idle_connections) idle_.push_back(std::move(client));
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> RestClient::Headers(
    const RestRequest& request) const {
  std::vector<std::pair<std::string, std::string>> headers = {{"Accept", "application/json"},
                                                              {"User-Agent", options_.user_agent}};
  ASSIGN_OR_RETURN(std::string token, config_.Token());
  if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
      request.method == "PATCH") {
    headers.emplace_back("Content-Type", request.content_type);
  }
  return headers;
}

absl::Duration RestClient::Backoff(int attempt) {
  absl::Duration d = options_.initial_backoff * std::pow(2.0, attempt - 1);
  d = std::min(d, options_.max_backoff);
  uint64_t r;
  {
    common::MutexLock lock(&mu_);
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    r = rng_;
  }
  // Equal jitter: half fixed, half random, so retries of many clients spread out.
  const double fraction = static_cast<double>(r % 1000000) / 1000000.0;
  return d / 2 + (d / 2) * fraction;
}

absl::StatusOr<RestResponse> RestClient::Do(const RestRequest& request) {
  common::Clock* clock = options_.clock;
  const absl::Duration timeout =
      request.timeout > absl::ZeroDuration() ? request.timeout : options_.timeout;
  absl::Time deadline = clock->Now() + timeout;
  const bool idempotent = request.idempotent || IdempotentMethod(request.method);
  const std::string what = absl::StrCat(request.method, " ", config_.host, request.path);
  absl::Status last = absl::DeadlineExceededError(absl::StrCat(what, ": deadline exceeded"));
  bool token_reloaded = false;  // one extra try after a 401 that a re-read token may fix
  const bool fenced = options_.write_fence != nullptr && request.method != "GET";
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    RETURN_IF_ERROR(limiter_.Acquire(CurrentApiTenant(), deadline));
    if (fenced) {
      ASSIGN_OR_RETURN(const absl::Time fence, options_.write_fence());
      if (fence <= clock->Now()) {
        return absl::UnavailableError(absl::StrCat(what, ": refused: the right to write ran out"));
      }
      deadline = std::min(deadline, fence);
    }
    ASSIGN_OR_RETURN(auto headers, Headers(request));
    ASSIGN_OR_RETURN(std::unique_ptr<httplib::ClientImpl> client, Acquire());
    // Socket timeouts run on real time; remember them to tell a timeout from a broken peer.
    const absl::Duration socket_timeout = deadline - clock->Now();
    const absl::Time attempt_start = absl::Now();
    SetTimeouts(client.get(), socket_timeout);
    httplib::Request req;
    req.method = request.method;
    req.path = request.path;
    for (auto& [k, v] : headers) req.headers.emplace(k, v);
    req.body = request.body;
    req.progress = [&](uint64_t, uint64_t) { return clock->Now() < deadline; };
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    const bool sent = client->send(req, res, error);
    bool retry = false;
    absl::Duration wait = Backoff(attempt);
    if (!sent) {
      const bool socket_timed_out =
          absl::Now() - attempt_start >= socket_timeout - absl::Milliseconds(20);
      if (error == httplib::Error::Canceled || clock->Now() >= deadline || socket_timed_out) {
        return absl::DeadlineExceededError(absl::StrCat(what, ": deadline exceeded"));
      }
      last = absl::UnavailableError(absl::StrCat(what, ": ", DescribeError(error)));
      retry = NothingSent(error) || idempotent;
      if (error == httplib::Error::SSLServerVerification ||
          error == httplib::Error::SSLLoadingCerts) {
        retry = false;
      }
    } else {
      if (res.status >= 200 && res.status < 300) {
        Release(std::move(client));
        RestResponse out;
        out.status = res.status;
        out.body = std::move(res.body);
        out.content_type = res.get_header_value("Content-Type");
        return out;
      }
      Release(std::move(client));
      last = FromHttpResponse(res.status, res.body);
      const int retry_after = RetryAfterSeconds(res);
      retry = RetryableAnswer(res.status, retry_after, idempotent);
      if (retry_after >= 0) wait = std::max(wait, absl::Seconds(retry_after));
      if (res.status == 401 && !token_reloaded && config_.ReloadToken()) {
        // The token file holds another token than the one refused (rewritten in place, which
        // stat did not show): the request was not served, so it is safe to send again now.
        token_reloaded = true;
        --attempt;
        common::LogInfo("API server answered 401; retrying with the re-read token",
                        {{"request", what}});
        continue;
      }
    }
    if (!retry || attempt == options_.max_attempts) return last;
    if (clock->Now() + wait >= deadline) return last;
    common::LogDebug("retrying API request",
                     {{"request", what}, {"attempt", attempt}, {"error", last.ToString()}});
    clock->SleepUntil(clock->Now() + wait);
  }
  return last;
}

absl::Status RestClient::Stream(const RestRequest& request,
                                const std::function<bool(absl::string_view)>& on_data,
                                StreamCanceller* canceller,
                                const std::function<void()>& on_established) {
  common::Clock* clock = options_.clock;
  const absl::Duration timeout =
      request.timeout > absl::ZeroDuration() ? request.timeout : options_.timeout;
  const std::string what = absl::StrCat(request.method, " ", config_.host, request.path);
  absl::Status last = absl::UnavailableError(absl::StrCat(what, ": no attempt made"));
  const absl::Time deadline = clock->Now() + timeout;  // for connecting and retries only
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    RETURN_IF_ERROR(limiter_.Acquire(CurrentApiTenant(), deadline));
    ASSIGN_OR_RETURN(auto headers, Headers(request));
    ASSIGN_OR_RETURN(std::unique_ptr<httplib::ClientImpl> client, Acquire());
    SetTimeouts(client.get(), timeout);
    if (canceller != nullptr && !canceller->Attach(client.get())) return absl::OkStatus();
    int status = 0;
    std::string error_body;
    bool stopped_by_consumer = false;
    httplib::Request req;
    req.method = request.method;
    req.path = request.path;
    for (auto& [k, v] : headers) req.headers.emplace(k, v);
    req.body = request.body;
    req.response_handler = [&](const httplib::Response& r) {
      status = r.status;
      if (status >= 200 && status < 300 && on_established) on_established();
      return true;
    };
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      if (status < 200 || status >= 300) {
        if (error_body.size() < 64 * 1024) error_body.append(data, n);
        return true;
      }
      if (!on_data(absl::string_view(data, n))) {
        stopped_by_consumer = true;
        return false;
      }
      return true;
    };
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    const bool sent = client->send(req, res, error);
    if (canceller != nullptr) canceller->Detach();
    const bool cancelled = canceller != nullptr && canceller->cancelled();
    if (stopped_by_consumer || cancelled) return absl::OkStatus();
    if (status >= 200 && status < 300) {
      // The stream was established: its end is final, never retried here.
      if (sent) {
        Release(std::move(client));
        return absl::OkStatus();
      }
      if (error == httplib::Error::Read) {
        // The server closed or the read timed out: a normal end of a watch.
        return absl::OkStatus();
      }
      return absl::UnavailableError(absl::StrCat(what, ": stream broken: ", DescribeError(error)));
    }
    bool retry = false;
    absl::Duration wait = Backoff(attempt);
    if (status == 0) {
      last = absl::UnavailableError(absl::StrCat(what, ": ", DescribeError(error)));
      retry = error != httplib::Error::SSLServerVerification &&
              error != httplib::Error::SSLLoadingCerts;
    } else {
      last = FromHttpResponse(status, error_body);
      const int retry_after = sent ? RetryAfterSeconds(res) : -1;
      retry = RetryableAnswer(status, retry_after, /*idempotent=*/true);  // a watch is a GET
      if (retry_after >= 0) wait = std::max(wait, absl::Seconds(retry_after));
    }
    if (!retry || attempt == options_.max_attempts) return last;
    if (clock->Now() + wait >= deadline) return last;
    clock->SleepUntil(clock->Now() + wait);
  }
  return last;
}

}  // namespace ctrlhost::kube
