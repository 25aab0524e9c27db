#include "runtime/kube/selector.h"

#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::kube {
namespace {

using ::testing::HasSubstr;

struct MatchCase {
  std::string selector;
  Labels labels;
  bool matches;
};

TEST(LabelSelectorTest, MatchesTable) {
  const Labels web = {{"app", "web"}, {"tier", "frontend"}, {"replicas", "3"}};
  std::vector<MatchCase> cases = {
      {"", web, true},
      {"app=web", web, true},
      {"app==web", web, true},
      {"app=db", web, false},
      {"app!=db", web, true},
      {"app!=web", web, false},
      {"missing!=x", web, true},  // != matches objects without the label
      {"app in (db,web)", web, true},
      {"app in (db)", web, false},
      {"app notin (db)", web, true},
      {"app notin (web,db)", web, false},
      {"missing notin (x)", web, true},
      {"app", web, true},
      {"missing", web, false},
      {"!missing", web, true},
      {"!app", web, false},
      {"app=web,tier=frontend", web, true},
      {"app=web,tier=backend", web, false},
      {"  app = web ,  tier in ( frontend , x )  ", web, true},
      {"replicas>2", web, true},
      {"replicas>3", web, false},
      {"replicas<4", web, true},
      {"app>1", web, false},  // not an integer label value
      {"missing<4", web, false},
      {"app=", web, false},
      {"empty=", {{"empty", ""}}, true},
      {"empty in ()", {{"empty", ""}}, true},
      {"x in (,a)", {{"x", ""}}, true},
      {"in=notin", {{"in", "notin"}}, true},  // keywords are plain words in key/value places
      {"example.com/role=x", {{"example.com/role", "x"}}, true},
  };
  for (const MatchCase& c : cases) {
    SCOPED_TRACE(c.selector);
    absl::StatusOr<LabelSelector> sel = LabelSelector::Parse(c.selector);
    ASSERT_TRUE(sel.ok()) << sel.status();
    EXPECT_EQ(sel->Matches(c.labels), c.matches);
    // The canonical text parses to the same selector.
    absl::StatusOr<LabelSelector> again = LabelSelector::Parse(sel->ToString());
    ASSERT_TRUE(again.ok()) << sel->ToString() << " " << again.status();
    EXPECT_EQ(*again, *sel) << sel->ToString();
  }
}

TEST(LabelSelectorTest, CanonicalString) {
  struct Case {
    std::string in;
    std::string out;
  };
  std::vector<Case> cases = {
      {"", ""},
      {"b=1,a=2", "a=2,b=1"},
      {"a==x", "a=x"},
      {"x in (c, a, b, a)", "x in (a,b,c)"},
      {"x notin (b)", "x notin (b)"},
      {"!z, y", "y,!z"},
      {"n > 5", "n>5"},
      {"n<5", "n<5"},
      {"a!=", "a!="},
  };
  for (const Case& c : cases) {
    absl::StatusOr<LabelSelector> sel = LabelSelector::Parse(c.in);
    ASSERT_TRUE(sel.ok()) << c.in << " " << sel.status();
    EXPECT_EQ(sel->ToString(), c.out) << c.in;
  }
  EXPECT_TRUE(LabelSelector::Parse("").value().Empty());
  EXPECT_TRUE(LabelSelector::Parse("  ").value().Empty());
  EXPECT_FALSE(LabelSelector::Parse("a").value().Empty());
}

TEST(LabelSelectorTest, MalformedSelectors) {
  struct Case {
    std::string selector;
    std::string message;
  };
  std::vector<Case> cases = {
      {"a in (x", "unable to parse requirement \"a in (x\": found '', expected: ',' or ')'"},
      {"a in x", "unable to parse requirement \"a in x\": found 'x' expected: '('"},
      {"a in (x y)", "found 'y', expected: ',' or ')'"},
      {"a in (=)", "found '=', expected: ',', ')' or identifier"},
      {"a b",
       "unable to parse requirement \"a b\": found 'b', expected: in, notin, =, ==, "
       "!=, gt, lt"},
      {"a=b c", "found 'c', expected: ',' or 'end of string' after requirement \"a=b\""},
      {"a=b,", "found '', expected: identifier after ','"},
      {",a", "found ',', expected: !, identifier, or 'end of string'"},
      {"=a", "found '=', expected: !, identifier, or 'end of string'"},
      {"!", "unable to parse requirement \"!\": found '', expected: identifier"},
      {"!a=b", "found '=', expected: ',' or 'end of string' after requirement \"!a\""},
      {"a==(b)", "found '(', expected: identifier"},
      {"a=b=c", "found '=', expected: ',' or 'end of string'"},
      {"Bad Key", "found 'Key', expected: in, notin"},
      {"bad_key_=x",
       "unable to parse requirement \"bad_key_=x\": key: Invalid value: "
       "\"bad_key_\": name part must consist of alphanumeric characters"},
      {"a/b/c=x", "key: Invalid value: \"a/b/c\": a qualified name must consist"},
      {"a=-x", "values[0][a]: Invalid value: \"-x\": a valid label must be an empty string"},
      {"a in (ok,-bad)", "values[0][a]: Invalid value: \"-bad\""},
      {"n>x",
       "values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be "
       "an integer"},
      {"n<", "for 'Gt', 'Lt' operators, the value must be an integer"},
      {std::string("a=") + std::string(64, 'v'), "must be no more than 63 characters"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.selector);
    absl::StatusOr<LabelSelector> sel = LabelSelector::Parse(c.selector);
    ASSERT_FALSE(sel.ok());
    EXPECT_EQ(sel.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(Reason(sel.status()), "BadRequest");
    EXPECT_EQ(HttpCode(sel.status()), 400);
    EXPECT_THAT(std::string(sel.status().message()), HasSubstr(c.message));
  }
}

TEST(LabelSelectorTest, RequiresExactMatch) {
  LabelSelector sel = LabelSelector::Parse("app=web,tier in (a),x in (a,b),y!=z").value();
  EXPECT_EQ(sel.RequiresExactMatch("app"), "web");
  EXPECT_EQ(sel.RequiresExactMatch("tier"), "a");
  EXPECT_EQ(sel.RequiresExactMatch("x"), std::nullopt);
  EXPECT_EQ(sel.RequiresExactMatch("y"), std::nullopt);
  EXPECT_EQ(sel.RequiresExactMatch("nope"), std::nullopt);
}

TEST(LabelSelectorTest, FromJson) {
  nlohmann::json j = {{"matchLabels", {{"app", "web"}}},
                      {"matchExpressions",
                       {{{"key", "tier"}, {"operator", "In"}, {"values", {"b", "a"}}},
                        {{"key", "env"}, {"operator", "NotIn"}, {"values", {"prod"}}},
                        {{"key", "team"}, {"operator", "Exists"}},
                        {{"key", "legacy"}, {"operator", "DoesNotExist"}, {"values", nullptr}}}}};
  absl::StatusOr<LabelSelector> sel = LabelSelector::FromJson(j);
  ASSERT_TRUE(sel.ok()) << sel.status();
  EXPECT_EQ(sel->ToString(), "app=web,env notin (prod),!legacy,team,tier in (a,b)");
  EXPECT_TRUE(sel->Matches({{"app", "web"}, {"tier", "a"}, {"team", "x"}}));
  EXPECT_FALSE(sel->Matches({{"app", "web"}, {"tier", "a"}}));

  // null selects nothing, {} everything (LabelSelectorAsSelector).
  LabelSelector nothing = LabelSelector::FromJson(nullptr).value();
  EXPECT_FALSE(nothing.Matches({}));
  EXPECT_FALSE(nothing.Empty());
  LabelSelector everything = LabelSelector::FromJson(nlohmann::json::object()).value();
  EXPECT_TRUE(everything.Matches({{"a", "b"}}));
  EXPECT_TRUE(everything.Empty());
}

TEST(LabelSelectorTest, FromJsonErrors) {
  struct Case {
    nlohmann::json json;
    std::string message;
  };
  std::vector<Case> cases = {
      {{{"matchExpressions", {{{"key", "a"}, {"operator", "Foo"}}}}},
       "\"Foo\" is not a valid label selector operator"},
      {{{"matchExpressions",
         {{{"key", "a"}, {"operator", "In"}, {"values", nlohmann::json::array()}}}}},
       "matchExpressions[0].values: Invalid value: []: for 'in', 'notin' operators, values set "
       "can't be empty"},
      {{{"matchExpressions", {{{"key", "a"}, {"operator", "Exists"}, {"values", {"x"}}}}}},
       "values set must be empty for exists and does not exist"},
      {{{"matchExpressions", {{{"key", "bad key"}, {"operator", "Exists"}}}}},
       "matchExpressions[0].key: Invalid value: \"bad key\""},
      {{{"matchExpressions", {{{"key", "a"}, {"operator", "In"}, {"values", {1}}}}}},
       "values must be strings"},
      {{{"matchExpressions", {"x"}}}, "key and operator must be strings"},
      {{{"matchExpressions", 5}}, "matchExpressions must be a list"},
      {{{"matchLabels", {{"a", 1}}}}, "matchLabels[a] must be a string"},
      {{{"matchLabels", {{"a", "-x"}}}}, "matchLabels.values[0][a]: Invalid value: \"-x\""},
      {{{"matchLabels", "a=b"}}, "matchLabels must be a map"},
      {"app=web", "must be an object"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json.dump());
    absl::StatusOr<LabelSelector> sel = LabelSelector::FromJson(c.json);
    ASSERT_FALSE(sel.ok());
    EXPECT_EQ(sel.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(sel.status().message()), HasSubstr(c.message));
  }
}

TEST(LabelSelectorTest, FromLabelsAndLabelsOf) {
  LabelSelector sel = LabelSelector::FromLabels({{"b", "2"}, {"a", "1"}});
  EXPECT_EQ(sel.ToString(), "a=1,b=2");
  EXPECT_TRUE(sel.Matches({{"a", "1"}, {"b", "2"}, {"c", "3"}}));
  EXPECT_TRUE(LabelSelector::FromLabels({}).Empty());
  nlohmann::json obj = {{"metadata", {{"labels", {{"a", "1"}, {"n", 5}}}}}};
  EXPECT_EQ(LabelsOf(obj), (Labels{{"a", "1"}}));
  EXPECT_TRUE(LabelsOf(nlohmann::json::array()).empty());
  EXPECT_TRUE(LabelsOf({{"metadata", 1}}).empty());
}

TEST(FieldSelectorTest, MatchesTable) {
  const Fields pod = {{"metadata.name", "web"},
                      {"metadata.namespace", "default"},
                      {"status.phase", "Running"},
                      {"spec.note", "a,b=c\\d"}};
  struct Case {
    std::string selector;
    bool matches;
  };
  std::vector<Case> cases = {
      {"", true},
      {"metadata.name=web", true},
      {"metadata.name==web", true},
      {"metadata.name!=web", false},
      {"metadata.name=db", false},
      {"metadata.name=web,status.phase=Running", true},
      {"metadata.name=web,status.phase!=Running", false},
      {"metadata.name = web , status.phase != Pending", true},
      {"spec.nodeName=", true},  // an absent field reads as ""
      {"spec.nodeName!=", false},
      {"spec.note=a\\,b\\=c\\\\d", true},
      {",,metadata.name=web,", true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.selector);
    absl::StatusOr<FieldSelector> sel = FieldSelector::Parse(c.selector);
    ASSERT_TRUE(sel.ok()) << sel.status();
    EXPECT_EQ(sel->Matches(pod), c.matches);
    absl::StatusOr<FieldSelector> again = FieldSelector::Parse(sel->ToString());
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(*again, *sel) << sel->ToString();
  }
}

TEST(FieldSelectorTest, CanonicalStringAndExactMatch) {
  FieldSelector sel =
      FieldSelector::Parse("status.phase!=Failed,metadata.name==a\\,b,metadata.namespace=x")
          .value();
  EXPECT_EQ(sel.ToString(), "metadata.name=a\\,b,metadata.namespace=x,status.phase!=Failed");
  EXPECT_EQ(sel.RequiresExactMatch("metadata.name"), "a,b");
  EXPECT_EQ(sel.RequiresExactMatch("metadata.namespace"), "x");
  EXPECT_EQ(sel.RequiresExactMatch("status.phase"), std::nullopt);
  EXPECT_EQ(sel.RequiresExactMatch("other"), std::nullopt);
  EXPECT_FALSE(sel.Empty());
  EXPECT_TRUE(FieldSelector::Parse("").value().Empty());
  EXPECT_TRUE(FieldSelector::Everything().Matches({}));
}

TEST(FieldSelectorTest, Malformed) {
  struct Case {
    std::string selector;
    std::string message;
  };
  std::vector<Case> cases = {
      {"metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"},
      {"a=b,c", "can't understand 'c'"},
      {"=x", "can't understand '=x'"},
      {"a! =x", "can't understand 'a! =x'"},
      {"a=b=c", "invalid field selector: unescaped character in value: '='"},
      {"a=b\\", "invalid field selector: invalid escape sequence: \\"},
      {"a=b\\x", "invalid field selector: invalid escape sequence: \\x"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.selector);
    absl::StatusOr<FieldSelector> sel = FieldSelector::Parse(c.selector);
    ASSERT_FALSE(sel.ok());
    EXPECT_EQ(Reason(sel.status()), "BadRequest");
    EXPECT_THAT(std::string(sel.status().message()), HasSubstr(c.message));
  }
}

TEST(FieldSelectorTest, ValidateFields) {
  FieldSelector sel = FieldSelector::Parse("metadata.name=a,spec.foo=b").value();
  absl::Status status = sel.ValidateFields({"metadata.name", "metadata.namespace"});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "field label not supported: spec.foo");
  EXPECT_EQ(HttpCode(status), 400);
  EXPECT_TRUE(sel.ValidateFields({"metadata.name", "spec.foo"}).ok());
}

TEST(FieldSelectorTest, EscapeRoundTrip) {
  for (const char* v : {"", "plain", "a,b", "x=y", "back\\slash", "\\,=\\"}) {
    std::string escaped = EscapeFieldValue(v);
    absl::StatusOr<std::string> back = UnescapeFieldValue(escaped);
    ASSERT_TRUE(back.ok()) << v;
    EXPECT_EQ(*back, v);
  }
}

// Untrusted input: any byte string yields a selector or a BadRequest, never a crash, and a
// parsed selector's canonical text parses back to it.
TEST(SelectorRobustnessTest, RandomInputs) {
  const std::string alphabet = "ab=!(),<>\\ in notin 09-_./\x00\xff";
  std::mt19937 gen(7);
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    size_t len = gen() % 24;
    for (size_t j = 0; j < len; ++j) text += alphabet[gen() % alphabet.size()];
    absl::StatusOr<LabelSelector> label = LabelSelector::Parse(text);
    if (label.ok()) {
      absl::StatusOr<LabelSelector> again = LabelSelector::Parse(label->ToString());
      ASSERT_TRUE(again.ok()) << text;
      EXPECT_EQ(*again, *label) << text;
      label->Matches({{"a", "b"}});
    } else {
      EXPECT_EQ(label.status().code(), absl::StatusCode::kInvalidArgument);
    }
    absl::StatusOr<FieldSelector> field = FieldSelector::Parse(text);
    if (field.ok()) {
      absl::StatusOr<FieldSelector> again = FieldSelector::Parse(field->ToString());
      ASSERT_TRUE(again.ok()) << text;
      EXPECT_EQ(*again, *field) << text;
    } else {
      EXPECT_EQ(field.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace ctrlhost::kube
