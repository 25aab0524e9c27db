#include "runtime/exe/command.h"

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "runtime/common/logging.h"

namespace ctrlhost::exe {
namespace {

using Args = std::vector<std::string>;

struct Result {
  int exit = -1;
  std::string out;
  std::string err;
};

class CommandGroupTest : public ::testing::Test {
 protected:
  CommandGroupTest() : group_("ctrlhost", "Runs operators.") {
    group_.Add("run", "Run operators", [this](const Args& args, std::ostream& out, std::ostream&) {
      last_args_ = args;
      out << "ran\n";
      return 7;
    });
    group_.Add("version", "Print version",
               [](const Args&, std::ostream&, std::ostream&) { return 0; });
  }

  Result Run(const Args& args) {
    std::ostringstream out, err;
    Result result;
    result.exit = group_.Run(args, out, err);
    result.out = out.str();
    result.err = err.str();
    return result;
  }

  CommandGroup group_;
  Args last_args_;
};

TEST_F(CommandGroupTest, DispatchesWithRemainingArguments) {
  Result r = Run({"run", "-f", "x"});
  EXPECT_EQ(r.exit, 7);
  EXPECT_EQ(r.out, "ran\n");
  EXPECT_EQ(last_args_, (Args{"-f", "x"}));
}

TEST_F(CommandGroupTest, HelpListsCommands) {
  for (const Args& args : {Args{"--help"}, Args{"-h"}, Args{"help"}}) {
    Result r = Run(args);
    EXPECT_EQ(r.exit, kExitOk);
    EXPECT_TRUE(absl::StartsWith(r.out, "Usage: ctrlhost COMMAND")) << r.out;
    EXPECT_TRUE(absl::StrContains(r.out, "  run       Run operators\n")) << r.out;
    EXPECT_TRUE(absl::StrContains(r.out, "  help      Show help for a command\n")) << r.out;
    EXPECT_EQ(r.err, "");
  }
}

TEST_F(CommandGroupTest, HelpCommandForwardsToTheCommandsHelp) {
  Result r = Run({"help", "run"});
  EXPECT_EQ(r.exit, 7);
  EXPECT_EQ(last_args_, Args{"--help"});
}

TEST_F(CommandGroupTest, MissingCommandIsAUsageError) {
  Result r = Run({});
  EXPECT_EQ(r.exit, kExitUsage);
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(absl::StrContains(r.err, "Usage: ctrlhost COMMAND")) << r.err;
  EXPECT_TRUE(absl::EndsWith(r.err,
                             "error: missing command for \"ctrlhost\"\n"
                             "run \"ctrlhost --help\" for usage\n"))
      << r.err;
}

TEST_F(CommandGroupTest, UnknownCommandSuggests) {
  Result r = Run({"rnu"});
  EXPECT_EQ(r.exit, kExitUsage);
  EXPECT_EQ(r.err,
            "error: unknown command \"rnu\" for \"ctrlhost\" (did you mean run?)\n"
            "run \"ctrlhost --help\" for usage\n");
  r = Run({"frobnicate"});
  EXPECT_EQ(r.err,
            "error: unknown command \"frobnicate\" for \"ctrlhost\"\n"
            "run \"ctrlhost --help\" for usage\n");
  r = Run({"help", "frobnicate"});
  EXPECT_EQ(r.exit, kExitUsage);
}

TEST_F(CommandGroupTest, FlagBeforeCommandIsAUsageError) {
  Result r = Run({"--log-level", "debug", "run"});
  EXPECT_EQ(r.exit, kExitUsage);
  EXPECT_TRUE(absl::StartsWith(r.err,
                               "error: unknown flag --log-level for \"ctrlhost\": flags go "
                               "after the command"))
      << r.err;
}

TEST(ParseCommandLineTest, HelpGoesToStdoutAndExitsZero) {
  FlagSet flags("ctrlhost x", "Does x.");
  CommonFlags common;
  AddCommonFlags(flags, &common);
  std::ostringstream out, err;
  EXPECT_EQ(ParseCommandLine(flags, common, {"--help"}, out, err), kExitOk);
  EXPECT_EQ(out.str(), flags.HelpText());
  EXPECT_EQ(err.str(), "");
}

TEST(ParseCommandLineTest, ErrorsGoToStderrAndExitTwo) {
  FlagSet flags("ctrlhost x", "Does x.");
  CommonFlags common;
  AddCommonFlags(flags, &common);
  std::ostringstream out, err;
  EXPECT_EQ(ParseCommandLine(flags, common, {"--log-level=loud"}, out, err), kExitUsage);
  EXPECT_EQ(out.str(), "");
  EXPECT_EQ(err.str(),
            "error: invalid value \"loud\" for --log-level: must be one of debug, info, warning, "
            "error\nrun \"ctrlhost x --help\" for usage\n");
}

TEST(ParseCommandLineTest, AppliesLogLevel) {
  FlagSet flags("ctrlhost x", "Does x.");
  CommonFlags common;
  AddCommonFlags(flags, &common);
  std::ostringstream out, err;
  EXPECT_EQ(ParseCommandLine(flags, common, {"--log-level", "error"}, out, err), std::nullopt);
  EXPECT_FALSE(common::LogEnabled(common::LogLevel::kWarning));
  EXPECT_TRUE(common::LogEnabled(common::LogLevel::kError));
  EXPECT_EQ(ParseCommandLine(flags, common, {"--log-level=debug", "--log-format=json"}, out, err),
            std::nullopt);
  EXPECT_TRUE(common::LogEnabled(common::LogLevel::kDebug));
  std::string line;
  common::SetLogSink([&line](absl::string_view l) { line = std::string(l); });
  common::LogInfo("hello");
  common::SetLogSink(nullptr);
  EXPECT_TRUE(absl::StartsWith(line, "{")) << line;
  common::SetLogLevel(common::LogLevel::kInfo);
  common::SetLogFormat(common::LogFormat::kText);
}

TEST(ValidateHostPortTest, AcceptsCommonForms) {
  EXPECT_TRUE(ValidateHostPort("--a", "127.0.0.1:9090").ok());
  EXPECT_TRUE(ValidateHostPort("--a", "localhost:1").ok());
  EXPECT_TRUE(ValidateHostPort("--a", "[::1]:65535").ok());
  EXPECT_TRUE(ValidateHostPort("--a", "0.0.0.0:0", /*allow_port_zero=*/true).ok());
}

TEST(ValidateHostPortTest, RejectsWithPreciseMessages) {
  EXPECT_EQ(ValidateHostPort("--a", "localhost").message(),
            "invalid value \"localhost\" for --a: expected HOST:PORT");
  EXPECT_EQ(ValidateHostPort("--a", ":80").message(),
            "invalid value \":80\" for --a: missing host (use 0.0.0.0 to listen on every "
            "interface)");
  EXPECT_EQ(ValidateHostPort("--a", "::1:80").message(),
            "invalid value \"::1:80\" for --a: an IPv6 host must be in brackets, e.g. [::1]:9090");
  EXPECT_EQ(ValidateHostPort("--a", "h:99999").message(),
            "invalid value \"h:99999\" for --a: the port must be a number from 1 to 65535");
  EXPECT_EQ(ValidateHostPort("--a", "h:0").message(),
            "invalid value \"h:0\" for --a: the port must be a number from 1 to 65535");
  EXPECT_EQ(ValidateHostPort("--a", "h:http").code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ctrlhost::exe
