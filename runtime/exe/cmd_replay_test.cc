// `ctrlhost replay` against the real webapp plugin process, on recordings written here: the
// summary and exit codes, --update (which must keep every record, those without an answer too,
// in its place), and recordings it refuses.
#include "runtime/exe/cmd_replay.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/controller/record/recording.h"
#include "runtime/exe/cmd_offline.h"

namespace ctrlhost::exe {
namespace {

namespace fs = std::filesystem;
namespace record = controller::record;
using ::testing::HasSubstr;

std::string Runfile(const std::string& relative) {
  char cwd[4096];
  return absl::StrCat(getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : ".", "/", relative);
}

const bool kChildEnvironment = [] {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path dir = tmp != nullptr ? tmp : "/tmp";
  const std::string suppressions = (dir / "cmd_replay_tsan.supp").string();
  std::ofstream(suppressions) << "called_from_lib:libgrpc.so\ncalled_from_lib:libgrpc++.so\n"
                              << "called_from_lib:libgpr.so\nrace:libabsl_*.so*\n";
  setenv("TSAN_OPTIONS", ("halt_on_error=1 suppressions=" + suppressions).c_str(), 1);
  setenv("WEBAPP_RECORD_DIR", (dir / "webapp-records").c_str(), 1);
  return true;
}();

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

Result Replay(std::vector<std::string> args) {
  std::ostringstream out, err;
  Result r;
  r.code = RunReplayCommand(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

pluginpb::ReconcileRecord Answered(uint64_t sequence, const nlohmann::json& object) {
  pluginpb::ReconcileRecord r;
  r.set_sequence(sequence);
  pluginpb::ReconcileCall* call = r.mutable_call();
  call->set_controller("webapp");
  call->set_namespace_(object["metadata"].value("namespace", "default"));
  call->set_name(object["metadata"].value("name", ""));
  call->set_reason(pluginpb::REASON_PRIMARY_CHANGED);
  call->set_attempt(1);
  call->set_object(object.dump());
  r.mutable_response();  // an empty answer: the webapp plugin answers otherwise
  return r;
}

class ReplayCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto docs = LoadFixtureFile(Runfile("plugins/webapp/testdata/webapp.yaml"));
    ASSERT_TRUE(docs.ok()) << docs.status();
    object_ = (*docs)[0].object;
    object_["metadata"]["uid"] = "uid-1";
    header_.set_format(record::kFormat);
    header_.set_operator_("web");
    header_.set_plugin("webapp");
    header_.mutable_controller()->set_name("webapp");
    header_.mutable_controller()->mutable_primary()->set_group("apps.ctrlhost.dev");
    header_.mutable_controller()->mutable_primary()->set_version("v1alpha1");
    header_.mutable_controller()->mutable_primary()->set_kind("WebApp");
    header_.mutable_controller()->mutable_primary()->set_resource("webapps");
    header_.mutable_controller()->mutable_primary()->set_namespaced(true);
    header_.mutable_controller()->mutable_primary()->set_has_status(true);
  }

  std::string Write(const std::vector<pluginpb::ReconcileRecord>& records) {
    const std::string path = dir_ + "/" + record::FileName(1);
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file << record::FileStart(header_);
    for (const auto& r : records) file << record::Frame(r);
    return path;
  }

  std::vector<pluginpb::ReconcileRecord> ReadBack(const std::string& path) {
    std::vector<pluginpb::ReconcileRecord> out;
    auto reader = record::RecordingReader::Open(path);
    EXPECT_TRUE(reader.ok()) << reader.status();
    while (reader.ok()) {
      auto next = (*reader)->Next();
      if (!next.ok() || !next->has_value()) break;
      out.push_back(**next);
    }
    return out;
  }

  std::string dir_;
  nlohmann::json object_;
  pluginpb::RecordingHeader header_;
};

TEST_F(ReplayCommandTest, DifferencesExitOneAndUpdateKeepsEveryRecordInItsPlace) {
  pluginpb::ReconcileRecord failed = Answered(2, object_);
  failed.mutable_failure()->set_code(4);
  failed.mutable_failure()->set_message("no answer");
  const std::string path = Write({Answered(1, object_), failed, Answered(3, object_)});

  Result r = Replay({"--recording", dir_, "--command", Runfile("plugins/webapp/webapp")});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("different: 00000001.ctrlrec offset "));
  EXPECT_THAT(r.out, HasSubstr("replayed 2 calls of controller webapp (operator web, plugin "
                               "webapp) from 1 file: 0 same, 2 different, 0 failed, 1 skipped"));

  r = Replay({"--recording", path, "--command", Runfile("plugins/webapp/webapp"), "--update"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::vector<pluginpb::ReconcileRecord> records = ReadBack(path);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].sequence(), 1u);
  EXPECT_EQ(records[1].sequence(), 2u);
  EXPECT_TRUE(records[1].has_failure());
  EXPECT_EQ(records[2].sequence(), 3u);
  EXPECT_GT(records[0].response().desired_objects_size(), 0);  // the plugin's answer now

  r = Replay({"--recording", dir_, "--command", Runfile("plugins/webapp/webapp")});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("2 same, 0 different, 0 failed, 1 skipped"));
}

TEST_F(ReplayCommandTest, AWindowOfCallsInFlightKeepsAnswersWithTheirCallsAndTheOrder) {
  // 30 WebApps of their own names, every fifth recorded without an answer, through a window of
  // 3 calls: each call's new answer must be its own (the plugin names its Deployment after the
  // WebApp), and --update must keep every record in its place.
  std::vector<pluginpb::ReconcileRecord> records;
  for (int i = 0; i < 30; ++i) {
    nlohmann::json object = object_;
    object["metadata"]["name"] = absl::StrFormat("web-%02d", i);
    object["metadata"]["uid"] = absl::StrCat("uid-", i);
    pluginpb::ReconcileRecord r = Answered(i + 1, object);
    if (i % 5 == 4) {
      r.mutable_failure()->set_code(4);
      r.mutable_failure()->set_message("no answer");
    }
    records.push_back(r);
  }
  const std::string path = Write(records);
  Result r = Replay({"--recording", path, "--command", Runfile("plugins/webapp/webapp"),
                     "--in-flight", "3", "--update"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("replayed 24 calls of controller webapp"));
  EXPECT_THAT(r.out, HasSubstr("6 skipped"));
  const std::vector<pluginpb::ReconcileRecord> updated = ReadBack(path);
  ASSERT_EQ(updated.size(), 30u);
  for (int i = 0; i < 30; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(updated[i].sequence(), static_cast<uint64_t>(i + 1));
    EXPECT_EQ(updated[i].call().name(), absl::StrFormat("web-%02d", i));
    if (i % 5 == 4) {
      EXPECT_TRUE(updated[i].has_failure());
      continue;
    }
    bool own = false;
    for (const std::string& desired : updated[i].response().desired_objects()) {
      own = own || nlohmann::json::parse(desired)["metadata"]["name"] == updated[i].call().name();
    }
    EXPECT_TRUE(own) << updated[i].response().DebugString();
  }
  r = Replay(
      {"--recording", path, "--command", Runfile("plugins/webapp/webapp"), "--in-flight", "3"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("24 same, 0 different, 0 failed, 6 skipped"));
}

TEST_F(ReplayCommandTest, BadRecordingsAndFlagsAreRefused) {
  EXPECT_EQ(Replay({"--recording", dir_}).code, 2);  // no --command
  Result r = Replay({"--recording", dir_ + "/nowhere", "--command", "x"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("no such directory"));
  const std::string path = Write({Answered(1, object_)});
  r = Replay({"--recording", path, "--command", "x", "--controller", "other"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr(path + ": holds controller webapp, not other"));
  header_.mutable_controller()->set_name("nosuch");
  Write({Answered(1, object_)});
  r = Replay({"--recording", path, "--command", Runfile("plugins/webapp/webapp")});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("does not declare controller nosuch"));
}

}  // namespace
}  // namespace ctrlhost::exe
