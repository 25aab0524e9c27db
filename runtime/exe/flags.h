// A small declarative command-line flag library for the `ctrlhost` executable.
//
// Each subcommand declares its own FlagSet: typed flags bound to the caller's variables, the
// positional arguments it takes, and a description. Parse() fills the variables and returns a
// precise, user-facing error for every mistake; HelpText() renders the usage line, the
// description and every flag with its default and meaning.
//
// Why not absl flags: they are process-global (one namespace for the whole binary) and have no
// notion of subcommands, so `ctrlhost run --port` and `ctrlhost apiserver --port` could not
// mean different things, and help could not be per subcommand.
//
//   std::string file;
//   int64_t port = 6443;
//   FlagSet flags("ctrlhost run", "Runs the operators described in FILE.");
//   flags.AddString("file", &file, "Operator file or directory").Short('f').Required();
//   flags.AddInt("port", &port, 0, 65535, "Port to listen on; 0 picks a free port");
//   absl::StatusOr<ParseOutcome> outcome = flags.Parse(args);
//   if (!outcome.ok()) { ... print outcome.status().message(), exit 2 ... }
//   if (*outcome == ParseOutcome::kHelp) { std::cout << flags.HelpText(); ... exit 0 ... }
//
// Accepted forms: `--name value`, `--name=value`, `-n value`, `-n=value`; booleans as `--name`,
// `--name=true|false` and `--no-name`; `--` ends the flags (everything after it is positional);
// flags and positional arguments may be interleaved. `-h` and `--help` are always defined. A
// flag given twice keeps the last value, except repeated flags, which accumulate.
//
// Error messages (absl::InvalidArgumentError, message meant for the user as is):
//   unknown flag --kubconfig for "ctrlhost run" (did you mean --kubeconfig?)
//   invalid value "abc" for --port: not an integer
//   --port must be between 1 and 65535, got 70000
//   missing required flag --file for "ctrlhost run"
//   unexpected argument "x" for "ctrlhost run"
//
// Thread-compatible: a FlagSet is built and parsed on one thread; the bound variables belong to
// the caller and must outlive the FlagSet.
#ifndef CTRLHOST_RUNTIME_EXE_FLAGS_H_
#define CTRLHOST_RUNTIME_EXE_FLAGS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ctrlhost::exe {

// Process exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the command ran and failed
inline constexpr int kExitUsage = 2;    // bad command line: nothing was done

enum class ParseOutcome {
  kOk,    // flags parsed; run the command
  kHelp,  // -h/--help was given; print HelpText() and exit 0
};

// One declared flag. Returned by the FlagSet::Add* methods for chained options; owned by its
// FlagSet. Thread-compatible.
class Flag {
 public:
  enum class Type { kString, kInt, kBool, kDuration, kStrings, kEnum };

  Flag(const Flag&) = delete;
  Flag& operator=(const Flag&) = delete;

  // A one-letter alias: Short('f') accepts `-f`.
  Flag& Short(char letter);
  // Parse() fails when the flag is absent.
  Flag& Required();
  // The placeholder shown in help (`--file PATH`); defaults to the type's (STRING, INT, ...).
  Flag& ValueName(absl::string_view name);
  // Overrides the default shown in help, for defaults computed later (e.g. "<data-dir>/x").
  Flag& DefaultText(absl::string_view text);
  // For duration flags: the smallest accepted value (default: no lower bound).
  Flag& MinDuration(absl::Duration min);

  const std::string& name() const { return name_; }
  Type type() const { return type_; }

 private:
  friend class FlagSet;
  Flag(std::string name, Type type, std::string help, std::string section)
      : name_(std::move(name)), type_(type), help_(std::move(help)), section_(std::move(section)) {}

  // Parses `text` into the bound variable.
  absl::Status Set(absl::string_view text);
  std::string Placeholder() const;
  std::string DefaultForHelp() const;

  std::string name_;
  Type type_;
  std::string help_;
  std::string section_;
  char short_ = 0;
  bool required_ = false;
  bool seen_ = false;
  std::string value_name_;
  std::string default_text_;
  bool has_default_text_ = false;

  std::string* string_value_ = nullptr;  // kString, kEnum
  int64_t* int_value_ = nullptr;
  int64_t int_min_ = 0;
  int64_t int_max_ = 0;
  bool* bool_value_ = nullptr;
  absl::Duration* duration_value_ = nullptr;
  bool has_min_duration_ = false;
  absl::Duration min_duration_;
  std::vector<std::string>* strings_value_ = nullptr;
  std::vector<std::string> allowed_;  // kEnum
  std::string initial_;               // the default, rendered when the flag was added
};

// The flags and positional arguments of one (sub)command. Thread-compatible: build and parse on
// one thread.
class FlagSet {
 public:
  // `command` is the full command as typed ("ctrlhost plugin swap"); it appears in errors and
  // in the usage line. `description` is the paragraph printed under the usage line.
  FlagSet(std::string command, std::string description);
  FlagSet(const FlagSet&) = delete;
  FlagSet& operator=(const FlagSet&) = delete;

  // Each Add* binds a flag named `name` (without dashes) to `*value`, whose current content is
  // the default. `name` must be unique in the set (a duplicate is a programming error).
  Flag& AddString(absl::string_view name, std::string* value, absl::string_view help);
  // Accepts integers in [min, max].
  Flag& AddInt(absl::string_view name, int64_t* value, int64_t min, int64_t max,
               absl::string_view help);
  Flag& AddBool(absl::string_view name, bool* value, absl::string_view help);
  // absl::ParseDuration syntax: "30s", "1m30s", "250ms".
  Flag& AddDuration(absl::string_view name, absl::Duration* value, absl::string_view help);
  // Repeatable: every occurrence appends. A default content is replaced, not appended to.
  Flag& AddStrings(absl::string_view name, std::vector<std::string>* values,
                   absl::string_view help);
  // A string restricted to `allowed`.
  Flag& AddEnum(absl::string_view name, std::string* value, std::vector<std::string> allowed,
                absl::string_view help);

  // Flags added after this call are listed under `title` in help ("Common flags").
  void BeginSection(absl::string_view title);

  // Declares the positional arguments: between `min` and `max` of them (max < 0: unbounded),
  // described by `usage` in the usage line ("NAME", "[FILE...]"), stored in `*values`.
  // Without this call, no positional argument is accepted.
  void SetPositionals(absl::string_view usage, int min, int max, std::vector<std::string>* values);

  // Parses `args` (the arguments after the command words). On error the bound variables may be
  // partially set.
  absl::StatusOr<ParseOutcome> Parse(const std::vector<std::string>& args);

  // True when the flag appeared on the command line during the last Parse().
  bool IsSet(absl::string_view name) const;

  std::string HelpText() const;
  const std::string& command() const { return command_; }

 private:
  Flag& Add(absl::string_view name, Flag::Type type, absl::string_view help);
  Flag* FindLong(absl::string_view name) const;
  Flag* FindShort(char letter) const;
  std::string Suggest(absl::string_view unknown) const;

  const std::string command_;
  const std::string description_;
  std::string section_;
  std::vector<std::unique_ptr<Flag>> flags_;
  std::string positional_usage_;
  int positional_min_ = 0;
  int positional_max_ = 0;
  std::vector<std::string>* positionals_ = nullptr;
};

// Edit distance between two strings for "did you mean": insertions, deletions, substitutions
// and transpositions of adjacent characters ("prot" → "port") each count as one.
int EditDistance(absl::string_view a, absl::string_view b);

// The closest of `candidates` to `word` when it is close enough to be a likely typo, else "".
std::string ClosestMatch(absl::string_view word, const std::vector<std::string>& candidates);

}  // namespace ctrlhost::exe

#endif  // CTRLHOST_RUNTIME_EXE_FLAGS_H_
