#include "runtime/controller/record/recorder.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "runtime/common/idle_cpu.h"
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

namespace {

// Room reserved past a captured call for the rest of a record (times, action, a small answer),
// so that Record rarely moves the call's bytes again.
constexpr size_t kAnswerRoom = 512;

// Appends the head of a length-delimited field (its tag and `size`) to `bytes` and room for the
// `size` bytes of its value; returns where that room starts.
uint8_t* AppendFieldHead(int field, size_t size, std::string& bytes) {
  using google::protobuf::io::CodedOutputStream;
  const uint32_t tag = (static_cast<uint32_t>(field) << 3) |
                       google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
  const size_t at = bytes.size();
  bytes.resize(at + CodedOutputStream::VarintSize32(tag) + CodedOutputStream::VarintSize64(size) +
               size);
  uint8_t* p = reinterpret_cast<uint8_t*>(bytes.data()) + at;
  p = CodedOutputStream::WriteVarint32ToArray(tag, p);
  return CodedOutputStream::WriteVarint64ToArray(size, p);
}

// Appends `message` as field `field` to `bytes`.
void AppendField(int field, const google::protobuf::MessageLite& message, std::string& bytes) {
  const size_t size = message.ByteSizeLong();
  message.SerializeWithCachedSizesToArray(AppendFieldHead(field, size, bytes));
}

// Appends a repeated enum field, packed (proto3's encoding), to `bytes`.
template <typename Enums>
void AppendPackedEnums(int field, const Enums& values, std::string& bytes) {
  using google::protobuf::io::CodedOutputStream;
  size_t size = 0;
  for (auto v : values) size += CodedOutputStream::VarintSize32SignExtended(static_cast<int>(v));
  uint8_t* p = AppendFieldHead(field, size, bytes);
  for (auto v : values) {
    p = CodedOutputStream::WriteVarint32SignExtendedToArray(static_cast<int>(v), p);
  }
}

// `call` as field 4 of a ReconcileRecord, after kFrameHeadRoom bytes, in `bytes` (whose
// capacity is reused).
std::string CallField(const pluginpb::ReconcileCall& call, std::string bytes) {
  const size_t size = call.ByteSizeLong();
  bytes.clear();
  bytes.reserve(kFrameHeadRoom + 1 + 10 + size + kAnswerRoom);  // tag, length, call, the rest
  bytes.resize(kFrameHeadRoom);
  call.SerializeWithCachedSizesToArray(
      AppendFieldHead(pluginpb::ReconcileRecord::kCallFieldNumber, size, bytes));
  return bytes;
}

}  // namespace

std::string Recorder::Capture(const pluginpb::ReconcileCall& call) {
  std::string bytes;
  {
    common::MutexLock lock(&mu_);
    if (!spare_.empty()) {
      bytes = std::move(spare_.back());
      spare_.pop_back();
      spare_bytes_ -= bytes.capacity();
    }
  }
  if (options_.secret_data || !MayHoldSecrets(call)) return CallField(call, std::move(bytes));
  pluginpb::ReconcileCall redacted = call;
  RedactSecrets(&redacted);
  return CallField(redacted, std::move(bytes));
}

void Recorder::Record(std::string captured_call, DispatchResult answer, const ApplyOutcome& outcome,
                      absl::Duration took) {
  // The rest of the record is appended to the call Capture serialized (protobuf takes fields in
  // any order), each field from a message on the stack or the answer itself: no copy, and no
  // allocation once the buffer is a reused one.
  Frame frame;
  frame.bytes = std::move(captured_call);
  if (frame.bytes.size() < kFrameHeadRoom) frame.bytes.assign(kFrameHeadRoom, '\0');  // no call
  AppendField(pluginpb::ReconcileRecord::kTimeFieldNumber, common::ToProtoTimestamp(clock_->Now()),
              frame.bytes);
  AppendField(pluginpb::ReconcileRecord::kTookFieldNumber, common::ToProtoDuration(took),
              frame.bytes);
  if (answer.response.ok()) {
    if (!options_.secret_data) RedactSecrets(&*answer.response, primary_is_secret_);
    AppendField(pluginpb::ReconcileRecord::kResponseFieldNumber, *answer.response, frame.bytes);
  } else {
    pluginpb::DispatchFailure failure;
    failure.set_code(static_cast<int>(answer.response.status().code()));
    failure.set_message(std::string(answer.response.status().message()));
    AppendField(pluginpb::ReconcileRecord::kFailureFieldNumber, failure, frame.bytes);
  }
  if (answer.capabilities.has_value() && !answer.capabilities->empty()) {
    AppendPackedEnums(pluginpb::ReconcileRecord::kCapabilitiesFieldNumber, *answer.capabilities,
                      frame.bytes);
  }
  AppendField(pluginpb::ReconcileRecord::kActionFieldNumber, ToHostAction(outcome), frame.bytes);
  // The sequence number (field 1) is put in the room in front under the lock, so that the
  // file's order is the sequence's.
  common::MutexLock lock(&mu_);
  const uint64_t sequence = next_sequence_++;
  if (stopping_) return;
  frame.offset = PutFrameHead(sequence, frame.bytes);
  if (pending_bytes_ + frame.size() > options_.max_pending_bytes && !pending_.empty()) {
    ++figures_.dropped;
    uint64_t suppressed = 0;
    if (error_log_.Allow(&suppressed)) {
      common::LogWarning(
          "recording fell behind the reconciles: records dropped (the disk, or the CPU time the "
          "writer gets, is short of the reconcile rate)",
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
  if (options_.idle_cpu) {
    if (absl::Status s = common::RunThisThreadOnIdleCpu(); !s.ok()) {
      common::LogWarning("the recording writer runs at normal priority",
                         {{"dir", options_.dir}, {"error", std::string(s.message())}});
    }
  }
  std::deque<Frame> batch;
  std::vector<std::string> reuse;
  while (true) {
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
    // The written buffers go back to Capture. Gathered outside the lock, handed over in O(1):
    // this thread runs on idle CPU, and a worker must never wait long for a lock it holds.
    reuse.clear();
    uint64_t reuse_bytes = 0;
    for (Frame& frame : batch) {
      const size_t capacity = frame.bytes.capacity();
      if (capacity > kMaxSpareBuffer || reuse_bytes + capacity > kMaxSpareBytes) continue;
      reuse_bytes += capacity;
      reuse.push_back(std::move(frame.bytes));
    }
    batch.clear();
    common::MutexLock lock(&mu_);
    writing_ = 0;
    if (spare_.empty()) {  // else the workers have not used the last ones yet: these are freed
      spare_.swap(reuse);
      spare_bytes_ = reuse_bytes;
    }
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
