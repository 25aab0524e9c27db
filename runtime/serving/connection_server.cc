#include "runtime/serving/connection_server.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/common/logging.h"
#include "runtime/serving/connection_stream.h"

namespace ctrlhost::serving {
namespace {

using internal::ConnectionStream;
using internal::PeerState;

int ToMillis(time_t sec, time_t usec) {
  const int64_t ms = static_cast<int64_t>(sec) * 1000 + usec / 1000;
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

int ToMillis(absl::Duration d) {
  return static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(d), 0, INT_MAX));
}

// cpp-httplib is a shared library that ThreadSanitizer does not instrument. Its chunked-response
// path keeps function-local static strings (the last-chunk marker), initialized by the first
// connection thread that ends a chunked answer; TSan sees that initialization (through its memcpy
// interceptor) but not the guard that orders it before the next thread's read, and reports a race
// on a global of httplib's. Running one chunked answer on the thread that starts the first server,
// before any connection thread exists, initializes them where thread creation orders it before
// every later read. A plain answer through a socket pair; nothing leaves the process.
class HttplibStaticsWarmer : public httplib::Server {
 public:
  void Run() {
    Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/plain", [](size_t, httplib::DataSink& sink) {
        sink.write("x", 1);
        sink.done();
        return true;
      });
    });
    // The path of an answer handed to the stream loop (Detach): `Connection: close`, a chunked
    // provider that writes nothing and returns false, a JSON type httplib compresses for a
    // client that accepts gzip.
    Get("/detached", [](const httplib::Request&, httplib::Response& res) {
      res.set_header("Connection", "close");
      res.set_chunked_content_provider("application/json",
                                       [](size_t, httplib::DataSink&) { return false; });
    });
    RunOnce("GET / HTTP/1.1\r\nHost: ctrlhost\r\nConnection: close\r\n\r\n");
    RunOnce(
        "GET /detached HTTP/1.1\r\nHost: ctrlhost\r\nAccept-Encoding: gzip\r\n"
        "Connection: close\r\n\r\n");
  }

 private:
  void RunOnce(const std::string& request) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return;
    // The request and the answer (well under 1 KiB) both fit the socket pair's buffers.
    if (::write(fds[1], request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      ConnectionStream stream(fds[0], /*ssl=*/nullptr, /*read_timeout_ms=*/1000,
                              /*write_stall_timeout_ms=*/1000);
      bool closed = false;
      process_request(stream, /*close_connection=*/true, closed, [](httplib::Request&) {});
    }
    ::close(fds[0]);
    ::close(fds[1]);
  }
};

void WarmHttplibStatics() {
  static const bool warmed = [] {
    HttplibStaticsWarmer().Run();
    return true;
  }();
  (void)warmed;
}

void SetTimeout(int fd, int option, int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  setsockopt(fd, SOL_SOCKET, option, &tv, sizeof(tv));
}

// How much a connection has shown, in the order in which unauthenticated ones are evicted.
enum class Progress {
  kSilent,      // no byte yet
  kSentBytes,   // a TLS ClientHello or the start of a request
  kHandshaken,  // its TLS handshake is complete (TLS servers only)
};

}  // namespace

// State of one connection. Every field but `fd`, `server` and `held` is guarded by the
// server's mu_; `held` belongs to the connection's thread.
struct ConnectionServer::Connection {
  int fd = -1;
  absl::Time deadline;
  bool authenticated = false;
  bool shut = false;
  bool busy = false;  // a request is being read, handled or answered
  Progress progress = Progress::kSilent;
  // unauthenticated_ or refusing_ (with the position in it), or null.
  std::list<Connection*>* list = nullptr;
  std::list<Connection*>::iterator position;
  bool in_idle = false;
  std::list<Connection*>::iterator idle_position;
  ConnectionServer* server = nullptr;
  std::vector<std::shared_ptr<void>> held;
  // Close with a reset (the connection's thread only): set after a write stall.
  bool abort = false;
  // The connection's thread only: its TLS session (null for plain TCP), and the producer of a
  // stream it hands to the stream loop once httplib returns (Detach()).
  SSL* ssl = nullptr;
  std::unique_ptr<StreamProducer> detach;
  bool detach_long_running = false;
};

namespace {
thread_local void* current_connection = nullptr;
}  // namespace

// One thread per connection: watches hold their connection for minutes, so a fixed pool would
// starve. The connection table bounds how many there are. shutdown() (httplib calls it once the
// accept loop has ended) lets the requests being served finish (bounded), closes every
// connection and waits for their threads.
class ConnectionServer::ThreadPerConnection : public httplib::TaskQueue {
 public:
  explicit ThreadPerConnection(ConnectionServer* server) : server_(server) {}

  void enqueue(std::function<void()> fn) override {
    {
      common::MutexLock lock(&mu_);
      ++active_;
    }
    try {
      std::thread([this, fn = std::move(fn)] {
        fn();
        common::MutexLock lock(&mu_);
        --active_;
        cv_.SignalAll();
      }).detach();
    } catch (const std::system_error& e) {
      // Out of threads: the socket inside `fn` cannot be reached to close it; the
      // connection limit keeps this from happening below the system's thread limit.
      common::MutexLock lock(&mu_);
      --active_;
      common::LogWarning("cannot start a connection thread",
                         {{"server", server_->limits_.name}, {"error", e.what()}});
    }
  }

  void shutdown() override {
    server_->DrainThenCloseAll();
    common::MutexLock lock(&mu_);
    while (active_ > 0) cv_.Wait(&mu_);
  }

 private:
  ConnectionServer* const server_;
  common::Mutex mu_;
  common::CondVar cv_;
  size_t active_ ABSL_GUARDED_BY(mu_) = 0;
};

absl::StatusOr<std::unique_ptr<ConnectionServer>> ConnectionServer::Create(
    ConnectionLimits limits, const std::string& cert_path, const std::string& key_path) {
  // A write to a peer that has gone would otherwise kill the process: OpenSSL writes with
  // write(2), without MSG_NOSIGNAL. (httplib's Server constructor does the same; said here so
  // that it does not depend on that.)
  signal(SIGPIPE, SIG_IGN);
  SSL_CTX* ctx = nullptr;
  if (!cert_path.empty()) {
    ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == nullptr) return absl::InternalError("cannot create a TLS context");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_SESSION_RESUMPTION_ON_RENEGOTIATION);
    // SSL_write returns once a record is written: a slow reader that takes a record now and
    // then is making progress, not stalled (ConnectionStream::write).
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_path.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, key_path.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
      char err[256] = {0};
      ERR_error_string_n(ERR_get_error(), err, sizeof(err));
      SSL_CTX_free(ctx);
      return absl::InvalidArgumentError(absl::StrCat("cannot load the serving certificate ",
                                                     cert_path, " and key ", key_path, ": ", err));
    }
  }
  // Each connection holds a file descriptor; keep some for everything else (the database,
  // plugin sockets, the listener).
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    const size_t reserve = 256;
    const size_t fit = rl.rlim_cur > 2 * reserve ? rl.rlim_cur - reserve : rl.rlim_cur / 2;
    if (limits.max_connections == 0 || limits.max_connections > fit) {
      common::LogWarning("connection limit lowered to fit the open-file limit",
                         {{"server", limits.name},
                          {"requested", limits.max_connections},
                          {"max_connections", fit},
                          {"open_file_limit", static_cast<uint64_t>(rl.rlim_cur)}});
      limits.max_connections = fit;
    }
  }
  if (limits.max_unauthenticated == 0) limits.max_unauthenticated = 1;
  std::unique_ptr<StreamLoop> streams;
  if (limits.stream_threads > 0) {
    StreamLoopOptions so;
    so.name = limits.name;
    so.threads = limits.stream_threads;
    so.window_bytes = limits.stream_window_bytes;
    so.stall_timeout = limits.stream_stall_timeout;
    auto started = StreamLoop::Start(std::move(so));
    if (!started.ok()) {
      if (ctx != nullptr) SSL_CTX_free(ctx);
      return started.status();
    }
    streams = *std::move(started);
  }
  std::unique_ptr<ConnectionServer> server(new ConnectionServer(std::move(limits), ctx));
  server->streams_ = std::move(streams);
  return server;
}

ConnectionServer::ConnectionServer(ConnectionLimits limits, SSL_CTX* ctx)
    : limits_(std::move(limits)),
      ssl_ctx_(ctx),
      refused_log_({.per_second = 0.2, .burst = 3}),
      evicted_log_({.per_second = 0.2, .burst = 3}),
      stalled_log_({.per_second = 0.2, .burst = 3}) {
  new_task_queue = [this] { return new ThreadPerConnection(this); };
  watchdog_ = std::thread([this] { Watchdog(); });
}

ConnectionServer::~ConnectionServer() {
  StopListening();
  CloseAll();
  if (ssl_ctx_ != nullptr) SSL_CTX_free(ssl_ctx_);
}

absl::StatusOr<int> ConnectionServer::Listen(const std::string& bind, int port, int backlog) {
  int bound = port;
  if (port == 0) {
    bound = bind_to_any_port(bind);
    if (bound <= 0) return absl::UnavailableError(absl::StrCat("cannot listen on ", bind));
  } else if (!bind_to_port(bind, port)) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", bind, ":", port, " (in use, or no permission)"));
  }
  if (absl::Status s = SetBacklog(backlog); !s.ok()) return s;
  WarmHttplibStatics();
  auto listener_done = std::make_shared<std::atomic<bool>>(false);
  listener_ = std::thread([this, listener_done] {
    listen_after_bind();
    *listener_done = true;
  });
  // Bounded: listen_after_bind either enters its accept loop or returns at once, and httplib
  // offers nothing to wait on.
  while (!is_running() && !*listener_done) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (*listener_done) {
    listener_.join();
    return absl::InternalError(absl::StrCat("the ", limits_.name, " listener on ", bind, ":", bound,
                                            " stopped as soon as it started"));
  }
  return bound;
}

void ConnectionServer::StopListening() {
  stop();
  if (listener_.joinable()) listener_.join();
  // The detached streams: those that are over write their last chunk within the grace.
  if (streams_ != nullptr) streams_->Stop(limits_.shutdown_grace);
}

absl::Status ConnectionServer::SetBacklog(int backlog) {
  const socket_t sock = svr_sock_;
  if (sock == INVALID_SOCKET) return absl::FailedPreconditionError("the server is not bound");
  if (::listen(sock, backlog) != 0) {
    return absl::InternalError(absl::StrCat("listen(backlog=", backlog, "): ", strerror(errno)));
  }
  return absl::OkStatus();
}

bool ConnectionServer::BeginRequest(Connection* c) {
  common::MutexLock lock(&mu_);
  if (c->shut) return false;
  c->busy = true;
  LeaveIdleLocked(c);
  return true;
}

void ConnectionServer::EndRequest(Connection* c) {
  common::MutexLock lock(&mu_);
  c->busy = false;
  if (c->authenticated && !c->shut && !closing_ && !c->in_idle) {
    idle_.push_back(c);
    c->idle_position = std::prev(idle_.end());
    c->in_idle = true;
  }
  if (closing_) cv_.SignalAll();
}

void ConnectionServer::LeaveIdleLocked(Connection* c) {
  if (!c->in_idle) return;
  idle_.erase(c->idle_position);
  c->in_idle = false;
}

bool ConnectionServer::AnyBusyLocked() const {
  for (const Connection* c : open_) {
    if (c->busy && !c->shut) return true;
  }
  return false;
}

void ConnectionServer::DrainThenCloseAll() {
  {
    common::MutexLock lock(&mu_);
    closing_ = true;
    // An idle keep-alive connection has no request to finish. (A request whose first bytes
    // arrive just now finds its connection shut in BeginRequest; the client sees the connection
    // closed before any answer, which HTTP clients retry for idempotent requests.)
    for (Connection* c : open_) {
      if (!c->busy) ShutDownLocked(c);
    }
    cv_.SignalAll();
    // A busy connection leaves its keep-alive loop after this request (the listener is gone),
    // so waiting for none to be busy is waiting for the answers to be written.
    const absl::Time deadline = absl::Now() + limits_.shutdown_grace;
    while (AnyBusyLocked()) {
      if (cv_.WaitWithDeadline(&mu_, deadline)) break;
    }
  }
  CloseAll();
}

void ConnectionServer::CloseAll() {
  {
    common::MutexLock lock(&mu_);
    closing_ = true;
    for (Connection* c : open_) ShutDownLocked(c);
    while (!refusing_.empty()) ShutDownLocked(refusing_.front());
    cv_.SignalAll();
  }
  if (watchdog_.joinable() && watchdog_.get_id() != std::this_thread::get_id()) {
    watchdog_.join();
  }
}

void ConnectionServer::MarkAuthenticated() {
  auto* c = static_cast<Connection*>(current_connection);
  if (c != nullptr) c->server->Authenticated(c);
}

bool ConnectionServer::PeerClosed() {
  auto* c = static_cast<Connection*>(current_connection);
  return c != nullptr && internal::Peek(c->fd) == PeerState::kClosed;
}

void ConnectionServer::HoldUntilResponseWritten(std::shared_ptr<void> resource) {
  auto* c = static_cast<Connection*>(current_connection);
  if (c != nullptr) c->held.push_back(std::move(resource));
}

bool ConnectionServer::CanDetach() {
  auto* c = static_cast<Connection*>(current_connection);
  if (c == nullptr || c->server->streams_ == nullptr) return false;
  common::MutexLock lock(&c->server->mu_);
  return !c->server->closing_;
}

void ConnectionServer::Detach(std::unique_ptr<StreamProducer> producer, bool long_running) {
  auto* c = static_cast<Connection*>(current_connection);
  if (c == nullptr || c->server->streams_ == nullptr) return;
  c->detach = std::move(producer);
  c->detach_long_running = long_running;
}

void ConnectionServer::WakeStreams() {
  if (streams_ != nullptr) streams_->WakeAll();
}

ConnectionServer::Stats ConnectionServer::GetStats() const {
  Stats s;
  {
    common::MutexLock lock(&mu_);
    s = stats_;
    s.open = open_.size() + detached_;
    s.unauthenticated = unauthenticated_.size();
    s.idle = idle_.size();
  }
  if (streams_ != nullptr) s.streams = streams_->GetStats();
  return s;
}

bool ConnectionServer::process_and_close_socket(socket_t sock) {
  Connection c;
  c.fd = sock;
  c.server = this;
  switch (Register(&c)) {
    case Admission::kAccepted:
      current_connection = &c;
      Serve(c);
      current_connection = nullptr;
      if (c.detach != nullptr) {
        // The stream loop owns the socket and the session from here; this thread ends.
        Unregister(&c, /*detached=*/true);
        const bool long_running = c.detach_long_running;
        streams_->Adopt(
            sock, c.ssl, std::move(c.detach),
            [this, long_running, held = std::move(c.held)](StreamLoop::End how) mutable {
              held.clear();  // e.g. the request's seat
              common::MutexLock lock(&mu_);
              --detached_;
              if (!long_running && how == StreamLoop::End::kStalled) ++stats_.write_stalled;
            },
            long_running ? limits_.stream_stall_timeout : limits_.write_stall_timeout);
        return true;
      }
      c.held.clear();
      Unregister(&c);
      break;
    case Admission::kAnswerRefusal:
      AnswerRefusal(c);
      Unregister(&c);
      break;
    case Admission::kRefused:
      break;
  }
  if (c.abort) {
    // A reset, not a FIN: the FIN would wait behind the unread answer in the send queue (for
    // ever towards a zero window), and the kernel would keep that memory for an orphaned
    // socket; the client, which reads nothing, learns at once that the answer is gone.
    linger abort{1, 0};
    setsockopt(sock, SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
  } else {
    ::shutdown(sock, SHUT_RDWR);
  }
  ::close(sock);
  return true;
}

void ConnectionServer::Serve(Connection& c) {
  const int read_ms = ToMillis(read_timeout_sec_, read_timeout_usec_);
  const int stall_ms = ToMillis(limits_.write_stall_timeout);
  // Bounds each blocking send (httplib set SO_SNDTIMEO to its own write timeout on accept).
  SetTimeout(c.fd, SO_SNDTIMEO, stall_ms);
  SSL* ssl = nullptr;
  if (ssl_ctx_ != nullptr) {
    // The first byte (its ClientHello) moves the connection out of the first rank to evict.
    if (!internal::Poll(c.fd, POLLIN, read_ms)) return;
    MadeProgress(&c, /*handshaken=*/false);
    ssl = SSL_new(ssl_ctx_);
    if (ssl == nullptr) return;
    c.ssl = ssl;
    SSL_set_fd(ssl, c.fd);
    // Blocking, bounded by the socket's read timeout per read and by the watchdog's deadline
    // for the whole handshake.
    if (SSL_accept(ssl) != 1) {
      ERR_clear_error();
      SSL_free(ssl);
      c.ssl = nullptr;
      return;
    }
    MadeProgress(&c, /*handshaken=*/true);
  }
  ConnectionStream stream(c.fd, ssl, read_ms, stall_ms);
  const int keep_alive_ms = ToMillis(keep_alive_timeout_sec_, 0);
  const std::function<void(httplib::Request&)> setup = [this, &c](httplib::Request&) {
    if (!limits_.authentication_required) Authenticated(&c);
  };
  size_t remaining = keep_alive_max_count_;
  bool clean = true;
  bool first = true;
  while (remaining > 0 && svr_sock_ != INVALID_SOCKET) {
    if (!stream.WaitReadable(keep_alive_ms)) break;
    if (first && ssl == nullptr) MadeProgress(&c, /*handshaken=*/false);
    first = false;
    if (!BeginRequest(&c)) break;
    bool connection_closed = false;
    const bool ok =
        process_request(stream, /*close_connection=*/remaining == 1, connection_closed, setup);
    if (c.detach == nullptr) c.held.clear();  // a detached answer keeps them until it is written
    EndRequest(&c);
    if (stream.stalled()) {
      c.abort = true;
      uint64_t suppressed = 0;
      {
        common::MutexLock lock(&mu_);
        ++stats_.write_stalled;
      }
      if (stalled_log_.Allow(&suppressed)) {
        common::LogWarning(
            "connection closed: the client read nothing of its response for the write stall "
            "timeout (what its request held is released)",
            {{"server", limits_.name},
             {"write_stall_timeout", absl::FormatDuration(limits_.write_stall_timeout)},
             {"suppressed", suppressed}});
      }
    }
    if (c.detach != nullptr) return;  // handed to the stream loop with its session
    if (!ok) clean = false;
    if (!ok || connection_closed) break;
    --remaining;
  }
  c.ssl = nullptr;
  if (ssl != nullptr) {
    if (clean) SSL_shutdown(ssl);
    ERR_clear_error();
    SSL_free(ssl);
  }
}

void ConnectionServer::AnswerRefusal(Connection& c) {
  // Every step below is bounded by the watchdog, which shuts the socket down at c.deadline.
  const absl::Time read_until = absl::Now() + limits_.refusal_deadline / 2;
  const int deadline_ms = ToMillis(limits_.refusal_deadline);
  SetTimeout(c.fd, SO_RCVTIMEO, deadline_ms);
  SetTimeout(c.fd, SO_SNDTIMEO, deadline_ms);
  SSL* ssl = nullptr;
  if (ssl_ctx_ != nullptr) {
    ssl = SSL_new(ssl_ctx_);
    if (ssl == nullptr) return;
    c.ssl = ssl;
    SSL_set_fd(ssl, c.fd);
    if (SSL_accept(ssl) != 1) {
      ERR_clear_error();
      SSL_free(ssl);
      c.ssl = nullptr;
      return;
    }
  }
  ConnectionStream stream(c.fd, ssl, deadline_ms, deadline_ms);
  // The request's headers first: an HTTP client reads an answer to a request it has sent (Go's
  // transport drops an answer that arrives before its request). A client that sends nothing
  // in time is answered anyway.
  std::string request;
  char buf[4096];
  while (request.size() < 16384 && request.find("\r\n\r\n") == std::string::npos) {
    const int wait_ms = ToMillis(read_until - absl::Now());
    if (wait_ms <= 0 || !stream.WaitReadable(wait_ms)) break;
    const ssize_t n = stream.read(buf, sizeof(buf));
    if (n <= 0) break;
    request.append(buf, static_cast<size_t>(n));
  }
  const std::string answer =
      absl::StrCat("HTTP/1.1 429 Too Many Requests\r\nContent-Type: ", limits_.refusal_content_type,
                   "\r\nContent-Length: ", limits_.refusal_body.size(),
                   "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n", limits_.refusal_body);
  size_t written = 0;
  while (written < answer.size()) {
    const ssize_t n = stream.write(answer.data() + written, answer.size() - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  if (ssl != nullptr) {
    SSL_shutdown(ssl);
    ERR_clear_error();
  }
  // A lingering close: the rest of the request (a body) is read and dropped until the client
  // closes, since closing with unread bytes sends a reset that can destroy the answer before
  // the client reads it.
  ::shutdown(c.fd, SHUT_WR);
  const absl::Time linger_until = read_until + limits_.refusal_deadline / 2;
  for (;;) {
    const int wait_ms = ToMillis(linger_until - absl::Now());
    if (wait_ms <= 0 || !internal::Poll(c.fd, POLLIN, wait_ms)) break;
    if (::recv(c.fd, buf, sizeof(buf), 0) <= 0) break;
  }
  if (ssl != nullptr) SSL_free(ssl);
}

ConnectionServer::Admission ConnectionServer::Register(Connection* c) {
  Admission admission = Admission::kAccepted;
  uint64_t evicted = 0;
  uint64_t evicted_idle = 0;
  size_t open = 0;
  {
    common::MutexLock lock(&mu_);
    if (closing_) return Admission::kRefused;
    size_t counted = open_.size() + detached_;
    if (unauthenticated_.size() >= limits_.max_unauthenticated) {
      if (Connection* victim = UnauthenticatedVictimLocked()) {
        ShutDownLocked(victim);
        ++evicted;
        --counted;  // the room for the new one
      }
    }
    if (limits_.max_connections > 0 && counted >= limits_.max_connections) {
      // An authenticated connection is closed for a new one only when it is idle between
      // requests, never in the middle of one.
      if (Connection* victim = UnauthenticatedVictimLocked()) {
        ShutDownLocked(victim);
        ++evicted;
      } else if (Connection* idle = IdleVictimLocked()) {
        ShutDownLocked(idle);
        ++evicted_idle;
      } else {
        ++stats_.refused;
        admission = refusing_.size() < limits_.max_refusals_answered ? Admission::kAnswerRefusal
                                                                     : Admission::kRefused;
      }
    }
    stats_.evicted += evicted;
    stats_.evicted_idle += evicted_idle;
    std::list<Connection*>* list = nullptr;
    if (admission == Admission::kAccepted) {
      c->deadline = absl::Now() + limits_.authentication_deadline;
      open_.insert(c);
      list = &unauthenticated_;
    } else if (admission == Admission::kAnswerRefusal) {
      c->deadline = absl::Now() + limits_.refusal_deadline;
      list = &refusing_;
    }
    if (list != nullptr) {
      list->push_back(c);
      c->list = list;
      c->position = std::prev(list->end());
      if (list->size() == 1) cv_.SignalAll();  // the watchdog may be idle
    }
    open = open_.size();
  }
  uint64_t suppressed = 0;
  if (admission != Admission::kAccepted && refused_log_.Allow(&suppressed)) {
    common::LogWarning(
        admission == Admission::kAnswerRefusal
            ? "connection refused with 429: --max-connections reached, every connection busy"
            : "connection closed unanswered: --max-connections reached, every connection busy, "
              "and too many refusals being answered",
        {{"server", limits_.name},
         {"max_connections", limits_.max_connections},
         {"suppressed", suppressed}});
  }
  if ((evicted > 0 || evicted_idle > 0) && evicted_log_.Allow(&suppressed)) {
    common::LogWarning(
        evicted > 0 ? "unauthenticated connection closed for a newer one (too many idle or slow "
                      "connections)"
                    : "idle keep-alive connection closed for a newer one: --max-connections "
                      "reached",
        {{"server", limits_.name},
         {"max_unauthenticated", limits_.max_unauthenticated},
         {"max_connections", limits_.max_connections},
         {"open", open},
         {"suppressed", suppressed}});
  }
  return admission;
}

ConnectionServer::Connection* ConnectionServer::UnauthenticatedVictimLocked() {
  // One poll(2) for every connection that has shown nothing yet: its client may have sent bytes
  // its thread has not read, or closed it.
  std::vector<pollfd> silent;
  std::vector<Connection*> silent_connections;
  for (Connection* c : unauthenticated_) {
    if (c->progress != Progress::kSilent) continue;
    silent.push_back(pollfd{c->fd, POLLIN | POLLRDHUP, 0});
    silent_connections.push_back(c);
  }
  Connection* first_silent = nullptr;
  if (!silent.empty() && ::poll(silent.data(), silent.size(), 0) >= 0) {
    for (size_t i = 0; i < silent.size(); ++i) {
      const short revents = silent[i].revents;
      if ((revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0) {
        return silent_connections[i];  // its client is gone
      }
      if ((revents & POLLIN) != 0) {
        silent_connections[i]->progress = Progress::kSentBytes;
      } else if (first_silent == nullptr) {
        first_silent = silent_connections[i];
      }
    }
  }
  if (first_silent != nullptr) return first_silent;
  for (Connection* c : unauthenticated_) {
    if (c->progress == Progress::kSentBytes) return c;
  }
  return unauthenticated_.empty() ? nullptr : unauthenticated_.front();
}

ConnectionServer::Connection* ConnectionServer::IdleVictimLocked() {
  // Bounded: a connection whose next request is arriving is skipped (it is about to be busy;
  // closing it would drop that request), and so are at most this many of them.
  int skipped = 0;
  for (Connection* c : idle_) {
    if (internal::Peek(c->fd) != PeerState::kReadable) return c;
    if (++skipped == 16) break;
  }
  return nullptr;
}

void ConnectionServer::Unregister(Connection* c, bool detached) {
  common::MutexLock lock(&mu_);
  if (detached) ++detached_;
  if (closing_) cv_.SignalAll();
  if (c->list != nullptr) {
    c->list->erase(c->position);
    c->list = nullptr;
  }
  LeaveIdleLocked(c);
  open_.erase(c);
}

void ConnectionServer::Authenticated(Connection* c) {
  common::MutexLock lock(&mu_);
  c->authenticated = true;
  if (c->list == &unauthenticated_) {
    unauthenticated_.erase(c->position);
    c->list = nullptr;
  }
}

void ConnectionServer::MadeProgress(Connection* c, bool handshaken) {
  common::MutexLock lock(&mu_);
  c->progress = std::max(c->progress, handshaken ? Progress::kHandshaken : Progress::kSentBytes);
}

void ConnectionServer::ShutDownLocked(Connection* c) {
  if (!c->shut) ::shutdown(c->fd, SHUT_RDWR);
  c->shut = true;
  if (c->list != nullptr) {
    c->list->erase(c->position);
    c->list = nullptr;
  }
  LeaveIdleLocked(c);
}

void ConnectionServer::Watchdog() {
  uint64_t timed_out = 0;
  common::MutexLock lock(&mu_);
  while (!closing_) {
    const absl::Time now = absl::Now();
    while (!unauthenticated_.empty() && unauthenticated_.front()->deadline <= now) {
      ShutDownLocked(unauthenticated_.front());
      ++stats_.timed_out;
      ++timed_out;
    }
    // A refused connection not answered within its deadline (a trickled TLS handshake).
    while (!refusing_.empty() && refusing_.front()->deadline <= now) {
      ShutDownLocked(refusing_.front());
    }
    if (timed_out > 0) {
      uint64_t suppressed = 0;
      if (evicted_log_.Allow(&suppressed)) {
        common::LogWarning(
            "unauthenticated connections closed: no authenticated request within "
            "the deadline (slow or idle clients)",
            {{"server", limits_.name},
             {"closed", timed_out},
             {"deadline", absl::FormatDuration(limits_.authentication_deadline)}});
        timed_out = 0;
      }
    }
    absl::Time next = absl::InfiniteFuture();
    if (!unauthenticated_.empty()) next = unauthenticated_.front()->deadline;
    if (!refusing_.empty()) next = std::min(next, refusing_.front()->deadline);
    // Also wakes at least once a second, so that a held back log line is eventually written.
    cv_.WaitWithDeadline(&mu_, std::min(next, now + absl::Seconds(1)));
  }
}

uint64_t RaiseOpenFileLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_cur < rl.rlim_max) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
  }
  return rl.rlim_cur;
}

}  // namespace ctrlhost::serving
