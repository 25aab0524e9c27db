// ConnectionServer: an httplib::Server that owns the life of every connection, so that a flood
// of idle, trickling or non-reading connections (slowloris) cannot lock real clients out.
//
// httplib serves each accepted socket with `process_and_close_socket`, a virtual this class
// overrides: it does the TLS handshake itself (when a certificate is given) and runs the
// keep-alive loop with httplib's request parser, while a connection table and a watchdog thread
// enforce:
// - at most `max_unauthenticated` connections that have not yet been authenticated: a new one
//   beyond that evicts one of them, the one that has shown the least: first one whose client
//   closed it or has sent no byte yet, then one mid-TLS-handshake or mid-request-line, then one
//   past its handshake; the oldest first within each. So a flood of idle connections evicts
//   itself, not a client that has begun talking (kubectl, the host's informers);
// - at most `max_connections` open connections. A new one beyond evicts an unauthenticated one
//   (in the order above), else the authenticated connection idle between requests for the
//   longest (a keep-alive connection; one whose next request is arriving is spared); when every
//   connection is busy, the new one is refused with an HTTP answer it can act on: 429 Too Many
//   Requests, `Retry-After: 1` and `refusal_body`, after its TLS handshake and request headers,
//   all within `refusal_deadline` (at most `max_refusals_answered` at once; beyond, closed
//   without a word). All logged, rate-limited;
// - a deadline for an unauthenticated connection to complete its TLS handshake and have its
//   request authenticated (`authentication_deadline`): a client that trickles bytes never
//   trips a per-read timeout, but it trips this one;
// - `write_stall_timeout`: a response write to a peer that accepts no byte for that long ends
//   the connection with a reset (and so frees what its request held, such as an in-flight
//   slot, and the kernel's buffer of unsent answer), counted and logged. It replaces httplib's
//   write timeout (set_write_timeout has no effect).
// A handler marks its connection authenticated with MarkAuthenticated() (the API server does it
// once the bearer token is checked). A server without authentication
// (`authentication_required = false`) counts a connection as authenticated once the headers of
// its first request have arrived.
//
//   ConnectionLimits limits;
//   limits.max_connections = 4096;
//   ASSIGN_OR_RETURN(auto server, ConnectionServer::Create(limits, cert, key));  // TLS
//   server->set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
//     if (TokenOk(req)) ConnectionServer::MarkAuthenticated();
//     ...
//   });
//   ASSIGN_OR_RETURN(int port, server->Listen("127.0.0.1", 0, /*backlog=*/4096));
//   ...
//   server->StopListening(); server->CloseAll();
//
// Thread-safe. The static functions act on the connection served by the calling thread (a
// handler, a content provider) and do nothing on any other thread.
#ifndef CTRLHOST_RUNTIME_SERVING_CONNECTION_SERVER_H_
#define CTRLHOST_RUNTIME_SERVING_CONNECTION_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "httplib.h"
#include "runtime/common/log_limiter.h"
#include "runtime/common/mutex.h"
#include "runtime/serving/stream_loop.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace ctrlhost::serving {

struct ConnectionLimits {
  // Open connections at most; 0: no limit.
  size_t max_connections = 8192;
  // Connections not (yet) authenticated at most; a new one beyond evicts the oldest.
  size_t max_unauthenticated = 256;
  // Longest an unauthenticated connection lives (TLS handshake, request headers, the
  // authentication of a request). Long enough for a slow client on a slow network.
  absl::Duration authentication_deadline = absl::Seconds(10);
  // False: a connection is authenticated once its first request's headers are read.
  bool authentication_required = false;
  // A response write that makes no progress for this long (the peer reads nothing) ends the
  // connection. Long enough for a client busy for a moment; short enough that requests stuck
  // on non-reading clients do not hold their resources (in-flight slots) for long.
  absl::Duration write_stall_timeout = absl::Seconds(10);
  // A connection refused at max_connections is answered 429 with this body and content type.
  std::string refusal_content_type = "text/plain; charset=utf-8";
  std::string refusal_body = "Too many open connections, please try again later.\n";
  // Longest a refused connection is kept to answer it (TLS handshake, its request headers up
  // to half of it, the answer, a lingering close); past it the connection is closed.
  absl::Duration refusal_deadline = absl::Seconds(2);
  // Refused connections being answered at once at most (each has a thread); beyond, refused
  // connections are closed without an answer.
  size_t max_refusals_answered = 64;
  // Names the server in log lines ("apiserver", "observe").
  std::string name = "http";
  // When the server stops: how long a request being served (its body being read, its handler
  // running, its response being written) may take to finish before its connection is cut.
  // Idle keep-alive connections are closed at once. A client is never sent half a response
  // because the server stopped while it was answering.
  absl::Duration shutdown_grace = absl::Seconds(5);
  // Threads of the event loop that writes detached streams (watches; see Detach()). 0: no loop,
  // a stream is written by its connection's thread until it ends.
  int stream_threads = 0;
  // A detached stream's bytes made and not yet accepted by its socket at most, before its
  // producer is asked for more (StreamLoopOptions::window_bytes).
  size_t stream_window_bytes = 1 << 20;
  // A detached stream whose socket accepts no byte for this long while bytes wait is ended with
  // a reset (StreamLoopOptions::stall_timeout).
  absl::Duration stream_stall_timeout = absl::Seconds(10);
};

class ConnectionServer : public httplib::Server {
 public:
  // Plain HTTP when `cert_path` is empty; otherwise TLS (1.2+) with that certificate chain and
  // key (PEM files). InvalidArgument when they cannot be loaded.
  static absl::StatusOr<std::unique_ptr<ConnectionServer>> Create(ConnectionLimits limits,
                                                                  const std::string& cert_path,
                                                                  const std::string& key_path);
  ~ConnectionServer() override;
  ConnectionServer(const ConnectionServer&) = delete;
  ConnectionServer& operator=(const ConnectionServer&) = delete;

  // Binds `bind`:`port` (0: a free port), sets the listen backlog (SetBacklog) and runs the
  // accept loop on a thread of its own. Returns the bound port once that loop is running:
  // httplib's stop() does nothing before, so a StopListening() right after a Listen() that
  // returned earlier could leave the thread in accept() for ever. Unavailable when the address
  // cannot be bound; Internal when the loop ends as soon as it starts. Call at most once, and
  // not concurrently with StopListening().
  absl::StatusOr<int> Listen(const std::string& bind, int port, int backlog);
  // Stops accepting, closes idle connections, lets the requests being served finish (at most
  // limits().shutdown_grace; then their connections are cut) and joins the accept loop's
  // thread. Idempotent; also done by the destructor.
  void StopListening();

  // After bind_to_port/bind_to_any_port: the listen backlog (httplib binds with 5, which drops
  // SYNs as soon as a handful of clients connect at once). Linux takes a new backlog from a
  // second listen() on the bound socket.
  absl::Status SetBacklog(int backlog);

  // After stop(): shuts every open connection down, whatever it is doing (their threads then
  // end), and stops the watchdog. No connection is served afterwards.
  void CloseAll();

  // The connection served by the calling thread is authenticated: it leaves the
  // unauthenticated pool and its deadline.
  static void MarkAuthenticated();
  // The peer of the calling thread's connection has closed or reset it (a client that went
  // away during a long-running response such as a watch). Never blocks.
  static bool PeerClosed();
  // Keeps `resource` until the response of the current request is written (or the connection
  // ends), e.g. an in-flight request slot.
  static void HoldUntilResponseWritten(std::shared_ptr<void> resource);
  // True when the calling thread's connection can be detached: the server has a stream loop
  // (limits().stream_threads > 0) and is not stopping. A handler that will detach its response
  // says `Connection: close` in it (the connection ends with the stream).
  static bool CanDetach();
  // From a chunked content provider, before it writes anything: once httplib returns, the
  // calling thread's connection (socket and TLS session) is handed to the stream loop, which
  // writes the rest of the body from `producer` and closes the connection after it; the
  // connection's thread ends. The provider must then return false (httplib writes nothing more
  // and does not close the connection). A detached connection still counts towards
  // max_connections until it is closed, and what HoldUntilResponseWritten() kept is kept until
  // then. `long_running` (a watch): it may stall for stream_stall_timeout; otherwise (a
  // streamed LIST) for write_stall_timeout, and a stall counts as write_stalled. Does nothing
  // unless CanDetach().
  static void Detach(std::unique_ptr<StreamProducer> producer, bool long_running);
  // Every detached stream's producer is called again soon (new data may exist). Cheap.
  void WakeStreams();

  struct Stats {
    size_t open = 0;
    size_t unauthenticated = 0;
    size_t idle = 0;             // authenticated, between requests (keep-alive)
    uint64_t refused = 0;        // max_connections reached, every connection busy: 429 or closed
    uint64_t evicted = 0;        // unauthenticated, closed for a newer one
    uint64_t evicted_idle = 0;   // authenticated and idle, closed for a newer one
    uint64_t timed_out = 0;      // unauthenticated past the deadline
    uint64_t write_stalled = 0;  // a response write made no progress for write_stall_timeout
    StreamLoop::Stats streams;   // detached streams (zero without a stream loop)
  };
  Stats GetStats() const;

  // Also the effective limits (max_connections lowered to fit the file-descriptor limit).
  const ConnectionLimits& limits() const { return limits_; }

 private:
  struct Connection;
  class ThreadPerConnection;
  enum class Admission { kAccepted, kAnswerRefusal, kRefused };

  ConnectionServer(ConnectionLimits limits, SSL_CTX* ctx);

  bool process_and_close_socket(socket_t sock) override;
  void Serve(Connection& c);
  // Answers a refused connection 429 (see the class comment); bounded by refusal_deadline.
  void AnswerRefusal(Connection& c);
  // Registers a new connection, making room for it or refusing it. kAnswerRefusal and
  // kRefused leave it unregistered.
  Admission Register(Connection* c);
  // `detached`: the connection lives on in the stream loop (counted in detached_).
  void Unregister(Connection* c, bool detached = false);
  void Authenticated(Connection* c);
  // The connection has shown bytes (`handshaken` false) or completed its TLS handshake.
  void MadeProgress(Connection* c, bool handshaken);
  // Around one request on `c`, from its first byte to its last response byte. BeginRequest is
  // false when the server is stopping and has already closed `c` as idle.
  bool BeginRequest(Connection* c);
  void EndRequest(Connection* c);
  // The unauthenticated connection that has shown the least (see the class comment), or null.
  Connection* UnauthenticatedVictimLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The authenticated connection idle the longest whose next request is not arriving, or null.
  Connection* IdleVictimLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The graceful part of stopping (after stop()): closes idle connections, waits up to
  // shutdown_grace for busy ones to finish their request, then CloseAll().
  void DrainThenCloseAll();
  bool AnyBusyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Shuts the connection's socket down (its thread sees EOF and ends).
  void ShutDownLocked(Connection* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LeaveIdleLocked(Connection* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Watchdog();

  // Constant after construction.
  ConnectionLimits limits_;
  SSL_CTX* const ssl_ctx_;  // owned; null for plain HTTP
  common::LogLimiter refused_log_;
  common::LogLimiter evicted_log_;
  common::LogLimiter stalled_log_;

  mutable common::Mutex mu_;
  common::CondVar cv_;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<Connection*> open_ ABSL_GUARDED_BY(mu_);
  // Oldest first; the deadlines are in the same order.
  std::list<Connection*> unauthenticated_ ABSL_GUARDED_BY(mu_);
  // Authenticated connections between requests, idle the longest first.
  std::list<Connection*> idle_ ABSL_GUARDED_BY(mu_);
  // Refused connections being answered (not in open_), oldest first, deadlines in that order.
  std::list<Connection*> refusing_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  size_t detached_ ABSL_GUARDED_BY(mu_) = 0;  // connections in streams_, not yet closed
  std::thread watchdog_;
  // Started by Listen(), joined by StopListening(): the owner's thread only.
  std::thread listener_;
  // Null without stream_threads. Declared last: destroyed (stopped) first, while what its
  // connections' callbacks touch is alive.
  std::unique_ptr<StreamLoop> streams_;
};

// Raises this process's soft limit of open files to the hard limit (as the Go runtime does at
// start): a server holding thousands of connections needs them. Returns the new soft limit.
uint64_t RaiseOpenFileLimit();

}  // namespace ctrlhost::serving

#endif  // CTRLHOST_RUNTIME_SERVING_CONNECTION_SERVER_H_
