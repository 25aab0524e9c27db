// Recorder: appends every reconcile of one controller (the call, the answer, what the host did
// with it) to recording files (recording.h) in a directory of its own, for `ctrlhost replay` and
// the SDKs' replay helpers.
//
// The serving path never waits for the disk: Capture() serializes the call (before the dispatch
// moves it away) into the start of the record's frame, Record() appends the answer and what the
// host did, on the worker's thread, and queues the bytes; a writer thread of the recorder's own
// appends them to the file. By default (`idle_cpu`) that thread runs only on CPU time nothing
// else wants (SCHED_IDLE): it writes whenever a core is idle, and its queue absorbs the time when
// none is. When the queue holds more than `max_pending_bytes` (the disk, or the CPU time the
// writer gets, is short of the reconcile rate), records are dropped, counted and logged (rate
// limited); their sequence numbers are skipped, so a replay sees the gap. Disk use is bounded: a
// file is closed after `file_bytes`, and the oldest files of the directory are deleted once it
// holds more than `max_bytes`. A host restarted on the same directory continues with the next
// file number.
//
//   pluginpb::RecordingHeader header;   // operator, plugin, controller (ToRecorded), host_version
//   ASSIGN_OR_RETURN(std::unique_ptr<record::Recorder> recorder,
//                    record::Recorder::Start({.dir = "recordings/webapp"}, header));
//   runner_options.recorder = recorder.get();   // outlives the runner
//
// Thread-safe. `mu_` guards the queue, the spare buffers and the figures; the open file and the
// list of files are the writer thread's alone.
#ifndef CTRLHOST_RUNTIME_CONTROLLER_RECORD_RECORDER_H_
#define CTRLHOST_RUNTIME_CONTROLLER_RECORD_RECORDER_H_

#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/clock.h"
#include "runtime/common/log_limiter.h"
#include "runtime/common/mutex.h"
#include "runtime/controller/reconcile.h"

namespace ctrlhost::controller::record {

struct RecorderOptions {
  std::string dir;  // required: this controller's directory, created (mode 0700) when missing
  // The directory's budget: when a file is started, the oldest files are deleted until the
  // directory holds at most this much with the new file at its limit.
  uint64_t max_bytes = uint64_t{256} << 20;
  // A file is closed, and the next one started, before it would hold more than this (a single
  // larger record gets a file of its own). 0: max_bytes/8; at most max_bytes.
  uint64_t file_bytes = 0;
  // false: Secret data and stringData values are recorded as digests (recording.h).
  bool secret_data = false;
  // Serialized records waiting for the writer; beyond it records are dropped and counted.
  uint64_t max_pending_bytes = uint64_t{64} << 20;
  // true: the writer runs only on CPU time nothing else wants (SCHED_IDLE), so that writing
  // never slows the serving path; on a machine the reconciles keep busy, its queue fills and
  // records are dropped (counted, logged). false: it competes for CPU like the reconciles.
  bool idle_cpu = true;
  common::Clock* clock = nullptr;  // borrowed; nullptr: Clock::Real()
};

class Recorder : public ReconcileRecorder {
 public:
  // Creates `options.dir`, continues after the files it already holds, and opens the first file
  // (so a directory that cannot be written is an error here, not a stream of dropped records).
  // `header` names the operator, plugin and controller; format, created and secret_data are set
  // here. InvalidArgument for bad options, the OS's error for the directory.
  static absl::StatusOr<std::unique_ptr<Recorder>> Start(RecorderOptions options,
                                                         pluginpb::RecordingHeader header);
  // Writes what is queued, closes the file and joins the writer.
  ~Recorder() override;
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // The call as the record's `call` field, Secrets redacted unless opted in, after room for the
  // frame's head: Record appends the rest of the record to it.
  std::string Capture(const pluginpb::ReconcileCall& call) override;
  // `captured_call` must come from this recorder's Capture.
  void Record(std::string captured_call, DispatchResult answer, const ApplyOutcome& outcome,
              absl::Duration took) override;

  struct Figures {
    std::string dir;
    uint64_t recorded = 0;       // records written
    uint64_t dropped = 0;        // records dropped (queue full, or a write failed)
    uint64_t bytes_written = 0;  // by this recorder, all files
    uint64_t files = 0;          // in the directory now
    uint64_t directory_bytes = 0;
    std::string current_file;
    std::string last_error;  // the last write error, "" when none
  };
  Figures figures() const;
  // Blocks until everything queued before the call is written (tests, and stopping).
  void Flush();

 private:
  Recorder(RecorderOptions options, pluginpb::RecordingHeader header);
  absl::Status ScanDirectory();
  absl::Status OpenNextFile();
  void CloseFile();
  void EnforceBudget();
  void WriterLoop();
  // A record's frame: the bytes from `offset` on (the varint length and the sequence field are
  // put in front of the serialized record, in room left for them, under mu_).
  struct Frame {
    std::string bytes;
    size_t offset = 0;
    size_t size() const { return bytes.size() - offset; }
  };
  void WriteBatch(std::deque<Frame>& batch);
  void NoteWriteError(const std::string& error, uint64_t lost);

  const RecorderOptions options_;
  common::Clock* const clock_;
  const bool primary_is_secret_;
  pluginpb::RecordingHeader header_;  // immutable after Start

  // The writer thread's alone (and Start's, before the thread runs).
  struct FileEntry {
    std::string path;
    uint64_t bytes = 0;
    uint64_t header_bytes = 0;  // the magic and header at its start
  };
  std::deque<FileEntry> files_;  // oldest first; the back is the open file
  std::FILE* file_ = nullptr;
  uint64_t next_index_ = 1;

  common::LogLimiter error_log_;
  mutable common::Mutex mu_;
  common::CondVar cv_;
  std::deque<Frame> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t writing_ ABSL_GUARDED_BY(mu_) = 0;  // records taken by the writer, not yet written
  int flushes_ ABSL_GUARDED_BY(mu_) = 0;       // Flush calls waiting: write at once
  // The writer gathers records for up to kBatchWait or kBatchBytes before it writes them.
  static constexpr absl::Duration kBatchWait = absl::Milliseconds(5);
  static constexpr uint64_t kBatchBytes = uint64_t{256} << 10;
  // Buffers of written frames, for Capture to fill again: a frame is allocated on a worker's
  // thread and would be freed on the writer's, and glibc's malloc makes such a free take the
  // worker's arena lock, contending with the serving path. The writer hands a batch's buffers
  // over when the last ones are used up (else frees them); at most kMaxSpareBytes of capacity.
  std::vector<std::string> spare_ ABSL_GUARDED_BY(mu_);
  uint64_t spare_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  static constexpr uint64_t kMaxSpareBytes = uint64_t{4} << 20;
  static constexpr size_t kMaxSpareBuffer = size_t{64} << 10;  // a larger one is freed
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Figures figures_ ABSL_GUARDED_BY(mu_);
  std::thread writer_;  // last: starts after everything above is initialised
};

// HostAction of an ApplyOutcome (what the runner did with an answer).
pluginpb::HostAction ToHostAction(const ApplyOutcome& outcome);

}  // namespace ctrlhost::controller::record

#endif  // CTRLHOST_RUNTIME_CONTROLLER_RECORD_RECORDER_H_
