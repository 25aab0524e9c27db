// JSONPath as CRD printer columns use it: fields, quoted names, indexes, slices, wildcards,
// recursive descent, filters, and malformed expressions that must fail cleanly.
#include "runtime/apiserver/jsonpath.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::apiserver {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const nlohmann::json& Doc() {
  static const nlohmann::json* const kDoc = new nlohmann::json(nlohmann::json::parse(R"({
    "metadata": {"name": "w", "labels": {"app.kubernetes.io/name": "web", "tier": "gold"}},
    "spec": {"replicas": 3, "ratio": 0.5, "paused": false, "ports": [80, 443, 8080, 9090]},
    "status": {
      "conditions": [
        {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
        {"type": "Ready", "status": "False", "reason": "Starting", "observed": 2},
        {"type": "Synced", "status": "True", "observed": 5, "lastTransitionTime": "x"}
      ],
      "items": [{"name": "a", "size": 1}, {"name": "b", "size": 2.5}, {"name": "c"}]
    }
  })"));
  return *kDoc;
}

// The values `path` finds in Doc(), each dumped as JSON.
std::vector<std::string> Find(const std::string& path) {
  auto p = JsonPath::Parse(path);
  EXPECT_TRUE(p.ok()) << path << ": " << p.status();
  if (!p.ok()) return {};
  std::vector<std::string> out;
  for (const nlohmann::json* v : p->FindAll(Doc())) out.push_back(v->dump());
  return out;
}

TEST(JsonPathTest, Fields) {
  EXPECT_THAT(Find(".spec.replicas"), ElementsAre("3"));
  EXPECT_THAT(Find("{.spec.replicas}"), ElementsAre("3"));
  EXPECT_THAT(Find("$.spec.replicas"), ElementsAre("3"));
  EXPECT_THAT(Find("spec.replicas"), ElementsAre("3"));
  EXPECT_THAT(Find(".metadata.name"), ElementsAre("\"w\""));
  EXPECT_THAT(Find(".spec.paused"), ElementsAre("false"));
  EXPECT_THAT(Find(".spec"), ElementsAre(Doc()["spec"].dump()));
  EXPECT_THAT(Find("."), ElementsAre(Doc().dump()));
}

TEST(JsonPathTest, MissingKeysAreNoResult) {
  EXPECT_THAT(Find(".spec.nothing"), IsEmpty());
  EXPECT_THAT(Find(".nothing.at.all"), IsEmpty());
  EXPECT_THAT(Find(".spec.replicas.deeper"), IsEmpty());  // a field of a number
  EXPECT_THAT(Find(".spec.ports.name"), IsEmpty());       // a field of an array
}

TEST(JsonPathTest, QuotedAndEscapedNames) {
  EXPECT_THAT(Find(".metadata.labels['app.kubernetes.io/name']"), ElementsAre("\"web\""));
  EXPECT_THAT(Find(R"(.metadata.labels["app.kubernetes.io/name"])"), ElementsAre("\"web\""));
  EXPECT_THAT(Find(R"(.metadata.labels.app\.kubernetes\.io/name)"), ElementsAre("\"web\""));
  EXPECT_THAT(Find(".metadata.labels['tier','nope','app.kubernetes.io/name']"),
              ElementsAre("\"gold\"", "\"web\""));
  EXPECT_THAT(Find(R"(.metadata['la\'bels'])"), IsEmpty());
}

TEST(JsonPathTest, IndexesAndSlices) {
  EXPECT_THAT(Find(".spec.ports[0]"), ElementsAre("80"));
  EXPECT_THAT(Find(".spec.ports[-1]"), ElementsAre("9090"));
  EXPECT_THAT(Find(".spec.ports[-4]"), ElementsAre("80"));
  EXPECT_THAT(Find(".spec.ports[4]"), IsEmpty());
  EXPECT_THAT(Find(".spec.ports[-5]"), IsEmpty());
  EXPECT_THAT(Find(".spec.ports[0,2]"), ElementsAre("80", "8080"));
  EXPECT_THAT(Find(".spec.ports[1:3]"), ElementsAre("443", "8080"));
  EXPECT_THAT(Find(".spec.ports[:2]"), ElementsAre("80", "443"));
  EXPECT_THAT(Find(".spec.ports[-2:]"), ElementsAre("8080", "9090"));
  EXPECT_THAT(Find(".spec.ports[::2]"), ElementsAre("80", "8080"));
  EXPECT_THAT(Find(".spec.ports[2:100]"), ElementsAre("8080", "9090"));
  EXPECT_THAT(Find(".spec.replicas[0]"), IsEmpty());  // not an array
  EXPECT_THAT(Find(".status.items[1].name"), ElementsAre("\"b\""));
}

TEST(JsonPathTest, Wildcards) {
  EXPECT_THAT(Find(".status.items[*].name"), ElementsAre("\"a\"", "\"b\"", "\"c\""));
  EXPECT_THAT(Find(".status.items.*.size"), ElementsAre("1", "2.5"));
  EXPECT_THAT(Find(".metadata.labels[*]"), ElementsAre("\"web\"", "\"gold\""));
  EXPECT_THAT(Find(".status.conditions[*].observed"), ElementsAre("2", "5"));
}

TEST(JsonPathTest, RecursiveDescent) {
  EXPECT_THAT(Find("..observed"), ElementsAre("2", "5"));
  EXPECT_THAT(Find(".status..name"), ElementsAre("\"a\"", "\"b\"", "\"c\""));
  EXPECT_THAT(Find("..ports[1]"), ElementsAre("443"));
}

TEST(JsonPathTest, Filters) {
  EXPECT_THAT(Find(R"(.status.conditions[?(@.type=="Ready")].status)"), ElementsAre("\"False\""));
  EXPECT_THAT(Find(".status.conditions[?(@.type=='Ready')].reason"), ElementsAre("\"Starting\""));
  EXPECT_THAT(Find(R"(.status.conditions[?( @.type == "Synced" )].status)"),
              ElementsAre("\"True\""));
  EXPECT_THAT(Find(R"(.status.conditions[?(@.status!="True")].type)"), ElementsAre("\"Ready\""));
  EXPECT_THAT(Find(R"(.status.conditions[?(@.type=="Gone")].status)"), IsEmpty());
  EXPECT_THAT(Find(".status.conditions[?(@.observed)].type"),
              ElementsAre("\"Ready\"", "\"Synced\""));
  // != skips elements without the field, as upstream.
  EXPECT_THAT(Find(".status.conditions[?(@.observed!=2)].type"), ElementsAre("\"Synced\""));
  EXPECT_THAT(Find(".status.conditions[?(@.observed>2)].type"), ElementsAre("\"Synced\""));
  EXPECT_THAT(Find(".status.conditions[?(@.observed>=2)].type"),
              ElementsAre("\"Ready\"", "\"Synced\""));
  EXPECT_THAT(Find(".status.conditions[?(@.observed<5)].type"), ElementsAre("\"Ready\""));
  EXPECT_THAT(Find(".status.conditions[?(@.observed<=5.0)].type"),
              ElementsAre("\"Ready\"", "\"Synced\""));
  EXPECT_THAT(Find(".status.items[?(@.size==2.5)].name"), ElementsAre("\"b\""));
  EXPECT_THAT(Find(".status.items[?(@.size>1)].name"), ElementsAre("\"b\""));
  // Strings order lexicographically; different types never match.
  EXPECT_THAT(Find(".status.conditions[?(@.type<'S')].type"),
              ElementsAre("\"Available\"", "\"Ready\""));
  EXPECT_THAT(Find(".status.conditions[?(@.observed=='2')].type"), IsEmpty());
  EXPECT_THAT(Find(".status.conditions[?(@.type==2)].type"), IsEmpty());
  // The filtered value and literal may swap sides; filters over non-arrays find nothing.
  EXPECT_THAT(Find(R"(.status.conditions[?("Ready"==@.type)].reason)"),
              ElementsAre("\"Starting\""));
  EXPECT_THAT(Find(".spec[?(@.replicas==3)]"), IsEmpty());
  // Paths inside filters go deeper; @ alone is the element.
  EXPECT_THAT(Find(".spec.ports[?(@>=8080)]"), ElementsAre("8080", "9090"));
}

TEST(JsonPathTest, FilterOnBooleansAndNull) {
  const nlohmann::json doc = nlohmann::json::parse(
      R"({"l":[{"n":"a","ok":true},{"n":"b","ok":false},{"n":"c","ok":null}]})");
  auto find = [&doc](const char* path) {
    std::vector<std::string> out;
    for (const nlohmann::json* v : JsonPath::Parse(path)->FindAll(doc)) out.push_back(v->dump());
    return out;
  };
  EXPECT_THAT(find(".l[?(@.ok==true)].n"), ElementsAre("\"a\""));
  EXPECT_THAT(find(".l[?(@.ok!=true)].n"), ElementsAre("\"b\""));
  EXPECT_THAT(find(".l[?(@.ok==null)].n"), ElementsAre("\"c\""));
  EXPECT_THAT(find(".l[?(@.ok<true)].n"), IsEmpty());
}

TEST(JsonPathTest, FindFirst) {
  auto p = JsonPath::Parse(".status.conditions[*].type");
  ASSERT_TRUE(p.ok());
  ASSERT_NE(p->FindFirst(Doc()), nullptr);
  EXPECT_EQ(*p->FindFirst(Doc()), "Available");
  EXPECT_EQ(JsonPath::Parse(".x")->FindFirst(Doc()), nullptr);
  EXPECT_EQ(p->expression(), ".status.conditions[*].type");
}

TEST(JsonPathTest, MalformedExpressionsAreErrors) {
  for (const char* bad : {"",
                          "   ",
                          "{}",
                          "{.a",
                          ".a[",
                          ".a[0",
                          ".a[x]",
                          ".a['x]",
                          ".a['x'",
                          ".a['x' 'y']",
                          ".a[?(@.x=='y')",
                          ".a[?(@.x=='y']",
                          ".a[?@.x=='y')]",
                          ".a[?(@.x==)]",
                          ".a[?(@.x=~'y')]",
                          ".a[?(@.x<>'y')]",
                          ".a[?('y')]",
                          ".a[?(@.x=='y' && @.z=='w')]",
                          ".a[1:2:0]",
                          ".a[1:2:-1]",
                          "..",
                          "..[",
                          ".a..",
                          ".a.b)",
                          ".a b",
                          "{.a}{.b}",
                          "x{.a}",
                          "{range .items[*]}{.name}{end}",
                          ".a\\",
                          ".a[99999999999999999999]"}) {
    auto p = JsonPath::Parse(bad);
    EXPECT_FALSE(p.ok()) << "\"" << bad << "\" parsed";
    if (!p.ok()) {
      EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    }
  }
}

TEST(JsonPathTest, HostileInputIsBounded) {
  // Too long.
  EXPECT_FALSE(JsonPath::Parse(std::string(JsonPath::kMaxLength + 1, 'a')).ok());
  // Nested filters beyond the limit fail to parse instead of recursing without bound.
  std::string nested = ".a";
  for (int i = 0; i < 1000; ++i) nested += "[?(@";
  EXPECT_FALSE(JsonPath::Parse(nested).ok());
  std::string ok_nested = ".l[?(@.m[?(@.n==1)])].name";
  auto p = JsonPath::Parse(ok_nested);
  ASSERT_TRUE(p.ok()) << p.status();
  const nlohmann::json doc =
      nlohmann::json::parse(R"({"l":[{"name":"x","m":[{"n":1}]},{"name":"y","m":[{"n":2}]}]})");
  ASSERT_EQ(p->FindAll(doc).size(), 1u);
  EXPECT_EQ(*p->FindAll(doc)[0], "x");
  // Recursive descent over a deep document walks without recursion.
  nlohmann::json deep = 1;
  for (int i = 0; i < 20000; ++i) {
    nlohmann::json wrapper = nlohmann::json::array();
    wrapper.push_back(std::move(deep));
    deep = std::move(wrapper);
  }
  EXPECT_EQ(JsonPath::Parse("..*")->FindAll(deep).size(), 20000u);
  // Every byte value as an expression: no crash whatever it parses to.
  for (int c = 0; c < 256; ++c) {
    const std::string s = ".a" + std::string(1, static_cast<char>(c)) + "b";
    auto q = JsonPath::Parse(s);
    if (q.ok()) q->FindAll(Doc());
  }
  // Deep nlohmann values are destroyed recursively; unwind it by hand.
  while (deep.is_array() && !deep.empty()) {
    nlohmann::json inner = std::move(deep[0]);
    deep = std::move(inner);
  }
}

}  // namespace
}  // namespace ctrlhost::apiserver
