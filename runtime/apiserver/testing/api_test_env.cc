#include "runtime/apiserver/testing/api_test_env.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "runtime/apiserver/object_util.h"

namespace ctrlhost::apiserver::testing {

std::string NewTempDir() {
  const char* root = std::getenv("TEST_TMPDIR");
  std::string pattern = absl::StrCat(root != nullptr ? root : "/tmp", "/apiserver-XXXXXX");
  char* dir = mkdtemp(pattern.data());
  return dir != nullptr ? std::string(dir) : std::string();
}

bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}

ApiTestEnv::ApiTestEnv(ApiTestEnvOptions options)
    : dir_(options.dir.empty() ? NewTempDir() : options.dir) {
  StoreOptions so;
  so.path = dir_ + "/state.db";
  so.sync_full = false;
  so.compaction_interval = absl::ZeroDuration();  // tests compact explicitly
  so.extract_labels = [](absl::string_view json) { return ExtractLabels(json); };
  so.clock = &clock_;
  if (options.watch_window_events > 0) so.watch_window_events = options.watch_window_events;
  auto store = Store::Open(std::move(so));
  if (!store.ok()) {
    ADD_FAILURE() << "cannot open the store: " << store.status();
    std::abort();
  }
  store_ = *std::move(store);
  registry_ = std::make_unique<ResourceRegistry>();
  handlers_ = std::make_unique<ApiHandlers>(store_.get(), registry_.get(), &clock_,
                                            options.handler_options);
  controllers_ =
      std::make_unique<Controllers>(store_.get(), registry_.get(), handlers_.get(), &clock_);
  Controllers* c = controllers_.get();
  handlers_->SetCrdHook([c](const nlohmann::json& crd) { c->SyncCrd(crd); });
  if (options.controllers) {
    absl::Status s = controllers_->Start();
    if (!s.ok()) ADD_FAILURE() << "cannot start the controllers: " << s;
  }
}

ApiTestEnv::~ApiTestEnv() {
  handlers_->StopWatches();
  controllers_->Stop();
  store_.reset();
}

ApiResponse ApiTestEnv::Do(const std::string& method, const std::string& path,
                           const std::string& body, const std::string& content_type,
                           const std::vector<std::pair<std::string, std::string>>& query,
                           const std::string& accept) {
  ApiRequest req;
  req.method = method;
  req.path = path;
  for (const auto& [k, v] : query) req.query.emplace(k, v);
  req.content_type = content_type;
  req.accept = accept;
  req.user_agent = "test/1.0";
  req.body = body;
  return handlers_->Handle(req);
}

void ApiTestEnv::CreateNamespace(const std::string& name) {
  ApiResponse r = Post(
      "/api/v1/namespaces",
      nlohmann::json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}});
  ASSERT_EQ(r.code, 201) << r.body;
}

nlohmann::json ApiTestEnv::CreateConfigMap(const std::string& ns, const std::string& name,
                                           const nlohmann::json& labels,
                                           const nlohmann::json& data) {
  nlohmann::json cm = {{"apiVersion", "v1"},
                       {"kind", "ConfigMap"},
                       {"metadata", {{"name", name}, {"labels", labels}}},
                       {"data", data}};
  ApiResponse r = Post(absl::StrCat("/api/v1/namespaces/", ns, "/configmaps"), cm);
  EXPECT_EQ(r.code, 201) << r.body;
  return Json(r);
}

nlohmann::json ApiTestEnv::Json(const ApiResponse& r) {
  return nlohmann::json::parse(r.body, nullptr, false);
}

WatchReader::WatchReader(ApiResponse response, common::FakeClock* clock)
    : response_(std::move(response)), clock_(clock) {
  if (!response_.stream) {
    common::MutexLock lock(&mu_);
    finished_ = true;
    return;
  }
  thread_ = std::thread([this] { Run(); });
}

WatchReader::~WatchReader() { Stop(); }

void WatchReader::Run() {
  auto write = [this](absl::string_view chunk) {
    common::MutexLock lock(&mu_);
    partial_.append(chunk.data(), chunk.size());
    size_t nl;
    while ((nl = partial_.find('\n')) != std::string::npos) {
      events_.push_back(nlohmann::json::parse(partial_.substr(0, nl), nullptr, false));
      partial_.erase(0, nl + 1);
    }
    return !stop_;
  };
  while (true) {
    {
      common::MutexLock lock(&mu_);
      if (stop_) break;
    }
    if (!response_.stream(write)) break;
  }
  common::MutexLock lock(&mu_);
  finished_ = true;
}

std::vector<nlohmann::json> WatchReader::WaitForEvents(size_t n, absl::Duration timeout) {
  WaitFor(
      [&] {
        common::MutexLock lock(&mu_);
        return events_.size() >= n || finished_;
      },
      timeout);
  return Events();
}

std::vector<nlohmann::json> WatchReader::Events() {
  common::MutexLock lock(&mu_);
  return events_;
}

bool WatchReader::Finished() {
  common::MutexLock lock(&mu_);
  return finished_;
}

bool WatchReader::WaitFinished(absl::Duration timeout) {
  return WaitFor([&] { return Finished(); }, timeout);
}

void WatchReader::Stop() {
  {
    common::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (!thread_.joinable()) return;
  // The pump may be blocked until the fake clock passes its poll deadline.
  while (!Finished()) {
    if (clock_ != nullptr) clock_->Advance(absl::Seconds(1));
    absl::SleepFor(absl::Milliseconds(1));
  }
  thread_.join();
}

void ExpectStatus(const ApiResponse& r, int code, const std::string& reason) {
  EXPECT_EQ(r.code, code) << r.body;
  nlohmann::json j = ApiTestEnv::Json(r);
  EXPECT_EQ(j.value("kind", ""), "Status") << r.body;
  EXPECT_EQ(j.value("status", ""), "Failure") << r.body;
  EXPECT_EQ(j.value("code", 0), code) << r.body;
  EXPECT_EQ(j.value("reason", ""), reason) << r.body;
}

}  // namespace ctrlhost::apiserver::testing
