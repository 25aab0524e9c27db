// ConnectionServer over plain HTTP on 127.0.0.1 port 0, with raw client sockets: eviction of
// the oldest unauthenticated connection, the authentication deadline, refusal when every
// connection is authenticated, peer-closed detection and per-request resources. TLS and the
// API server's use of it are tested end to end in e2e/apiserver/connections_e2e_test.py.
#include "runtime/serving/connection_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ctrlhost::serving {
namespace {

class Running {
 public:
  explicit Running(ConnectionLimits limits) {
    auto server = ConnectionServer::Create(std::move(limits), "", "");
    EXPECT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    server_->set_keep_alive_timeout(30);
    server_->set_read_timeout(30);
    server_->Get("/auth", [](const httplib::Request&, httplib::Response& res) {
      ConnectionServer::MarkAuthenticated();
      res.set_content("ok", "text/plain");
    });
    absl::StatusOr<int> port = server_->Listen("127.0.0.1", 0, /*backlog=*/128);
    EXPECT_TRUE(port.ok()) << port.status();
    port_ = port.value_or(0);
  }
  ~Running() { server_->StopListening(); }
  ConnectionServer& server() { return *server_; }
  int port() const { return port_; }

 private:
  std::unique_ptr<ConnectionServer> server_;
  int port_ = 0;
};

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

// True when the server closed `fd` within 20 s (a bound, not a measured time).
bool ClosedByServer(int fd) {
  char buf[4096];
  for (int i = 0; i < 200; ++i) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) return true;
    }
  }
  return false;
}

// Reads a response whose body is "ok" (plain or chunked), bounded: 20 s without a byte.
std::string ReadOk(int fd) {
  std::string out;
  char buf[4096];
  while (out.find("\r\n\r\nok") == std::string::npos &&
         out.find("\r\n\r\n2\r\nok") == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 20000) <= 0) break;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Sends a keep-alive GET and reads its response headers (and the 2-byte body).
std::string Request(int fd, const std::string& path) {
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n";
  EXPECT_EQ(send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  return ReadOk(fd);
}

template <typename F>
bool Eventually(F f) {
  for (int i = 0; i < 400; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return f();
}

TEST(ConnectionServerTest, ListenServesOnTheBoundPort) {
  Running running(ConnectionLimits{});
  ASSERT_GT(running.port(), 0);
  const int fd = Connect(running.port());
  EXPECT_NE(Request(fd, "/auth").find("200 OK"), std::string::npos);
  close(fd);
}

// SO_REUSEADDR only (the httplib default adds SO_REUSEPORT, which would share the port).
void ReuseAddressOnly(ConnectionServer& server) {
  server.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
}

TEST(ConnectionServerTest, ListenOnAPortInUseIsUnavailable) {
  auto first = ConnectionServer::Create(ConnectionLimits{}, "", "");
  ASSERT_TRUE(first.ok()) << first.status();
  ReuseAddressOnly(**first);
  absl::StatusOr<int> port = (*first)->Listen("127.0.0.1", 0, /*backlog=*/16);
  ASSERT_TRUE(port.ok()) << port.status();
  auto second = ConnectionServer::Create(ConnectionLimits{}, "", "");
  ASSERT_TRUE(second.ok()) << second.status();
  ReuseAddressOnly(**second);
  absl::StatusOr<int> again = (*second)->Listen("127.0.0.1", *port, /*backlog=*/16);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(again.status().message(),
            absl::StrCat("cannot listen on 127.0.0.1:", *port, " (in use, or no permission)"));
  (*first)->StopListening();
}

// Listen returns only once the accept loop runs, so a stop right after it cannot leave the
// listener thread in accept() (the test would hang in StopListening).
TEST(ConnectionServerTest, StopListeningRightAfterListenReturns) {
  for (int i = 0; i < 20; ++i) {
    auto server = ConnectionServer::Create(ConnectionLimits{}, "", "");
    ASSERT_TRUE(server.ok()) << server.status();
    ASSERT_TRUE((*server)->Listen("127.0.0.1", 0, /*backlog=*/16).ok());
    (*server)->StopListening();
    (*server)->StopListening();  // idempotent
  }
}

TEST(ConnectionServerTest, ANewConnectionEvictsTheOldestUnauthenticatedOne) {
  ConnectionLimits limits;
  limits.max_unauthenticated = 4;
  limits.authentication_deadline = absl::Hours(1);  // only eviction closes connections here
  limits.authentication_required = true;
  Running running(limits);
  std::vector<int> idle;
  // One at a time: each connection's thread registers it, so under load four connections
  // opened at once could register in another order than they were opened.
  for (int i = 0; i < 4; ++i) {
    idle.push_back(Connect(running.port()));
    ASSERT_TRUE(Eventually(
        [&] { return running.server().GetStats().unauthenticated == static_cast<size_t>(i) + 1; }));
  }
  const int fifth = Connect(running.port());
  EXPECT_TRUE(ClosedByServer(idle[0]));
  EXPECT_EQ(running.server().GetStats().evicted, 1u);
  // The newest one is served, and once authenticated it leaves the pool for good.
  EXPECT_NE(Request(fifth, "/auth").find("200 OK"), std::string::npos);
  ASSERT_TRUE(Eventually([&] { return running.server().GetStats().unauthenticated == 3; }))
      << running.server().GetStats().unauthenticated << " open "
      << running.server().GetStats().open;
  for (int i = 0; i < 4; ++i) close(Connect(running.port()));
  EXPECT_NE(Request(fifth, "/auth").find("200 OK"), std::string::npos);
  for (int fd : idle) close(fd);
  close(fifth);
}

TEST(ConnectionServerTest, TricklingConnectionIsClosedAtTheDeadline) {
  ConnectionLimits limits;
  limits.authentication_deadline = absl::Milliseconds(300);
  limits.authentication_required = true;
  Running running(limits);
  const int fd = Connect(running.port());
  // One byte of a request line at a time: each read completes, no read timeout fires.
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    const char* line = "GET /auth HTTP/1.1\r\n";
    for (int i = 0; line[i] != '\0' && !stop; ++i) {
      if (send(fd, line + i, 1, MSG_NOSIGNAL) != 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  EXPECT_TRUE(ClosedByServer(fd));
  stop = true;
  trickle.join();
  EXPECT_EQ(running.server().GetStats().timed_out, 1u);
  close(fd);
}

// Every connection authenticated and busy with a request (an idle one would make room: see
// RegressionAtTheLimitTheLongestIdleConnectionMakesRoom).
TEST(ConnectionServerTest, FullOfAuthenticatedConnectionsRefusesANewOne) {
  ConnectionLimits limits;
  limits.max_connections = 2;
  limits.authentication_deadline = absl::Hours(1);
  limits.authentication_required = true;
  Running running(limits);
  std::atomic<int> entered{0};
  std::atomic<bool> release{false};
  running.server().Get("/hold", [&](const httplib::Request&, httplib::Response& res) {
    entered.fetch_add(1);
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    res.set_content("ok", "text/plain");
  });
  const int a = Connect(running.port());
  const int b = Connect(running.port());
  ASSERT_NE(Request(a, "/auth").find("200 OK"), std::string::npos);
  ASSERT_NE(Request(b, "/auth").find("200 OK"), std::string::npos);
  const std::string hold = "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n";
  for (int fd : {a, b}) {
    ASSERT_EQ(send(fd, hold.data(), hold.size(), MSG_NOSIGNAL), static_cast<ssize_t>(hold.size()));
  }
  ASSERT_TRUE(Eventually([&] { return entered.load() == 2; }));
  const int c = Connect(running.port());
  EXPECT_TRUE(ClosedByServer(c));
  EXPECT_EQ(running.server().GetStats().refused, 1u);
  release = true;
  ASSERT_NE(ReadOk(a).find("200 OK"), std::string::npos);
  ASSERT_NE(ReadOk(b).find("200 OK"), std::string::npos);
  // The authenticated ones were not touched.
  EXPECT_NE(Request(a, "/auth").find("200 OK"), std::string::npos);
  close(a);
  close(b);
  close(c);
}

TEST(ConnectionServerTest, WithoutAuthenticationTheFirstRequestAuthenticates) {
  ConnectionLimits limits;
  limits.authentication_deadline = absl::Milliseconds(300);
  Running running(limits);
  running.server().Get("/plain", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", "text/plain");
  });
  const int fd = Connect(running.port());
  ASSERT_NE(Request(fd, "/plain").find("200 OK"), std::string::npos);
  // Well past the deadline, the connection is still served.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_NE(Request(fd, "/plain").find("200 OK"), std::string::npos);
  EXPECT_EQ(running.server().GetStats().timed_out, 0u);
  close(fd);
}

TEST(ConnectionServerTest, StreamingHandlerSeesThePeerClose) {
  Running running(ConnectionLimits{});
  std::atomic<bool> saw_close{false};
  std::atomic<bool> released{false};
  running.server().Get("/stream", [&](const httplib::Request&, httplib::Response& res) {
    ConnectionServer::HoldUntilResponseWritten(
        std::shared_ptr<void>(nullptr, [&](void*) { released = true; }));
    res.set_chunked_content_provider("text/plain", [&](size_t, httplib::DataSink& sink) {
      if (ConnectionServer::PeerClosed()) {
        saw_close = true;
        return false;
      }
      static const char kOk[] = "ok";
      sink.write(kOk, 2);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      return true;
    });
  });
  const int fd = Connect(running.port());
  EXPECT_NE(Request(fd, "/stream").find("200 OK"), std::string::npos);
  EXPECT_FALSE(ConnectionServer::PeerClosed());  // not a connection thread: always false
  close(fd);
  EXPECT_TRUE(Eventually([&] { return saw_close.load(); }));
  EXPECT_TRUE(Eventually([&] { return released.load(); }));
}

// Reads until the peer closes the connection (bounded: 20 s).
std::string ReadToEnd(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 20000) <= 0) break;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Stopping while a request is being answered: that answer is written whole (the client saw a
// truncated body, "unexpected EOF" in client-go, when a connection was cut mid-answer), and an
// idle keep-alive connection is closed at once.
TEST(ConnectionServerTest, StoppingLetsTheRequestBeingAnsweredFinish) {
  Running running(ConnectionLimits{});
  std::atomic<bool> entered{false};
  const std::string body(100000, 'x');
  running.server().Get("/slow", [&](const httplib::Request&, httplib::Response& res) {
    entered = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    res.set_content(body, "text/plain");
  });
  const int idle = Connect(running.port());
  EXPECT_NE(Request(idle, "/auth").find("200 OK"), std::string::npos);
  const int busy = Connect(running.port());
  const std::string req = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(send(busy, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  ASSERT_TRUE(Eventually([&] { return entered.load(); }));
  running.server().StopListening();
  const std::string answer = ReadToEnd(busy);
  EXPECT_NE(answer.find("200 OK"), std::string::npos) << answer.substr(0, 200);
  EXPECT_NE(answer.find("\r\n\r\n" + body), std::string::npos)
      << "answer cut at " << answer.size() << " bytes";
  EXPECT_TRUE(ClosedByServer(idle));
  close(idle);
  close(busy);
}

// A request that does not finish within shutdown_grace has its connection cut: stopping is
// bounded.
TEST(ConnectionServerTest, StoppingCutsARequestPastTheGrace) {
  ConnectionLimits limits;
  limits.shutdown_grace = absl::Milliseconds(200);
  Running running(limits);
  std::atomic<bool> entered{false};
  std::atomic<bool> release{false};
  running.server().Get("/stuck", [&](const httplib::Request&, httplib::Response& res) {
    entered = true;
    res.set_chunked_content_provider("text/plain", [&](size_t, httplib::DataSink& sink) {
      if (release.load()) return false;
      static const char kOk[] = "ok";
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      return sink.write(kOk, 2);
    });
  });
  const int fd = Connect(running.port());
  const std::string req = "GET /stuck HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  ASSERT_TRUE(Eventually([&] { return entered.load(); }));
  std::thread stopper([&] { running.server().StopListening(); });
  const std::string answer = ReadToEnd(fd);  // ends when the server cuts the connection
  EXPECT_NE(answer.find("200 OK"), std::string::npos);
  EXPECT_EQ(answer.find("\r\n0\r\n\r\n"), std::string::npos) << "the stream was not cut";
  release = true;
  stopper.join();
  close(fd);
}

// A client socket that reads nothing, with a small receive buffer: a response larger than the
// socket buffers blocks the server's writes.
int ConnectNotReading(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  int size = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

void Send(int fd, const std::string& bytes) {
  EXPECT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

// Issue 25: a client that asks for a large answer and reads nothing held its request's
// resources (an in-flight slot) until httplib's write timeout (30 s in the API server). A write
// that makes no progress for write_stall_timeout ends the connection, whatever that timeout.
TEST(ConnectionServerTest, RegressionAStalledResponseWriteEndsTheConnection) {
  ConnectionLimits limits;
  limits.write_stall_timeout = absl::Milliseconds(300);
  Running running(limits);
  running.server().set_write_timeout(600);  // httplib's: not what bounds a stalled write
  std::atomic<bool> released{false};
  running.server().Get("/endless", [&](const httplib::Request&, httplib::Response& res) {
    ConnectionServer::HoldUntilResponseWritten(
        std::shared_ptr<void>(nullptr, [&](void*) { released = true; }));
    res.set_chunked_content_provider("text/plain", [](size_t, httplib::DataSink& sink) {
      static const std::string chunk(64 * 1024, 'x');
      return sink.write(chunk.data(), chunk.size());
    });
  });
  const int stuck = ConnectNotReading(running.port());
  Send(stuck, "GET /endless HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(Eventually([&] { return released.load(); })) << "still writing after 20 s";
  EXPECT_TRUE(Eventually([&] { return running.server().GetStats().write_stalled == 1; }));
  EXPECT_TRUE(Eventually([&] { return running.server().GetStats().open == 0; }));
  // Others are served meanwhile and after.
  const int other = Connect(running.port());
  EXPECT_NE(Request(other, "/auth").find("200 OK"), std::string::npos);
  close(other);
  close(stuck);
}

// Issue 25: a flood of connections that send nothing evicted clients that had sent bytes (a
// TLS handshake, the start of a request) but took a moment before their request: a silent
// connection is evicted first.
TEST(ConnectionServerTest, RegressionASilentConnectionIsEvictedBeforeOneThatSentBytes) {
  ConnectionLimits limits;
  limits.max_unauthenticated = 4;
  limits.authentication_deadline = absl::Hours(1);
  limits.authentication_required = true;
  Running running(limits);
  const int talking = Connect(running.port());
  Send(talking, "GET /auth HTTP/1.1\r\n");  // the rest comes later
  ASSERT_TRUE(Eventually([&] { return running.server().GetStats().unauthenticated == 1; }));
  std::vector<int> silent;
  for (int i = 0; i < 3; ++i) {
    silent.push_back(Connect(running.port()));
    ASSERT_TRUE(Eventually(
        [&] { return running.server().GetStats().unauthenticated == static_cast<size_t>(i) + 2; }));
  }
  const int fifth = Connect(running.port());
  EXPECT_TRUE(ClosedByServer(silent[0]));
  EXPECT_EQ(running.server().GetStats().evicted, 1u);
  // The one that had sent bytes (the oldest) is still there and is served.
  Send(talking, "Host: x\r\n\r\n");
  const std::string answer = ReadOk(talking);
  EXPECT_NE(answer.find("200 OK"), std::string::npos) << answer;
  for (int fd : silent) close(fd);
  close(talking);
  close(fifth);
}

// Issue 25: idle keep-alive connections that had authenticated filled max_connections until
// their keep-alive timeout, and every new client was refused. The one idle the longest makes
// room.
TEST(ConnectionServerTest, RegressionAtTheLimitTheLongestIdleConnectionMakesRoom) {
  ConnectionLimits limits;
  limits.max_connections = 2;
  limits.authentication_deadline = absl::Hours(1);
  limits.authentication_required = true;
  Running running(limits);
  const int a = Connect(running.port());
  ASSERT_NE(Request(a, "/auth").find("200 OK"), std::string::npos);
  // The server marks a connection idle after the client has its answer: wait for it, or b
  // could be the older idle one (it was, under TSan).
  ASSERT_TRUE(Eventually([&] { return running.server().GetStats().idle == 1; }));
  const int b = Connect(running.port());
  ASSERT_NE(Request(b, "/auth").find("200 OK"), std::string::npos);
  ASSERT_TRUE(Eventually([&] { return running.server().GetStats().idle == 2; }));
  const int c = Connect(running.port());
  EXPECT_NE(Request(c, "/auth").find("200 OK"), std::string::npos);
  EXPECT_TRUE(ClosedByServer(a));
  EXPECT_EQ(running.server().GetStats().evicted_idle, 1u);
  EXPECT_EQ(running.server().GetStats().refused, 0u);
  EXPECT_NE(Request(b, "/auth").find("200 OK"), std::string::npos);
  close(a);
  close(b);
  close(c);
}

// Holds `count` connections busy on /hold until Release(); each is authenticated first.
class BusyConnections {
 public:
  explicit BusyConnections(Running& running) : running_(running) {
    running.server().Get("/hold", [this](const httplib::Request&, httplib::Response& res) {
      common_entered_.fetch_add(1);
      while (!release_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      res.set_content("ok", "text/plain");
    });
  }
  ~BusyConnections() { Release(); }
  void Hold(int count) {
    for (int i = 0; i < count; ++i) {
      const int fd = Connect(running_.port());
      ASSERT_NE(Request(fd, "/auth").find("200 OK"), std::string::npos);
      Send(fd, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
      fds_.push_back(fd);
    }
    ASSERT_TRUE(
        Eventually([&] { return common_entered_.load() == static_cast<int>(fds_.size()); }));
  }
  void Release() {
    release_ = true;
    for (int fd : fds_) close(fd);
    fds_.clear();
  }
  const std::vector<int>& fds() const { return fds_; }

 private:
  Running& running_;
  std::atomic<int> common_entered_{0};
  std::atomic<bool> release_{false};
  std::vector<int> fds_;
};

// Issue 25: a client refused at max_connections saw its TLS connection closed without a word;
// kube-apiserver answers 429 with Retry-After, which clients act on.
TEST(ConnectionServerTest, RegressionARefusedConnectionIsAnsweredTooManyRequests) {
  ConnectionLimits limits;
  limits.max_connections = 1;
  limits.authentication_deadline = absl::Hours(1);
  limits.authentication_required = true;
  limits.refusal_content_type = "application/json";
  limits.refusal_body = R"({"kind":"Status","code":429})";
  Running running(limits);
  BusyConnections busy(running);
  ASSERT_NO_FATAL_FAILURE(busy.Hold(1));
  const int refused = Connect(running.port());
  Send(refused, "GET /auth HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string answer = ReadToEnd(refused);
  EXPECT_EQ(answer.rfind("HTTP/1.1 429 Too Many Requests\r\n", 0), 0u) << answer;
  EXPECT_NE(answer.find("\r\nRetry-After: 1\r\n"), std::string::npos) << answer;
  EXPECT_NE(answer.find("\r\nConnection: close\r\n"), std::string::npos) << answer;
  EXPECT_NE(answer.find("\r\n\r\n{\"kind\":\"Status\",\"code\":429}"), std::string::npos) << answer;
  EXPECT_EQ(running.server().GetStats().refused, 1u);
  close(refused);
  // A client that sends nothing is answered too, once the short deadline has passed.
  const int quiet = Connect(running.port());
  EXPECT_EQ(ReadToEnd(quiet).rfind("HTTP/1.1 429 ", 0), 0u);
  close(quiet);
  busy.Release();
}

// Answering refused connections is bounded: beyond max_refusals_answered at once, a refused
// connection is closed without an answer.
TEST(ConnectionServerTest, RefusalsAnsweredAtOnceAreBounded) {
  ConnectionLimits limits;
  limits.max_connections = 1;
  limits.authentication_deadline = absl::Hours(1);
  limits.authentication_required = true;
  limits.max_refusals_answered = 1;
  limits.refusal_deadline = absl::Hours(1);  // the first one waits for its request
  Running running(limits);
  BusyConnections busy(running);
  ASSERT_NO_FATAL_FAILURE(busy.Hold(1));
  const int waiting = Connect(running.port());  // sends nothing: its answer waits
  ASSERT_TRUE(Eventually([&] { return running.server().GetStats().refused == 1; }));
  const int second = Connect(running.port());
  EXPECT_EQ(ReadToEnd(second), "");
  EXPECT_EQ(running.server().GetStats().refused, 2u);
  Send(waiting, "GET /auth HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(ReadToEnd(waiting).rfind("HTTP/1.1 429 ", 0), 0u);
  close(waiting);
  close(second);
  busy.Release();
}

}  // namespace
}  // namespace ctrlhost::serving
