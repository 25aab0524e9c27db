// PluginSlot's shadow with real plugins: two in-process test plugins served over TCP on
// 127.0.0.1 (runtime/plugin/testing/test_plugin.h), one serving and one shadow.
#include "runtime/manager/plugin_slot.h"

#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/common/mutex.h"
#include "runtime/controller/apply/testing/test_controllers.h"
#include "runtime/plugin/testing/test_plugin.h"

namespace ctrlhost::manager {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(60);

// Answers collected from the slot. Thread-safe.
class Answers {
 public:
  controller::ReconcileCallback Callback() {
    return [this](controller::DispatchResult r) {
      common::MutexLock lock(&mu_);
      results_.push_back(r.response.status());
    };
  }
  // Waits (real time, bounded) until `n` answers came; true if they did.
  bool WaitFor(size_t n) {
    for (int i = 0; i < 6000; ++i) {
      {
        common::MutexLock lock(&mu_);
        if (results_.size() >= n) return true;
      }
      usleep(10000);
    }
    return false;
  }
  std::vector<absl::Status> results() {
    common::MutexLock lock(&mu_);
    return results_;
  }

 private:
  common::Mutex mu_;
  std::vector<absl::Status> results_ ABSL_GUARDED_BY(mu_);
};

class PluginSlotShadowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    serving_plugin_ = StartPlugin({});
    ASSERT_NE(serving_plugin_, nullptr);
    absl::StatusOr<std::unique_ptr<PluginSlot>> slot =
        PluginSlot::Start(Factory("web", serving_plugin_->port()), nullptr, nullptr);
    ASSERT_TRUE(slot.ok()) << slot.status();
    slot_ = *std::move(slot);
    for (int i = 0; i < 6000 && slot_->status().state != plugin::PluginState::kReady; ++i) {
      usleep(10000);
    }
    ASSERT_EQ(slot_->status().state, plugin::PluginState::kReady) << slot_->status().last_error;
  }
  void TearDown() override {
    if (slot_ != nullptr) slot_->Stop();
  }

  static std::unique_ptr<plugin::testing::TestPlugin> StartPlugin(
      plugin::testing::TestPluginOptions options) {
    auto plugin = plugin::testing::TestPlugin::Start("127.0.0.1:0", std::move(options));
    if (!plugin.ok()) {
      ADD_FAILURE() << plugin.status();
      return nullptr;
    }
    return *std::move(plugin);
  }

  static PluginSlot::OptionsFactory Factory(const std::string& name, int port) {
    return [name, port](uint64_t) {
      plugin::SupervisorOptions options;
      options.name = name;
      options.source.endpoint = absl::StrCat("127.0.0.1:", port);
      options.handshake.deadline = kWait;
      return options;
    };
  }

  std::shared_ptr<ShadowComparator> Comparator() {
    return std::make_shared<ShadowComparator>(
        [this](absl::string_view name) -> std::optional<controller::ControllerInfo> {
          if (name == webapp_.name) return webapp_;
          return std::nullopt;
        },
        ShadowComparator::Options{.plugin = "web"});
  }

  static pluginpb::ReconcileCall Call(const std::string& name) {
    pluginpb::ReconcileCall call;
    call.set_controller("webapp");
    call.set_namespace_("team");
    call.set_name(name);
    call.set_object(absl::StrCat(R"({"apiVersion":"ctrlhost.dev/v1","kind":"WebApp",
        "metadata":{"name":")",
                                 name, R"(","namespace":"team","uid":"u-)", name,
                                 R"("},"status":{}})"));
    return call;
  }

  void Dispatch(const std::string& name, Answers* answers) {
    slot_->Dispatch(Call(name), absl::Now() + kWait, answers->Callback());
  }

  // Waits (real time, bounded) until the comparator has counted `n` pairs of `webapp`
  // (compared or dropped).
  static bool WaitCounted(ShadowComparator* comparator, uint64_t n) {
    for (int i = 0; i < 6000; ++i) {
      comparator->WaitIdle();
      const ShadowComparator::Figures f = comparator->Snapshot();
      auto it = f.controllers.find("webapp");
      if (it != f.controllers.end() && it->second.compared + it->second.dropped >= n) {
        return true;
      }
      usleep(10000);
    }
    return false;
  }

  controller::ControllerInfo webapp_ = controller::apply::testing::WebAppController();
  std::unique_ptr<plugin::testing::TestPlugin> serving_plugin_;
  // Members, so that TearDown stops the slot before the plugins go away.
  std::unique_ptr<plugin::testing::TestPlugin> shadow_plugin_;
  std::unique_ptr<PluginSlot> slot_;
};

TEST_F(PluginSlotShadowTest, TheSameReleaseAgreesOnEveryCall) {
  shadow_plugin_ = StartPlugin({});
  plugin::testing::TestPlugin* shadow_plugin = shadow_plugin_.get();
  std::shared_ptr<ShadowComparator> comparator = Comparator();
  // Room for every call at once (beyond the bound they are dropped: see the hold test).
  SwapResult started = slot_->StartShadow(Factory("web", shadow_plugin->port()),
                                          {.max_in_flight = 100}, comparator, kWait);
  ASSERT_TRUE(started.status.ok()) << started.status;
  EXPECT_EQ(slot_->shadow_comparator(), comparator);
  const SlotStatus status = slot_->Snapshot();
  EXPECT_TRUE(status.has_shadow);
  EXPECT_EQ(status.shadow_percent, 100u);
  EXPECT_EQ(status.shadow_generation, 2u);

  Answers answers;
  for (int i = 0; i < 100; ++i) Dispatch(absl::StrCat("web-", i), &answers);
  ASSERT_TRUE(answers.WaitFor(100));
  for (const absl::Status& s : answers.results()) EXPECT_TRUE(s.ok()) << s;
  ASSERT_TRUE(WaitCounted(comparator.get(), 100));
  const ShadowComparator::ControllerFigures f = comparator->Snapshot().controllers.at("webapp");
  EXPECT_EQ(f.compared, 100u);
  EXPECT_EQ(f.same, 100u);
  EXPECT_EQ(f.dropped, 0u);
  EXPECT_EQ(shadow_plugin->received(), 100);
  EXPECT_EQ(serving_plugin_->received(), 100);

  ASSERT_TRUE(slot_->StopShadow(absl::Seconds(5)).ok());
  EXPECT_EQ(slot_->shadow_comparator(), nullptr);
  EXPECT_FALSE(slot_->Snapshot().has_shadow);
  // Calls after the stop go to the serving instance alone.
  Dispatch("after", &answers);
  ASSERT_TRUE(answers.WaitFor(101));
  EXPECT_EQ(shadow_plugin->received(), 100);
  EXPECT_EQ(slot_->StopShadow(absl::Seconds(1)).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(PluginSlotShadowTest, AReleaseThatAnswersDifferentlyIsShownWhereItDiffers) {
  shadow_plugin_ = StartPlugin({.status_tag = "v2"});
  plugin::testing::TestPlugin* shadow_plugin = shadow_plugin_.get();
  std::shared_ptr<ShadowComparator> comparator = Comparator();
  ASSERT_TRUE(
      slot_->StartShadow(Factory("web", shadow_plugin->port()), {}, comparator, kWait).status.ok());
  Answers answers;
  for (int i = 0; i < 10; ++i) Dispatch(absl::StrCat("web-", i), &answers);
  ASSERT_TRUE(answers.WaitFor(10));
  ASSERT_TRUE(WaitCounted(comparator.get(), 10));
  const ShadowComparator::Figures figures = comparator->Snapshot();
  EXPECT_EQ(figures.controllers.at("webapp").different, 10u);
  ASSERT_FALSE(figures.differences.empty());
  EXPECT_EQ(figures.differences.back().summary, "status");
  EXPECT_THAT(figures.differences.back().patch, HasSubstr(R"("path":"/status/tag")"));
  EXPECT_THAT(figures.differences.back().patch, HasSubstr(R"("value":"v2")"));
}

TEST_F(PluginSlotShadowTest, AShadowThatIsDownNeverFailsTheServingPath) {
  shadow_plugin_ = StartPlugin({});
  plugin::testing::TestPlugin* shadow_plugin = shadow_plugin_.get();
  std::shared_ptr<ShadowComparator> comparator = Comparator();
  ASSERT_TRUE(
      slot_->StartShadow(Factory("web", shadow_plugin->port()), {}, comparator, kWait).status.ok());
  shadow_plugin_.reset();  // the shadow goes away
  Answers answers;
  for (int i = 0; i < 20; ++i) Dispatch(absl::StrCat("web-", i), &answers);
  ASSERT_TRUE(answers.WaitFor(20));
  for (const absl::Status& s : answers.results()) EXPECT_TRUE(s.ok()) << s;
  ASSERT_TRUE(WaitCounted(comparator.get(), 20));
  const ShadowComparator::ControllerFigures f = comparator->Snapshot().controllers.at("webapp");
  EXPECT_EQ(f.shadow_errors + f.dropped + f.same, 20u);
  EXPECT_GT(f.shadow_errors, 0u);
  EXPECT_EQ(f.different, 0u);
}

TEST_F(PluginSlotShadowTest, AShadowThatHangsNeverDelaysTheServingPath) {
  shadow_plugin_ = StartPlugin({.hang_all = true});
  std::shared_ptr<ShadowComparator> comparator = Comparator();
  ASSERT_TRUE(slot_
                  ->StartShadow(Factory("web", shadow_plugin_->port()), {.max_in_flight = 4},
                                comparator, kWait)
                  .status.ok());
  // The serving instance answers every call while the shadow holds the first four (until their
  // deadline, a minute away) and the others are not given to it.
  Answers answers;
  for (int i = 0; i < 50; ++i) Dispatch(absl::StrCat("web-", i), &answers);
  ASSERT_TRUE(answers.WaitFor(50));
  for (const absl::Status& s : answers.results()) EXPECT_TRUE(s.ok()) << s;
  ASSERT_TRUE(WaitCounted(comparator.get(), 46));
  const ShadowComparator::ControllerFigures f = comparator->Snapshot().controllers.at("webapp");
  EXPECT_EQ(f.dropped, 46u);
  EXPECT_EQ(f.compared, 0u);
  EXPECT_EQ(serving_plugin_->received(), 50);
  // Stopping the stuck shadow (drain bounded) leaves the serving instance serving.
  ASSERT_TRUE(slot_->StopShadow(absl::Milliseconds(100)).ok());
  Dispatch("after", &answers);
  ASSERT_TRUE(answers.WaitFor(51));
  EXPECT_TRUE(answers.results().back().ok());
  // The four calls failed by the stop are not compared: the shadow was stopping.
  comparator->WaitIdle();
  EXPECT_EQ(comparator->Snapshot().controllers.at("webapp").compared, 0u);
}

TEST_F(PluginSlotShadowTest, AKeyStillAtTheShadowIsNotGivenToItAgain) {
  shadow_plugin_ = StartPlugin({});
  plugin::testing::TestPlugin* shadow_plugin = shadow_plugin_.get();
  std::shared_ptr<ShadowComparator> comparator = Comparator();
  ASSERT_TRUE(slot_
                  ->StartShadow(Factory("web", shadow_plugin->port()), {.max_in_flight = 2},
                                comparator, kWait)
                  .status.ok());
  // "hold" is answered (by both plugins) only after a "release".
  Answers answers;
  Dispatch("hold", &answers);
  Dispatch("hold", &answers);  // the same key while the shadow still has it: not for the shadow
  // Both holds must be at the plugins before the release, or they would wait for another.
  for (int i = 0; i < 6000 && (shadow_plugin->received() < 1 || serving_plugin_->received() < 2);
       ++i) {
    usleep(10000);
  }
  Dispatch("release", &answers);  // the second call at the shadow: the bound is 2
  ASSERT_TRUE(answers.WaitFor(3));
  ASSERT_TRUE(WaitCounted(comparator.get(), 3));
  const ShadowComparator::ControllerFigures f = comparator->Snapshot().controllers.at("webapp");
  EXPECT_EQ(f.dropped, 1u);
  EXPECT_EQ(f.compared, 2u);
  EXPECT_EQ(f.same, 2u);
  EXPECT_EQ(shadow_plugin->received(), 2);
  EXPECT_EQ(serving_plugin_->received(), 3);
}

TEST_F(PluginSlotShadowTest, BadShadowOptionsAreRefused) {
  std::shared_ptr<ShadowComparator> comparator = Comparator();
  const PluginSlot::OptionsFactory factory = Factory("web", serving_plugin_->port());
  EXPECT_EQ(slot_->StartShadow(factory, {.percent = 0}, comparator, kWait).status.code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(slot_->StartShadow(factory, {.percent = 101}, comparator, kWait).status.code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(slot_->StartShadow(factory, {.max_in_flight = 0}, comparator, kWait).status.code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(slot_->StartShadow(factory, {}, nullptr, kWait).status.code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(slot_->StartShadow(factory, {.percent = 50}, comparator, kWait).status.ok());
  SwapResult again = slot_->StartShadow(factory, {}, comparator, kWait);
  EXPECT_EQ(again.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status.message(), HasSubstr("running already"));
}

TEST_F(PluginSlotShadowTest, APercentSendsAStableShareOfTheKeys) {
  shadow_plugin_ = StartPlugin({});
  plugin::testing::TestPlugin* shadow_plugin = shadow_plugin_.get();
  std::shared_ptr<ShadowComparator> comparator = Comparator();
  ASSERT_TRUE(slot_
                  ->StartShadow(Factory("web", shadow_plugin->port()),
                                {.percent = 30, .max_in_flight = 200}, comparator, kWait)
                  .status.ok());
  Answers answers;
  int expected = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string name = absl::StrCat("web-", i);
    if (PluginSlot::Bucket(absl::StrCat("team/", name)) < 30) ++expected;
    Dispatch(name, &answers);
  }
  ASSERT_TRUE(answers.WaitFor(200));
  ASSERT_TRUE(WaitCounted(comparator.get(), expected));
  EXPECT_EQ(comparator->Snapshot().controllers.at("webapp").compared,
            static_cast<uint64_t>(expected));
  EXPECT_EQ(shadow_plugin->received(), expected);
  EXPECT_GT(expected, 30);
  EXPECT_LT(expected, 90);
}

}  // namespace
}  // namespace ctrlhost::manager
