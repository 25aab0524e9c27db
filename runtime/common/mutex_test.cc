#include "runtime/common/mutex.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace ctrlhost::common {
namespace {

// Four threads add 10,000 each to *n under *mu; the one that reaches 40,000 signals *done.
std::vector<std::thread> CountTo40000(Mutex* mu, int* n, CondVar* done) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([mu, n, done] {
      for (int i = 0; i < 10000; ++i) {
        MutexLock lock(mu);
        if (++*n == 40000) done->SignalAll();
      }
    });
  }
  return threads;
}

TEST(MutexTest, GuardsCounterAcrossThreads) {
  Mutex mu;
  CondVar done;
  int n = 0;
  for (auto& t : CountTo40000(&mu, &n, &done)) t.join();
  EXPECT_EQ(n, 40000);
}

TEST(CondVarTest, SignalWakesWaiterAndTimeoutReportsTimedOut) {
  Mutex mu;
  CondVar cv;
  bool ready = false;
  std::thread producer([&] {
    MutexLock lock(&mu);
    ready = true;
    cv.SignalAll();
  });
  {
    MutexLock lock(&mu);
    while (!ready) cv.Wait(&mu);
  }
  producer.join();
  MutexLock lock(&mu);
  EXPECT_TRUE(cv.WaitWithTimeout(&mu, absl::Milliseconds(1)));
}

// An adaptive mutex excludes as a plain one and works with a CondVar.
TEST(MutexTest, AdaptiveMutexExcludesAndWaits) {
  Mutex mu;
  mu.MakeAdaptive();
  CondVar cv;
  int n = 0;
  std::vector<std::thread> threads = CountTo40000(&mu, &n, &cv);
  {
    MutexLock lock(&mu);
    while (n < 40000) cv.Wait(&mu);
    EXPECT_EQ(n, 40000);
  }
  for (auto& t : threads) t.join();
  MutexLock lock(&mu);
  EXPECT_TRUE(cv.WaitWithTimeout(&mu, absl::Milliseconds(1)));
}

TEST(RwMutexTest, ReadersShareWritersExclude) {
  RwMutex mu;
  int value = 0;
  {
    ReaderLock a(&mu);
    ReaderLock b(&mu);  // a second reader does not block
    EXPECT_EQ(value, 0);
  }
  {
    WriterLock w(&mu);
    value = 1;
  }
  ReaderLock r(&mu);
  EXPECT_EQ(value, 1);
}

}  // namespace
}  // namespace ctrlhost::common
