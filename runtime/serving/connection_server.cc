#include "runtime/serving/connection_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
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

namespace ctrlhost::serving {
namespace {

int ToMillis(time_t sec, time_t usec) {
  const int64_t ms = static_cast<int64_t>(sec) * 1000 + usec / 1000;
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

bool Poll(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  int r;
  do {
    r = ::poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  return r > 0 && (p.revents & events) != 0;
}

void AddressOf(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  const int r = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                     : getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (r != 0) return;
  char buf[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    port = ntohs(a->sin6_port);
  }
  ip = buf;
}

// One connection's bytes, over TLS or plain TCP, with httplib's read and write timeouts. The
// socket is blocking with SO_RCVTIMEO/SO_SNDTIMEO set (httplib sets them on accept), so a read
// inside a TLS record that never completes still returns.
class ConnectionStream : public httplib::Stream {
 public:
  ConnectionStream(int fd, SSL* ssl, int read_timeout_ms, int write_timeout_ms)
      : fd_(fd),
        ssl_(ssl),
        read_timeout_ms_(read_timeout_ms),
        write_timeout_ms_(write_timeout_ms) {}

  // Waits up to `timeout_ms` for bytes of a next request.
  bool WaitReadable(int timeout_ms) const {
    if (Buffered()) return true;
    return Poll(fd_, POLLIN, timeout_ms);
  }

  bool is_readable() const override { return WaitReadable(read_timeout_ms_); }
  bool is_writable() const override { return Poll(fd_, POLLOUT, write_timeout_ms_); }

  ssize_t read(char* ptr, size_t size) override {
    if (size == 0) return 0;
    if (ssl_ != nullptr) {
      if (SSL_pending(ssl_) <= 0 && !Poll(fd_, POLLIN, read_timeout_ms_)) return -1;
      const int n = SSL_read(ssl_, ptr, static_cast<int>(std::min<size_t>(size, INT_MAX)));
      return n > 0 ? n : -1;
    }
    // httplib reads request lines a byte at a time: buffer, or each byte is a recv().
    if (begin_ == end_) {
      if (!Poll(fd_, POLLIN, read_timeout_ms_)) return -1;
      ssize_t n;
      do {
        n = ::recv(fd_, buffer_, sizeof(buffer_), 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return -1;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, end_ - begin_);
    std::memcpy(ptr, buffer_ + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!Poll(fd_, POLLOUT, write_timeout_ms_)) return -1;
    if (ssl_ != nullptr) {
      const int n = SSL_write(ssl_, ptr, static_cast<int>(std::min<size_t>(size, INT_MAX)));
      return n > 0 ? n : -1;
    }
    ssize_t n;
    do {
      n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    AddressOf(fd_, true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    AddressOf(fd_, false, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  bool Buffered() const { return ssl_ != nullptr ? SSL_pending(ssl_) > 0 : begin_ != end_; }

  const int fd_;
  SSL* const ssl_;
  const int read_timeout_ms_;
  const int write_timeout_ms_;
  char buffer_[4096];
  size_t begin_ = 0;
  size_t end_ = 0;
};

}  // namespace

// State of one open connection. `deadline`, `authenticated`, `shut`, `busy` and the list
// position are guarded by the server's mu_; `held` belongs to the connection's thread.
struct ConnectionServer::Connection {
  int fd = -1;
  absl::Time deadline;
  bool authenticated = false;
  bool shut = false;
  bool busy = false;  // a request is being read, handled or answered
  bool in_unauthenticated = false;
  std::list<Connection*>::iterator position;
  ConnectionServer* server = nullptr;
  std::vector<std::shared_ptr<void>> held;
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
  return std::unique_ptr<ConnectionServer>(new ConnectionServer(std::move(limits), ctx));
}

ConnectionServer::ConnectionServer(ConnectionLimits limits, SSL_CTX* ctx)
    : limits_(std::move(limits)),
      ssl_ctx_(ctx),
      refused_log_({.per_second = 0.2, .burst = 3}),
      evicted_log_({.per_second = 0.2, .burst = 3}) {
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
  return true;
}

void ConnectionServer::EndRequest(Connection* c) {
  common::MutexLock lock(&mu_);
  c->busy = false;
  if (closing_) cv_.SignalAll();
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
  if (c == nullptr) return false;
  pollfd p{c->fd, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

void ConnectionServer::HoldUntilResponseWritten(std::shared_ptr<void> resource) {
  auto* c = static_cast<Connection*>(current_connection);
  if (c != nullptr) c->held.push_back(std::move(resource));
}

ConnectionServer::Stats ConnectionServer::GetStats() const {
  common::MutexLock lock(&mu_);
  Stats s = stats_;
  s.open = open_.size();
  s.unauthenticated = unauthenticated_.size();
  return s;
}

bool ConnectionServer::process_and_close_socket(socket_t sock) {
  Connection c;
  c.fd = sock;
  c.server = this;
  if (Register(&c)) {
    current_connection = &c;
    Serve(c);
    c.held.clear();
    current_connection = nullptr;
    Unregister(&c);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return true;
}

void ConnectionServer::Serve(Connection& c) {
  SSL* ssl = nullptr;
  if (ssl_ctx_ != nullptr) {
    ssl = SSL_new(ssl_ctx_);
    if (ssl == nullptr) return;
    SSL_set_fd(ssl, c.fd);
    // Blocking, bounded by the socket's read timeout per read and by the watchdog's deadline
    // for the whole handshake.
    if (SSL_accept(ssl) != 1) {
      ERR_clear_error();
      SSL_free(ssl);
      return;
    }
  }
  ConnectionStream stream(c.fd, ssl, ToMillis(read_timeout_sec_, read_timeout_usec_),
                          ToMillis(write_timeout_sec_, write_timeout_usec_));
  const int keep_alive_ms = ToMillis(keep_alive_timeout_sec_, 0);
  const std::function<void(httplib::Request&)> setup = [this, &c](httplib::Request&) {
    if (!limits_.authentication_required) Authenticated(&c);
  };
  size_t remaining = keep_alive_max_count_;
  bool clean = true;
  while (remaining > 0 && svr_sock_ != INVALID_SOCKET) {
    if (!stream.WaitReadable(keep_alive_ms)) break;
    if (!BeginRequest(&c)) break;
    bool connection_closed = false;
    const bool ok =
        process_request(stream, /*close_connection=*/remaining == 1, connection_closed, setup);
    c.held.clear();
    EndRequest(&c);
    if (!ok) clean = false;
    if (!ok || connection_closed) break;
    --remaining;
  }
  if (ssl != nullptr) {
    if (clean) SSL_shutdown(ssl);
    ERR_clear_error();
    SSL_free(ssl);
  }
}

bool ConnectionServer::Register(Connection* c) {
  bool refused = false;
  bool evicted = false;
  size_t open = 0;
  {
    common::MutexLock lock(&mu_);
    if (closing_) return false;
    auto evict_oldest = [&] {
      Connection* oldest = unauthenticated_.front();
      ShutDownLocked(oldest);
      ++stats_.evicted;
      evicted = true;
    };
    if (unauthenticated_.size() >= limits_.max_unauthenticated) evict_oldest();
    if (limits_.max_connections > 0 && open_.size() >= limits_.max_connections) {
      // Authenticated connections are never evicted for a new one that might not be.
      if (!unauthenticated_.empty()) {
        evict_oldest();
      } else {
        ++stats_.refused;
        refused = true;
      }
    }
    if (!refused) {
      c->deadline = absl::Now() + limits_.authentication_deadline;
      open_.insert(c);
      unauthenticated_.push_back(c);
      c->position = std::prev(unauthenticated_.end());
      c->in_unauthenticated = true;
      if (unauthenticated_.size() == 1) cv_.SignalAll();  // the watchdog may be idle
    }
    open = open_.size();
  }
  uint64_t suppressed = 0;
  if (refused && refused_log_.Allow(&suppressed)) {
    common::LogWarning("connection refused: --max-connections reached (all of them authenticated)",
                       {{"server", limits_.name},
                        {"max_connections", limits_.max_connections},
                        {"suppressed", suppressed}});
  }
  if (evicted && evicted_log_.Allow(&suppressed)) {
    common::LogWarning(
        "unauthenticated connection closed for a newer one (too many idle or slow "
        "connections)",
        {{"server", limits_.name},
         {"max_unauthenticated", limits_.max_unauthenticated},
         {"open", open},
         {"suppressed", suppressed}});
  }
  return !refused;
}

void ConnectionServer::Unregister(Connection* c) {
  common::MutexLock lock(&mu_);
  if (closing_) cv_.SignalAll();
  if (c->in_unauthenticated) {
    unauthenticated_.erase(c->position);
    c->in_unauthenticated = false;
  }
  open_.erase(c);
}

void ConnectionServer::Authenticated(Connection* c) {
  common::MutexLock lock(&mu_);
  c->authenticated = true;
  if (c->in_unauthenticated) {
    unauthenticated_.erase(c->position);
    c->in_unauthenticated = false;
  }
}

void ConnectionServer::ShutDownLocked(Connection* c) {
  if (!c->shut) ::shutdown(c->fd, SHUT_RDWR);
  c->shut = true;
  if (c->in_unauthenticated) {
    unauthenticated_.erase(c->position);
    c->in_unauthenticated = false;
  }
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
    const absl::Time next =
        unauthenticated_.empty() ? absl::InfiniteFuture() : unauthenticated_.front()->deadline;
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
