// StreamLoop: writes long-running HTTP/1.1 chunked responses (watches) from a small fixed pool of
// threads driven by readiness (epoll), instead of a thread per connection.
//
// A connection thread that has written a response's headers hands its connection over with
// Adopt(): its socket, its TLS session and a StreamProducer that makes the rest of the body. From
// then on one loop thread owns it:
// - it calls the producer when WakeAll() says new data may exist (the API server calls it on
//   every committed write), when the producer's NextCall() time comes (a bookmark, the end of the
//   watch), and again after what it made is written (a long backlog comes in pieces);
// - each piece becomes one chunk of the body; the producer is not called while more than
//   `window_bytes` are waiting to be written, so a connection's memory is bounded by its window
//   whatever its producer has to say;
// - a connection whose socket accepts no byte for `stall_timeout` while bytes wait is ended with a
//   reset (counted, logged): a client that reads nothing cannot hold memory or a thread, and
//   never delays the others, which are written by the same thread without ever blocking;
// - a connection whose client closes it is ended at once (epoll reports the hang-up);
// - when the producer says the stream is over, the last chunk is written and the connection is
//   closed (the response carries `Connection: close`).
//
//   StreamLoopOptions o;
//   ASSIGN_OR_RETURN(std::unique_ptr<StreamLoop> loop, StreamLoop::Start(o));
//   loop->Adopt(fd, ssl, std::move(producer), [] { /* the connection is closed */ });
//   loop->WakeAll();        // after a write that watches may want
//   loop->Stop(absl::Seconds(2));
//
// Thread-safe: Adopt, WakeAll, Stop and GetStats may be called from any thread. A producer is
// called on its loop thread only, never concurrently with itself, and destroyed there.
#ifndef CTRLHOST_RUNTIME_SERVING_STREAM_LOOP_H_
#define CTRLHOST_RUNTIME_SERVING_STREAM_LOOP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

typedef struct ssl_st SSL;

namespace ctrlhost::serving {

// The rest of a response body, made piece by piece. Called on one loop thread only.
class StreamProducer {
 public:
  virtual ~StreamProducer() = default;
  // Appends to `*out` what is ready now, without blocking (a few hundred KiB at most per call).
  // Returns false when the stream is over: what it appended is still written, then the last
  // chunk.
  virtual bool Produce(std::string* out) = 0;
  // The latest time (absl::Now()'s clock) at which Produce must be called again even if nothing
  // wakes the loop: a bookmark due, the end of a watch. absl::InfiniteFuture() for none.
  virtual absl::Time NextCall() const = 0;
};

struct StreamLoopOptions {
  // Names the loop in log lines ("apiserver").
  std::string name = "http";
  // Loop threads; each owns a share of the connections.
  int threads = 2;
  // Bytes made by a producer and not yet accepted by the socket at most before the producer is
  // called again (one piece can pass it; the next waits).
  size_t window_bytes = 1 << 20;
  // A connection with bytes waiting whose socket accepts none for this long is ended.
  absl::Duration stall_timeout = absl::Seconds(10);
};

class StreamLoop {
 public:
  // Internal when the kernel refuses an epoll or eventfd descriptor.
  static absl::StatusOr<std::unique_ptr<StreamLoop>> Start(StreamLoopOptions options);
  ~StreamLoop();  // Stop(absl::ZeroDuration())
  StreamLoop(const StreamLoop&) = delete;
  StreamLoop& operator=(const StreamLoop&) = delete;

  // How a connection ended.
  enum class End { kFinished, kPeerClosed, kStalled, kCut };

  // Takes over a connection whose response headers (with `Transfer-Encoding: chunked`) are
  // written: `fd` (made non-blocking, closed by the loop) and `ssl` (may be null for plain TCP;
  // freed by the loop). `stall_timeout` replaces options().stall_timeout for it when not zero.
  // `on_closed` runs on a loop thread once the connection is closed, after the producer is
  // destroyed. After Stop(), the connection is closed at once (kCut).
  void Adopt(int fd, SSL* ssl, std::unique_ptr<StreamProducer> producer,
             std::function<void(End)> on_closed,
             absl::Duration stall_timeout = absl::ZeroDuration());
  // Every producer is called again soon (new data may exist). Cheap; coalesces.
  void WakeAll();
  // Calls every producer once more (so those that are over write their last chunk), waits up to
  // `grace` for their connections to finish, then cuts the rest (counted, logged) and joins the
  // threads. Idempotent.
  void Stop(absl::Duration grace);

  struct Stats {
    size_t open = 0;           // connections being written
    uint64_t finished = 0;     // ended with their last chunk
    uint64_t peer_closed = 0;  // the client closed or reset it
    uint64_t stalled = 0;      // ended: no byte accepted for stall_timeout
    uint64_t cut_at_stop = 0;  // still open when Stop()'s grace ran out
  };
  Stats GetStats() const;
  const StreamLoopOptions& options() const { return options_; }

 private:
  class Worker;
  explicit StreamLoop(StreamLoopOptions options);

  // Constant after Start().
  const StreamLoopOptions options_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> cut_logged_{false};
};

}  // namespace ctrlhost::serving

#endif  // CTRLHOST_RUNTIME_SERVING_STREAM_LOOP_H_
