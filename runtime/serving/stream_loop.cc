#include "runtime/serving/stream_loop.h"

#include <fcntl.h>
#include <malloc.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/log_limiter.h"
#include "runtime/common/logging.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::serving {
namespace {

// A pending buffer larger than this is given back to the allocator once it is written, so an
// idle watch keeps no large buffer after a burst.
constexpr size_t kKeepBufferBytes = 16 * 1024;
constexpr int kMaxEvents = 256;

// Each adopted connection was set up by a thread of its own (TLS handshake, request parsing),
// whose freed memory glibc keeps in that thread's arena. After a burst of new watches that is
// most of the growth (10,000 watches: 245 of 274 MiB stayed after they all closed), so once
// this many connections were adopted or closed and the loop is idle, freed memory is given
// back to the kernel (malloc_trim), at most once a second for the whole process.
constexpr uint64_t kTrimAfterChurn = 256;
std::atomic<uint64_t> churn_since_trim{0};
std::atomic<int64_t> last_trim_ns{0};

void MaybeTrim() {
  if (churn_since_trim.load(std::memory_order_relaxed) < kTrimAfterChurn) return;
  const int64_t now = absl::GetCurrentTimeNanos();
  int64_t last = last_trim_ns.load(std::memory_order_relaxed);
  if (now - last < 1000 * 1000 * 1000) return;
  if (!last_trim_ns.compare_exchange_strong(last, now)) return;  // another loop thread trims
  churn_since_trim = 0;
  malloc_trim(0);
}

using End = StreamLoop::End;

// One adopted connection. Owned by its worker's thread.
struct Conn {
  int fd = -1;
  SSL* ssl = nullptr;
  std::unique_ptr<StreamProducer> producer;
  std::function<void(End)> on_closed;
  absl::Duration stall_timeout;
  std::string pending;  // framed chunks not yet accepted by the socket, from `offset`
  size_t offset = 0;
  bool over = false;      // the producer is done; its last chunk is in `pending`
  bool again = false;     // the last Produce made bytes: call it again once they are written
  bool want_out = false;  // registered for EPOLLOUT
  bool closed = false;
  absl::Time waiting_since;  // when `pending` last became non-empty or made progress
  absl::Time next_call = absl::InfiniteFuture();

  size_t Waiting() const { return pending.size() - offset; }
};

void AppendChunk(absl::string_view piece, std::string* out) {
  char size[20];
  const int n = snprintf(size, sizeof(size), "%zx\r\n", piece.size());
  out->append(size, n);
  out->append(piece.data(), piece.size());
  out->append("\r\n");
}

}  // namespace

class StreamLoop::Worker {
 public:
  Worker(const StreamLoopOptions& options, int epoll_fd, int wake_fd)
      : options_(options),
        epoll_fd_(epoll_fd),
        wake_fd_(wake_fd),
        stalled_log_({.per_second = 0.2, .burst = 3}) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Worker() {
    Cut();
    if (thread_.joinable()) thread_.join();
    ::close(epoll_fd_);
    ::close(wake_fd_);
  }

  void Add(std::unique_ptr<Conn> c) {
    bool taken = false;
    {
      common::MutexLock lock(&mu_);
      if (!cut_) {
        ++open_;
        incoming_.push_back(std::move(c));
        taken = true;
      }
    }
    if (!taken) {
      // Stopped: closed at once, nothing written.
      CloseUnregistered(c.get(), End::kCut);
      return;
    }
    Wake();
  }

  void Wake() {
    if (wake_pending_.exchange(true)) return;
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }

  void BeginStop() {
    {
      common::MutexLock lock(&mu_);
      stopping_ = true;
    }
    Wake();
  }

  // Waits until no connection is open or `deadline` passes.
  bool WaitDrained(absl::Time deadline) {
    common::MutexLock lock(&mu_);
    while (open_ > 0) {
      if (cv_.WaitWithDeadline(&mu_, deadline)) break;
    }
    return open_ == 0;
  }

  void Cut() {
    {
      common::MutexLock lock(&mu_);
      cut_ = true;
    }
    Wake();
  }

  void Join() {
    Cut();
    if (thread_.joinable()) thread_.join();
  }

  void AddStats(Stats* s) const {
    common::MutexLock lock(&mu_);
    s->open += open_;
    s->finished += ended_[static_cast<int>(End::kFinished)];
    s->peer_closed += ended_[static_cast<int>(End::kPeerClosed)];
    s->stalled += ended_[static_cast<int>(End::kStalled)];
    s->cut_at_stop += ended_[static_cast<int>(End::kCut)];
  }

 private:
  void Run();
  // Takes the adopted connections and the stop flags; false once cut.
  bool TakeIncoming(bool* stopping);
  void Pump(Conn* c, absl::Time now);
  void Flush(Conn* c, absl::Time now);
  void Readable(Conn* c, uint32_t events);
  // Ends `c` now (its descriptor, session and producer); its memory goes in FreeClosed().
  void Close(Conn* c, End how);
  void FreeClosed();
  // Closes a connection that never reached the epoll set.
  static void CloseUnregistered(Conn* c, End how);
  void Watch(Conn* c, bool want_out);
  // Runs every due connection (all of them when `all`) and sets next_due_.
  void Scan(bool all, absl::Time now);
  // Lowers next_due_ to when `c` is due: its NextCall(), or its stall deadline.
  void NoteDue(const Conn* c);

  const StreamLoopOptions& options_;
  const int epoll_fd_;
  const int wake_fd_;
  std::atomic<bool> wake_pending_{false};
  common::LogLimiter stalled_log_;
  std::thread thread_;

  // The loop thread's own.
  absl::flat_hash_map<Conn*, std::unique_ptr<Conn>> conns_;
  std::vector<Conn*> ready_;   // to Produce again (their last piece is written)
  std::vector<Conn*> closed_;  // closed in this iteration; freed at its end
  // No connection is due before (an upper bound on the epoll wait).
  absl::Time next_due_ = absl::InfiniteFuture();

  mutable common::Mutex mu_;
  common::CondVar cv_;
  std::vector<std::unique_ptr<Conn>> incoming_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool cut_ ABSL_GUARDED_BY(mu_) = false;
  size_t open_ ABSL_GUARDED_BY(mu_) = 0;  // adopted and not yet closed
  uint64_t ended_[4] ABSL_GUARDED_BY(mu_) = {0, 0, 0, 0};
};

void StreamLoop::Worker::Run() {
  epoll_event events[kMaxEvents];
  bool stopping = false;
  for (;;) {
    int timeout_ms = -1;
    if (!ready_.empty()) {
      timeout_ms = 0;
    } else if (next_due_ != absl::InfiniteFuture()) {
      const int64_t ms = absl::ToInt64Milliseconds(next_due_ - absl::Now()) + 1;
      timeout_ms = static_cast<int>(std::clamp<int64_t>(ms, 0, 60 * 1000));
    }
    if (churn_since_trim.load(std::memory_order_relaxed) >= kTrimAfterChurn &&
        (timeout_ms < 0 || timeout_ms > 1000)) {
      timeout_ms = 1000;  // to trim once idle
    }
    const int n = ::epoll_wait(epoll_fd_, events, kMaxEvents, timeout_ms);
    bool woken = false;
    const absl::Time now = absl::Now();
    for (int i = 0; i < n; ++i) {
      Conn* c = static_cast<Conn*>(events[i].data.ptr);
      if (c == nullptr) {
        uint64_t count = 0;
        (void)!::read(wake_fd_, &count, sizeof(count));
        wake_pending_ = false;
        woken = true;
        continue;
      }
      if (c->closed) continue;
      if ((events[i].events & ~static_cast<uint32_t>(EPOLLOUT)) != 0) Readable(c, events[i].events);
      if (!c->closed && (events[i].events & EPOLLOUT) != 0) Flush(c, now);
    }
    const bool was_stopping = stopping;
    if (woken && !TakeIncoming(&stopping)) break;
    // Connections whose last piece was written make their next one, in turn.
    std::vector<Conn*> ready;
    ready.swap(ready_);
    for (Conn* c : ready) {
      if (!c->closed) Pump(c, now);
    }
    if (woken || stopping != was_stopping || now >= next_due_) {
      Scan(/*all=*/woken || stopping != was_stopping, now);
    }
    FreeClosed();
    // Idle: nothing ready and nothing was due in this round.
    if (n == 0 && ready_.empty()) MaybeTrim();
  }
  std::vector<Conn*> all;
  for (auto& [ptr, c] : conns_) all.push_back(ptr);
  for (Conn* c : all) Close(c, End::kCut);
  FreeClosed();
}

void StreamLoop::Worker::FreeClosed() {
  if (closed_.empty()) return;
  ready_.erase(std::remove_if(ready_.begin(), ready_.end(), [](Conn* c) { return c->closed; }),
               ready_.end());
  for (Conn* c : closed_) conns_.erase(c);
  closed_.clear();
}

bool StreamLoop::Worker::TakeIncoming(bool* stopping) {
  std::vector<std::unique_ptr<Conn>> incoming;
  {
    common::MutexLock lock(&mu_);
    if (cut_) {
      // Those adopted but not yet taken are closed with the rest.
      for (auto& c : incoming_) conns_.emplace(c.get(), std::move(c));
      incoming_.clear();
      return false;
    }
    incoming.swap(incoming_);
    *stopping = stopping_;
  }
  for (auto& c : incoming) {
    Conn* raw = c.get();
    conns_.emplace(raw, std::move(c));
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = raw;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, raw->fd, &ev) != 0) {
      Close(raw, End::kPeerClosed);
      continue;
    }
    raw->next_call = absl::InfinitePast();  // its first piece now
  }
  return true;
}

void StreamLoop::Worker::Scan(bool all, absl::Time now) {
  next_due_ = absl::InfiniteFuture();
  for (auto& [ptr, owned] : conns_) {
    Conn* c = owned.get();
    if (c->closed) continue;
    if (c->Waiting() > 0 && now - c->waiting_since >= c->stall_timeout) {
      Close(c, End::kStalled);
      continue;
    }
    if (all || now >= c->next_call) {
      Pump(c, now);
    } else {
      NoteDue(c);
    }
  }
}

void StreamLoop::Worker::NoteDue(const Conn* c) {
  if (c->closed) return;
  next_due_ = std::min(next_due_, c->next_call);
  if (c->Waiting() > 0) {
    next_due_ = std::min(next_due_, c->waiting_since + c->stall_timeout);
  }
}

void StreamLoop::Worker::Pump(Conn* c, absl::Time now) {
  if (c->over || c->Waiting() > options_.window_bytes) {
    NoteDue(c);  // its stall deadline
    return;
  }
  std::string piece;
  const bool more = c->producer->Produce(&piece);
  c->next_call = more ? c->producer->NextCall() : absl::InfiniteFuture();
  c->again = more && !piece.empty();
  if (c->Waiting() == 0) c->waiting_since = now;
  if (!piece.empty()) AppendChunk(piece, &c->pending);
  if (!more) {
    c->pending.append("0\r\n\r\n");
    c->over = true;
  }
  Flush(c, now);
  NoteDue(c);
}

void StreamLoop::Worker::Flush(Conn* c, absl::Time now) {
  while (c->Waiting() > 0) {
    const char* data = c->pending.data() + c->offset;
    const size_t len = std::min<size_t>(c->Waiting(), INT_MAX);
    ssize_t n = 0;
    if (c->ssl != nullptr) {
      ERR_clear_error();
      const int r = SSL_write(c->ssl, data, static_cast<int>(len));
      if (r <= 0) {
        const int e = SSL_get_error(c->ssl, r);
        if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) break;
        ERR_clear_error();
        Close(c, End::kPeerClosed);
        return;
      }
      n = r;
    } else {
      n = ::send(c->fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        Close(c, End::kPeerClosed);
        return;
      }
    }
    c->offset += static_cast<size_t>(n);
    c->waiting_since = now;
  }
  if (c->Waiting() > 0) {
    if (!c->want_out) Watch(c, /*want_out=*/true);
    NoteDue(c);
    return;
  }
  c->offset = 0;
  if (c->pending.capacity() > kKeepBufferBytes) {
    std::string().swap(c->pending);
  } else {
    c->pending.clear();
  }
  if (c->want_out) Watch(c, /*want_out=*/false);
  if (c->over) {
    Close(c, End::kFinished);
  } else if (c->again) {
    c->again = false;
    ready_.push_back(c);
  }
}

void StreamLoop::Worker::Watch(Conn* c, bool want_out) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (want_out ? static_cast<uint32_t>(EPOLLOUT) : 0u);
  ev.data.ptr = c;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
  c->want_out = want_out;
}

void StreamLoop::Worker::Readable(Conn* c, uint32_t events) {
  if ((events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) != 0) {
    Close(c, End::kPeerClosed);
    return;
  }
  // A client sends nothing while it reads a stream (the response says Connection: close).
  // TLS records that are not data (a key update) are handled inside SSL_read; data, an
  // orderly close or an error end the connection.
  char buf[512];
  if (c->ssl != nullptr) {
    ERR_clear_error();
    const int r = SSL_read(c->ssl, buf, sizeof(buf));
    if (r <= 0) {
      const int e = SSL_get_error(c->ssl, r);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return;
    }
    ERR_clear_error();
  } else {
    const ssize_t r = ::recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  }
  Close(c, End::kPeerClosed);
}

void StreamLoop::Worker::Close(Conn* c, End how) {
  if (c->closed) return;
  c->closed = true;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  if (how == End::kFinished) {
    if (c->ssl != nullptr) {
      ERR_clear_error();
      SSL_shutdown(c->ssl);  // close_notify, if the socket takes it now
      ERR_clear_error();
    }
    // Every byte is with the kernel; the FIN follows it.
    ::shutdown(c->fd, SHUT_WR);
  } else if (how == End::kStalled || how == End::kCut) {
    // A reset: a FIN would wait behind the unread bytes, and the kernel would keep them.
    linger abort{1, 0};
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
  }
  if (how == End::kStalled) {
    uint64_t suppressed = 0;
    if (stalled_log_.Allow(&suppressed)) {
      common::LogWarning(
          "stream ended: the client read nothing of its response for the stall timeout (a "
          "watcher that cannot keep up, or a client that stopped reading); a watcher may watch "
          "again from its last resourceVersion",
          {{"server", options_.name},
           {"stall_timeout", absl::FormatDuration(c->stall_timeout)},
           {"waiting_bytes", c->Waiting()},
           {"suppressed", suppressed}});
    }
  }
  CloseUnregistered(c, how);
  {
    common::MutexLock lock(&mu_);
    ++ended_[static_cast<int>(how)];
    --open_;
    if (open_ == 0) cv_.SignalAll();
  }
  closed_.push_back(c);
  churn_since_trim.fetch_add(1, std::memory_order_relaxed);
}

void StreamLoop::Worker::CloseUnregistered(Conn* c, End how) {
  if (c->ssl != nullptr) {
    SSL_free(c->ssl);
    c->ssl = nullptr;
  }
  if (c->fd >= 0) {
    ::close(c->fd);
    c->fd = -1;
  }
  c->producer.reset();
  if (c->on_closed) {
    std::function<void(End)> on_closed = std::move(c->on_closed);
    c->on_closed = nullptr;
    on_closed(how);
  }
}

StreamLoop::StreamLoop(StreamLoopOptions options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<StreamLoop>> StreamLoop::Start(StreamLoopOptions options) {
  if (options.threads < 1) options.threads = 1;
  std::unique_ptr<StreamLoop> loop(new StreamLoop(std::move(options)));
  for (int i = 0; i < loop->options_.threads; ++i) {
    const int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd < 0) {
      return absl::InternalError(absl::StrCat("epoll_create1: ", strerror(errno)));
    }
    const int wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd < 0) {
      ::close(epoll_fd);
      return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;
    if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev) != 0) {
      ::close(epoll_fd);
      ::close(wake_fd);
      return absl::InternalError(absl::StrCat("epoll_ctl: ", strerror(errno)));
    }
    loop->workers_.push_back(std::make_unique<Worker>(loop->options_, epoll_fd, wake_fd));
  }
  return loop;
}

StreamLoop::~StreamLoop() { Stop(absl::ZeroDuration()); }

void StreamLoop::Adopt(int fd, SSL* ssl, std::unique_ptr<StreamProducer> producer,
                       std::function<void(End)> on_closed, absl::Duration stall_timeout) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  if (ssl != nullptr) {
    // A retried write may come from a moved buffer (`pending` grows); idle sessions give their
    // 16 KiB record buffers back.
    SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                          SSL_MODE_RELEASE_BUFFERS);
    // The mode frees them after the next record; a watch may wait minutes for one, holding
    // the ~34 KiB its handshake and headers left. (Fails, harmlessly, if bytes wait in them.)
    SSL_free_buffers(ssl);
  }
  auto c = std::make_unique<Conn>();
  c->fd = fd;
  c->ssl = ssl;
  c->producer = std::move(producer);
  c->on_closed = std::move(on_closed);
  c->stall_timeout = stall_timeout > absl::ZeroDuration() ? stall_timeout : options_.stall_timeout;
  churn_since_trim.fetch_add(1, std::memory_order_relaxed);
  // Spread by descriptor: cheap, and even enough for many connections.
  workers_[static_cast<size_t>(fd) % workers_.size()]->Add(std::move(c));
}

void StreamLoop::WakeAll() {
  for (auto& w : workers_) w->Wake();
}

void StreamLoop::Stop(absl::Duration grace) {
  for (auto& w : workers_) w->BeginStop();
  const absl::Time deadline = absl::Now() + grace;
  for (auto& w : workers_) w->WaitDrained(deadline);
  for (auto& w : workers_) w->Join();
  Stats s = GetStats();
  if (s.cut_at_stop > 0 && !cut_logged_.exchange(true)) {
    common::LogWarning("streams cut at stop: still being written when the grace period ended",
                       {{"server", options_.name},
                        {"cut", s.cut_at_stop},
                        {"grace", absl::FormatDuration(grace)}});
  }
}

StreamLoop::Stats StreamLoop::GetStats() const {
  Stats s;
  for (const auto& w : workers_) w->AddStats(&s);
  return s;
}

}  // namespace ctrlhost::serving
