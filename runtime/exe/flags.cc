#include "runtime/exe/flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ctrlhost::exe {
namespace {

constexpr int kHelpWidth = 100;

std::string Quote(absl::string_view text) { return absl::StrCat("\"", text, "\""); }

// Appends `text` word-wrapped to `width` columns, continuation lines indented by `indent`.
void AppendWrapped(std::string* out, absl::string_view text, size_t first_column, size_t indent,
                   size_t width) {
  size_t column = first_column;
  bool first_word = true;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!first_word && column + 1 + word.size() > width) {
      absl::StrAppend(out, "\n", std::string(indent, ' '));
      column = indent;
    } else if (!first_word) {
      out->push_back(' ');
      ++column;
    }
    absl::StrAppend(out, word);
    column += word.size();
    first_word = false;
  }
}

}  // namespace

int EditDistance(absl::string_view a, absl::string_view b) {
  // Optimal string alignment distance: a full table, since the transposition step looks two
  // rows back. Inputs are flag and command names, so the table is tiny.
  std::vector<std::vector<int>> d(a.size() + 1, std::vector<int>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string ClosestMatch(absl::string_view word, const std::vector<std::string>& candidates) {
  // A typo changes a few characters; allow about one edit per three characters, at least one.
  const int limit = std::max<int>(1, static_cast<int>(word.size()) / 3);
  std::string best;
  int best_distance = limit + 1;
  for (const std::string& candidate : candidates) {
    int distance = EditDistance(word, candidate);
    // A prefix ("kube" for "kubeconfig") is also a likely intent.
    if (distance > limit && word.size() >= 3 && absl::StartsWith(candidate, word)) {
      distance = limit;
    }
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// Flag

Flag& Flag::Short(char letter) {
  short_ = letter;
  return *this;
}

Flag& Flag::Required() {
  required_ = true;
  return *this;
}

Flag& Flag::ValueName(absl::string_view name) {
  value_name_ = std::string(name);
  return *this;
}

Flag& Flag::DefaultText(absl::string_view text) {
  default_text_ = std::string(text);
  has_default_text_ = true;
  return *this;
}

Flag& Flag::MinDuration(absl::Duration min) {
  has_min_duration_ = true;
  min_duration_ = min;
  return *this;
}

absl::Status Flag::Set(absl::string_view text) {
  const std::string flag = absl::StrCat("--", name_);
  switch (type_) {
    case Type::kString:
      *string_value_ = std::string(text);
      return absl::OkStatus();
    case Type::kStrings:
      if (!seen_) strings_value_->clear();  // the first occurrence replaces the default
      strings_value_->push_back(std::string(text));
      return absl::OkStatus();
    case Type::kEnum:
      if (std::find(allowed_.begin(), allowed_.end(), text) == allowed_.end()) {
        return absl::InvalidArgumentError(absl::StrCat("invalid value ", Quote(text), " for ", flag,
                                                       ": must be one of ",
                                                       absl::StrJoin(allowed_, ", ")));
      }
      *string_value_ = std::string(text);
      return absl::OkStatus();
    case Type::kInt: {
      int64_t value = 0;
      if (!absl::SimpleAtoi(text, &value)) {
        // SimpleAtoi also fails on overflow; say which.
        bool digits = !text.empty() && std::all_of(text.begin() + (text[0] == '-' ? 1 : 0),
                                                   text.end(), absl::ascii_isdigit);
        if (digits && text != "-") {
          return absl::InvalidArgumentError(
              absl::StrCat(flag, " must be between ", int_min_, " and ", int_max_, ", got ", text));
        }
        return absl::InvalidArgumentError(
            absl::StrCat("invalid value ", Quote(text), " for ", flag, ": not an integer"));
      }
      if (value < int_min_ || value > int_max_) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, " must be between ", int_min_, " and ", int_max_, ", got ", value));
      }
      *int_value_ = value;
      return absl::OkStatus();
    }
    case Type::kBool: {
      std::string lower = absl::AsciiStrToLower(text);
      if (lower == "true" || lower == "1" || lower == "yes") {
        *bool_value_ = true;
      } else if (lower == "false" || lower == "0" || lower == "no") {
        *bool_value_ = false;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("invalid value ", Quote(text), " for ", flag, ": must be true or false"));
      }
      return absl::OkStatus();
    }
    case Type::kDuration: {
      absl::Duration value;
      if (!absl::ParseDuration(text, &value) || value == absl::InfiniteDuration() ||
          value == -absl::InfiniteDuration()) {
        return absl::InvalidArgumentError(absl::StrCat("invalid value ", Quote(text), " for ", flag,
                                                       ": not a duration (e.g. 30s, 1m30s)"));
      }
      if (has_min_duration_ && value < min_duration_) {
        return absl::InvalidArgumentError(absl::StrCat(
            flag, " must be at least ", absl::FormatDuration(min_duration_), ", got ", text));
      }
      *duration_value_ = value;
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unhandled flag type");
}

std::string Flag::Placeholder() const {
  if (!value_name_.empty()) return value_name_;
  switch (type_) {
    case Type::kString:
    case Type::kStrings:
      return "STRING";
    case Type::kInt:
      return "INT";
    case Type::kBool:
      return "";
    case Type::kDuration:
      return "DURATION";
    case Type::kEnum: {
      // Short lists read best inline (`--output yaml|json`); long ones go to the notes.
      std::string inline_list = absl::StrJoin(allowed_, "|");
      return inline_list.size() <= 16 ? inline_list : "VALUE";
    }
  }
  return "";
}

std::string Flag::DefaultForHelp() const {
  if (has_default_text_) return default_text_;
  return initial_;
}

// ---------------------------------------------------------------------------------------------
// FlagSet

FlagSet::FlagSet(std::string command, std::string description)
    : command_(std::move(command)), description_(std::move(description)) {}

Flag& FlagSet::Add(absl::string_view name, Flag::Type type, absl::string_view help) {
  if (name == "help" || FindLong(name) != nullptr) {
    // A programming error in a command's declaration, caught by its tests.
    std::fprintf(stderr, "flag --%s declared twice in \"%s\"\n", std::string(name).c_str(),
                 command_.c_str());
    std::abort();
  }
  flags_.push_back(
      std::unique_ptr<Flag>(new Flag(std::string(name), type, std::string(help), section_)));
  return *flags_.back();
}

Flag& FlagSet::AddString(absl::string_view name, std::string* value, absl::string_view help) {
  Flag& flag = Add(name, Flag::Type::kString, help);
  flag.string_value_ = value;
  if (!value->empty()) flag.initial_ = Quote(*value);
  return flag;
}

Flag& FlagSet::AddInt(absl::string_view name, int64_t* value, int64_t min, int64_t max,
                      absl::string_view help) {
  Flag& flag = Add(name, Flag::Type::kInt, help);
  flag.int_value_ = value;
  flag.int_min_ = min;
  flag.int_max_ = max;
  // A default outside the range means "not given" (e.g. no canary): not shown as a default.
  if (*value >= min && *value <= max) flag.initial_ = absl::StrCat(*value);
  return flag;
}

Flag& FlagSet::AddBool(absl::string_view name, bool* value, absl::string_view help) {
  Flag& flag = Add(name, Flag::Type::kBool, help);
  flag.bool_value_ = value;
  if (*value) flag.initial_ = "true";
  return flag;
}

Flag& FlagSet::AddDuration(absl::string_view name, absl::Duration* value, absl::string_view help) {
  Flag& flag = Add(name, Flag::Type::kDuration, help);
  flag.duration_value_ = value;
  flag.initial_ = absl::FormatDuration(*value);
  return flag;
}

Flag& FlagSet::AddStrings(absl::string_view name, std::vector<std::string>* values,
                          absl::string_view help) {
  Flag& flag = Add(name, Flag::Type::kStrings, help);
  flag.strings_value_ = values;
  if (!values->empty()) flag.initial_ = absl::StrJoin(*values, ",");
  return flag;
}

Flag& FlagSet::AddEnum(absl::string_view name, std::string* value, std::vector<std::string> allowed,
                       absl::string_view help) {
  Flag& flag = Add(name, Flag::Type::kEnum, help);
  flag.string_value_ = value;
  flag.allowed_ = std::move(allowed);
  if (!value->empty()) flag.initial_ = *value;
  return flag;
}

void FlagSet::BeginSection(absl::string_view title) { section_ = std::string(title); }

void FlagSet::SetPositionals(absl::string_view usage, int min, int max,
                             std::vector<std::string>* values) {
  positional_usage_ = std::string(usage);
  positional_min_ = min;
  positional_max_ = max;
  positionals_ = values;
}

Flag* FlagSet::FindLong(absl::string_view name) const {
  for (const auto& flag : flags_) {
    if (flag->name_ == name) return flag.get();
  }
  return nullptr;
}

Flag* FlagSet::FindShort(char letter) const {
  for (const auto& flag : flags_) {
    if (flag->short_ == letter) return flag.get();
  }
  return nullptr;
}

std::string FlagSet::Suggest(absl::string_view unknown) const {
  std::vector<std::string> names = {"help"};
  for (const auto& flag : flags_) {
    names.push_back(flag->name_);
    if (flag->type_ == Flag::Type::kBool) names.push_back(absl::StrCat("no-", flag->name_));
  }
  std::string best = ClosestMatch(unknown, names);
  return best.empty() ? "" : absl::StrCat(" (did you mean --", best, "?)");
}

bool FlagSet::IsSet(absl::string_view name) const {
  const Flag* flag = FindLong(name);
  return flag != nullptr && flag->seen_;
}

absl::StatusOr<ParseOutcome> FlagSet::Parse(const std::vector<std::string>& args) {
  for (auto& flag : flags_) flag->seen_ = false;
  std::vector<std::string> positionals;
  bool help = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      positionals.insert(positionals.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {  // "x" and "-" (stdin) are positional
      positionals.push_back(arg);
      continue;
    }
    const bool is_long = absl::StartsWith(arg, "--");
    absl::string_view body = absl::string_view(arg).substr(is_long ? 2 : 1);
    absl::string_view name = body;
    std::optional<absl::string_view> inline_value;
    if (size_t eq = body.find('='); eq != absl::string_view::npos) {
      name = body.substr(0, eq);
      inline_value = body.substr(eq + 1);
    }
    const std::string shown = absl::StrCat(is_long ? "--" : "-", name);

    if ((is_long && name == "help") || (!is_long && name == "h")) {
      if (inline_value.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat(shown, " takes no value for ", Quote(command_)));
      }
      help = true;
      continue;
    }

    Flag* flag = nullptr;
    bool negated = false;
    if (is_long) {
      flag = FindLong(name);
      if (flag == nullptr && absl::StartsWith(name, "no-")) {
        Flag* positive = FindLong(name.substr(3));
        if (positive != nullptr && positive->type_ == Flag::Type::kBool) {
          flag = positive;
          negated = true;
        }
      }
    } else if (name.size() == 1) {
      flag = FindShort(name[0]);
    }
    if (flag == nullptr) {
      std::string hint;
      if (!is_long && name.size() > 1 && FindLong(name) != nullptr) {
        hint = absl::StrCat(" (did you mean --", name, "?)");
      } else {
        hint = Suggest(name);
      }
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag ", shown, " for ", Quote(command_), hint));
    }

    if (flag->type_ == Flag::Type::kBool) {
      if (negated) {
        if (inline_value.has_value()) {
          return absl::InvalidArgumentError(
              absl::StrCat(shown, " takes no value; use --", flag->name_, "=",
                           *inline_value == "true" ? "false" : "true"));
        }
        *flag->bool_value_ = false;
      } else if (inline_value.has_value()) {
        absl::Status status = flag->Set(*inline_value);
        if (!status.ok()) return status;
      } else {
        *flag->bool_value_ = true;
      }
      flag->seen_ = true;
      continue;
    }

    absl::string_view value;
    if (inline_value.has_value()) {
      value = *inline_value;
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", flag->name_, " needs a value (", flag->Placeholder(), ")"));
    }
    absl::Status status = flag->Set(value);
    if (!status.ok()) return status;
    flag->seen_ = true;
  }

  // Help wins over every other problem: a user asking for help gets it.
  if (help) return ParseOutcome::kHelp;

  for (const auto& flag : flags_) {
    if (flag->required_ && !flag->seen_) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing required flag --", flag->name_, " for ", Quote(command_)));
    }
  }
  const int count = static_cast<int>(positionals.size());
  if (positional_max_ >= 0 && count > positional_max_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unexpected argument ", Quote(positionals[positional_max_]), " for ", Quote(command_)));
  }
  if (count < positional_min_) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quote(command_), " needs ", positional_min_,
                     positional_min_ == 1 ? " argument" : " arguments", " (", positional_usage_,
                     "), got ", count));
  }
  if (positionals_ != nullptr) *positionals_ = std::move(positionals);
  return ParseOutcome::kOk;
}

std::string FlagSet::HelpText() const {
  std::string out = absl::StrCat("Usage: ", command_, " [flags]");
  if (!positional_usage_.empty()) absl::StrAppend(&out, " ", positional_usage_);
  absl::StrAppend(&out, "\n\n");
  if (!description_.empty()) {
    for (absl::string_view paragraph : absl::StrSplit(description_, '\n')) {
      AppendWrapped(&out, paragraph, 0, 0, kHelpWidth);
      absl::StrAppend(&out, "\n");
    }
    absl::StrAppend(&out, "\n");
  }

  struct Row {
    std::string left;
    std::string right;
    std::string section;
  };
  std::vector<Row> rows;
  for (const auto& flag : flags_) {
    std::string left = flag->short_ != 0 ? absl::StrCat("-", std::string(1, flag->short_), ", ")
                                         : std::string("    ");
    absl::StrAppend(&left, "--", flag->name_);
    std::string placeholder = flag->Placeholder();
    if (!placeholder.empty()) absl::StrAppend(&left, " ", placeholder);
    std::string right = flag->help_;
    std::vector<std::string> notes;
    if (flag->required_) notes.push_back("required");
    if (flag->type_ == Flag::Type::kStrings) notes.push_back("repeatable");
    if (flag->type_ == Flag::Type::kEnum && placeholder != absl::StrJoin(flag->allowed_, "|")) {
      notes.push_back(absl::StrCat("one of ", absl::StrJoin(flag->allowed_, ", ")));
    }
    std::string default_text = flag->DefaultForHelp();
    if (flag->type_ == Flag::Type::kInt) {
      constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
      constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
      if (flag->int_max_ == kMax && flag->int_min_ != kMin) {
        notes.push_back(absl::StrCat(">= ", flag->int_min_));
      } else if (flag->int_min_ == kMin && flag->int_max_ != kMax) {
        notes.push_back(absl::StrCat("<= ", flag->int_max_));
      } else if (flag->int_min_ != kMin) {
        notes.push_back(absl::StrCat(flag->int_min_, "..", flag->int_max_));
      }
    }
    if (!default_text.empty() && !flag->required_) {
      notes.push_back(absl::StrCat("default ", default_text));
    }
    if (!notes.empty()) absl::StrAppend(&right, " (", absl::StrJoin(notes, "; "), ")");
    rows.push_back({std::move(left), std::move(right), flag->section_});
  }
  // -h/--help is listed with the common flags when the command has them, else last.
  bool has_common = std::any_of(rows.begin(), rows.end(),
                                [](const Row& r) { return r.section == "Common flags"; });
  rows.push_back({"-h, --help", "Show this help and exit",
                  has_common ? "Common flags" : (rows.empty() ? "" : rows.back().section)});

  size_t width = 0;
  for (const Row& row : rows) width = std::max(width, row.left.size());
  const size_t column = 2 + width + 3;

  std::vector<std::string> sections;
  for (const Row& row : rows) {
    if (std::find(sections.begin(), sections.end(), row.section) == sections.end()) {
      sections.push_back(row.section);
    }
  }
  for (const std::string& section : sections) {
    absl::StrAppend(&out, section.empty() ? "Flags" : section, ":\n");
    for (const Row& row : rows) {
      if (row.section != section) continue;
      absl::StrAppend(&out, "  ", row.left, std::string(column - 2 - row.left.size(), ' '));
      AppendWrapped(&out, row.right, column, column, kHelpWidth);
      absl::StrAppend(&out, "\n");
    }
    absl::StrAppend(&out, "\n");
  }
  // One trailing newline, not two.
  out.pop_back();
  return out;
}

}  // namespace ctrlhost::exe
