#include "runtime/apiserver/server.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "runtime/apiserver/controllers.h"
#include "runtime/apiserver/crd.h"
#include "runtime/apiserver/handlers.h"
#include "runtime/apiserver/object_util.h"
#include "runtime/apiserver/pki/pki.h"
#include "runtime/apiserver/request_info.h"
#include "runtime/apiserver/resource_registry.h"
#include "runtime/apiserver/seats.h"
#include "runtime/apiserver/storage/store.h"
#include "runtime/common/log_limiter.h"
#include "runtime/common/logging.h"
#include "runtime/common/mutex.h"
#include "runtime/common/paths.h"
#include "runtime/common/status_macros.h"
#include "runtime/kube/api_status.h"
#include "runtime/serving/connection_server.h"
#include "runtime/serving/gzip_producer.h"

namespace ctrlhost::apiserver {
namespace {

void SendStatus(httplib::Response& res, const absl::Status& s) {
  auto [code, body] = kube::ToHttpResponse(s);
  res.status = code;
  res.set_content(body, "application/json");
}

// The namespaces every Kubernetes cluster has; clients assume "default" exists (kubectl without
// -n). Created on start when absent, like kube-apiserver's system namespace controller.
absl::Status EnsureSystemNamespaces(ApiHandlers& handlers) {
  for (const char* name : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    ApiRequest req;
    req.method = "POST";
    req.path = "/api/v1/namespaces";
    req.content_type = "application/json";
    req.body = absl::StrCat(R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":")", name,
                            R"("}})");
    ApiResponse resp = handlers.Handle(req);
    if (resp.code != 201 && resp.code != 409) {
      return absl::InternalError(
          absl::StrCat("cannot create the namespace ", name, ": HTTP ", resp.code, " ", resp.body));
    }
  }
  return absl::OkStatus();
}

// A data directory that already holds the cluster's token or CA but whose state.db is empty
// (0 bytes: truncated, or restored from a bad backup) would start as a fresh, empty cluster
// that clients trust as the old one: refused. A missing state.db is logged loudly.
absl::Status CheckStateMatchesCredentials(const std::string& data_dir) {
  struct stat st {};
  bool has_credentials = false;
  std::string found;
  for (const char* name : {"token", "ca.crt"}) {
    if (stat((data_dir + "/" + name).c_str(), &st) == 0) {
      has_credentials = true;
      found = name;
      break;
    }
  }
  if (!has_credentials) return absl::OkStatus();
  const std::string db = data_dir + "/state.db";
  if (stat(db.c_str(), &st) != 0) {
    common::LogWarning(
        "state.db is missing next to an existing token and CA: starting an EMPTY cluster with "
        "the old credentials (restore state.db from a backup if this is not intended)",
        {{"path", db}});
    return absl::OkStatus();
  }
  if (S_ISREG(st.st_mode) && st.st_size == 0) {
    struct stat wal {};
    if (stat((db + "-wal").c_str(), &wal) == 0 && wal.st_size > 0) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        db, " is empty (0 bytes) but ", data_dir, "/", found,
        " belongs to an existing cluster: refusing to start it as a fresh, empty cluster. "
        "Restore state.db from a backup, or remove the data directory to start over"));
  }
  return absl::OkStatus();
}

// A token for the in-process host's own client: 32 random bytes, hex, held in memory only.
absl::StatusOr<std::string> NewSystemToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    ERR_clear_error();
    return absl::InternalError("RAND_bytes failed while generating the system token");
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

// `authorization` is "Bearer <token>"; compared in constant time.
bool BearerMatches(const std::string& authorization, const std::string& token) {
  static constexpr absl::string_view kBearer = "Bearer ";
  if (token.empty() || authorization.size() != kBearer.size() + token.size() ||
      !absl::StartsWith(authorization, kBearer)) {
    return false;
  }
  return CRYPTO_memcmp(authorization.data() + kBearer.size(), token.data(), token.size()) == 0;
}

bool IsPublicPath(const std::string& path) {
  return path == "/healthz" || path == "/livez" || path == "/readyz" || path == "/version" ||
         absl::StartsWith(path, "/healthz/") || absl::StartsWith(path, "/livez/") ||
         absl::StartsWith(path, "/readyz/");
}

}  // namespace

struct ApiServer::Impl {
  ApiServerOptions options;
  std::unique_ptr<Store> store;
  std::unique_ptr<ResourceRegistry> registry;
  std::unique_ptr<ApiHandlers> handlers;
  std::unique_ptr<Controllers> controllers;
  std::unique_ptr<serving::ConnectionServer> http;
  // Requests being served, not counting watches (see ApiServerOptions).
  std::unique_ptr<RequestSeats> seats;
  common::LogLimiter throttled_log{{.per_second = 0.2, .burst = 3}};
  std::string token;
  // The host's own client's (system_token()); never written anywhere.
  std::string system_token;
  std::string scheme;
  std::string kubeconfig;
  int port = 0;
  std::atomic<bool> stopped{false};
  // The listener whose stream loop a committed write wakes (watches written there). Set once
  // it exists; cleared when stopping. The store's writer thread reads it.
  std::atomic<serving::ConnectionServer*> wake_streams{nullptr};

  // Members go in reverse order (the listener before the store whose writer reads
  // wake_streams): a start that failed half way stops waking it first.
  ~Impl() { wake_streams = nullptr; }
  common::Mutex mu;
  common::CondVar cv;
  bool done ABSL_GUARDED_BY(mu) = false;

  void Serve(const httplib::Request& req, std::string body, httplib::Response& res);
  // Takes a seat of `level` for the request (see RequestSeats) until its response is written;
  // false (with a 429 in `res`) when that level has none left for its kind.
  bool AdmitInflight(const httplib::Request& req, RequestSeats::Level level,
                     httplib::Response& res);

  // Start's steps, in order. Opens the database, then the handlers and controllers over it.
  absl::Status OpenState();
  // The HTTP (or, with the PKI it ensures, HTTPS) listener with its connection limits; not yet
  // listening.
  absl::Status CreateHttp();
  // Socket options and timeouts of `http`, and every route through PreRoute and Serve.
  void InstallRoutes();
  // Before a request is routed: authentication, an inflight seat, the declared body length.
  httplib::Server::HandlerResponse PreRoute(const httplib::Request& req, httplib::Response& res);
  // Reads a request's body (at most options.max_body_bytes, chunked or not), then serves it.
  void ServeWithBody(const httplib::Request& req, httplib::Response& res,
                     const httplib::ContentReader& reader);
};

namespace {

// ApiResponse::produce and next_call as the stream loop's producer.
class FunctionProducer : public serving::StreamProducer {
 public:
  FunctionProducer(std::function<bool(std::string*)> produce, std::function<absl::Time()> next)
      : produce_(std::move(produce)), next_(std::move(next)) {}
  bool Produce(std::string* out) override { return produce_(out); }
  absl::Time NextCall() const override { return next_ ? next_() : absl::InfiniteFuture(); }

 private:
  std::function<bool(std::string*)> produce_;
  std::function<absl::Time()> next_;
};

// Long-running requests (watches) hold no in-flight slot, as in kube-apiserver: they would
// otherwise use up the limit for ever. Health checks neither: a probe must be answered.
bool IsLongRunningOrProbe(const httplib::Request& req) {
  if (IsPublicPath(req.path)) return true;
  if (absl::StrContains(req.path, "/watch/")) return true;
  auto it = req.params.find("watch");
  return it != req.params.end() && (it->second == "true" || it->second == "1");
}

// A read whose answer grows with the data (a collection LIST, the OpenAPI documents) takes a
// list seat; any other read a plain read seat.
RequestSeats::Kind KindOf(const httplib::Request& req) {
  if (req.method != "GET" && req.method != "HEAD" && req.method != "OPTIONS") {
    return RequestSeats::kWrite;
  }
  if (absl::StartsWith(req.path, "/openapi/")) return RequestSeats::kList;
  auto watch = req.params.find("watch");
  absl::StatusOr<RequestInfo> info = ParseRequestInfo(
      req.method, req.path, watch == req.params.end() ? "" : absl::string_view(watch->second));
  if (info.ok() && info->is_resource_request && info->verb == "list") return RequestSeats::kList;
  return RequestSeats::kRead;
}

}  // namespace

bool ApiServer::Impl::AdmitInflight(const httplib::Request& req, RequestSeats::Level level,
                                    httplib::Response& res) {
  if (IsLongRunningOrProbe(req)) return true;
  const RequestSeats::Kind kind = KindOf(req);
  std::shared_ptr<void> seat = seats->Admit(level, kind);
  if (seat == nullptr) {
    uint64_t suppressed = 0;
    if (throttled_log.Allow(&suppressed)) {
      const SeatLimits& limits = seats->limits(level);
      const char* message =
          kind == RequestSeats::kWrite ? "request refused: --max-mutating-requests-inflight reached"
          : kind == RequestSeats::kList
              ? "request refused: --max-requests-inflight reached, or its share for LISTs"
              : "request refused: --max-requests-inflight reached";
      common::LogWarning(message,
                         {{"level", level == RequestSeats::kSystem ? "system" : "user"},
                          {"limit", kind == RequestSeats::kWrite ? limits.writes : limits.reads},
                          {"list_limit", limits.list_reads},
                          {"suppressed", suppressed}});
    }
    // kube-apiserver's answer (client-go waits Retry-After seconds and retries).
    SendStatus(res, kube::TooManyRequestsError("Too many requests, please try again later.", 1));
    res.set_header("Retry-After", "1");
    return false;
  }
  serving::ConnectionServer::HoldUntilResponseWritten(std::move(seat));
  return true;
}

void ApiServer::Impl::Serve(const httplib::Request& req, std::string body, httplib::Response& res) {
  ApiRequest ar;
  ar.method = req.method;
  ar.path = req.path;
  for (const auto& [k, v] : req.params) ar.query.emplace(k, v);  // first value wins
  ar.content_type = req.get_header_value("Content-Type");
  ar.accept = req.get_header_value("Accept");
  ar.user_agent = req.get_header_value("User-Agent");
  ar.body = std::move(body);
  ApiResponse resp = handlers->Handle(ar);
  res.status = resp.code;
  for (const auto& [name, value] : resp.headers) res.set_header(name, value);
  if ((resp.produce || resp.stream) && serving::ConnectionServer::CanDetach()) {
    // A watch, or a LIST streamed in chunks: written by the stream loop once its headers are
    // out, and this thread is freed. The connection ends with the answer. (At a stop the loop
    // lets a LIST finish: httplib would end it without its last chunk.)
    const bool watch = static_cast<bool>(resp.produce);
    if (!watch) {
      // A LIST's stream never blocks: each call makes the next chunk.
      resp.produce = [stream = std::move(resp.stream)](std::string* out) {
        return stream([out](absl::string_view chunk) {
          out->append(chunk.data(), chunk.size());
          return true;
        });
      };
    }
    res.set_header("Connection", "close");
    auto producer = std::make_shared<std::unique_ptr<serving::StreamProducer>>(
        std::make_unique<FunctionProducer>(std::move(resp.produce), std::move(resp.next_call)));
    res.set_chunked_content_provider(
        resp.content_type, [producer, watch, &res](size_t, httplib::DataSink&) {
          // httplib has written the headers: when it chose to compress (the client accepts
          // gzip and the type is compressible: a JSON LIST), the body must be gzip too.
          if (res.get_header_value("Content-Encoding") == "gzip") {
            *producer = std::make_unique<serving::GzipProducer>(std::move(*producer));
          }
          serving::ConnectionServer::Detach(std::move(*producer), /*long_running=*/watch);
          return false;  // httplib writes nothing more and leaves the connection open
        });
    return;
  }
  if (resp.stream) {
    auto stream = std::move(resp.stream);
    res.set_chunked_content_provider(resp.content_type, [stream](size_t, httplib::DataSink& sink) {
      // A watch waiting for events writes nothing, so a client that went away would otherwise
      // hold its socket (in CLOSE-WAIT) and this thread until the watch times out.
      if (serving::ConnectionServer::PeerClosed()) return false;
      bool alive = true;
      const bool more = stream([&](absl::string_view chunk) {
        if (!sink.is_writable() || !sink.write(chunk.data(), chunk.size())) alive = false;
        return alive;
      });
      if (!alive) return false;  // client gone: abort the connection
      if (!more) sink.done();
      return true;
    });
    return;
  }
  res.set_content(resp.body, resp.content_type);
}

absl::Status ApiServer::Impl::OpenState() {
  StoreOptions so;
  so.path = options.data_dir + "/state.db";
  so.sync_full = options.sync_full;
  so.retained_revisions = options.retained_revisions;
  so.compaction_interval = options.compaction_interval;
  so.extract_labels = [](absl::string_view json) { return ExtractLabels(json); };
  so.on_publish = [this] {
    if (serving::ConnectionServer* http = wake_streams.load()) http->WakeStreams();
  };
  ASSIGN_OR_RETURN(store, Store::Open(std::move(so)));
  registry = std::make_unique<ResourceRegistry>();
  HandlerOptions handler_options;
  handler_options.shard_selectors = options.sharded_list_and_watch;
  handlers = std::make_unique<ApiHandlers>(store.get(), registry.get(), common::Clock::Real(),
                                           handler_options);
  controllers = std::make_unique<Controllers>(store.get(), registry.get(), handlers.get(),
                                              common::Clock::Real());
  RETURN_IF_ERROR(controllers->Start());
  RETURN_IF_ERROR(EnsureSystemNamespaces(*handlers));
  Controllers* running = controllers.get();
  handlers->SetCrdHook([running](const nlohmann::json& crd) { running->SyncCrd(crd); });
  return absl::OkStatus();
}

absl::Status ApiServer::Impl::CreateHttp() {
  std::vector<std::string> hosts = options.hosts;
  if (options.bind != "0.0.0.0" && options.bind != "::") hosts.push_back(options.bind);
  serving::ConnectionLimits limits;
  limits.name = "apiserver";
  limits.max_connections = options.max_connections;
  limits.max_unauthenticated = options.max_unauthenticated_connections;
  limits.authentication_deadline = options.authentication_deadline;
  limits.authentication_required = !options.insecure_http;
  limits.write_stall_timeout = options.write_stall_timeout;
  limits.stream_threads = options.watch_threads;
  limits.stream_stall_timeout = options.watch_stall_timeout;
  limits.stream_window_bytes = options.watch_window_bytes;
  // What kube-apiserver answers when it is too busy: client-go waits Retry-After and retries.
  limits.refusal_content_type = "application/json";
  limits.refusal_body = kube::ToHttpResponse(kube::TooManyRequestsError(
                                                 "Too many open connections (--max-connections), "
                                                 "please try again later.",
                                                 1))
                            .second;
  if (options.insecure_http) {
    ASSIGN_OR_RETURN(http, serving::ConnectionServer::Create(limits, "", ""));
    scheme = "http";
  } else {
    ASSIGN_OR_RETURN(Pki pki, EnsurePki(options.data_dir, hosts));
    token = pki.token;
    ASSIGN_OR_RETURN(
        http, serving::ConnectionServer::Create(limits, pki.server_cert_path, pki.server_key_path));
    scheme = "https";
  }
  return absl::OkStatus();
}

httplib::Server::HandlerResponse ApiServer::Impl::PreRoute(const httplib::Request& req,
                                                           httplib::Response& res) {
  const std::string auth = req.get_header_value("Authorization");
  // The host's own client (also over plain HTTP, where nothing else is checked).
  const RequestSeats::Level level =
      BearerMatches(auth, system_token) ? RequestSeats::kSystem : RequestSeats::kUser;
  if (!token.empty() && !IsPublicPath(req.path)) {
    if (level != RequestSeats::kSystem && !BearerMatches(auth, token)) {
      SendStatus(res, kube::UnauthorizedError("Unauthorized"));
      res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    }
    serving::ConnectionServer::MarkAuthenticated();
  }
  if (!AdmitInflight(req, level, res)) return httplib::Server::HandlerResponse::Handled;
  // Before any byte of the body is read: httplib would try to skip a declared length past
  // the limit (`Content-Length: -1` is 2^64 - 1 to it) and answer only after its read
  // timeout. A length up to 64 MiB is still read and dropped by httplib, so a
  // client that sends a body somewhat too large gets its 413 rather than a broken pipe.
  if (req.has_header("Content-Length")) {
    const std::string value = req.get_header_value("Content-Length");
    uint64_t length = 0;
    if (value.empty() || value[0] == '-' || value[0] == '+' || !absl::SimpleAtoi(value, &length)) {
      SendStatus(res, kube::BadRequestError(absl::StrCat("invalid Content-Length \"",
                                                         absl::CHexEscape(value.substr(0, 64)),
                                                         "\": not a length in bytes")));
      res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (length > std::max<uint64_t>(options.max_body_bytes, 64 << 20)) {
      SendStatus(res, kube::RequestEntityTooLargeError(absl::StrCat(
                          "the request body is larger than ", options.max_body_bytes, " bytes")));
      res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    }
  }
  return httplib::Server::HandlerResponse::Unhandled;
}

// Bodies are read here rather than by httplib, which applies its payload limit to
// Content-Length only: a `Transfer-Encoding: chunked` body would otherwise be read whole,
// whatever its size.
void ApiServer::Impl::ServeWithBody(const httplib::Request& req, httplib::Response& res,
                                    const httplib::ContentReader& reader) {
  std::string body;
  bool too_large = false;
  const bool read = reader([&](const char* data, size_t n) {
    if (n > options.max_body_bytes - body.size()) {
      too_large = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  if (too_large || res.status == 413) {
    SendStatus(res, kube::RequestEntityTooLargeError(absl::StrCat(
                        "the request body is larger than ", options.max_body_bytes, " bytes")));
    // The rest of the body is still on the connection: do not read it as a next request.
    res.set_header("Connection", "close");
    return;
  }
  if (!read) {
    SendStatus(res, kube::BadRequestError("the request body could not be read"));
    res.set_header("Connection", "close");
    return;
  }
  Serve(req, std::move(body), res);
}

void ApiServer::Impl::InstallRoutes() {
  serving::ConnectionServer& http = *this->http;
  http.set_payload_max_length(options.max_body_bytes);
  // Without TCP_NODELAY a response body waits for the client's delayed ACK of the headers
  // (~40 ms per request); httplib also closes a keep-alive connection after 5 requests by
  // default, which makes clients redo the TLS handshake. Measured in bench/apiserver: 205 ->
  // ~2,400 creates/s.
  http.set_tcp_nodelay(true);
  // httplib's default socket options add SO_REUSEPORT, which lets a second server bind the same
  // port without an error (and steal half the connections). Keep only SO_REUSEADDR.
  http.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http.set_keep_alive_max_count(1000000);
  http.set_keep_alive_timeout(30);
  http.set_read_timeout(30);
  // Writes are bounded by limits.write_stall_timeout (ConnectionServer), not a write timeout.
  http.set_pre_routing_handler(
      [this](const httplib::Request& req, httplib::Response& res) { return PreRoute(req, res); });
  auto serve = [this](const httplib::Request& req, httplib::Response& res) {
    Serve(req, req.body, res);
  };
  auto serve_with_body = [this](const httplib::Request& req, httplib::Response& res,
                                const httplib::ContentReader& reader) {
    ServeWithBody(req, res, reader);
  };
  const size_t max_body = options.max_body_bytes;
  http.Get(".*", serve);
  http.Post(".*", serve_with_body);
  http.Put(".*", serve_with_body);
  http.Patch(".*", serve_with_body);
  http.Delete(".*", serve_with_body);  // with a body
  http.Delete(".*", serve);            // without
  http.Options(".*", [](const httplib::Request&, httplib::Response& res) {
    SendStatus(res, kube::MethodNotAllowedError("OPTIONS is not supported"));
  });
  http.set_error_handler([max_body](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413) {
      SendStatus(res, kube::RequestEntityTooLargeError(
                          absl::StrCat("the request body is larger than ", max_body, " bytes")));
    } else if (res.status == 404) {
      SendStatus(
          res, kube::ApiError(404, "NotFound", "the server could not find the requested resource"));
    } else if (res.status >= 400) {
      SendStatus(res, kube::ApiError(res.status, "", absl::StrCat("HTTP ", res.status)));
    }
  });
}

absl::StatusOr<std::unique_ptr<ApiServer>> ApiServer::Start(const ApiServerOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  ASSIGN_OR_RETURN(impl->system_token, NewSystemToken());
  // The host's level gets as many seats as users get, apart from theirs, and no list share:
  // its informers list everything they watch when they start.
  SeatLimits system_seats;
  system_seats.reads = std::max(options.max_requests_inflight, 0);
  system_seats.writes = std::max(options.max_mutating_requests_inflight, 0);
  impl->seats = std::make_unique<RequestSeats>(
      RequestSeats::UserLimits(options.max_requests_inflight,
                               options.max_mutating_requests_inflight),
      system_seats);
  // A database file reaching the process's file size limit (RLIMIT_FSIZE) must fail the write
  // with EFBIG, answered 429 like a full disk (storage/sqlite.cc), not kill the whole server.
  signal(SIGXFSZ, SIG_IGN);
  RETURN_IF_ERROR(common::CreatePrivateDirectory(options.data_dir));
  RETURN_IF_ERROR(CheckStateMatchesCredentials(options.data_dir));
  RETURN_IF_ERROR(impl->OpenState());
  RETURN_IF_ERROR(impl->CreateHttp());
  impl->wake_streams = impl->http.get();
  impl->InstallRoutes();
  // httplib listens with a backlog of 5: a burst of connections (clients starting together, a
  // flood) would have SYNs dropped and retried after 1 s. The kernel caps it at somaxconn.
  ASSIGN_OR_RETURN(impl->port, impl->http->Listen(options.bind, options.port, /*backlog=*/4096));

  // From here on the server owns the running threads: an error below stops them on return.
  Impl* running = impl.get();
  std::unique_ptr<ApiServer> server(new ApiServer(std::move(impl)));
  std::string host = options.bind == "0.0.0.0" ? "127.0.0.1" : options.bind;
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  const std::string url = absl::StrCat(running->scheme, "://", host, ":", running->port);
  running->kubeconfig = options.data_dir + "/kubeconfig";
  if (!options.insecure_http) {
    RETURN_IF_ERROR(WriteKubeconfig(running->kubeconfig, url, options.data_dir + "/ca.crt",
                                    running->token, "ctrlhost"));
  } else {
    RETURN_IF_ERROR(WriteKubeconfig(running->kubeconfig, url, "", "", "ctrlhost"));
  }
  common::LogInfo("API server listening", {{"url", url},
                                           {"kubeconfig", running->kubeconfig},
                                           {"revision", running->store->Revision()}});
  return server;
}

ApiServer::ApiServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ApiServer::~ApiServer() { Stop(); }

int ApiServer::port() const { return impl_->port; }

std::string ApiServer::url() const {
  return absl::StrCat(impl_->scheme, "://", impl_->options.bind, ":", impl_->port);
}

std::string ApiServer::kubeconfig_path() const { return impl_->kubeconfig; }

const std::string& ApiServer::system_token() const { return impl_->system_token; }

serving::ConnectionServer::Stats ApiServer::connection_stats() const {
  return impl_->http->GetStats();
}

void ApiServer::Wait() {
  common::MutexLock lock(&impl_->mu);
  while (!impl_->done) impl_->cv.Wait(&impl_->mu);
}

void ApiServer::Stop() {
  if (impl_->stopped.exchange(true)) return;
  impl_->wake_streams = nullptr;
  // Watches end first, each with its last chunk written, while the connections are still open:
  // clients see a finished watch (and re-watch), not a broken stream. A client that does not
  // read holds its watch back at most this long.
  impl_->handlers->StopWatches();
  impl_->http->WakeStreams();  // the watches the stream loop writes see that they are over
  impl_->handlers->WaitWatchesDone(absl::Seconds(2));
  impl_->http->StopListening();
  impl_->controllers->Stop();
  impl_->store.reset();
  common::MutexLock lock(&impl_->mu);
  impl_->done = true;
  impl_->cv.SignalAll();
}

}  // namespace ctrlhost::apiserver
