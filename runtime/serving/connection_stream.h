// ConnectionStream: one accepted connection's bytes, over TLS or plain TCP, as the
// httplib::Stream that ConnectionServer hands to httplib's request parser. Internal to
// runtime/serving.
//
// Reads wait at most `read_timeout_ms` for a byte. A write writes everything or fails; it fails
// when the peer accepts no byte for `write_stall_timeout_ms` (a client that asked for a large
// answer and reads nothing): stalled() then says so, so that the server can count and log it. A
// write that makes progress, however slowly, never stalls.
//
//   ConnectionStream stream(fd, ssl, /*read_timeout_ms=*/30000, /*write_stall_timeout_ms=*/10000);
//   server.process_request(stream, ...);
//   if (stream.stalled()) ...;
//
// Thread-compatible: used by the connection's own thread only.
#ifndef CTRLHOST_RUNTIME_SERVING_CONNECTION_STREAM_H_
#define CTRLHOST_RUNTIME_SERVING_CONNECTION_STREAM_H_

#include <sys/types.h>

#include <cstddef>
#include <string>

#include "httplib.h"

typedef struct ssl_st SSL;

namespace ctrlhost::serving::internal {

// poll(2) for `events` on `fd`, retried on EINTR: true when one of them is ready.
bool Poll(int fd, short events, int timeout_ms);

// What a connection's socket shows without reading from it.
enum class PeerState {
  kNothing,   // no byte waiting, still open
  kReadable,  // bytes wait to be read
  kClosed,    // the peer closed or reset it
};
// Never blocks; safe on a socket another thread reads (it consumes nothing).
PeerState Peek(int fd);

class ConnectionStream : public httplib::Stream {
 public:
  // `ssl` (borrowed, may be null for plain TCP) is already past its handshake. The socket is
  // blocking.
  ConnectionStream(int fd, SSL* ssl, int read_timeout_ms, int write_stall_timeout_ms);
  ConnectionStream(const ConnectionStream&) = delete;
  ConnectionStream& operator=(const ConnectionStream&) = delete;

  // Waits up to `timeout_ms` for bytes of a next request.
  bool WaitReadable(int timeout_ms) const;
  // A write ended because the peer accepted no byte for the stall timeout.
  bool stalled() const { return stalled_; }

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

 private:
  bool Buffered() const;

  const int fd_;
  SSL* const ssl_;
  const int read_timeout_ms_;
  const int write_stall_timeout_ms_;
  // is_writable() is const in httplib::Stream; a stall seen there is still a stall.
  mutable bool stalled_ = false;
  char buffer_[4096];
  size_t begin_ = 0;
  size_t end_ = 0;
};

}  // namespace ctrlhost::serving::internal

#endif  // CTRLHOST_RUNTIME_SERVING_CONNECTION_STREAM_H_
