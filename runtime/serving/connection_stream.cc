#include "runtime/serving/connection_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

namespace ctrlhost::serving::internal {
namespace {

enum class Ready { kReady, kTimeout, kError };

Ready WaitFor(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  int r;
  do {
    r = ::poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return Ready::kTimeout;
  if (r > 0 && (p.revents & events) != 0) return Ready::kReady;
  return Ready::kError;
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

}  // namespace

bool Poll(int fd, short events, int timeout_ms) {
  return WaitFor(fd, events, timeout_ms) == Ready::kReady;
}

PeerState Peek(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return PeerState::kNothing;
  if ((p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0) return PeerState::kClosed;
  return (p.revents & POLLIN) != 0 ? PeerState::kReadable : PeerState::kNothing;
}

ConnectionStream::ConnectionStream(int fd, SSL* ssl, int read_timeout_ms,
                                   int write_stall_timeout_ms)
    : fd_(fd),
      ssl_(ssl),
      read_timeout_ms_(read_timeout_ms),
      write_stall_timeout_ms_(write_stall_timeout_ms) {}

bool ConnectionStream::Buffered() const {
  return ssl_ != nullptr ? SSL_pending(ssl_) > 0 : begin_ != end_;
}

bool ConnectionStream::WaitReadable(int timeout_ms) const {
  if (Buffered()) return true;
  return Poll(fd_, POLLIN, timeout_ms);
}

bool ConnectionStream::is_readable() const { return WaitReadable(read_timeout_ms_); }

bool ConnectionStream::is_writable() const {
  const Ready r = WaitFor(fd_, POLLOUT, write_stall_timeout_ms_);
  if (r == Ready::kTimeout) stalled_ = true;
  return r == Ready::kReady;
}

ssize_t ConnectionStream::read(char* ptr, size_t size) {
  if (size == 0) return 0;
  if (ssl_ != nullptr) {
    if (SSL_pending(ssl_) <= 0 && !Poll(fd_, POLLIN, read_timeout_ms_)) return -1;
    const int n = SSL_read(ssl_, ptr, static_cast<int>(std::min<size_t>(size, INT_MAX)));
    if (n <= 0) ERR_clear_error();
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

// Writes everything (httplib ignores a short count in places: the response headers), and
// fails only when no byte could be written for the stall timeout: each byte of progress
// restarts it, so it measures time without progress, not the time a large buffer takes. The
// socket's SO_SNDTIMEO (set to the stall timeout by the server) bounds each blocking send; a
// TLS write returns after each record (SSL_MODE_ENABLE_PARTIAL_WRITE).
ssize_t ConnectionStream::write(const char* ptr, size_t size) {
  using Clock = std::chrono::steady_clock;
  const auto stall = std::chrono::milliseconds(write_stall_timeout_ms_);
  Clock::time_point deadline = Clock::now() + stall;
  size_t written = 0;
  while (written < size) {
    const auto remaining =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    const Ready ready =
        remaining > 0 ? WaitFor(fd_, POLLOUT, static_cast<int>(remaining)) : Ready::kTimeout;
    if (ready == Ready::kTimeout) {
      stalled_ = true;
      return -1;
    }
    if (ready == Ready::kError) return -1;
    const char* data = ptr + written;
    const size_t length = std::min<size_t>(size - written, INT_MAX);
    if (ssl_ != nullptr) {
      // After WANT_WRITE, retried with the same buffer and length, as OpenSSL requires.
      const int n = SSL_write(ssl_, data, static_cast<int>(length));
      if (n > 0) {
        written += static_cast<size_t>(n);
        deadline = Clock::now() + stall;
        continue;
      }
      const int error = SSL_get_error(ssl_, n);
      ERR_clear_error();
      if (error != SSL_ERROR_WANT_WRITE) return -1;
      continue;
    }
    ssize_t n;
    do {
      n = ::send(fd_, data, length, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
      written += static_cast<size_t>(n);
      deadline = Clock::now() + stall;
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
  }
  return static_cast<ssize_t>(written);
}

void ConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  AddressOf(fd_, true, ip, port);
}

void ConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
  AddressOf(fd_, false, ip, port);
}

}  // namespace ctrlhost::serving::internal
