#include "runtime/admin/validate.h"

#include <string>
#include <vector>

#include "ctrlhost/admin/v1alpha1/adminpb.h"
#include "gtest/gtest.h"

namespace ctrlhost::admin {
namespace {

adminpb::SwapPluginRequest ValidSwap() {
  adminpb::SwapPluginRequest request;
  request.set_operator_("web");
  request.set_plugin("webapp");
  request.mutable_replace()->mutable_exec()->set_command("/opt/web/v2");
  return request;
}

TEST(ValidateTest, GetPluginNeedsBothNames) {
  adminpb::GetPluginRequest request;
  EXPECT_EQ(ValidateGetPluginRequest(request),
            absl::InvalidArgumentError("GetPluginRequest.operator is required"));
  request.set_operator_("web");
  EXPECT_EQ(ValidateGetPluginRequest(request),
            absl::InvalidArgumentError("GetPluginRequest.plugin is required"));
  request.set_plugin("webapp");
  EXPECT_TRUE(ValidateGetPluginRequest(request).ok());
}

TEST(ValidateTest, GetControllerNeedsAllThreeNames) {
  adminpb::GetControllerRequest request;
  EXPECT_EQ(ValidateGetControllerRequest(request).message(),
            "GetControllerRequest.operator is required");
  request.set_operator_("web");
  EXPECT_EQ(ValidateGetControllerRequest(request).message(),
            "GetControllerRequest.plugin is required");
  request.set_plugin("webapp");
  EXPECT_EQ(ValidateGetControllerRequest(request).message(),
            "GetControllerRequest.controller is required");
  request.set_controller("webapp");
  EXPECT_TRUE(ValidateGetControllerRequest(request).ok());
}

TEST(ValidateTest, ValidSwaps) {
  EXPECT_TRUE(ValidateSwapPluginRequest(ValidSwap()).ok());

  adminpb::SwapPluginRequest endpoint = ValidSwap();
  endpoint.mutable_replace()->mutable_endpoint()->set_address("unix:///run/p.sock");
  endpoint.mutable_replace()->mutable_endpoint()->mutable_tls()->set_ca_file("/ca.pem");
  EXPECT_TRUE(ValidateSwapPluginRequest(endpoint).ok());

  adminpb::SwapPluginRequest canary = ValidSwap();
  canary.mutable_start_canary()->mutable_source()->mutable_exec()->set_command("v2");
  (*canary.mutable_start_canary()->mutable_source()->mutable_exec()->mutable_env())["A"] = "";
  for (uint32_t percent : {1u, 50u, 99u}) {
    canary.mutable_start_canary()->set_percent(percent);
    EXPECT_TRUE(ValidateSwapPluginRequest(canary).ok()) << percent;
  }

  adminpb::SwapPluginRequest promote = ValidSwap();
  promote.mutable_promote_canary();
  promote.mutable_ready_timeout()->set_seconds(0);  // zero: the configured deadline
  EXPECT_TRUE(ValidateSwapPluginRequest(promote).ok());
  adminpb::SwapPluginRequest abort = ValidSwap();
  abort.mutable_abort_canary();
  abort.mutable_ready_timeout()->set_seconds(30);
  abort.mutable_ready_timeout()->set_nanos(5);
  EXPECT_TRUE(ValidateSwapPluginRequest(abort).ok());
}

TEST(ValidateTest, InvalidSwapsNameTheField) {
  struct Case {
    std::string name;
    adminpb::SwapPluginRequest request;
    std::string message;
  };
  std::vector<Case> cases;
  auto add = [&](std::string name, auto edit, std::string message) {
    adminpb::SwapPluginRequest request = ValidSwap();
    edit(request);
    cases.push_back({std::move(name), std::move(request), std::move(message)});
  };
  add(
      "no operator", [](adminpb::SwapPluginRequest& r) { r.clear_operator_(); },
      "SwapPluginRequest.operator is required");
  add(
      "no plugin", [](adminpb::SwapPluginRequest& r) { r.clear_plugin(); },
      "SwapPluginRequest.plugin is required");
  add(
      "no action", [](adminpb::SwapPluginRequest& r) { r.clear_action(); },
      "SwapPluginRequest.action is required: one of replace, start_canary, promote_canary, "
      "abort_canary, start_shadow, stop_shadow or promote_shadow");
  add(
      "empty replace", [](adminpb::SwapPluginRequest& r) { r.mutable_replace()->Clear(); },
      "SwapPluginRequest.replace needs exactly one of exec or endpoint");
  add(
      "no command",
      [](adminpb::SwapPluginRequest& r) { r.mutable_replace()->mutable_exec()->Clear(); },
      "SwapPluginRequest.replace.exec.command is required");
  add(
      "no address", [](adminpb::SwapPluginRequest& r) { r.mutable_replace()->mutable_endpoint(); },
      "SwapPluginRequest.replace.endpoint.address is required");
  add(
      "cert without key",
      [](adminpb::SwapPluginRequest& r) {
        r.mutable_replace()->mutable_endpoint()->set_address("h:1");
        r.mutable_replace()->mutable_endpoint()->mutable_tls()->set_cert_file("/c.pem");
      },
      "SwapPluginRequest.replace.endpoint.tls.cert_file and "
      "SwapPluginRequest.replace.endpoint.tls.key_file go together: set both for mutual TLS, or "
      "neither");
  add(
      "NUL in an argument",
      [](adminpb::SwapPluginRequest& r) {
        r.mutable_replace()->mutable_exec()->add_args("ok");
        r.mutable_replace()->mutable_exec()->add_args(std::string("a\0b", 3));
      },
      "SwapPluginRequest.replace.exec.args[1] must not contain a NUL byte");
  add(
      "'=' in an env name",
      [](adminpb::SwapPluginRequest& r) {
        (*r.mutable_replace()->mutable_exec()->mutable_env())["A=B"] = "1";
      },
      "SwapPluginRequest.replace.exec.env variable name \"A=B\" must not contain '=' or a NUL "
      "byte");
  add(
      "empty env name",
      [](adminpb::SwapPluginRequest& r) {
        (*r.mutable_replace()->mutable_exec()->mutable_env())[""] = "1";
      },
      "SwapPluginRequest.replace.exec.env has an empty variable name");
  add(
      "canary without source",
      [](adminpb::SwapPluginRequest& r) { r.mutable_start_canary()->set_percent(10); },
      "SwapPluginRequest.start_canary.source needs exactly one of exec or endpoint");
  add(
      "canary without command",
      [](adminpb::SwapPluginRequest& r) {
        r.mutable_start_canary()->mutable_source()->mutable_exec();
        r.mutable_start_canary()->set_percent(10);
      },
      "SwapPluginRequest.start_canary.source.exec.command is required");
  for (uint32_t percent : {0u, 100u, 4000000000u}) {
    add(
        "canary percent",
        [percent](adminpb::SwapPluginRequest& r) {
          r.mutable_start_canary()->mutable_source()->mutable_endpoint()->set_address("h:1");
          r.mutable_start_canary()->set_percent(percent);
        },
        "SwapPluginRequest.start_canary.percent must be between 1 and 99, got " +
            std::to_string(percent));
  }
  add(
      "negative timeout",
      [](adminpb::SwapPluginRequest& r) { r.mutable_ready_timeout()->set_seconds(-2); },
      "SwapPluginRequest.ready_timeout must not be negative, got -2s");
  add(
      "negative nanos",
      [](adminpb::SwapPluginRequest& r) { r.mutable_ready_timeout()->set_nanos(-5); },
      "SwapPluginRequest.ready_timeout must not be negative, got -5ns");
  add(
      "mixed signs",
      [](adminpb::SwapPluginRequest& r) {
        r.mutable_ready_timeout()->set_seconds(1);
        r.mutable_ready_timeout()->set_nanos(-1);
      },
      "SwapPluginRequest.ready_timeout is not a valid Duration (seconds 1, nanos -1)");
  add(
      "nanos out of range",
      [](adminpb::SwapPluginRequest& r) { r.mutable_ready_timeout()->set_nanos(1000000000); },
      "SwapPluginRequest.ready_timeout is not a valid Duration (seconds 0, nanos 1000000000)");

  for (const Case& c : cases) {
    absl::Status status = ValidateSwapPluginRequest(c.request);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(status.message(), c.message) << c.name;
  }
}

TEST(ValidateTest, InvalidShadowRequestsNameTheField) {
  const adminpb::PluginSource source = ValidSwap().replace();
  auto start = [&](uint32_t percent, uint32_t max_in_flight) {
    adminpb::SwapPluginRequest r = ValidSwap();
    *r.mutable_start_shadow()->mutable_source() = source;
    r.mutable_start_shadow()->set_percent(percent);
    r.mutable_start_shadow()->set_max_in_flight(max_in_flight);
    return r;
  };
  EXPECT_TRUE(ValidateSwapPluginRequest(start(0, 0)).ok());
  EXPECT_TRUE(ValidateSwapPluginRequest(start(100, 4096)).ok());
  EXPECT_EQ(ValidateSwapPluginRequest(start(101, 0)),
            absl::InvalidArgumentError("SwapPluginRequest.start_shadow.percent must be between 1 "
                                       "and 100 (0: 100), got 101"));
  EXPECT_EQ(ValidateSwapPluginRequest(start(0, 5000)),
            absl::InvalidArgumentError("SwapPluginRequest.start_shadow.max_in_flight must be at "
                                       "most 4096 (0: 64), got 5000"));
  adminpb::SwapPluginRequest no_source = ValidSwap();
  no_source.mutable_start_shadow();
  EXPECT_EQ(ValidateSwapPluginRequest(no_source),
            absl::InvalidArgumentError(
                "SwapPluginRequest.start_shadow.source needs exactly one of exec or endpoint"));
  adminpb::SwapPluginRequest promote = ValidSwap();
  promote.mutable_promote_shadow()->set_min_agreement(1.5);
  EXPECT_EQ(ValidateSwapPluginRequest(promote),
            absl::InvalidArgumentError(
                "SwapPluginRequest.promote_shadow.min_agreement must be between 0 and 1, got 1.5"));
  promote.mutable_promote_shadow()->set_min_agreement(0.99);
  EXPECT_TRUE(ValidateSwapPluginRequest(promote).ok());
  adminpb::SwapPluginRequest stop = ValidSwap();
  stop.mutable_stop_shadow();
  EXPECT_TRUE(ValidateSwapPluginRequest(stop).ok());
}

}  // namespace
}  // namespace ctrlhost::admin
