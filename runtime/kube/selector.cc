#include "runtime/kube/selector.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/kube/api_status.h"
#include "runtime/kube/validation.h"

namespace ctrlhost::kube {
namespace {

// ---------------------------------------------------------------------------------------------
// Label selector lexer and parser, after apimachinery's pkg/labels/selector.go.

enum class Tok {
  kIdentifier,
  kDoesNotExist,  // !
  kEquals,        // =
  kDoubleEquals,  // ==
  kNotEquals,     // !=
  kGreaterThan,   // >
  kLessThan,      // <
  kOpenPar,
  kClosedPar,
  kComma,
  kIn,
  kNotIn,
  kEnd,
};

struct Token {
  Tok tok;
  std::string literal;
  size_t begin;  // byte offsets in the selector text
  size_t end;
};

bool IsWhitespace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

bool IsSpecial(char c) {
  return c == '=' || c == '!' || c == '(' || c == ')' || c == ',' || c == '>' || c == '<';
}

std::vector<Token> Lex(absl::string_view s) {
  std::vector<Token> tokens;
  size_t i = 0;
  while (true) {
    while (i < s.size() && IsWhitespace(s[i])) ++i;
    if (i >= s.size()) break;
    size_t begin = i;
    if (IsSpecial(s[i])) {
      absl::string_view two = s.substr(i, 2);
      Tok tok;
      if (two == "!=") {
        tok = Tok::kNotEquals;
      } else if (two == "==") {
        tok = Tok::kDoubleEquals;
      } else {
        switch (s[i]) {
          case '!':
            tok = Tok::kDoesNotExist;
            break;
          case '=':
            tok = Tok::kEquals;
            break;
          case '>':
            tok = Tok::kGreaterThan;
            break;
          case '<':
            tok = Tok::kLessThan;
            break;
          case '(':
            tok = Tok::kOpenPar;
            break;
          case ')':
            tok = Tok::kClosedPar;
            break;
          default:
            tok = Tok::kComma;
            break;
        }
      }
      i += (tok == Tok::kNotEquals || tok == Tok::kDoubleEquals) ? 2 : 1;
      tokens.push_back({tok, std::string(s.substr(begin, i - begin)), begin, i});
      continue;
    }
    while (i < s.size() && !IsWhitespace(s[i]) && !IsSpecial(s[i])) ++i;
    std::string word(s.substr(begin, i - begin));
    Tok tok = word == "in" ? Tok::kIn : word == "notin" ? Tok::kNotIn : Tok::kIdentifier;
    tokens.push_back({tok, std::move(word), begin, i});
  }
  tokens.push_back({Tok::kEnd, "", s.size(), s.size()});
  return tokens;
}

// Messages of a failed requirement, combined like apimachinery's ErrorList.ToAggregate.
std::string Aggregate(const std::vector<std::string>& errs) {
  if (errs.size() == 1) return errs[0];
  return absl::StrCat("[", absl::StrJoin(errs, ", "), "]");
}

// apimachinery's NewRequirement checks. `path` prefixes field paths ("" or
// "matchExpressions[0].").
std::vector<std::string> CheckRequirement(const LabelRequirement& r, absl::string_view path) {
  std::vector<std::string> errs;
  std::vector<std::string> key_errs = IsQualifiedName(r.key);
  if (!key_errs.empty()) {
    errs.push_back(absl::StrCat(path, "key: Invalid value: ", GoQuote(r.key), ": ",
                                absl::StrJoin(key_errs, "; ")));
  }
  std::string values_path = absl::StrCat(path, "values");
  auto values_json = [&r] { return nlohmann::json(r.values).dump(); };
  switch (r.op) {
    case SelectorOperator::kIn:
    case SelectorOperator::kNotIn:
      if (r.values.empty()) {
        errs.push_back(absl::StrCat(values_path, ": Invalid value: ", values_json(),
                                    ": for 'in', 'notin' operators, values set can't be empty"));
      }
      break;
    case SelectorOperator::kEquals:
    case SelectorOperator::kNotEquals:
      if (r.values.size() != 1) {
        errs.push_back(absl::StrCat(values_path, ": Invalid value: ", values_json(),
                                    ": exact-match compatibility requires one single value"));
      }
      break;
    case SelectorOperator::kExists:
    case SelectorOperator::kDoesNotExist:
      if (!r.values.empty()) {
        errs.push_back(absl::StrCat(values_path, ": Invalid value: ", values_json(),
                                    ": values set must be empty for exists and does not exist"));
      }
      break;
    case SelectorOperator::kGreaterThan:
    case SelectorOperator::kLessThan:
      if (r.values.size() != 1) {
        errs.push_back(absl::StrCat(values_path, ": Invalid value: ", values_json(),
                                    ": for 'Gt', 'Lt' operators, exactly one value is required"));
      }
      for (size_t i = 0; i < r.values.size(); ++i) {
        int64_t unused;
        if (!absl::SimpleAtoi(r.values[i], &unused) ||
            absl::StripAsciiWhitespace(r.values[i]) != r.values[i]) {
          errs.push_back(absl::StrCat(values_path, "[", i,
                                      "]: Invalid value: ", GoQuote(r.values[i]),
                                      ": for 'Gt', 'Lt' operators, the value must be an integer"));
        }
      }
      break;
  }
  for (size_t i = 0; i < r.values.size(); ++i) {
    std::vector<std::string> value_errs = IsValidLabelValue(r.values[i]);
    if (!value_errs.empty()) {
      errs.push_back(absl::StrCat(values_path, "[", i, "][", r.key, "]: Invalid value: ",
                                  GoQuote(r.values[i]), ": ", absl::StrJoin(value_errs, "; ")));
    }
  }
  return errs;
}

void NormalizeValues(std::vector<std::string>& values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
}

// Strict base-10 int64, like Go's strconv.ParseInt (sign allowed, nothing else).
std::optional<int64_t> ParseInt64(absl::string_view s) {
  if (s.empty() || absl::StripAsciiWhitespace(s) != s) return std::nullopt;
  int64_t value;
  if (!absl::SimpleAtoi(s, &value)) return std::nullopt;
  return value;
}

class LabelParser {
 public:
  explicit LabelParser(absl::string_view text) : text_(text), tokens_(Lex(text)) {}

  absl::StatusOr<std::vector<LabelRequirement>> Parse() {
    std::vector<LabelRequirement> requirements;
    while (true) {
      const Token& next = Peek(/*values=*/true);
      Tok tok = Kind(next, /*values=*/true);
      if (tok == Tok::kEnd) return requirements;
      if (tok != Tok::kIdentifier && tok != Tok::kDoesNotExist) {
        return Error(absl::StrCat("found '", next.literal,
                                  "', expected: !, identifier, or 'end of string'"));
      }
      size_t begin = next.begin;
      std::string why;
      std::optional<LabelRequirement> r = ParseRequirement(why);
      if (!r.has_value()) {
        size_t end = tokens_[std::min(pos_, tokens_.size() - 1)].end;
        std::string requirement(absl::StripAsciiWhitespace(text_.substr(begin, end - begin)));
        return BadRequestError(
            absl::StrCat("unable to parse requirement ", GoQuote(requirement), ": ", why));
      }
      std::string previous = r->ToString();
      requirements.push_back(*std::move(r));
      const Token& after = Consume(/*values=*/true);
      Tok after_tok = Kind(after, true);
      if (after_tok == Tok::kEnd) return requirements;
      if (after_tok == Tok::kComma) {
        const Token& following = Peek(true);
        Tok following_tok = Kind(following, true);
        if (following_tok != Tok::kIdentifier && following_tok != Tok::kDoesNotExist) {
          return Error(
              absl::StrCat("found '", following.literal, "', expected: identifier after ','"));
        }
        continue;
      }
      return Error(absl::StrCat("found '", after.literal,
                                "', expected: ',' or 'end of string' after requirement ",
                                GoQuote(previous)));
    }
  }

 private:
  // In a value position the keywords in/notin are plain identifiers.
  static Tok Kind(const Token& t, bool values) {
    if (values && (t.tok == Tok::kIn || t.tok == Tok::kNotIn)) return Tok::kIdentifier;
    return t.tok;
  }
  const Token& Peek(bool values) const { return tokens_[pos_]; }
  const Token& Consume(bool values) {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;  // kEnd stays current
    return t;
  }
  absl::Status Error(absl::string_view message) const { return BadRequestError(message); }

  std::optional<LabelRequirement> ParseRequirement(std::string& why) {
    LabelRequirement r;
    bool does_not_exist = false;
    const Token* t = &Consume(true);
    if (Kind(*t, true) == Tok::kDoesNotExist) {
      does_not_exist = true;
      t = &Consume(true);
    }
    if (Kind(*t, true) != Tok::kIdentifier) {
      why = absl::StrCat("found '", t->literal, "', expected: identifier");
      return std::nullopt;
    }
    r.key = t->literal;
    Tok next = Kind(Peek(true), true);
    if (does_not_exist || next == Tok::kEnd || next == Tok::kComma) {
      r.op = does_not_exist ? SelectorOperator::kDoesNotExist : SelectorOperator::kExists;
      return Check(std::move(r), why);
    }
    const Token& op = Consume(/*values=*/false);
    switch (op.tok) {
      case Tok::kIn:
        r.op = SelectorOperator::kIn;
        break;
      case Tok::kNotIn:
        r.op = SelectorOperator::kNotIn;
        break;
      case Tok::kEquals:
      case Tok::kDoubleEquals:
        r.op = SelectorOperator::kEquals;
        break;
      case Tok::kNotEquals:
        r.op = SelectorOperator::kNotEquals;
        break;
      case Tok::kGreaterThan:
        r.op = SelectorOperator::kGreaterThan;
        break;
      case Tok::kLessThan:
        r.op = SelectorOperator::kLessThan;
        break;
      default:
        why = absl::StrCat("found '", op.literal, "', expected: in, notin, =, ==, !=, gt, lt");
        return std::nullopt;
    }
    bool ok = (r.op == SelectorOperator::kIn || r.op == SelectorOperator::kNotIn)
                  ? ParseValueList(r.values, why)
                  : ParseExactValue(r.values, why);
    if (!ok) return std::nullopt;
    NormalizeValues(r.values);
    return Check(std::move(r), why);
  }

  static std::optional<LabelRequirement> Check(LabelRequirement r, std::string& why) {
    std::vector<std::string> errs = CheckRequirement(r, "");
    if (!errs.empty()) {
      why = Aggregate(errs);
      return std::nullopt;
    }
    return r;
  }

  // `(a, b, c)`; empty entries ("()", "(,a)") stand for the empty value, as in apimachinery.
  bool ParseValueList(std::vector<std::string>& values, std::string& why) {
    const Token& open = Consume(true);
    if (open.tok != Tok::kOpenPar) {
      why = absl::StrCat("found '", open.literal, "' expected: '('");
      return false;
    }
    bool expect_value = true;
    while (true) {
      const Token& t = Consume(true);
      Tok tok = Kind(t, true);
      if (tok == Tok::kIdentifier && expect_value) {
        values.push_back(t.literal);
        expect_value = false;
      } else if (tok == Tok::kComma) {
        if (expect_value) values.push_back("");
        expect_value = true;
      } else if (tok == Tok::kClosedPar) {
        if (expect_value) values.push_back("");
        return true;
      } else {
        why = expect_value
                  ? absl::StrCat("found '", t.literal, "', expected: ',', ')' or identifier")
                  : absl::StrCat("found '", t.literal, "', expected: ',' or ')'");
        return false;
      }
    }
  }

  // The single value after =, ==, !=, >, <; nothing before ',' or the end means "".
  bool ParseExactValue(std::vector<std::string>& values, std::string& why) {
    Tok next = Kind(Peek(true), true);
    if (next == Tok::kEnd || next == Tok::kComma) {
      values.push_back("");
      return true;
    }
    const Token& t = Consume(true);
    if (Kind(t, true) != Tok::kIdentifier) {
      why = absl::StrCat("found '", t.literal, "', expected: identifier");
      return false;
    }
    values.push_back(t.literal);
    return true;
  }

  absl::string_view text_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

bool Contains(const std::vector<std::string>& sorted, const std::string& value) {
  return std::binary_search(sorted.begin(), sorted.end(), value);
}

}  // namespace

Labels LabelsOf(const nlohmann::json& object) {
  Labels labels;
  if (!object.is_object()) return labels;
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return labels;
  auto l = meta->find("labels");
  if (l == meta->end() || !l->is_object()) return labels;
  for (auto it = l->begin(); it != l->end(); ++it) {
    if (it.value().is_string()) labels.emplace(it.key(), it.value().get<std::string>());
  }
  return labels;
}

bool LabelRequirement::Matches(const Labels& labels) const {
  auto it = labels.find(key);
  bool has = it != labels.end();
  switch (op) {
    case SelectorOperator::kEquals:
    case SelectorOperator::kIn:
      return has && Contains(values, it->second);
    case SelectorOperator::kNotEquals:
    case SelectorOperator::kNotIn:
      return !has || !Contains(values, it->second);
    case SelectorOperator::kExists:
      return has;
    case SelectorOperator::kDoesNotExist:
      return !has;
    case SelectorOperator::kGreaterThan:
    case SelectorOperator::kLessThan: {
      if (!has || values.size() != 1) return false;
      std::optional<int64_t> actual = ParseInt64(it->second);
      std::optional<int64_t> bound = ParseInt64(values[0]);
      if (!actual.has_value() || !bound.has_value()) return false;
      return op == SelectorOperator::kGreaterThan ? *actual > *bound : *actual < *bound;
    }
  }
  return false;
}

std::string LabelRequirement::ToString() const {
  std::string out = op == SelectorOperator::kDoesNotExist ? "!" : "";
  absl::StrAppend(&out, key);
  switch (op) {
    case SelectorOperator::kExists:
    case SelectorOperator::kDoesNotExist:
      return out;
    case SelectorOperator::kEquals:
      return absl::StrCat(out, "=", absl::StrJoin(values, ","));
    case SelectorOperator::kNotEquals:
      return absl::StrCat(out, "!=", absl::StrJoin(values, ","));
    case SelectorOperator::kGreaterThan:
      return absl::StrCat(out, ">", absl::StrJoin(values, ","));
    case SelectorOperator::kLessThan:
      return absl::StrCat(out, "<", absl::StrJoin(values, ","));
    case SelectorOperator::kIn:
      return absl::StrCat(out, " in (", absl::StrJoin(values, ","), ")");
    case SelectorOperator::kNotIn:
      return absl::StrCat(out, " notin (", absl::StrJoin(values, ","), ")");
  }
  return out;
}

absl::StatusOr<LabelSelector> LabelSelector::Parse(absl::string_view text) {
  LabelParser parser(text);
  absl::StatusOr<std::vector<LabelRequirement>> requirements = parser.Parse();
  if (!requirements.ok()) return requirements.status();
  LabelSelector selector;
  selector.requirements_ = *std::move(requirements);
  selector.Sort();
  return selector;
}

absl::StatusOr<LabelSelector> LabelSelector::FromJson(const nlohmann::json& json) {
  if (json.is_null()) return Nothing();
  if (!json.is_object()) {
    return BadRequestError(
        absl::StrCat("invalid label selector: must be an object, got ", json.dump()));
  }
  LabelSelector selector;
  std::vector<std::string> errs;
  auto match_labels = json.find("matchLabels");
  if (match_labels != json.end() && !match_labels->is_null()) {
    if (!match_labels->is_object()) {
      return BadRequestError("invalid label selector: matchLabels must be a map of strings");
    }
    for (auto it = match_labels->begin(); it != match_labels->end(); ++it) {
      if (!it.value().is_string()) {
        return BadRequestError(
            absl::StrCat("invalid label selector: matchLabels[", it.key(), "] must be a string"));
      }
      LabelRequirement r{it.key(), SelectorOperator::kEquals, {it.value().get<std::string>()}};
      for (std::string& e : CheckRequirement(r, "matchLabels.")) errs.push_back(std::move(e));
      selector.requirements_.push_back(std::move(r));
    }
  }
  auto expressions = json.find("matchExpressions");
  if (expressions != json.end() && !expressions->is_null()) {
    if (!expressions->is_array()) {
      return BadRequestError("invalid label selector: matchExpressions must be a list");
    }
    for (size_t i = 0; i < expressions->size(); ++i) {
      const nlohmann::json& e = (*expressions)[i];
      std::string path = absl::StrCat("matchExpressions[", i, "].");
      auto key = e.is_object() ? e.find("key") : e.end();
      auto op = e.is_object() ? e.find("operator") : e.end();
      if (!e.is_object() || key == e.end() || !key->is_string() || op == e.end() ||
          !op->is_string()) {
        return BadRequestError(
            absl::StrCat("invalid label selector: ", path, "key and operator must be strings"));
      }
      LabelRequirement r;
      r.key = key->get<std::string>();
      const std::string& op_name = op->get_ref<const std::string&>();
      if (op_name == "In") {
        r.op = SelectorOperator::kIn;
      } else if (op_name == "NotIn") {
        r.op = SelectorOperator::kNotIn;
      } else if (op_name == "Exists") {
        r.op = SelectorOperator::kExists;
      } else if (op_name == "DoesNotExist") {
        r.op = SelectorOperator::kDoesNotExist;
      } else {
        return BadRequestError(
            absl::StrCat(GoQuote(op_name), " is not a valid label selector operator"));
      }
      auto values = e.find("values");
      if (values != e.end() && !values->is_null()) {
        if (!values->is_array()) {
          return BadRequestError(
              absl::StrCat("invalid label selector: ", path, "values must be a list"));
        }
        for (const nlohmann::json& v : *values) {
          if (!v.is_string()) {
            return BadRequestError(
                absl::StrCat("invalid label selector: ", path, "values must be strings"));
          }
          r.values.push_back(v.get<std::string>());
        }
      }
      NormalizeValues(r.values);
      for (std::string& err : CheckRequirement(r, path)) errs.push_back(std::move(err));
      selector.requirements_.push_back(std::move(r));
    }
  }
  if (!errs.empty()) return BadRequestError(Aggregate(errs));
  selector.Sort();
  return selector;
}

LabelSelector LabelSelector::FromLabels(const Labels& labels) {
  LabelSelector selector;
  for (const auto& [key, value] : labels) {
    selector.requirements_.push_back({key, SelectorOperator::kEquals, {value}});
  }
  return selector;  // std::map iteration is already in key order
}

LabelSelector LabelSelector::Nothing() {
  LabelSelector selector;
  selector.nothing_ = true;
  return selector;
}

void LabelSelector::Sort() {
  std::stable_sort(requirements_.begin(), requirements_.end(),
                   [](const LabelRequirement& a, const LabelRequirement& b) {
                     if (a.key != b.key) return a.key < b.key;
                     return a.ToString() < b.ToString();
                   });
}

bool LabelSelector::Matches(const Labels& labels) const {
  if (nothing_) return false;
  for (const LabelRequirement& r : requirements_) {
    if (!r.Matches(labels)) return false;
  }
  return true;
}

std::string LabelSelector::ToString() const {
  if (nothing_) return "";
  std::vector<std::string> parts;
  parts.reserve(requirements_.size());
  for (const LabelRequirement& r : requirements_) parts.push_back(r.ToString());
  return absl::StrJoin(parts, ",");
}

std::optional<std::string> LabelSelector::RequiresExactMatch(absl::string_view key) const {
  for (const LabelRequirement& r : requirements_) {
    if (r.key != key || r.values.size() != 1) continue;
    if (r.op == SelectorOperator::kEquals || r.op == SelectorOperator::kIn) return r.values[0];
  }
  return std::nullopt;
}

}  // namespace ctrlhost::kube
