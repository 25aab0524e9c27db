#include "runtime/apiserver/jsonpath.h"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ctrlhost::apiserver {

// One entry of an index list: a single index or a slice.
struct IndexRange {
  bool single = true;
  int64_t start = 0;  // the index when single
  std::optional<int64_t> from, to;
  int64_t stride = 1;
};

using Steps = std::vector<JsonPath::Step>;

// A side of a filter comparison: a path relative to the element (@...) or a literal.
struct Operand {
  std::shared_ptr<const Steps> path;  // null for a literal
  nlohmann::json literal;
};

struct Filter {
  std::string op;  // "exists", "==", "!=", "<", "<=", ">", ">="
  Operand left, right;
};

struct JsonPath::Step {
  enum class Kind { kField, kNames, kWildcard, kDescend, kIndexes, kFilter };
  Kind kind = Kind::kField;
  std::vector<std::string> names;  // kField (one) and kNames
  std::vector<IndexRange> ranges;  // kIndexes
  std::shared_ptr<const Filter> filter;
};

namespace {

using Kind = JsonPath::Step::Kind;

// Characters that end an unquoted field name.
bool EndsField(char c) {
  switch (c) {
    case '.':
    case '[':
    case ']':
    case ',':
    case '(':
    case ')':
    case '=':
    case '!':
    case '<':
    case '>':
    case '{':
    case '}':
    case '@':
    case '$':
    case '\'':
    case '"':
      return true;
    default:
      return absl::ascii_isspace(static_cast<unsigned char>(c));
  }
}

class Parser {
 public:
  explicit Parser(absl::string_view in) : in_(in) {}

  // The whole expression: steps to the end of the input.
  absl::StatusOr<Steps> ParseAll() {
    SkipSpace();
    if (Peek() == '$') ++pos_;
    auto steps = ParseSteps(/*depth=*/0, /*relative=*/false);
    if (!steps.ok()) return steps.status();
    SkipSpace();
    if (!AtEnd()) return Error("unexpected character");
    return steps;
  }

 private:
  bool AtEnd() const { return pos_ >= in_.size(); }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < in_.size() ? in_[pos_ + ahead] : '\0'; }
  void SkipSpace() {
    while (!AtEnd() && absl::ascii_isspace(static_cast<unsigned char>(in_[pos_]))) ++pos_;
  }
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid JSONPath \"", in_, "\": ", what, " at position ", pos_));
  }

  // Steps until a character that cannot continue a path (end, space, ')', an operator...).
  absl::StatusOr<Steps> ParseSteps(int depth, bool relative) {
    Steps steps;
    while (!AtEnd()) {
      const char c = Peek();
      if (c == '.' && Peek(1) == '.') {
        pos_ += 2;
        steps.push_back(Step(Kind::kDescend));
        if (Peek() == '[') continue;
        if (Peek() == '*') {
          ++pos_;
          steps.push_back(Step(Kind::kWildcard));
          continue;
        }
        auto name = ParseFieldName();
        if (!name.ok()) return name.status();
        if (name->empty()) return Error("expected a field name after '..'");
        steps.push_back(Field(*std::move(name)));
      } else if (c == '.') {
        ++pos_;
        if (Peek() == '*') {
          ++pos_;
          steps.push_back(Step(Kind::kWildcard));
          continue;
        }
        auto name = ParseFieldName();
        if (!name.ok()) return name.status();
        // A lone "." (the whole object) is allowed only as the last thing of a path.
        if (name->empty()) {
          const char next = Peek();
          if (next == '.' || next == '[') return Error("expected a field name after '.'");
          continue;
        }
        steps.push_back(Field(*std::move(name)));
      } else if (c == '[') {
        auto step = ParseBracket(depth);
        if (!step.ok()) return step.status();
        steps.push_back(*std::move(step));
      } else if (!relative && steps.empty() && !EndsField(c)) {
        // "metadata.name" without the leading dot, as kubectl also accepts.
        auto name = ParseFieldName();
        if (!name.ok()) return name.status();
        steps.push_back(Field(*std::move(name)));
      } else {
        break;
      }
    }
    return steps;
  }

  static JsonPath::Step Step(Kind kind) {
    JsonPath::Step s;
    s.kind = kind;
    return s;
  }
  static JsonPath::Step Field(std::string name) {
    JsonPath::Step s = Step(Kind::kField);
    s.names.push_back(std::move(name));
    return s;
  }

  // An unquoted name; "\x" stands for x so that names may contain dots.
  absl::StatusOr<std::string> ParseFieldName() {
    std::string name;
    while (!AtEnd()) {
      const char c = in_[pos_];
      if (c == '\\') {
        if (pos_ + 1 >= in_.size()) return Error("dangling escape");
        name.push_back(in_[pos_ + 1]);
        pos_ += 2;
        continue;
      }
      if (EndsField(c)) break;
      name.push_back(c);
      ++pos_;
    }
    return name;
  }

  // 'text' or "text" with backslash escapes.
  absl::StatusOr<std::string> ParseQuoted() {
    const char quote = in_[pos_++];
    std::string out;
    while (!AtEnd()) {
      const char c = in_[pos_++];
      if (c == quote) return out;
      if (c == '\\') {
        if (AtEnd()) break;
        out.push_back(in_[pos_++]);
        continue;
      }
      out.push_back(c);
    }
    return Error("unterminated string");
  }

  absl::StatusOr<JsonPath::Step> ParseBracket(int depth) {
    ++pos_;  // '['
    SkipSpace();
    if (Peek() == '?') {
      auto f = ParseFilter(depth);
      if (!f.ok()) return f.status();
      JsonPath::Step s = Step(Kind::kFilter);
      s.filter = *std::move(f);
      return s;
    }
    if (Peek() == '*') {
      ++pos_;
      SkipSpace();
      if (Peek() != ']') return Error("expected ']'");
      ++pos_;
      return Step(Kind::kWildcard);
    }
    if (Peek() == '\'' || Peek() == '"') {
      JsonPath::Step s = Step(Kind::kNames);
      while (true) {
        SkipSpace();
        if (Peek() != '\'' && Peek() != '"') return Error("expected a quoted name");
        auto name = ParseQuoted();
        if (!name.ok()) return name.status();
        s.names.push_back(*std::move(name));
        SkipSpace();
        if (Peek() == ',') {
          ++pos_;
          continue;
        }
        if (Peek() != ']') return Error("expected ']'");
        ++pos_;
        return s;
      }
    }
    JsonPath::Step s = Step(Kind::kIndexes);
    while (true) {
      auto range = ParseRange();
      if (!range.ok()) return range.status();
      s.ranges.push_back(*range);
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() != ']') return Error("expected ']'");
      ++pos_;
      return s;
    }
  }

  // An optional integer; nullopt when none is there.
  absl::StatusOr<std::optional<int64_t>> ParseInt() {
    SkipSpace();
    const size_t start = pos_;
    if (Peek() == '-' || Peek() == '+') ++pos_;
    while (absl::ascii_isdigit(static_cast<unsigned char>(Peek()))) ++pos_;
    if (pos_ == start) return std::optional<int64_t>();
    int64_t v;
    if (!absl::SimpleAtoi(in_.substr(start, pos_ - start), &v)) return Error("bad index");
    return std::optional<int64_t>(v);
  }

  // "3", "-1", "1:3", ":2", "::2".
  absl::StatusOr<IndexRange> ParseRange() {
    IndexRange r;
    auto first = ParseInt();
    if (!first.ok()) return first.status();
    SkipSpace();
    if (Peek() != ':') {
      if (!first->has_value()) return Error("expected an index");
      r.start = **first;
      return r;
    }
    r.single = false;
    r.from = *first;
    ++pos_;
    auto second = ParseInt();
    if (!second.ok()) return second.status();
    r.to = *second;
    SkipSpace();
    if (Peek() == ':') {
      ++pos_;
      auto stride = ParseInt();
      if (!stride.ok()) return stride.status();
      if (stride->has_value()) r.stride = **stride;
      if (r.stride <= 0) return Error("slice step must be positive");
    }
    return r;
  }

  absl::StatusOr<std::shared_ptr<const Filter>> ParseFilter(int depth) {
    if (depth >= JsonPath::kMaxFilterDepth) return Error("filters nested too deeply");
    ++pos_;  // '?'
    SkipSpace();
    if (Peek() != '(') return Error("expected '(' after '?'");
    ++pos_;
    auto f = std::make_shared<Filter>();
    auto left = ParseOperand(depth + 1);
    if (!left.ok()) return left.status();
    f->left = *std::move(left);
    SkipSpace();
    std::string op;
    while (Peek() == '=' || Peek() == '!' || Peek() == '<' || Peek() == '>')
      op.push_back(in_[pos_++]);
    if (op.empty()) {
      if (f->left.path == nullptr) return Error("a filter without an operator must be a path");
      f->op = "exists";
    } else {
      if (op != "==" && op != "!=" && op != "<" && op != "<=" && op != ">" && op != ">=") {
        return Error(absl::StrCat("unknown operator \"", op, "\""));
      }
      f->op = op;
      auto right = ParseOperand(depth + 1);
      if (!right.ok()) return right.status();
      f->right = *std::move(right);
    }
    SkipSpace();
    if (Peek() != ')') return Error("expected ')'");
    ++pos_;
    SkipSpace();
    if (Peek() != ']') return Error("expected ']'");
    ++pos_;
    return std::shared_ptr<const Filter>(std::move(f));
  }

  absl::StatusOr<Operand> ParseOperand(int depth) {
    SkipSpace();
    Operand o;
    const char c = Peek();
    if (c == '@') {
      ++pos_;
      auto steps = ParseSteps(depth, /*relative=*/true);
      if (!steps.ok()) return steps.status();
      o.path = std::make_shared<const Steps>(*std::move(steps));
      return o;
    }
    if (c == '\'' || c == '"') {
      auto s = ParseQuoted();
      if (!s.ok()) return s.status();
      o.literal = *std::move(s);
      return o;
    }
    const size_t start = pos_;
    while (!AtEnd() && !EndsField(in_[pos_])) ++pos_;
    // Numbers may carry '.' (3.5); EndsField stopped there.
    while (!AtEnd() &&
           (in_[pos_] == '.' || absl::ascii_isalnum(static_cast<unsigned char>(in_[pos_])) ||
            in_[pos_] == '-' || in_[pos_] == '+')) {
      ++pos_;
    }
    const absl::string_view word = in_.substr(start, pos_ - start);
    if (word == "true") {
      o.literal = true;
    } else if (word == "false") {
      o.literal = false;
    } else if (word == "null") {
      o.literal = nullptr;
    } else {
      int64_t i;
      double d;
      if (absl::SimpleAtoi(word, &i)) {
        o.literal = i;
      } else if (!word.empty() && absl::SimpleAtod(word, &d) && std::isfinite(d)) {
        o.literal = d;
      } else {
        return Error("expected @, a quoted string, a number, true, false or null");
      }
    }
    return o;
  }

  absl::string_view in_;
  size_t pos_ = 0;
};

using Nodes = std::vector<const nlohmann::json*>;

Nodes Evaluate(const Steps& steps, const nlohmann::json& root);

// Pre-order: the node itself, then its descendants, without recursion.
void AddDescendants(const nlohmann::json* node, Nodes& out) {
  std::vector<const nlohmann::json*> stack = {node};
  while (!stack.empty()) {
    const nlohmann::json* n = stack.back();
    stack.pop_back();
    out.push_back(n);
    if (n->is_object() || n->is_array()) {
      // Push in reverse so that children come out in document order.
      std::vector<const nlohmann::json*> children;
      for (const auto& child : *n) children.push_back(&child);
      for (auto it = children.rbegin(); it != children.rend(); ++it) stack.push_back(*it);
    }
  }
}

void AddRange(const nlohmann::json& array, const IndexRange& r, Nodes& out) {
  const int64_t n = static_cast<int64_t>(array.size());
  if (r.single) {
    int64_t i = r.start < 0 ? r.start + n : r.start;
    if (i >= 0 && i < n) out.push_back(&array[static_cast<size_t>(i)]);
    return;
  }
  auto clamp = [n](int64_t v) {
    if (v < 0) v += n;
    return v < 0 ? 0 : (v > n ? n : v);
  };
  const int64_t from = r.from ? clamp(*r.from) : 0;
  const int64_t to = r.to ? clamp(*r.to) : n;
  for (int64_t i = from; i < to; i += r.stride) out.push_back(&array[static_cast<size_t>(i)]);
}

// The one value an operand stands for at `element`; null when it selects none or several.
std::optional<nlohmann::json> OperandValue(const Operand& o, const nlohmann::json& element) {
  if (o.path == nullptr) return o.literal;
  Nodes found = Evaluate(*o.path, element);
  if (found.size() != 1) return std::nullopt;
  return *found[0];
}

// -1, 0, 1, or nullopt when the values cannot be ordered (different types, objects...).
std::optional<int> Compare(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_number_float() || b.is_number_float()) {
      const double x = a.get<double>(), y = b.get<double>();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    if (a.is_number_unsigned() && b.is_number_unsigned()) {
      const uint64_t x = a.get<uint64_t>(), y = b.get<uint64_t>();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    // An unsigned value above INT64_MAX is larger than any signed one.
    if (a.is_number_unsigned() && a.get<uint64_t>() > INT64_MAX) return 1;
    if (b.is_number_unsigned() && b.get<uint64_t>() > INT64_MAX) return -1;
    const int64_t x = a.get<int64_t>(), y = b.get<int64_t>();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const auto& x = a.get_ref<const std::string&>();
    const auto& y = b.get_ref<const std::string&>();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  return std::nullopt;
}

bool Matches(const Filter& f, const nlohmann::json& element) {
  if (f.op == "exists") return !Evaluate(*f.left.path, element).empty();
  std::optional<nlohmann::json> left = OperandValue(f.left, element);
  std::optional<nlohmann::json> right = OperandValue(f.right, element);
  if (!left || !right) return false;
  if (f.op == "==" || f.op == "!=") {
    bool equal;
    if (std::optional<int> c = Compare(*left, *right)) {
      equal = *c == 0;
    } else if (left->type() == right->type()) {
      equal = *left == *right;  // booleans, null, objects, arrays
    } else {
      return false;  // different types cannot be compared, whatever the operator
    }
    return (f.op == "==") == equal;
  }
  std::optional<int> c = Compare(*left, *right);
  if (!c) return false;
  if (f.op == "<") return *c < 0;
  if (f.op == "<=") return *c <= 0;
  if (f.op == ">") return *c > 0;
  return *c >= 0;  // ">="
}

Nodes Evaluate(const Steps& steps, const nlohmann::json& root) {
  Nodes current = {&root};
  for (const JsonPath::Step& step : steps) {
    Nodes next;
    for (const nlohmann::json* node : current) {
      switch (step.kind) {
        case Kind::kField:
        case Kind::kNames:
          if (!node->is_object()) break;
          for (const std::string& name : step.names) {
            auto it = node->find(name);
            if (it != node->end()) next.push_back(&*it);
          }
          break;
        case Kind::kWildcard:
          if (node->is_object() || node->is_array()) {
            for (const auto& child : *node) next.push_back(&child);
          }
          break;
        case Kind::kDescend:
          AddDescendants(node, next);
          break;
        case Kind::kIndexes:
          if (!node->is_array()) break;
          for (const IndexRange& r : step.ranges) AddRange(*node, r, next);
          break;
        case Kind::kFilter:
          if (!node->is_array()) break;
          for (const auto& element : *node) {
            if (Matches(*step.filter, element)) next.push_back(&element);
          }
          break;
      }
    }
    current = std::move(next);
    if (current.empty()) break;
  }
  return current;
}

}  // namespace

absl::StatusOr<JsonPath> JsonPath::Parse(absl::string_view expression) {
  if (expression.size() > kMaxLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid JSONPath: longer than ", kMaxLength, " characters"));
  }
  absl::string_view inner = absl::StripAsciiWhitespace(expression);
  if (absl::ConsumePrefix(&inner, "{")) {
    if (!absl::ConsumeSuffix(&inner, "}")) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid JSONPath \"", expression, "\": unclosed '{'"));
    }
  }
  if (absl::StripAsciiWhitespace(inner).empty()) {
    return absl::InvalidArgumentError("invalid JSONPath: empty");
  }
  Parser parser(inner);
  auto steps = parser.ParseAll();
  if (!steps.ok()) return steps.status();
  JsonPath path;
  path.expression_ = std::string(expression);
  path.steps_ = std::make_shared<const Steps>(*std::move(steps));
  return path;
}

std::vector<const nlohmann::json*> JsonPath::FindAll(const nlohmann::json& root) const {
  return Evaluate(*steps_, root);
}

const nlohmann::json* JsonPath::FindFirst(const nlohmann::json& root) const {
  Nodes all = Evaluate(*steps_, root);
  return all.empty() ? nullptr : all.front();
}

}  // namespace ctrlhost::apiserver
