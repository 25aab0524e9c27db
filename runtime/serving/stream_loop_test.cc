#include "runtime/serving/stream_loop.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ctrlhost::serving {
namespace {

// What the test and a producer share (the producer runs on a loop thread).
struct Shared {
  std::atomic<int> ready{0};      // pieces the producer may hand out now
  std::atomic<bool> over{false};  // the producer ends at its next call
  std::atomic<int> calls{0};
  std::atomic<size_t> produced{0};
  std::atomic<bool> destroyed{false};
  std::atomic<bool> closed{false};        // on_closed ran
  std::atomic<int64_t> next_call_ms{-1};  // NextCall() this far from its last call; -1 none
  size_t piece_bytes = 5;
};

class TestProducer : public StreamProducer {
 public:
  explicit TestProducer(std::shared_ptr<Shared> s) : s_(std::move(s)) {}
  ~TestProducer() override { s_->destroyed = true; }
  bool Produce(std::string* out) override {
    ++s_->calls;
    last_ = absl::Now();
    if (s_->over) return false;
    int ready = s_->ready.load();
    while (ready > 0 && !s_->ready.compare_exchange_weak(ready, ready - 1)) {
    }
    if (ready > 0) {
      out->append(s_->piece_bytes, 'x');
      s_->produced += s_->piece_bytes;
    }
    return true;
  }
  absl::Time NextCall() const override {
    const int64_t ms = s_->next_call_ms.load();
    return ms < 0 ? absl::InfiniteFuture() : last_ + absl::Milliseconds(ms);
  }

 private:
  std::shared_ptr<Shared> s_;
  absl::Time last_ = absl::Now();
};

// Waits (bounded: 20 s, so a loaded machine passes) until `done`.
template <typename F>
bool Eventually(F done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}

// Reads what is there, waiting up to `ms` for the first byte; "" at EOF or a reset.
std::string ReadSome(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, ms) <= 0) return "";
  char buf[65536];
  const ssize_t n = ::read(fd, buf, sizeof(buf));
  return n > 0 ? std::string(buf, n) : "";
}

// Reads until EOF (or a reset); bounded by Eventually's limit per read.
std::string ReadToEnd(int fd) {
  std::string all;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20000) <= 0) break;
    char buf[65536];
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    all.append(buf, n);
  }
  return all;
}

class StreamLoopTest : public ::testing::Test {
 protected:
  void Start(StreamLoopOptions o = {}) {
    o.name = "test";
    auto loop = StreamLoop::Start(o);
    ASSERT_TRUE(loop.ok()) << loop.status();
    loop_ = *std::move(loop);
  }
  // Adopts one end of a socket pair; returns the other (the client's).
  int Adopt(std::shared_ptr<Shared> s) {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    loop_->Adopt(fds[0], /*ssl=*/nullptr, std::make_unique<TestProducer>(s),
                 [s](StreamLoop::End) { s->closed = true; });
    clients_.push_back(fds[1]);
    return fds[1];
  }
  void TearDown() override {
    if (loop_ != nullptr) loop_->Stop(absl::ZeroDuration());
    for (int fd : clients_) ::close(fd);
  }

  std::unique_ptr<StreamLoop> loop_;
  std::vector<int> clients_;
};

TEST_F(StreamLoopTest, WritesPiecesAsChunksThenTheLastChunkAndCloses) {
  Start();
  auto s = std::make_shared<Shared>();
  s->ready = 2;  // both on the first calls: a piece is followed by another call
  const int client = Adopt(s);
  ASSERT_TRUE(Eventually([&] { return s->ready == 0; }));
  s->over = true;
  loop_->WakeAll();
  EXPECT_EQ(ReadToEnd(client), "5\r\nxxxxx\r\n5\r\nxxxxx\r\n0\r\n\r\n");
  ASSERT_TRUE(Eventually([&] { return s->closed.load(); }));
  EXPECT_TRUE(s->destroyed);
  EXPECT_EQ(loop_->GetStats().finished, 1u);
  EXPECT_EQ(loop_->GetStats().open, 0u);
}

TEST_F(StreamLoopTest, WakeAllCallsEveryProducer) {
  Start({.threads = 2});
  std::vector<std::shared_ptr<Shared>> shared;
  std::vector<int> clients;
  for (int i = 0; i < 20; ++i) {
    shared.push_back(std::make_shared<Shared>());
    clients.push_back(Adopt(shared.back()));
  }
  ASSERT_TRUE(Eventually([&] {
    for (auto& s : shared) {
      if (s->calls == 0) return false;
    }
    return true;
  }));
  EXPECT_EQ(ReadSome(clients[7], 50), "");  // nothing to say yet
  for (auto& s : shared) s->ready = 1;
  loop_->WakeAll();
  for (int fd : clients) EXPECT_EQ(ReadSome(fd, 20000), "5\r\nxxxxx\r\n");
}

TEST_F(StreamLoopTest, CallsAProducerAtItsNextCallWithoutAWake) {
  Start();
  auto s = std::make_shared<Shared>();
  s->next_call_ms = 20;
  const int client = Adopt(s);
  ASSERT_TRUE(Eventually([&] { return s->calls > 0; }));
  s->ready = 1;  // no WakeAll: only the timer brings it
  EXPECT_EQ(ReadSome(client, 20000), "5\r\nxxxxx\r\n");
}

TEST_F(StreamLoopTest, AClientThatReadsNothingIsBoundedByTheWindowThenEnded) {
  StreamLoopOptions o;
  o.window_bytes = 64 * 1024;
  o.stall_timeout = absl::Milliseconds(300);
  Start(o);
  auto s = std::make_shared<Shared>();
  s->piece_bytes = 16 * 1024;
  s->ready = 1 << 20;  // always something to say
  const int client = Adopt(s);
  int sndbuf = 0;
  int rcvbuf = 0;
  socklen_t len = sizeof(int);
  ::getsockopt(client, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len);
  ::getsockopt(client, SOL_SOCKET, SO_SNDBUF, &sndbuf, &len);
  // The window full, a wake (a committed write) finds it over its window: its stall deadline
  // must still end it.
  ASSERT_TRUE(Eventually([&] { return s->produced >= o.window_bytes; }));
  loop_->WakeAll();
  ASSERT_TRUE(Eventually([&] { return loop_->GetStats().stalled == 1; }));
  // What was made: the socket's buffers (both ends, for a Unix pair), the window and a piece.
  EXPECT_LE(s->produced.load(),
            static_cast<size_t>(2 * (sndbuf + rcvbuf)) + o.window_bytes + 2 * s->piece_bytes);
  EXPECT_TRUE(s->closed);
  EXPECT_TRUE(s->destroyed);
}

TEST_F(StreamLoopTest, AClientThatReadsSlowlyIsNotEnded) {
  StreamLoopOptions o;
  o.window_bytes = 16 * 1024;
  // Long enough that a loaded machine does not starve the reader for that long (it failed with
  // 500 ms under the sanitizers' parallel load): what is tested is that progress, however slow,
  // never counts as a stall.
  o.stall_timeout = absl::Seconds(10);
  Start(o);
  auto s = std::make_shared<Shared>();
  s->piece_bytes = 4096;
  s->ready = 200;
  const int client = Adopt(s);
  size_t got = 0;
  // 800 KiB read a little at a time, with pauses shorter than the stall timeout.
  while (got < 200 * 4096) {
    std::string bytes = ReadSome(client, 20000);
    ASSERT_FALSE(bytes.empty()) << "ended after " << got << " bytes";
    for (char ch : bytes) got += ch == 'x';
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(loop_->GetStats().stalled, 0u);
}

TEST_F(StreamLoopTest, AClientThatClosesEndsItsStreamAtOnce) {
  Start();
  auto s = std::make_shared<Shared>();
  const int client = Adopt(s);
  ASSERT_TRUE(Eventually([&] { return s->calls > 0; }));
  ::shutdown(client, SHUT_RDWR);
  ASSERT_TRUE(Eventually([&] { return s->destroyed.load(); }));
  EXPECT_EQ(loop_->GetStats().peer_closed, 1u);
}

TEST_F(StreamLoopTest, StopLetsAStreamThatIsOverWriteItsLastChunk) {
  Start();
  auto ending = std::make_shared<Shared>();
  const int client = Adopt(ending);
  ASSERT_TRUE(Eventually([&] { return ending->calls > 0; }));
  ending->over = true;  // as a watch stopped by the server
  // Stop returns as soon as it is written: the grace only bounds a stream that is not over.
  loop_->Stop(absl::Seconds(30));
  EXPECT_EQ(ReadToEnd(client), "0\r\n\r\n");
  const StreamLoop::Stats stats = loop_->GetStats();
  EXPECT_EQ(stats.finished, 1u);
  EXPECT_EQ(stats.cut_at_stop, 0u);
  EXPECT_EQ(stats.open, 0u);
}

TEST_F(StreamLoopTest, StopCutsAStreamThatIsNotOverAfterTheGraceAndRefusesNewOnes) {
  Start();
  auto endless = std::make_shared<Shared>();
  Adopt(endless);
  ASSERT_TRUE(Eventually([&] { return endless->calls > 0; }));
  loop_->Stop(absl::Milliseconds(50));
  const StreamLoop::Stats stats = loop_->GetStats();
  EXPECT_EQ(stats.cut_at_stop, 1u);
  EXPECT_EQ(stats.open, 0u);
  EXPECT_TRUE(endless->closed);
  // After Stop an adopted connection is closed at once.
  auto late = std::make_shared<Shared>();
  const int late_client = Adopt(late);
  EXPECT_TRUE(late->closed);
  EXPECT_EQ(ReadToEnd(late_client), "");
}

}  // namespace
}  // namespace ctrlhost::serving
