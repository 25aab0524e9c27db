#include "runtime/kube/validation.h"

#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ctrlhost::kube {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr char kSubdomainRegexMsg[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

TEST(ValidationTest, Dns1123Subdomain) {
  for (const char* ok : {"a", "web", "my-app.example.com", "0", "a.b.c", "x1-2-3"}) {
    EXPECT_THAT(IsDns1123Subdomain(ok), IsEmpty()) << ok;
  }
  for (const char* bad : {"", "Bad_Name", "-a", "a-", "a..b", ".a", "a.", "a b", "UPPER"}) {
    EXPECT_THAT(IsDns1123Subdomain(bad), ElementsAre(kSubdomainRegexMsg)) << bad;
  }
  EXPECT_THAT(IsDns1123Subdomain(std::string(253, 'a')), IsEmpty());
  EXPECT_THAT(IsDns1123Subdomain(std::string(254, 'a')),
              ElementsAre("must be no more than 253 characters"));
}

TEST(ValidationTest, Dns1123Label) {
  EXPECT_THAT(IsDns1123Label("kube-system"), IsEmpty());
  EXPECT_THAT(IsDns1123Label(std::string(63, 'a')), IsEmpty());
  EXPECT_THAT(IsDns1123Label(std::string(64, 'a')),
              ElementsAre("must be no more than 63 characters"));
  // apimachinery's RegexError really writes two spaces before "or".
  EXPECT_THAT(IsDns1123Label("a.b"),
              ElementsAre("a lowercase RFC 1123 label must consist of lower case alphanumeric "
                          "characters or '-', and must start and end with an alphanumeric "
                          "character (e.g. 'my-name',  or '123-abc', regex used for validation "
                          "is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"));
  EXPECT_THAT(IsDns1123Label(""), SizeIs(1));
}

TEST(ValidationTest, QualifiedName) {
  for (const char* ok : {"app", "App_1.x-y", "example.com/name", "k8s.io/My.Name", "a/b"}) {
    EXPECT_THAT(IsQualifiedName(ok), IsEmpty()) << ok;
  }
  EXPECT_THAT(IsQualifiedName("/a"), ElementsAre("prefix part must be non-empty"));
  EXPECT_THAT(IsQualifiedName("Example.com/a"),
              ElementsAre(::testing::StartsWith("prefix part a lowercase RFC 1123 subdomain")));
  std::vector<std::string> empty_name = IsQualifiedName("example.com/");
  ASSERT_THAT(empty_name, SizeIs(2));
  EXPECT_EQ(empty_name[0], "name part must be non-empty");
  EXPECT_EQ(empty_name[1],
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
            "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')");
  EXPECT_THAT(IsQualifiedName(std::string(64, 'a')),
              ElementsAre("name part must be no more than 63 characters"));
  EXPECT_THAT(IsQualifiedName("a/b/c"),
              ElementsAre(::testing::StartsWith("a qualified name must consist of")));
  EXPECT_THAT(IsQualifiedName("-a"), SizeIs(1));
  EXPECT_THAT(IsQualifiedName("a b"), SizeIs(1));
}

TEST(ValidationTest, LabelValue) {
  for (const char* ok : {"", "v1", "My_Value.2", "a"}) {
    EXPECT_THAT(IsValidLabelValue(ok), IsEmpty()) << ok;
  }
  EXPECT_THAT(IsValidLabelValue("-x"),
              ElementsAre(::testing::StartsWith("a valid label must be an empty string or")));
  EXPECT_THAT(IsValidLabelValue("a/b"), SizeIs(1));
  EXPECT_THAT(IsValidLabelValue(std::string(64, 'a')),
              ElementsAre("must be no more than 63 characters"));
}

TEST(ValidationTest, PathSegmentAndNameRules) {
  EXPECT_THAT(IsValidPathSegmentName(".."), ElementsAre("may not be '..'"));
  EXPECT_THAT(IsValidPathSegmentName("a/b%c"),
              ElementsAre("may not contain '/'", "may not contain '%'"));
  EXPECT_THAT(IsValidPathSegmentName("Any Thing:ok"), IsEmpty());
  EXPECT_THAT(ValidateName("web-", NameRule::kDns1123Subdomain, /*prefix=*/true), IsEmpty());
  EXPECT_THAT(ValidateName("web-", NameRule::kDns1123Subdomain, /*prefix=*/false), SizeIs(1));
  EXPECT_THAT(ValidateName("a.b", NameRule::kDns1123Label, false), SizeIs(1));
  EXPECT_THAT(ValidateName("a.b", NameRule::kDns1123Subdomain, false), IsEmpty());
}

TEST(ValidationTest, GenerateName) {
  std::mt19937 gen(42);
  std::string name = GenerateName("web-", gen);
  ASSERT_EQ(name.size(), 9u);
  EXPECT_EQ(name.substr(0, 4), "web-");
  EXPECT_THAT(IsDns1123Subdomain(name), IsEmpty());
  EXPECT_EQ(name.substr(4).find_first_of("aeiou013"), std::string::npos);
  std::string long_name = GenerateName(std::string(100, 'x'));
  EXPECT_EQ(long_name.size(), kMaxGeneratedNameLength + kGeneratedNameSuffixLength);
  EXPECT_THAT(IsDns1123Label(long_name), IsEmpty());

  nlohmann::json obj = {{"metadata", {{"generateName", "cm-"}}}};
  EXPECT_TRUE(ApplyGenerateName(obj, gen));
  EXPECT_THAT(obj["metadata"]["name"].get<std::string>(), ::testing::StartsWith("cm-"));
  EXPECT_FALSE(ApplyGenerateName(obj, gen));  // a name is set now
  nlohmann::json no_gen = {{"metadata", {{"name", ""}}}};
  EXPECT_FALSE(ApplyGenerateName(no_gen));
  nlohmann::json weird = {{"metadata", {{"generateName", 5}}}};
  EXPECT_FALSE(ApplyGenerateName(weird));
  nlohmann::json not_object = 3;
  EXPECT_FALSE(ApplyGenerateName(not_object));
}

nlohmann::json ConfigMap(nlohmann::json meta) {
  return {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", std::move(meta)}};
}

TEST(ValidationTest, ObjectMetaValid) {
  nlohmann::json obj = ConfigMap({{"name", "web"},
                                  {"namespace", "default"},
                                  {"generation", 3},
                                  {"labels", {{"app.kubernetes.io/name", "web"}, {"tier", ""}}},
                                  {"annotations", {{"Example.com/Note", "anything at all"}}},
                                  {"finalizers", {"ctrlhost.dev/cleanup", "orphan"}},
                                  {"ownerReferences",
                                   {{{"apiVersion", "apps/v1"},
                                     {"kind", "Deployment"},
                                     {"name", "web"},
                                     {"uid", "1234"},
                                     {"controller", true}}}}});
  EXPECT_THAT(ValidateObjectMeta(obj, NameRule::kDns1123Subdomain, true), IsEmpty());
}

TEST(ValidationTest, ObjectMetaBadNameMatchesServerMessage) {
  std::vector<StatusCause> causes =
      ValidateObjectMeta(ConfigMap({{"name", "Bad_Name"}, {"namespace", "default"}}),
                         NameRule::kDns1123Subdomain, true);
  ASSERT_THAT(causes, SizeIs(1));
  absl::Status status = InvalidError("", "ConfigMap", "Bad_Name", causes);
  EXPECT_EQ(status.message(),
            std::string("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: "
                        "\"Bad_Name\": ") +
                kSubdomainRegexMsg);
}

TEST(ValidationTest, ObjectMetaNameAndNamespaceRules) {
  auto fields = [](const std::vector<StatusCause>& causes) {
    std::vector<std::string> out;
    for (const StatusCause& c : causes) out.push_back(c.field + " " + c.reason);
    return out;
  };
  EXPECT_THAT(
      fields(ValidateObjectMeta(ConfigMap(nlohmann::json::object()), NameRule::kDns1123Subdomain,
                                true)),
      ElementsAre("metadata.name FieldValueRequired", "metadata.namespace FieldValueRequired"));
  std::vector<StatusCause> no_name =
      ValidateObjectMeta(ConfigMap({{"namespace", "x"}}), NameRule::kDns1123Subdomain, true);
  ASSERT_THAT(no_name, SizeIs(1));
  EXPECT_EQ(no_name[0].message, "Required value: name or generateName is required");

  EXPECT_THAT(fields(ValidateObjectMeta(ConfigMap({{"name", "ns1"}, {"namespace", "x"}}),
                                        NameRule::kDns1123Label, false)),
              ElementsAre("metadata.namespace FieldValueForbidden"));
  EXPECT_THAT(fields(ValidateObjectMeta(ConfigMap({{"name", "a"}, {"namespace", "Bad.NS"}}),
                                        NameRule::kDns1123Subdomain, true)),
              ElementsAre("metadata.namespace FieldValueInvalid"));
  EXPECT_THAT(fields(ValidateObjectMeta(
                  ConfigMap({{"name", "ok"}, {"generateName", "Bad-"}, {"namespace", "d"}}),
                  NameRule::kDns1123Subdomain, true)),
              ElementsAre("metadata.generateName FieldValueInvalid"));
  EXPECT_THAT(fields(ValidateObjectMeta(ConfigMap({{"name", 7}, {"namespace", "d"}}),
                                        NameRule::kDns1123Subdomain, true)),
              ElementsAre("metadata.name FieldValueInvalid", "metadata.name FieldValueRequired"));
  EXPECT_THAT(
      fields(ValidateObjectMeta(ConfigMap({{"name", "a"}, {"namespace", "d"}, {"generation", -1}}),
                                NameRule::kDns1123Subdomain, true)),
      ElementsAre("metadata.generation FieldValueInvalid"));
  EXPECT_THAT(fields(ValidateObjectMeta(nlohmann::json::array(), NameRule::kPathSegment, false)),
              ElementsAre("metadata.name FieldValueRequired"));
  EXPECT_THAT(fields(ValidateObjectMeta({{"metadata", "x"}}, NameRule::kPathSegment, false)),
              ElementsAre("metadata FieldValueInvalid", "metadata.name FieldValueRequired"));
}

TEST(ValidationTest, LabelsAndAnnotations) {
  std::vector<StatusCause> causes =
      ValidateLabels({{"bad key", "v"}, {"ok", "-bad"}, {"n", 5}}, "metadata.labels");
  ASSERT_THAT(causes, SizeIs(3));
  EXPECT_EQ(causes[0].field, "metadata.labels");
  EXPECT_THAT(causes[0].message, ::testing::StartsWith("Invalid value: \"bad key\": name part"));
  EXPECT_THAT(causes[1].message, HasSubstr("must be strings"));
  EXPECT_THAT(causes[2].message, ::testing::StartsWith("Invalid value: \"-bad\": a valid label"));
  EXPECT_THAT(ValidateLabels("str", "metadata.labels"), SizeIs(1));
  EXPECT_THAT(ValidateLabels(nullptr, "metadata.labels"), IsEmpty());

  EXPECT_THAT(ValidateAnnotations({{"UPPER.example.com/Key", "v"}}, "metadata.annotations"),
              IsEmpty());
  EXPECT_THAT(ValidateAnnotations({{"a/b/c", "v"}}, "metadata.annotations"), SizeIs(1));
  // The limit is on the sum of keys and values: exactly at the limit passes, one over fails.
  nlohmann::json at_limit = {{"k", std::string(kTotalAnnotationSizeLimitBytes - 1, 'v')}};
  EXPECT_THAT(ValidateAnnotations(at_limit, "metadata.annotations"), IsEmpty());
  nlohmann::json over = {{"k", std::string(kTotalAnnotationSizeLimitBytes, 'v')}};
  std::vector<StatusCause> too_long = ValidateAnnotations(over, "metadata.annotations");
  ASSERT_THAT(too_long, SizeIs(1));
  EXPECT_EQ(too_long[0].reason, "FieldValueTooLong");
  EXPECT_EQ(too_long[0].message, "Too long: may not be longer than 262144");
}

TEST(ValidationTest, FinalizersAndOwnerReferences) {
  std::vector<StatusCause> causes = ValidateObjectMeta(
      ConfigMap({{"name", "a"},
                 {"namespace", "d"},
                 {"finalizers", {"bad finalizer", "orphan", "foregroundDeletion", 3}},
                 {"ownerReferences",
                  {{{"apiVersion", "apps/"}, {"kind", "X"}, {"controller", true}},
                   {{"apiVersion", "v1"},
                    {"kind", "Y"},
                    {"name", "y"},
                    {"uid", "u"},
                    {"controller", true}},
                   "junk"}}}),
      NameRule::kDns1123Subdomain, true);
  std::vector<std::string> got;
  for (const StatusCause& c : causes) got.push_back(c.field + ": " + c.message);
  EXPECT_THAT(got, ::testing::Contains(HasSubstr(
                       "metadata.ownerReferences.apiVersion: Invalid value: \"apps/\": version "
                       "must not be empty")));
  EXPECT_THAT(got, ::testing::Contains(
                       "metadata.ownerReferences.name: Invalid value: \"\": name must not be "
                       "empty"));
  EXPECT_THAT(got, ::testing::Contains("metadata.ownerReferences.uid: Invalid value: \"\": uid "
                                       "must not be empty"));
  EXPECT_THAT(got, ::testing::Contains(HasSubstr(
                       "Only one reference can have Controller set to true. Found \"true\" in "
                       "references for X/ and Y/y")));
  EXPECT_THAT(got, ::testing::Contains(HasSubstr("metadata.finalizers: Invalid value: \"bad "
                                                 "finalizer\": name part must consist")));
  EXPECT_THAT(got, ::testing::Contains(
                       HasSubstr("finalizer orphan and foregroundDeletion cannot be both set")));
  EXPECT_THAT(got, ::testing::Contains("metadata.finalizers: Invalid value: 3: must be a string"));
  EXPECT_THAT(got, ::testing::Contains(HasSubstr("metadata.ownerReferences: Invalid value: "
                                                 "\"junk\": must be an object")));
}

}  // namespace
}  // namespace ctrlhost::kube
