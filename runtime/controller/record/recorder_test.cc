#include "runtime/controller/record/recorder.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/controller/record/recording.h"

namespace ctrlhost::controller::record {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string NewDir(const std::string& name) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  std::filesystem::remove_all(dir);
  return dir;
}

pluginpb::RecordingHeader Header() {
  pluginpb::RecordingHeader h;
  h.set_operator_("web");
  h.set_plugin("webapp");
  h.mutable_controller()->set_name("webapp");
  return h;
}

pluginpb::ReconcileCall Call(const std::string& name, const std::string& object) {
  pluginpb::ReconcileCall call;
  call.set_controller("webapp");
  call.set_namespace_("team");
  call.set_name(name);
  call.set_object(object);
  return call;
}

pluginpb::ReconcileResponse Answer(const std::string& desired) {
  pluginpb::ReconcileResponse r;
  r.add_desired_objects(desired);
  return r;
}

// Every record of every file in `dir`, in order.
std::vector<pluginpb::ReconcileRecord> ReadAll(const std::string& dir,
                                               pluginpb::RecordingHeader* header = nullptr) {
  std::vector<pluginpb::ReconcileRecord> out;
  absl::StatusOr<std::vector<std::string>> files = RecordingFiles(dir);
  EXPECT_TRUE(files.ok()) << files.status();
  if (!files.ok()) return out;
  for (const std::string& file : *files) {
    auto reader = RecordingReader::Open(file);
    EXPECT_TRUE(reader.ok()) << reader.status();
    if (!reader.ok()) return out;
    if (header != nullptr) *header = (*reader)->header();
    while (true) {
      auto record = (*reader)->Next();
      EXPECT_TRUE(record.ok()) << record.status();
      if (!record.ok() || !record->has_value()) break;
      out.push_back(**record);
    }
  }
  return out;
}

TEST(Recorder, WritesCallsAnswersAndWhatTheHostDid) {
  const std::string dir = NewDir("writes");
  auto recorder = Recorder::Start({.dir = dir}, Header());
  ASSERT_TRUE(recorder.ok()) << recorder.status();
  ApplyOutcome written;
  written.writes = 2;
  (*recorder)->Record((*recorder)->Capture(Call("a", R"({"metadata":{"name":"a"}})")),
                      DispatchResult(Answer(R"({"kind":"ConfigMap"})"),
                                     Capabilities{pluginpb::CAPABILITY_CONDITIONS}),
                      written, absl::Milliseconds(3));
  ApplyOutcome refused;
  refused.kind = OutcomeKind::kTerminal;
  refused.reason = "NotControlled";
  refused.status = absl::FailedPreconditionError("in the way");
  (*recorder)->Record((*recorder)->Capture(Call("b", "{}")), DispatchResult(Answer("{}")), refused,
                      absl::Seconds(1));
  ApplyOutcome retry;
  retry.kind = OutcomeKind::kRetry;
  (*recorder)->Record((*recorder)->Capture(Call("c", "{}")),
                      DispatchResult(absl::DeadlineExceededError("no answer")), retry,
                      absl::Seconds(30));
  (*recorder)->Flush();
  EXPECT_EQ((*recorder)->figures().recorded, 3u);
  EXPECT_EQ((*recorder)->figures().dropped, 0u);

  pluginpb::RecordingHeader header;
  const std::vector<pluginpb::ReconcileRecord> records = ReadAll(dir, &header);
  EXPECT_EQ(header.format(), kFormat);
  EXPECT_EQ(header.controller().name(), "webapp");
  EXPECT_FALSE(header.secret_data());
  EXPECT_TRUE(header.has_created());
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].sequence(), 1u);
  EXPECT_EQ(records[0].call().name(), "a");
  EXPECT_EQ(records[0].response().desired_objects(0), R"({"kind":"ConfigMap"})");
  EXPECT_EQ(records[0].action().result(), pluginpb::HOST_ACTION_RESULT_WRITTEN);
  EXPECT_EQ(records[0].action().writes(), 2u);
  ASSERT_EQ(records[0].capabilities_size(), 1);
  EXPECT_EQ(records[0].took().nanos(), 3000000);
  EXPECT_EQ(records[1].action().result(), pluginpb::HOST_ACTION_RESULT_REFUSED);
  EXPECT_EQ(records[1].action().reason(), "NotControlled");
  EXPECT_EQ(records[1].action().message(), "in the way");
  EXPECT_EQ(records[2].sequence(), 3u);
  ASSERT_TRUE(records[2].has_failure());
  EXPECT_EQ(records[2].failure().code(), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(records[2].action().result(), pluginpb::HOST_ACTION_RESULT_RETRY);
}

TEST(Recorder, RecordsSecretsAsDigestsUnlessTold) {
  const std::string secret = R"({"apiVersion":"v1","kind":"Secret","data":{"pw":"aHVudGVyMg=="}})";
  for (bool include : {false, true}) {
    const std::string dir = NewDir(absl::StrCat("secrets", include));
    auto recorder = Recorder::Start({.dir = dir, .secret_data = include}, Header());
    ASSERT_TRUE(recorder.ok());
    (*recorder)->Record((*recorder)->Capture(Call("s", secret)), DispatchResult(Answer(secret)),
                        ApplyOutcome{}, absl::ZeroDuration());
    (*recorder)->Flush();
    pluginpb::RecordingHeader header;
    const std::vector<pluginpb::ReconcileRecord> records = ReadAll(dir, &header);
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(header.secret_data(), include);
    const std::string want = include ? "aHVudGVyMg==" : SecretDigest("aHVudGVyMg==");
    EXPECT_EQ(json::parse(records[0].call().object())["data"]["pw"], want);
    EXPECT_EQ(json::parse(records[0].response().desired_objects(0))["data"]["pw"], want);
  }
}

TEST(Recorder, RotatesFilesAndKeepsTheDirectoryWithinItsBudget) {
  const std::string dir = NewDir("rotates");
  RecorderOptions options{.dir = dir, .max_bytes = 8 << 10, .file_bytes = 2 << 10};
  const std::string object = absl::StrCat(R"({"pad":")", std::string(400, 'x'), R"("})");
  {
    auto recorder = Recorder::Start(options, Header());
    ASSERT_TRUE(recorder.ok());
    for (int i = 0; i < 100; ++i) {
      (*recorder)->Record((*recorder)->Capture(Call(absl::StrCat("k", i), object)),
                          DispatchResult(Answer("{}")), ApplyOutcome{}, absl::ZeroDuration());
      (*recorder)->Flush();  // one record per batch, so rotation is checked per record
    }
    const Recorder::Figures f = (*recorder)->figures();
    EXPECT_EQ(f.recorded, 100u);
    EXPECT_LE(f.directory_bytes, options.max_bytes);
    EXPECT_GE(f.files, 3u);
  }
  absl::StatusOr<std::vector<std::string>> files = RecordingFiles(dir);
  ASSERT_TRUE(files.ok());
  uint64_t total = 0;
  for (const std::string& f : *files) {
    const uint64_t size = std::filesystem::file_size(f);
    EXPECT_LE(size, options.file_bytes) << f;
    total += size;
  }
  EXPECT_LE(total, options.max_bytes);
  EXPECT_GT(FileIndex(files->front()).value(), 1u);  // the oldest were deleted
  // What is left is the newest records, in order, ending with the last one.
  const std::vector<pluginpb::ReconcileRecord> records = ReadAll(dir);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back().call().name(), "k99");
  for (size_t i = 1; i < records.size(); ++i) {
    EXPECT_EQ(records[i].sequence(), records[i - 1].sequence() + 1);
  }

  // A restart continues with the next file number and keeps the old files.
  const uint64_t last = FileIndex(files->back()).value();
  auto again = Recorder::Start(options, Header());
  ASSERT_TRUE(again.ok());
  EXPECT_THAT((*again)->figures().current_file, HasSubstr(FileName(last + 1)));
}

TEST(Recorder, DropsAndCountsWhatTheWriterCannotKeepUpWith) {
  const std::string dir = NewDir("drops");
  // A one-byte backlog: whatever arrives while a record waits is dropped.
  auto recorder = Recorder::Start({.dir = dir, .max_pending_bytes = 1}, Header());
  ASSERT_TRUE(recorder.ok());
  constexpr int kRecords = 2000;
  for (int i = 0; i < kRecords; ++i) {
    (*recorder)->Record((*recorder)->Capture(Call(absl::StrCat("k", i), "{}")),
                        DispatchResult(Answer("{}")), ApplyOutcome{}, absl::ZeroDuration());
  }
  (*recorder)->Flush();
  const Recorder::Figures f = (*recorder)->figures();
  EXPECT_EQ(f.recorded + f.dropped, static_cast<uint64_t>(kRecords));
  const std::vector<pluginpb::ReconcileRecord> records = ReadAll(dir);
  EXPECT_EQ(records.size(), f.recorded);
  // Sequence numbers show the gaps: increasing, the last one at most kRecords.
  for (size_t i = 1; i < records.size(); ++i) {
    EXPECT_GT(records[i].sequence(), records[i - 1].sequence());
  }
  if (!records.empty()) {
    EXPECT_LE(records.back().sequence(), static_cast<uint64_t>(kRecords));
  }
}

TEST(Recorder, ReusedBuffersCarryNothingOfTheirLastRecord) {
  // Written frames' buffers are filled again by Capture: records of very different sizes, each
  // batch written before the next is captured, must read back exactly as they were.
  const std::string dir = NewDir("reuse");
  auto recorder = Recorder::Start({.dir = dir}, Header());
  ASSERT_TRUE(recorder.ok());
  std::vector<std::string> objects;
  for (int i = 0; i < 60; ++i) {
    // Large, small and larger than the room left for an answer; answers as large as calls.
    const size_t size = (i % 3 == 0) ? 20000 : (i % 3 == 1) ? 3 : 700;
    objects.push_back(
        absl::StrCat(R"({"n":)", i, R"(,"pad":")", std::string(size, 'a' + i % 26), R"("})"));
  }
  for (int i = 0; i < 60; ++i) {
    const std::string& answer = objects[(i + 1) % objects.size()];
    (*recorder)->Record((*recorder)->Capture(Call(absl::StrCat("k", i), objects[i])),
                        DispatchResult(Answer(answer)), ApplyOutcome{}, absl::Milliseconds(i));
    if (i % 4 == 3) (*recorder)->Flush();
  }
  (*recorder)->Flush();
  const std::vector<pluginpb::ReconcileRecord> records = ReadAll(dir);
  ASSERT_EQ(records.size(), 60u);
  for (int i = 0; i < 60; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(records[i].sequence(), static_cast<uint64_t>(i + 1));
    EXPECT_EQ(records[i].call().name(), absl::StrCat("k", i));
    EXPECT_EQ(records[i].call().object(), objects[i]);
    ASSERT_EQ(records[i].response().desired_objects_size(), 1);
    EXPECT_EQ(records[i].response().desired_objects(0), objects[(i + 1) % objects.size()]);
    EXPECT_EQ(records[i].took().nanos(), i * 1000000);
  }
}

TEST(Recorder, RedactsSecretsAmongChildrenAndRelatedObjects) {
  const std::string dir = NewDir("children");
  auto recorder = Recorder::Start({.dir = dir}, Header());
  ASSERT_TRUE(recorder.ok());
  const std::string secret = R"({"apiVersion":"v1","kind":"Secret","stringData":{"k":"v"}})";
  pluginpb::ReconcileCall call = Call("w", R"({"kind":"WebApp"})");
  call.add_children()->set_object(secret);
  call.add_related_objects()->set_object(secret);
  (*recorder)->Record((*recorder)->Capture(call), DispatchResult(Answer("{}")), ApplyOutcome{},
                      absl::ZeroDuration());
  (*recorder)->Flush();
  const std::vector<pluginpb::ReconcileRecord> records = ReadAll(dir);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].call().object(), R"({"kind":"WebApp"})");
  EXPECT_EQ(json::parse(records[0].call().children(0).object())["stringData"]["k"],
            SecretDigest("v"));
  EXPECT_EQ(json::parse(records[0].call().related_objects(0).object())["stringData"]["k"],
            SecretDigest("v"));
}

TEST(Recorder, ARecordWithoutACaptureHasNoCall) {
  // Record's contract is a Capture's result; anything else must still not corrupt the file.
  const std::string dir = NewDir("nocapture");
  auto recorder = Recorder::Start({.dir = dir}, Header());
  ASSERT_TRUE(recorder.ok());
  (*recorder)->Record("", DispatchResult(Answer("{}")), ApplyOutcome{}, absl::ZeroDuration());
  (*recorder)->Record((*recorder)->Capture(Call("b", "{}")), DispatchResult(Answer("{}")),
                      ApplyOutcome{}, absl::ZeroDuration());
  (*recorder)->Flush();
  const std::vector<pluginpb::ReconcileRecord> records = ReadAll(dir);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_FALSE(records[0].has_call());
  EXPECT_EQ(records[1].call().name(), "b");
}

// The threads of this process that run under SCHED_IDLE (policy 5, field 41 of
// /proc/self/task/TID/stat), by TID.
std::set<std::string> IdleThreads() {
  std::set<std::string> idle;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t end_of_name = stat.rfind(')');
    if (end_of_name == std::string::npos) continue;
    std::vector<std::string> fields;
    std::istringstream rest(stat.substr(end_of_name + 2));  // from field 3, the state
    for (std::string f; rest >> f;) fields.push_back(f);
    if (fields.size() > 38 && fields[38] == "5") idle.insert(task.path().filename().string());
  }
  return idle;
}

TEST(Recorder, TheWriterRunsOnIdleCpuUnlessTold) {
  for (bool idle : {true, false}) {
    SCOPED_TRACE(idle);
    // By TID: a writer joined a moment ago may still be listed until the kernel releases it.
    const std::set<std::string> before = IdleThreads();
    auto recorder =
        Recorder::Start({.dir = NewDir(absl::StrCat("cpu", idle)), .idle_cpu = idle}, Header());
    ASSERT_TRUE(recorder.ok());
    // The writer sets its policy when it starts; a record written proves it has.
    (*recorder)->Record((*recorder)->Capture(Call("a", "{}")), DispatchResult(Answer("{}")),
                        ApplyOutcome{}, absl::ZeroDuration());
    (*recorder)->Flush();
    size_t added = 0;
    for (const std::string& tid : IdleThreads()) added += before.count(tid) == 0 ? 1 : 0;
    EXPECT_EQ(added, idle ? 1u : 0u);
  }
}

TEST(Recorder, RefusesADirectoryItCannotWrite) {
  EXPECT_FALSE(Recorder::Start({.dir = ""}, Header()).ok());
  EXPECT_FALSE(Recorder::Start({.dir = NewDir("small"), .max_bytes = 10}, Header()).ok());
  const std::string file = NewDir("plainfile");
  { std::ofstream(file) << "x"; }
  absl::StatusOr<std::unique_ptr<Recorder>> r = Recorder::Start({.dir = file + "/sub"}, Header());
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("cannot create recording directory"));
  if (geteuid() != 0) {  // root writes anywhere
    const std::string locked = NewDir("locked");
    std::filesystem::create_directories(locked);
    ::chmod(locked.c_str(), 0500);
    r = Recorder::Start({.dir = locked}, Header());
    EXPECT_THAT(r.status().message(), HasSubstr("cannot create recording file"));
  }
}

}  // namespace
}  // namespace ctrlhost::controller::record
