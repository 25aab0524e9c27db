#include "runtime/common/yaml_json.h"

#include <cmath>
#include <regex>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/yaml.h"

namespace ctrlhost::common {
namespace {

constexpr size_t kYamlExpansionSlack = 64 * 1024;

// YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution).
const std::regex& IntRegex() {
  static const std::regex* const r = new std::regex("^[-+]?[0-9]+$");
  return *r;
}
const std::regex& OctRegex() {
  static const std::regex* const r = new std::regex("^0o[0-7]+$");
  return *r;
}
const std::regex& HexRegex() {
  static const std::regex* const r = new std::regex("^0x[0-9a-fA-F]+$");
  return *r;
}
const std::regex& FloatRegex() {
  static const std::regex* const r =
      new std::regex("^[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?$");
  return *r;
}

// A plain scalar typed by the core schema; InvalidArgument for an integer that no JSON number
// holds (an octal past int64; decimals past uint64 become doubles, as JSON parsers read them).
absl::StatusOr<nlohmann::json> TypedScalar(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (std::regex_match(s, IntRegex())) {
    int64_t i;
    if (absl::SimpleAtoi(s, &i)) return i;
    uint64_t u;
    if (absl::SimpleAtoi(s, &u)) return u;
    double d;
    if (absl::SimpleAtod(s, &d)) return d;
  }
  if (std::regex_match(s, OctRegex())) {
    uint64_t value = 0;
    for (char c : s.substr(2)) {
      if (value > (static_cast<uint64_t>(INT64_MAX) >> 3)) {
        return absl::InvalidArgumentError(
            absl::StrCat("the octal number ", s.size() > 40 ? s.substr(0, 40) + "..." : s,
                         " is out of range (at most 0o777777777777777777777)"));
      }
      value = (value << 3) | static_cast<uint64_t>(c - '0');
    }
    return static_cast<int64_t>(value);
  }
  if (std::regex_match(s, HexRegex())) {
    uint64_t u;
    if (absl::SimpleHexAtoi(s.substr(2), &u) && u <= INT64_MAX) return static_cast<int64_t>(u);
  }
  if (s == ".inf" || s == ".Inf" || s == ".INF" || s == "+.inf") return INFINITY;
  if (s == "-.inf" || s == "-.Inf" || s == "-.INF") return -INFINITY;
  if (std::regex_match(s, FloatRegex())) {
    double d;
    if (absl::SimpleAtod(s, &d)) return d;
  }
  return s;
}

// What converting may cost: one unit per node plus the bytes of each scalar. Aliases make a
// document's tree larger than its text ("billion laughs": nine levels of ten aliases each are
// 10^9 nodes from 600 bytes); without aliases the cost is at most about 1.5 units per byte of
// text, so the budget allows every alias-free document and a bounded expansion beyond it.
struct Budget {
  size_t left;
};

size_t BudgetFor(absl::string_view yaml) { return 2 * yaml.size() + kYamlExpansionSlack; }

absl::Status Spend(Budget& budget, size_t units, const YAML::Node& node) {
  if (units > budget.left) {
    return absl::InvalidArgumentError(absl::StrCat(
        "yaml: line ", node.Mark().line + 1,
        ": the document expands to too many nodes (aliases may not grow a document past twice "
        "its size plus ",
        kYamlExpansionSlack, ")"));
  }
  budget.left -= units;
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> Convert(const YAML::Node& node, int depth, Budget& budget) {
  if (depth > kMaxYamlNestingDepth) {
    return absl::InvalidArgumentError(absl::StrCat("yaml: line ", node.Mark().line + 1,
                                                   ": nesting deeper than ", kMaxYamlNestingDepth,
                                                   " levels"));
  }
  if (auto s = Spend(budget, node.IsScalar() ? 1 + node.Scalar().size() : 1, node); !s.ok()) {
    return s;
  }
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return nullptr;
    case YAML::NodeType::Scalar:
      // "!" marks a quoted or block scalar: always a string. "?" is a plain scalar.
      if (node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str") return node.Scalar();
      if (absl::StatusOr<nlohmann::json> typed = TypedScalar(node.Scalar()); typed.ok()) {
        return *std::move(typed);
      } else {
        return absl::InvalidArgumentError(absl::StrCat("yaml: line ", node.Mark().line + 1,
                                                       " column ", node.Mark().column + 1, ": ",
                                                       typed.status().message()));
      }
    case YAML::NodeType::Sequence: {
      nlohmann::json arr = nlohmann::json::array();
      for (const YAML::Node& item : node) {
        auto v = Convert(item, depth + 1, budget);
        if (!v.ok()) return v.status();
        arr.push_back(std::move(*v));
      }
      return arr;
    }
    case YAML::NodeType::Map: {
      nlohmann::json obj = nlohmann::json::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) {
          return absl::InvalidArgumentError(absl::StrCat("yaml: line ", kv.first.Mark().line + 1,
                                                         ": mapping keys must be scalars"));
        }
        const std::string& key = kv.first.Scalar();
        if (obj.contains(key)) {
          return absl::InvalidArgumentError(absl::StrCat("yaml: line ", kv.first.Mark().line + 1,
                                                         ": key \"", key, "\" already set"));
        }
        if (auto s = Spend(budget, 1 + key.size(), kv.first); !s.ok()) return s;
        auto v = Convert(kv.second, depth + 1, budget);
        if (!v.ok()) return v.status();
        obj[key] = std::move(*v);
      }
      return obj;
    }
  }
  return nullptr;
}

// yaml-cpp 0.7's LoadAll never returns on some short inputs (`"x",` or `---\n,`: a flow-entry
// token where a document starts is never consumed, so it builds empty documents for ever; found
// by tools/fuzz). This first pass drives the same parser over the events only and stops when a
// document starts where the previous one did, so LoadAll runs only on streams that end.
// It also stops at the first collection nested deeper than kMaxYamlNestingDepth: yaml-cpp
// recurses once per level (its guard throws "bad file" at 2000), and the events come as the
// parser descends, so the limit is named before it goes further.
class StuckParserError {
 public:
  explicit StuckParserError(YAML::Mark mark) : mark(mark) {}
  YAML::Mark mark;
};

class TooDeepError {
 public:
  explicit TooDeepError(YAML::Mark mark) : mark(mark) {}
  YAML::Mark mark;
};

class DocumentProgress : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (started_ && mark.pos == last_.pos) throw StuckParserError(mark);
    started_ = true;
    last_ = mark;
    depth_ = 0;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Enter(mark);
  }
  void OnSequenceEnd() override { --depth_; }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Enter(mark);
  }
  void OnMapEnd() override { --depth_; }

 private:
  void Enter(const YAML::Mark& mark) {
    if (++depth_ > kMaxYamlNestingDepth) throw TooDeepError(mark);
  }

  bool started_ = false;
  YAML::Mark last_;
  int depth_ = 0;
};

// YAML 1.2 allows no C0 control character but tab, LF and CR (go-yaml, kube-apiserver's
// parser: "control characters are not allowed"); yaml-cpp would read on past a NUL.
absl::Status CheckCharacters(absl::string_view yaml) {
  int line = 1;
  for (char c : yaml) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') ++line;
    if ((u < 0x20 && c != '\t' && c != '\n' && c != '\r') || u == 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat("yaml: line ", line, ": control characters are not allowed"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckStreamEnds(const std::string& yaml) {
  std::istringstream in(yaml);
  YAML::Parser parser(in);
  DocumentProgress progress;
  try {
    while (parser.HandleNextDocument(progress)) {
    }
  } catch (const StuckParserError& e) {
    return absl::InvalidArgumentError(absl::StrCat("yaml: line ", e.mark.line + 1, " column ",
                                                   e.mark.column + 1,
                                                   ": did not find expected node content"));
  } catch (const TooDeepError& e) {
    return absl::InvalidArgumentError(absl::StrCat("yaml: line ", e.mark.line + 1, " column ",
                                                   e.mark.column + 1, ": nesting deeper than ",
                                                   kMaxYamlNestingDepth, " levels"));
  }
  return absl::OkStatus();
}

absl::Status ParseError(const YAML::Exception& e) {
  return absl::InvalidArgumentError(
      absl::StrCat("yaml: line ", e.mark.line + 1, " column ", e.mark.column + 1, ": ", e.msg));
}

bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  // Would read back as null/bool/number, or not at all.
  if (absl::StatusOr<nlohmann::json> typed = TypedScalar(s); !typed.ok() || !typed->is_string()) {
    return true;
  }
  static const std::regex* const plain = new std::regex("^[A-Za-z0-9_./][A-Za-z0-9_./ -]*$");
  if (!std::regex_match(s, *plain)) return true;
  return s.back() == ' ' || s.find(" #") != std::string::npos;
}

void Emit(const nlohmann::json& v, YAML::Emitter& out) {
  switch (v.type()) {
    case nlohmann::json::value_t::object:
      out << YAML::BeginMap;
      for (auto it = v.begin(); it != v.end(); ++it) {
        out << YAML::Key;
        if (NeedsQuotes(it.key())) out << YAML::DoubleQuoted;
        out << it.key() << YAML::Value;
        Emit(it.value(), out);
      }
      out << YAML::EndMap;
      break;
    case nlohmann::json::value_t::array:
      if (v.empty()) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        break;
      }
      out << YAML::BeginSeq;
      for (const auto& item : v) Emit(item, out);
      out << YAML::EndSeq;
      break;
    case nlohmann::json::value_t::string: {
      const std::string& s = v.get_ref<const std::string&>();
      // A literal block keeps exactly one trailing newline; other multi-line strings are
      // double-quoted with escapes so they read back byte for byte.
      if (s.find('\n') != std::string::npos && s.back() == '\n' &&
          s.find("\n\n") == std::string::npos && s.find_first_of("\t\r") == std::string::npos &&
          s.front() != ' ') {
        out << YAML::Literal << s;
      } else {
        if (NeedsQuotes(s)) out << YAML::DoubleQuoted;
        out << s;
      }
      break;
    }
    case nlohmann::json::value_t::null:
      out << YAML::Null;
      break;
    case nlohmann::json::value_t::boolean:
      out << (v.get<bool>() ? "true" : "false");
      break;
    default:
      out << v.dump();
      break;
  }
}

}  // namespace

absl::StatusOr<nlohmann::json> YamlToJson(absl::string_view yaml) {
  auto docs = YamlDocumentsToJson(yaml);
  if (!docs.ok()) return docs.status();
  if (docs->empty()) return nullptr;
  if (docs->size() > 1) {
    return absl::InvalidArgumentError("yaml: expected one document, found several");
  }
  return std::move((*docs)[0]);
}

absl::Status CheckYamlStream(absl::string_view yaml) {
  if (absl::Status s = CheckCharacters(yaml); !s.ok()) return s;
  try {
    return CheckStreamEnds(std::string(yaml));
  } catch (const YAML::Exception&) {
    // A syntax error ends the stream: LoadAll, on the same parser, throws it at the same place
    // and the caller reports it in its own form.
    return absl::OkStatus();
  }
}

absl::StatusOr<std::vector<nlohmann::json>> YamlDocumentsToJson(absl::string_view yaml) {
  std::vector<nlohmann::json> out;
  if (absl::Status s = CheckYamlStream(yaml); !s.ok()) return s;
  const std::string text(yaml);
  try {
    Budget budget{BudgetFor(yaml)};
    for (const YAML::Node& doc : YAML::LoadAll(text)) {
      auto v = Convert(doc, 0, budget);
      if (!v.ok()) return v.status();
      if (!v->is_null()) out.push_back(std::move(*v));
    }
  } catch (const YAML::Exception& e) {
    return ParseError(e);
  }
  return out;
}

std::string JsonToYaml(const nlohmann::json& value) {
  YAML::Emitter out;
  Emit(value, out);
  std::string s = out.c_str();
  s.push_back('\n');
  return s;
}

}  // namespace ctrlhost::common
