#include "runtime/exe/cmd_replay.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/common/mutex.h"
#include "runtime/common/proto_time.h"
#include "runtime/controller/record/recording.h"
#include "runtime/controller/record/replay.h"
#include "runtime/exe/cmd_offline.h"
#include "runtime/exe/command.h"
#include "runtime/exe/flags.h"

namespace ctrlhost::exe {
namespace {

namespace record = controller::record;

struct ReplayFlags {
  std::string recording, command, controller;
  std::vector<std::string> args, env;
  bool update = false;
  bool ignore_cut_tail = false;
  int64_t in_flight = 16;
  int64_t max_differences = 20;
  absl::Duration timeout = absl::Seconds(30);
  absl::Duration ready_timeout = absl::Seconds(30);
};

void AddReplayFlags(FlagSet& flags, ReplayFlags& f) {
  flags
      .AddString("recording", &f.recording,
                 "A recording: a directory of *.ctrlrec files, a directory with one such "
                 "directory per controller (then --controller), or one file")
      .ValueName("PATH")
      .Required();
  flags.AddString("command", &f.command, "Plugin executable (path, or name in PATH)")
      .ValueName("CMD")
      .Required();
  flags.AddStrings("arg", &f.args, "Argument for --command, in order").ValueName("ARG");
  flags.AddStrings("env", &f.env, "Environment variable for --command").ValueName("KEY=VALUE");
  flags
      .AddString("controller", &f.controller,
                 "The controller whose recording to replay (default: the only one recorded)")
      .ValueName("NAME");
  flags.AddBool("update", &f.update,
                "Write the new answers into the recording as the expected ones");
  flags.AddBool("ignore-cut-tail", &f.ignore_cut_tail,
                "Replay a recording whose last record is cut short (its host was killed while "
                "writing it) without that record, instead of failing");
  flags.AddInt("in-flight", &f.in_flight, 1, 1024, "Calls at the plugin at once").ValueName("N");
  flags
      .AddInt("max-differences", &f.max_differences, 0, 1000000,
              "Differences printed in full (all are counted)")
      .ValueName("N");
  flags.AddDuration("timeout", &f.timeout, "Deadline for each answer")
      .MinDuration(absl::Milliseconds(1));
  flags
      .AddDuration("ready-timeout", &f.ready_timeout,
                   "Deadline for the plugin to start and answer Describe and health")
      .MinDuration(absl::Milliseconds(1));
}

struct Totals {
  uint64_t compared = 0, same = 0, different = 0, failed = 0, skipped = 0, printed = 0;
};

// One recorded call sent again, and its new answer.
struct Slot {
  pluginpb::ReconcileRecord record;
  uint64_t offset = 0;
  // Recorded without an answer: not sent, kept in its place (--update keeps the order).
  bool skipped = false;
  absl::Time deadline;
  // Set once, under Answers::mu, by the plugin's callback or by the replay giving up on it;
  // read by the replay thread after it saw it set.
  std::optional<controller::DispatchResult> answer;
};

// Where the plugin's callbacks put their answers; shared with callbacks that may come after a
// wedged plugin was given up on. Thread-safe: `mu` guards every slot's `answer`.
struct Answers {
  common::Mutex mu;
  common::CondVar cv;
};

std::string KeyOf(const pluginpb::ReconcileCall& call) {
  return call.namespace_().empty() ? call.name()
                                   : absl::StrCat(call.namespace_(), "/", call.name());
}

// Replays one file; with `updated` set, collects every record with its new answer.
class FileReplay {
 public:
  FileReplay(const ReplayFlags& f, OfflinePlugin& plugin, std::ostream& out, Totals& totals)
      : f_(f), plugin_(plugin), out_(out), totals_(totals) {}

  // Keeps up to --in-flight calls at the plugin (a new one is sent as soon as the oldest is
  // judged), and judges the answers in the recording's order.
  absl::Status Run(record::RecordingReader& reader, bool last_file,
                   std::vector<pluginpb::ReconcileRecord>* updated) {
    const record::ReplayJudge judge(reader.header());
    auto answers = std::make_shared<Answers>();
    std::deque<std::shared_ptr<Slot>> window;  // in the recording's order
    size_t sent = 0;                           // in the window and not skipped
    bool more = true;
    absl::Status read_error;
    while (true) {
      while (more && sent < static_cast<size_t>(f_.in_flight)) {
        absl::StatusOr<std::shared_ptr<Slot>> next = Next(reader, last_file, more);
        if (!next.ok()) {
          read_error = next.status();  // what was read before is still replayed
          more = false;
          break;
        }
        if (*next == nullptr) break;
        if (!(*next)->skipped) {
          Send(answers, *next);
          ++sent;
        }
        window.push_back(*std::move(next));
      }
      if (window.empty()) return read_error;
      std::shared_ptr<Slot> oldest = std::move(window.front());
      window.pop_front();
      if (!oldest->skipped) {
        Await(*answers, *oldest);
        --sent;
      }
      Judge(reader, judge, *oldest, updated);
    }
  }

 private:
  // The next record of the file (nullptr at its end, `more` then false). A record cut short
  // at the end of the last file ends the replay with a warning under --ignore-cut-tail.
  absl::StatusOr<std::shared_ptr<Slot>> Next(record::RecordingReader& reader, bool last_file,
                                             bool& more) {
    absl::StatusOr<std::optional<pluginpb::ReconcileRecord>> next = reader.Next();
    if (!next.ok()) {
      if (absl::IsDataLoss(next.status()) && last_file && f_.ignore_cut_tail) {
        out_ << "warning: " << next.status().message() << " (ignored: --ignore-cut-tail)\n";
        more = false;
        return nullptr;
      }
      return next.status();
    }
    if (!next->has_value()) {
      more = false;
      return nullptr;
    }
    auto slot = std::make_shared<Slot>();
    slot->record = **std::move(next);
    slot->offset = reader.offset();
    slot->skipped = !slot->record.has_response();
    if (slot->skipped) ++totals_.skipped;
    return slot;
  }

  void Send(const std::shared_ptr<Answers>& answers, const std::shared_ptr<Slot>& slot) {
    slot->deadline = absl::Now() + f_.timeout;
    pluginpb::ReconcileCall call = slot->record.call();
    *call.mutable_deadline() = common::ToProtoTimestamp(slot->deadline);
    plugin_.Dispatch(std::move(call), slot->deadline,
                     [answers, slot](controller::DispatchResult result) {
                       common::MutexLock lock(&answers->mu);
                       if (slot->answer.has_value()) return;  // given up on
                       slot->answer = std::move(result);
                       answers->cv.SignalAll();
                     });
  }

  // Waits for `slot`'s answer. The plugin answers every dispatch by its deadline; the slack
  // covers a wedged one, whose call then counts as failed.
  static void Await(Answers& answers, Slot& slot) {
    common::MutexLock lock(&answers.mu);
    const absl::Time give_up = slot.deadline + absl::Seconds(10);
    while (!slot.answer.has_value()) {
      if (answers.cv.WaitWithDeadline(&answers.mu, give_up)) break;
    }
    if (!slot.answer.has_value()) slot.answer = absl::DeadlineExceededError("no answer");
  }

  void Judge(const record::RecordingReader& reader, const record::ReplayJudge& judge, Slot& item,
             std::vector<pluginpb::ReconcileRecord>* updated) {
    if (item.skipped) {
      if (updated != nullptr) updated->push_back(std::move(item.record));
      return;
    }
    ++totals_.compared;
    const bool answered = item.answer->response.ok();
    if (!answered) ++totals_.failed;
    controller::apply::OutcomeDiff diff = judge.Compare(item.record, *item.answer);
    if (diff.same) {
      ++totals_.same;
    } else {
      if (answered) ++totals_.different;
      Print(reader, item, diff);
    }
    if (updated == nullptr) return;
    if (answered) {
      pluginpb::ReconcileResponse fresh = *item.answer->response;
      if (!reader.header().secret_data()) {
        record::RedactSecrets(&fresh, record::PrimaryIsSecret(reader.header().controller()));
      }
      *item.record.mutable_response() = std::move(fresh);
    }
    updated->push_back(std::move(item.record));
  }

  void Print(const record::RecordingReader& reader, const Slot& item,
             const controller::apply::OutcomeDiff& diff) {
    if (totals_.printed >= static_cast<uint64_t>(f_.max_differences)) return;
    ++totals_.printed;
    const std::string where = absl::StrCat(std::filesystem::path(reader.path()).filename().string(),
                                           " offset ", item.offset, " (record ",
                                           item.record.sequence(), ") ", KeyOf(item.record.call()));
    if (!item.answer->response.ok()) {
      out_ << "failed: " << where
           << ": the plugin did not answer: " << item.answer->response.status().message() << "\n";
      return;
    }
    out_ << "different: " << where << ": " << diff.summary << "\n  "
         << diff.patch.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }

  const ReplayFlags& f_;
  OfflinePlugin& plugin_;
  std::ostream& out_;
  Totals& totals_;
};

// Rewrites `path` with the header and `records`, atomically (a temporary file renamed over it).
absl::Status Rewrite(const std::string& path, const pluginpb::RecordingHeader& header,
                     const std::vector<pluginpb::ReconcileRecord>& records) {
  const std::string tmp = absl::StrCat(path, ".update");
  {
    std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
    file << record::FileStart(header);
    for (const pluginpb::ReconcileRecord& r : records) file << record::Frame(r);
    file.flush();
    if (!file) return absl::DataLossError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::DataLossError(absl::StrCat("cannot replace ", path));
  }
  return absl::OkStatus();
}

// The recording's files, each checked to be of one controller: --controller's, else the first's.
absl::StatusOr<std::string> RecordedController(const std::vector<std::string>& files,
                                               const std::string& wanted) {
  std::string name = wanted;
  for (const std::string& file : files) {
    absl::StatusOr<std::unique_ptr<record::RecordingReader>> reader =
        record::RecordingReader::Open(file);
    if (!reader.ok()) return reader.status();
    const std::string& has = (*reader)->header().controller().name();
    if (name.empty()) name = has;
    if (has != name) {
      return absl::FailedPreconditionError(
          absl::StrCat(file, ": holds controller ", has, ", not ", name));
    }
  }
  return name;
}

int Replay(const ReplayFlags& f, const std::vector<std::string>& files, const std::string& name,
           OfflinePlugin& plugin, std::ostream& out, std::ostream& err) {
  Totals totals;
  FileReplay replay(f, plugin, out, totals);
  std::string operator_name, plugin_name;
  for (size_t i = 0; i < files.size(); ++i) {
    absl::StatusOr<std::unique_ptr<record::RecordingReader>> reader =
        record::RecordingReader::Open(files[i]);
    if (!reader.ok()) return Failure(reader.status().message(), err);
    operator_name = (*reader)->header().operator_();
    plugin_name = (*reader)->header().plugin();
    std::vector<pluginpb::ReconcileRecord> updated;
    absl::Status s = replay.Run(**reader, i + 1 == files.size(), f.update ? &updated : nullptr);
    if (!s.ok()) return Failure(s.message(), err);
    if (f.update) {
      if (absl::Status w = Rewrite(files[i], (*reader)->header(), updated); !w.ok()) {
        return Failure(w.message(), err);
      }
    }
  }
  out << "replayed " << totals.compared << " calls of controller " << name << " (operator "
      << operator_name << ", plugin " << plugin_name << ") from " << files.size()
      << (files.size() == 1 ? " file" : " files") << ": " << totals.same << " same, "
      << totals.different << " different, " << totals.failed << " failed, " << totals.skipped
      << " skipped (no recorded answer)\n";
  if (totals.printed < totals.different + totals.failed) {
    out << "(" << totals.different + totals.failed - totals.printed
        << " more differences not shown: --max-differences)\n";
  }
  if (f.update) {
    out << "updated: the new answers are the recorded ones now\n";
    return kExitOk;
  }
  return totals.different + totals.failed == 0 ? kExitOk : kExitFailure;
}

}  // namespace

int RunReplayCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FlagSet flags(
      "ctrlhost replay",
      "Sends every recorded call of a controller (ctrlhost run --record, or an operator file's "
      "spec.record) to a plugin started as \"ctrlhost test\" starts it, and compares each answer "
      "with the recorded one by what the host would do with it. Prints each difference (file, "
      "offset, key, the JSON patch from the recorded answer to the new one) and a summary. Exit "
      "codes: 0 no difference, 1 a difference, a plugin failure or an unreadable recording, 2 "
      "usage error.");
  ReplayFlags f;
  AddReplayFlags(flags, f);
  CommonFlags common;
  AddCommonFlags(flags, &common);
  if (std::optional<int> exit = ParseCommandLine(flags, common, args, out, err)) return *exit;
  auto usage = [&](absl::string_view message) { return UsageError(flags.command(), message, err); };
  if (f.recording.empty()) return usage("--recording must not be empty");
  if (f.command.empty()) return usage("--command must not be empty");
  std::vector<std::pair<std::string, std::string>> env;
  for (const std::string& pair : f.env) {
    std::pair<std::string, std::string> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
    if (kv.first.empty() || pair.find('=') == std::string::npos) {
      return usage(absl::StrCat("invalid value \"", pair, "\" for --env: expected KEY=VALUE"));
    }
    env.push_back(std::move(kv));
  }
  // The recording first: a wrong path should not cost a plugin start.
  absl::StatusOr<std::vector<std::string>> files = record::FindRecording(f.recording, f.controller);
  if (!files.ok()) return Failure(files.status().message(), err);
  absl::StatusOr<std::string> name = RecordedController(*files, f.controller);
  if (!name.ok()) return Failure(name.status().message(), err);

  absl::StatusOr<std::unique_ptr<OfflinePlugin>> plugin =
      OfflinePlugin::Start(f.command, f.args, env, f.ready_timeout);
  if (!plugin.ok()) return Failure(plugin.status().message(), err);
  std::vector<std::string> declared;
  for (const pluginpb::ControllerSpec& c : (*plugin)->describe().controllers()) {
    declared.push_back(c.name());
  }
  if (std::find(declared.begin(), declared.end(), *name) == declared.end()) {
    return Failure(absl::StrCat("plugin ", f.command, " does not declare controller ", *name,
                                " (it declares: ", absl::StrJoin(declared, ", "), ")"),
                   err);
  }
  return Replay(f, *files, *name, **plugin, out, err);
}

}  // namespace ctrlhost::exe
