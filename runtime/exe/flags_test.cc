#include "runtime/exe/flags.h"

#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace ctrlhost::exe {
namespace {

using Args = std::vector<std::string>;

// A flag set with one flag of every type, as a command would declare it.
class FlagsTest : public ::testing::Test {
 protected:
  FlagsTest() : flags_("ctrlhost run", "Runs things.") {
    flags_.AddString("kubeconfig", &kubeconfig_, "Cluster").ValueName("PATH");
    flags_.AddString("file", &file_, "Operator file").Short('f').Required().ValueName("PATH");
    flags_.AddInt("port", &port_, 1, 65535, "Port");
    flags_.AddBool("insecure-http", &insecure_, "Plain HTTP");
    flags_.AddBool("color", &color_, "Colors");
    flags_.AddDuration("timeout", &timeout_, "Deadline").MinDuration(absl::ZeroDuration());
    flags_.AddStrings("arg", &list_, "Argument");
    flags_.AddEnum("output", &output_, {"table", "yaml", "json"}, "Format").Short('o');
  }

  // Parses and returns the error message, or "" on success.
  std::string Error(const Args& args) {
    absl::StatusOr<ParseOutcome> outcome = flags_.Parse(args);
    if (outcome.ok()) return "";
    EXPECT_EQ(outcome.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(outcome.status().message());
  }

  std::string kubeconfig_;
  std::string file_;
  int64_t port_ = 6443;
  bool insecure_ = false;
  bool color_ = true;
  absl::Duration timeout_ = absl::Seconds(5);
  std::vector<std::string> list_;
  std::string output_ = "table";
  FlagSet flags_;
};

TEST_F(FlagsTest, DefaultsStayWhenFlagsAreAbsent) {
  EXPECT_EQ(Error({"-f", "x.yaml"}), "");
  EXPECT_EQ(port_, 6443);
  EXPECT_FALSE(insecure_);
  EXPECT_TRUE(color_);
  EXPECT_EQ(timeout_, absl::Seconds(5));
  EXPECT_EQ(output_, "table");
  EXPECT_FALSE(flags_.IsSet("port"));
  EXPECT_TRUE(flags_.IsSet("file"));
}

TEST_F(FlagsTest, SpaceAndEqualsFormsBothWork) {
  EXPECT_EQ(Error({"--file", "a.yaml", "--port=8080", "--kubeconfig", "k", "--output=json"}), "");
  EXPECT_EQ(file_, "a.yaml");
  EXPECT_EQ(port_, 8080);
  EXPECT_EQ(kubeconfig_, "k");
  EXPECT_EQ(output_, "json");
}

TEST_F(FlagsTest, ShortFormsWork) {
  EXPECT_EQ(Error({"-f", "a.yaml", "-o=yaml"}), "");
  EXPECT_EQ(file_, "a.yaml");
  EXPECT_EQ(output_, "yaml");
}

TEST_F(FlagsTest, EqualsFormKeepsEqualsInValue) {
  EXPECT_EQ(Error({"--file=a=b.yaml"}), "");
  EXPECT_EQ(file_, "a=b.yaml");
}

TEST_F(FlagsTest, EmptyValueWithEquals) {
  EXPECT_EQ(Error({"-f", "x", "--kubeconfig="}), "");
  EXPECT_EQ(kubeconfig_, "");
  EXPECT_TRUE(flags_.IsSet("kubeconfig"));
}

TEST_F(FlagsTest, BoolForms) {
  EXPECT_EQ(Error({"-f", "x", "--insecure-http", "--no-color"}), "");
  EXPECT_TRUE(insecure_);
  EXPECT_FALSE(color_);
  EXPECT_EQ(Error({"-f", "x", "--insecure-http=false", "--color=true"}), "");
  EXPECT_FALSE(insecure_);
  EXPECT_TRUE(color_);
}

TEST_F(FlagsTest, BoolDoesNotConsumeNextArgument) {
  std::vector<std::string> positionals;
  flags_.SetPositionals("[ARG]", 0, 1, &positionals);
  EXPECT_EQ(Error({"-f", "x", "--insecure-http", "false"}), "");
  EXPECT_TRUE(insecure_);
  EXPECT_EQ(positionals, Args{"false"});
}

TEST_F(FlagsTest, BadBoolValue) {
  EXPECT_EQ(Error({"-f", "x", "--insecure-http=maybe"}),
            "invalid value \"maybe\" for --insecure-http: must be true or false");
}

TEST_F(FlagsTest, NegatedBoolTakesNoValue) {
  EXPECT_EQ(Error({"-f", "x", "--no-color=true"}), "--no-color takes no value; use --color=false");
}

TEST_F(FlagsTest, NoPrefixOnlyForBools) {
  EXPECT_EQ(Error({"-f", "x", "--no-port"}), "unknown flag --no-port for \"ctrlhost run\"");
}

TEST_F(FlagsTest, DurationParses) {
  EXPECT_EQ(Error({"-f", "x", "--timeout", "1m30s"}), "");
  EXPECT_EQ(timeout_, absl::Seconds(90));
  EXPECT_EQ(Error({"-f", "x", "--timeout=250ms"}), "");
  EXPECT_EQ(timeout_, absl::Milliseconds(250));
}

TEST_F(FlagsTest, BadDuration) {
  EXPECT_EQ(Error({"-f", "x", "--timeout", "abc"}),
            "invalid value \"abc\" for --timeout: not a duration (e.g. 30s, 1m30s)");
  // A bare number has no unit: refused rather than guessed.
  EXPECT_EQ(Error({"-f", "x", "--timeout", "30"}),
            "invalid value \"30\" for --timeout: not a duration (e.g. 30s, 1m30s)");
  EXPECT_EQ(Error({"-f", "x", "--timeout", "inf"}),
            "invalid value \"inf\" for --timeout: not a duration (e.g. 30s, 1m30s)");
}

TEST_F(FlagsTest, DurationBelowMinimum) {
  EXPECT_EQ(Error({"-f", "x", "--timeout=-1s"}), "--timeout must be at least 0, got -1s");
}

TEST_F(FlagsTest, NotAnInteger) {
  EXPECT_EQ(Error({"-f", "x", "--port", "abc"}),
            "invalid value \"abc\" for --port: not an integer");
  EXPECT_EQ(Error({"-f", "x", "--port=1.5"}), "invalid value \"1.5\" for --port: not an integer");
  EXPECT_EQ(Error({"-f", "x", "--port="}), "invalid value \"\" for --port: not an integer");
}

TEST_F(FlagsTest, IntegerOutOfRange) {
  EXPECT_EQ(Error({"-f", "x", "--port", "70000"}), "--port must be between 1 and 65535, got 70000");
  EXPECT_EQ(Error({"-f", "x", "--port", "0"}), "--port must be between 1 and 65535, got 0");
  EXPECT_EQ(Error({"-f", "x", "--port=-3"}), "--port must be between 1 and 65535, got -3");
  // Beyond int64: still a range error, not "not an integer".
  EXPECT_EQ(Error({"-f", "x", "--port", "99999999999999999999999"}),
            "--port must be between 1 and 65535, got 99999999999999999999999");
}

TEST_F(FlagsTest, IntegerAcceptsNegativeValueAfterSpace) {
  int64_t delta = 0;
  flags_.AddInt("delta", &delta, -10, 10, "Delta");
  EXPECT_EQ(Error({"-f", "x", "--delta", "-4"}), "");
  EXPECT_EQ(delta, -4);
}

TEST_F(FlagsTest, EnumRejectsOtherValues) {
  EXPECT_EQ(Error({"-f", "x", "-o", "xml"}),
            "invalid value \"xml\" for --output: must be one of table, yaml, json");
}

TEST_F(FlagsTest, RepeatedStringsAccumulate) {
  EXPECT_EQ(Error({"-f", "x", "--arg", "a", "--arg=b", "--arg", "--c"}), "");
  EXPECT_EQ(list_, (Args{"a", "b", "--c"}));
}

TEST_F(FlagsTest, RepeatedStringsReplaceTheirDefault) {
  std::vector<std::string> envs = {"DEFAULT=1"};
  flags_.AddStrings("env", &envs, "Env");
  EXPECT_EQ(Error({"-f", "x", "--env", "A=1", "--env", "B=2"}), "");
  EXPECT_EQ(envs, (Args{"A=1", "B=2"}));
}

TEST_F(FlagsTest, LastValueWinsForSingleFlags) {
  EXPECT_EQ(Error({"-f", "x", "--port", "1", "--port", "2"}), "");
  EXPECT_EQ(port_, 2);
}

TEST_F(FlagsTest, UnknownFlagSuggestsClosest) {
  EXPECT_EQ(Error({"--kubconfig", "k"}),
            "unknown flag --kubconfig for \"ctrlhost run\" (did you mean --kubeconfig?)");
  EXPECT_EQ(Error({"--prot=1"}), "unknown flag --prot for \"ctrlhost run\" (did you mean --port?)");
  EXPECT_EQ(Error({"--insecure"}),
            "unknown flag --insecure for \"ctrlhost run\" (did you mean --insecure-http?)");
}

TEST_F(FlagsTest, UnknownFlagWithoutCloseMatch) {
  EXPECT_EQ(Error({"--zzzzzzzz"}), "unknown flag --zzzzzzzz for \"ctrlhost run\"");
}

TEST_F(FlagsTest, SingleDashLongNameSuggestsDoubleDash) {
  EXPECT_EQ(Error({"-file", "x"}),
            "unknown flag -file for \"ctrlhost run\" (did you mean --file?)");
}

TEST_F(FlagsTest, UnknownShortFlag) {
  EXPECT_EQ(Error({"-z"}), "unknown flag -z for \"ctrlhost run\"");
}

TEST_F(FlagsTest, MissingValue) {
  EXPECT_EQ(Error({"-f", "x", "--port"}), "flag --port needs a value (INT)");
  EXPECT_EQ(Error({"-f"}), "flag --file needs a value (PATH)");
}

TEST_F(FlagsTest, MissingRequiredFlag) {
  EXPECT_EQ(Error({"--port", "80"}), "missing required flag --file for \"ctrlhost run\"");
}

TEST_F(FlagsTest, UnexpectedArgumentWithoutPositionals) {
  EXPECT_EQ(Error({"-f", "x", "extra"}), "unexpected argument \"extra\" for \"ctrlhost run\"");
}

TEST_F(FlagsTest, PositionalCounts) {
  std::vector<std::string> positionals;
  flags_.SetPositionals("NAME", 1, 1, &positionals);
  EXPECT_EQ(Error({"-f", "x"}), "\"ctrlhost run\" needs 1 argument (NAME), got 0");
  EXPECT_EQ(Error({"-f", "x", "a", "b"}), "unexpected argument \"b\" for \"ctrlhost run\"");
  EXPECT_EQ(Error({"a", "-f", "x"}), "");
  EXPECT_EQ(positionals, Args{"a"});
}

TEST_F(FlagsTest, UnboundedPositionals) {
  std::vector<std::string> positionals;
  flags_.SetPositionals("[FILE...]", 0, -1, &positionals);
  EXPECT_EQ(Error({"a", "-f", "x", "b", "-", "c"}), "");
  EXPECT_EQ(positionals, (Args{"a", "b", "-", "c"}));
}

TEST_F(FlagsTest, DoubleDashEndsFlags) {
  std::vector<std::string> positionals;
  flags_.SetPositionals("[ARG...]", 0, -1, &positionals);
  EXPECT_EQ(Error({"-f", "x", "--", "--port", "-o", "--"}), "");
  EXPECT_EQ(positionals, (Args{"--port", "-o", "--"}));
  EXPECT_EQ(port_, 6443);
}

TEST_F(FlagsTest, HelpWinsOverMissingAndExtraArguments) {
  // A malformed flag before --help is still reported: the line cannot be read past it.
  absl::StatusOr<ParseOutcome> outcome = flags_.Parse({"--port", "abc", "--help"});
  EXPECT_FALSE(outcome.ok());
  outcome = flags_.Parse({"extra", "--help"});
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(*outcome, ParseOutcome::kHelp);
  outcome = flags_.Parse({"--help", "--port", "80"});  // missing --file does not matter
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(*outcome, ParseOutcome::kHelp);
  outcome = flags_.Parse({"-h"});
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(*outcome, ParseOutcome::kHelp);
}

TEST_F(FlagsTest, HelpTakesNoValue) {
  EXPECT_EQ(Error({"--help=yes"}), "--help takes no value for \"ctrlhost run\"");
}

TEST_F(FlagsTest, IsSetResetsBetweenParses) {
  EXPECT_EQ(Error({"-f", "x", "--port", "1"}), "");
  EXPECT_TRUE(flags_.IsSet("port"));
  EXPECT_EQ(Error({"-f", "x"}), "");
  EXPECT_FALSE(flags_.IsSet("port"));
  EXPECT_FALSE(flags_.IsSet("no-such-flag"));
}

TEST_F(FlagsTest, HelpTextListsEveryFlagWithDefaults) {
  std::vector<std::string> positionals;
  flags_.SetPositionals("[NAME]", 0, 1, &positionals);
  flags_.BeginSection("Common flags");
  std::string level = "info";
  flags_.AddEnum("log-level", &level, {"debug", "info", "warning"}, "Log level");
  const std::string help = flags_.HelpText();
  EXPECT_TRUE(absl::StartsWith(help, "Usage: ctrlhost run [flags] [NAME]\n\nRuns things.\n"))
      << help;
  EXPECT_TRUE(absl::StrContains(help, "-f, --file PATH")) << help;
  EXPECT_TRUE(absl::StrContains(help, "Operator file (required)")) << help;
  EXPECT_TRUE(absl::StrContains(help, "--port INT")) << help;
  EXPECT_TRUE(absl::StrContains(help, "Port (1..65535; default 6443)")) << help;
  EXPECT_TRUE(absl::StrContains(help, "Colors (default true)")) << help;
  EXPECT_TRUE(absl::StrContains(help, "Deadline (default 5s)")) << help;
  EXPECT_TRUE(absl::StrContains(help, "Argument (repeatable)")) << help;
  EXPECT_TRUE(absl::StrContains(help, "-o, --output table|yaml|json")) << help;
  EXPECT_TRUE(absl::StrContains(help, "\nFlags:\n")) << help;
  EXPECT_TRUE(absl::StrContains(help, "\nCommon flags:\n")) << help;
  EXPECT_LT(help.find("--port"), help.find("Common flags:"));
  EXPECT_GT(help.find("--log-level"), help.find("Common flags:"));
  EXPECT_GT(help.find("--help"), help.find("Common flags:"));
  // A long enum list moves from the placeholder to the notes.
  EXPECT_TRUE(absl::StrContains(help, "--log-level VALUE")) << help;
  EXPECT_TRUE(absl::StrContains(help, "Log level (one of debug, info, warning; default info)"))
      << help;
}

TEST_F(FlagsTest, HelpTextIntRangesAndUnsetDefaults) {
  int64_t canary = 0, generation = 0;
  flags_.AddInt("canary", &canary, 1, 99, "Canary");
  flags_.AddInt("generation", &generation, 0, std::numeric_limits<int64_t>::max(), "Gen");
  const std::string help = flags_.HelpText();
  EXPECT_TRUE(absl::StrContains(help, "Canary (1..99)\n")) << help;
  EXPECT_TRUE(absl::StrContains(help, "Gen (>= 0; default 0)\n")) << help;
}

TEST_F(FlagsTest, HelpTextShowsDefaultText) {
  std::string socket;
  flags_.AddString("admin-socket", &socket, "Socket").DefaultText("<data-dir>/admin.sock");
  EXPECT_TRUE(absl::StrContains(flags_.HelpText(), "Socket (default <data-dir>/admin.sock)"));
}

TEST_F(FlagsTest, HelpTextWrapsLongLines) {
  std::string long_flag;
  flags_.AddString("long", &long_flag,
                   std::string(30, 'w') + " " + std::string(30, 'x') + " " + std::string(30, 'y'));
  for (absl::string_view line : absl::StrSplit(flags_.HelpText(), '\n')) {
    EXPECT_LE(line.size(), 100u) << line;
  }
}

TEST(FlagSetDeathTest, DuplicateFlagIsAProgrammingError) {
  std::string a, b;
  FlagSet flags("ctrlhost x", "");
  flags.AddString("name", &a, "");
  EXPECT_DEATH(flags.AddString("name", &b, ""), "declared twice");
}

TEST(EditDistanceTest, Basics) {
  EXPECT_EQ(EditDistance("", ""), 0);
  EXPECT_EQ(EditDistance("abc", ""), 3);
  EXPECT_EQ(EditDistance("kubconfig", "kubeconfig"), 1);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
  EXPECT_EQ(EditDistance("prot", "port"), 1);
}

TEST(ClosestMatchTest, PicksOnlyLikelyTypos) {
  EXPECT_EQ(ClosestMatch("rn", {"run", "dump"}), "run");
  EXPECT_EQ(ClosestMatch("verison", {"run", "version"}), "version");  // one transposition
  EXPECT_EQ(ClosestMatch("vrsn", {"run", "version"}), "");            // 3 edits in 4
  EXPECT_EQ(ClosestMatch("versio", {"run", "version"}), "version");
  EXPECT_EQ(ClosestMatch("zzz", {"run", "dump"}), "");
  EXPECT_EQ(ClosestMatch("plug", {"plugin", "dump"}), "plugin");  // prefix
}

}  // namespace
}  // namespace ctrlhost::exe
