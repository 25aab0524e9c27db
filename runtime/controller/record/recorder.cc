#include "runtime/controller/record/recorder.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "runtime/common/logging.h"
#include "runtime/common/proto_time.h"
#include "runtime/common/status_macros.h"
#include "runtime/controller/record/recording.h"

namespace ctrlhost::controller::record {
namespace {

namespace fs = std::filesystem;

pluginpb::HostActionResult ResultOf(const ApplyOutcome& outcome) {
  switch (outcome.kind) {
    case OutcomeKind::kDone:
    case OutcomeKind::kRequeueAfter:
      return outcome.writes > 0 ? pluginpb::HOST_ACTION_RESULT_WRITTEN
                                : pluginpb::HOST_ACTION_RESULT_UNCHANGED;
    case OutcomeKind::kRetry:
      return pluginpb::HOST_ACTION_RESULT_RETRY;
    case OutcomeKind::kRequeueNow:
      return pluginpb::HOST_ACTION_RESULT_CONFLICT;
    case OutcomeKind::kTerminal:
      return pluginpb::HOST_ACTION_RESULT_REFUSED;
  }
  return pluginpb::HOST_ACTION_RESULT_UNSPECIFIED;
}

// Room in front of a serialized record for its frame's head: the length (at most 10 bytes), the
// sequence field's tag (1) and the sequence (at most 10).
constexpr size_t kFrameHeadRoom = 21;

// Writes the frame's head (the length of what follows, the sequence field) just before the
// serialized record at bytes[kFrameHeadRoom...]; returns where the frame starts.
size_t PutFrameHead(uint64_t sequence, std::string& bytes) {
  using google::protobuf::io::CodedOutputStream;
  constexpr uint32_t kSequenceTag = (1 << 3) | 0;  // field 1, varint
  const size_t body = bytes.size() - kFrameHeadRoom;
  const size_t size = 1 + CodedOutputStream::VarintSize64(sequence) + body;
  const size_t head = CodedOutputStream::VarintSize64(size) + (size - body);
  uint8_t* p = reinterpret_cast<uint8_t*>(bytes.data()) + kFrameHeadRoom - head;
  p = CodedOutputStream::WriteVarint64ToArray(size, p);
  p = CodedOutputStream::WriteVarint32ToArray(kSequenceTag, p);
  CodedOutputStream::WriteVarint64ToArray(sequence, p);
  return kFrameHeadRoom - head;
}

}  // namespace

pluginpb::HostAction ToHostAction(const ApplyOutcome& outcome) {
  pluginpb::HostAction action;
  action.set_result(ResultOf(outcome));
  action.set_reason(outcome.reason);
  if (!outcome.status.ok()) action.set_message(std::string(outcome.status.message()));
  action.set_writes(outcome.writes);
  action.set_skipped(outcome.skipped);
  if (outcome.kind == OutcomeKind::kRequeueAfter) {
    *action.mutable_requeue_after() = common::ToProtoDuration(outcome.requeue_after);
  }
  return action;
}

Recorder::Recorder(RecorderOptions options, pluginpb::RecordingHeader header)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : common::Clock::Real()),
      primary_is_secret_(PrimaryIsSecret(header.controller())),
      header_(std::move(header)),
      error_log_({.per_second = 0.2, .burst = 3, .clock = options_.clock}) {
  figures_.dir = options_.dir;
}

absl::StatusOr<std::unique_ptr<Recorder>> Recorder::Start(RecorderOptions options,
                                                          pluginpb::RecordingHeader header) {
  if (options.dir.empty()) return absl::InvalidArgumentError("recording directory is empty");
  if (options.max_bytes < (uint64_t{1} << 10)) {
    return absl::InvalidArgumentError("recording maxBytes must be at least 1Ki");
  }
  if (options.file_bytes == 0) options.file_bytes = options.max_bytes / 8;
  if (options.file_bytes > options.max_bytes) {
    return absl::InvalidArgumentError("a recording file's size limit exceeds the directory's");
  }
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create recording directory ", options.dir, ": ", ec.message()));
  }
  ::chmod(options.dir.c_str(), 0700);
  header.set_format(kFormat);
  header.set_secret_data(options.secret_data);
  std::unique_ptr<Recorder> recorder(new Recorder(std::move(options), std::move(header)));
  RETURN_IF_ERROR(recorder->ScanDirectory());
  RETURN_IF_ERROR(recorder->OpenNextFile());
  recorder->writer_ = std::thread([r = recorder.get()] { r->WriterLoop(); });
  return recorder;
}

Recorder::~Recorder() {
  {
    common::MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  if (writer_.joinable()) writer_.join();
  CloseFile();
}

absl::Status Recorder::ScanDirectory() {
  absl::StatusOr<std::vector<std::string>> existing = RecordingFiles(options_.dir);
  if (!existing.ok()) {
    if (absl::IsNotFound(existing.status())) return absl::OkStatus();
    return existing.status();
  }
  for (const std::string& path : *existing) {
    std::error_code ec;
    const uint64_t size = fs::file_size(path, ec);
    files_.push_back({path, ec ? 0 : size, 0});
    next_index_ = std::max(next_index_, FileIndex(path).value_or(0) + 1);
  }
  return absl::OkStatus();
}

absl::Status Recorder::OpenNextFile() {
  CloseFile();
  header_.mutable_created()->CopyFrom(common::ToProtoTimestamp(clock_->Now()));
  const std::string start = FileStart(header_);
  // "x": never over a file someone else wrote meanwhile; such a number is skipped.
  for (int tries = 0; tries < 100; ++tries) {
    const std::string path = absl::StrCat(options_.dir, "/", FileName(next_index_++));
    std::FILE* f = std::fopen(path.c_str(), "wbx");
    if (f == nullptr && errno == EEXIST) continue;
    if (f == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create recording file ", path, ": ", std::strerror(errno)));
    }
    // A batch's worth of buffer: one write(2) per batch instead of one per 4 KiB (stdio's
    // default), which at tens of thousands of records a second was CPU time the serving path
    // shares the machine with.
    std::setvbuf(f, nullptr, _IOFBF, kBatchBytes);
    if (std::fwrite(start.data(), 1, start.size(), f) != start.size() || std::fflush(f) != 0) {
      const std::string error = std::strerror(errno);
      std::fclose(f);
      return absl::FailedPreconditionError(
          absl::StrCat("cannot write recording file ", path, ": ", error));
    }
    EnforceBudget();
    file_ = f;
    files_.push_back({path, start.size(), start.size()});
    common::MutexLock lock(&mu_);
    figures_.current_file = path;
    figures_.bytes_written += start.size();
    figures_.files = files_.size();
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      absl::StrCat("cannot create a recording file in ", options_.dir, ": every name is taken"));
}

void Recorder::CloseFile() {
  if (file_ == nullptr) return;
  std::fclose(file_);
  file_ = nullptr;
}

void Recorder::EnforceBudget() {
  // Room for the file being started to grow to file_bytes: the directory never holds more than
  // max_bytes.
  uint64_t total = 0;
  for (const FileEntry& f : files_) total += f.bytes;
  while (!files_.empty() && total + options_.file_bytes > options_.max_bytes) {
    std::error_code ec;
    fs::remove(files_.front().path, ec);
    total -= files_.front().bytes;
    files_.pop_front();
  }
}

void Recorder::Record(pluginpb::ReconcileCall call, DispatchResult answer,
                      const ApplyOutcome& outcome, absl::Duration took) {
  pluginpb::ReconcileRecord record;
  const absl::Time now = clock_->Now();
  *record.mutable_time() = common::ToProtoTimestamp(now);
  *record.mutable_took() = common::ToProtoDuration(took);
  record.mutable_call()->Swap(&call);
  if (answer.response.ok()) {
    record.mutable_response()->Swap(&*answer.response);
  } else {
    record.mutable_failure()->set_code(static_cast<int>(answer.response.status().code()));
    record.mutable_failure()->set_message(std::string(answer.response.status().message()));
  }
  if (answer.capabilities.has_value()) {
    for (pluginpb::Capability c : *answer.capabilities) record.add_capabilities(c);
  }
  *record.mutable_action() = ToHostAction(outcome);
  if (!options_.secret_data) {
    RedactSecrets(record.mutable_call());
    if (record.has_response()) RedactSecrets(record.mutable_response(), primary_is_secret_);
  }
  // Serialized outside the lock, after room for the frame's head; the sequence number (field 1)
  // is put in that room under the lock, so that the file's order is the sequence's. Protobuf
  // takes fields in any order.
  Frame frame;
  frame.bytes.resize(kFrameHeadRoom + record.ByteSizeLong());
  record.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(frame.bytes.data()) +
                                         kFrameHeadRoom);
  common::MutexLock lock(&mu_);
  const uint64_t sequence = next_sequence_++;
  if (stopping_) return;
  frame.offset = PutFrameHead(sequence, frame.bytes);
  if (pending_bytes_ + frame.size() > options_.max_pending_bytes && !pending_.empty()) {
    ++figures_.dropped;
    uint64_t suppressed = 0;
    if (error_log_.Allow(&suppressed)) {
      common::LogWarning(
          "recording fell behind the reconciles: records dropped (the disk is too slow for the "
          "reconcile rate)",
          {{"dir", options_.dir}, {"dropped", figures_.dropped}, {"suppressed", suppressed}});
    }
    return;
  }
  pending_bytes_ += frame.size();
  // The writer is woken for the first record of a batch and for a full one, not for each: a
  // wake-up per reconcile was most of what recording cost the serving path.
  const bool first = pending_.empty();
  pending_.push_back(std::move(frame));
  if (first || pending_bytes_ >= kBatchBytes) cv_.SignalAll();
}

void Recorder::WriterLoop() {
  while (true) {
    std::deque<Frame> batch;
    {
      common::MutexLock lock(&mu_);
      while (pending_.empty() && !stopping_) cv_.Wait(&mu_);
      // Let a batch gather (bounded: kBatchWait, or kBatchBytes queued, or a Flush or stop).
      const absl::Time gather_until = absl::Now() + kBatchWait;
      while (!stopping_ && flushes_ == 0 && pending_bytes_ < kBatchBytes &&
             !cv_.WaitWithDeadline(&mu_, gather_until)) {
      }
      if (pending_.empty()) return;  // stopping, and everything is written
      batch.swap(pending_);
      pending_bytes_ = 0;
      writing_ = batch.size();
    }
    WriteBatch(batch);
    common::MutexLock lock(&mu_);
    writing_ = 0;
    cv_.SignalAll();
  }
}

void Recorder::WriteBatch(std::deque<Frame>& batch) {
  uint64_t written = 0;
  uint64_t records = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const Frame& frame = batch[i];
    if (file_ != nullptr && files_.back().bytes + frame.size() > options_.file_bytes &&
        files_.back().bytes > files_.back().header_bytes) {
      CloseFile();
    }
    if (file_ == nullptr) {
      if (absl::Status s = OpenNextFile(); !s.ok()) {
        NoteWriteError(std::string(s.message()), batch.size() - i);
        break;
      }
    }
    if (std::fwrite(frame.bytes.data() + frame.offset, 1, frame.size(), file_) != frame.size()) {
      NoteWriteError(absl::StrCat("cannot write ", files_.back().path, ": ", std::strerror(errno)),
                     1);
      CloseFile();  // the next record starts a new file: a half-written one ends this file
      continue;
    }
    files_.back().bytes += frame.size();
    written += frame.size();
    ++records;
  }
  if (file_ != nullptr && std::fflush(file_) != 0) {
    NoteWriteError(absl::StrCat("cannot write ", files_.back().path, ": ", std::strerror(errno)),
                   0);
    CloseFile();
  }
  common::MutexLock lock(&mu_);
  figures_.recorded += records;
  figures_.bytes_written += written;
  uint64_t total = 0;
  for (const FileEntry& f : files_) total += f.bytes;
  figures_.directory_bytes = total;
}

void Recorder::NoteWriteError(const std::string& error, uint64_t lost) {
  common::MutexLock lock(&mu_);
  figures_.dropped += lost;
  figures_.last_error = error;
  uint64_t suppressed = 0;
  if (error_log_.Allow(&suppressed)) {
    common::LogWarning("recording: write failed, records dropped", {{"dir", options_.dir},
                                                                    {"error", error},
                                                                    {"dropped", figures_.dropped},
                                                                    {"suppressed", suppressed}});
  }
}

void Recorder::Flush() {
  common::MutexLock lock(&mu_);
  ++flushes_;
  cv_.SignalAll();
  while (!pending_.empty() || writing_ > 0) cv_.Wait(&mu_);
  --flushes_;
}

Recorder::Figures Recorder::figures() const {
  common::MutexLock lock(&mu_);
  return figures_;
}

}  // namespace ctrlhost::controller::record
