#include "bench/dispatch/harness.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"

namespace ctrlhost::bench {

pluginpb::ReconcileCall MakeCall() {
  pluginpb::ReconcileCall call;
  call.set_controller("echo");
  call.set_namespace_("team-a");
  call.set_name("app-1");
  call.set_uid("6f0d1c3e-8f7e-4d4b-9a57-0c6a3d2f1b10");
  call.set_reason(pluginpb::REASON_PRIMARY_CHANGED);
  std::string object =
      R"({"apiVersion":"example.com/v1","kind":"WebApp","metadata":{"name":"app-1",)"
      R"("namespace":"team-a","uid":"6f0d1c3e-8f7e-4d4b-9a57-0c6a3d2f1b10",)"
      R"("resourceVersion":"12345","generation":3,"labels":{"app":"web","tier":"front"}},)"
      R"("spec":{"replicas":3,"image":"registry.example.com/web:1.4.0","env":[)";
  for (int i = 0; i < 12; ++i) {
    absl::StrAppend(&object, i ? "," : "", R"({"name":"VAR_)", i, R"(","value":"value-)", i,
                    R"(-xxxxxxxxxxxxxxxxxxxxxxxx"})");
  }
  object += "]}}";
  call.set_object(object);
  call.set_attempt(1);
  call.set_trace_id("4bf92f3577b34da6a3ce929d0e0e4736");
  return call;
}

Collector::Collector(int total) : total_(total) { latencies_.reserve(total); }

bool Collector::Record(absl::Duration latency, bool ok) {
  common::MutexLock lock(&mu_);
  latencies_.push_back(absl::ToDoubleMicroseconds(latency));
  if (!ok) ++errors_;
  if (static_cast<int>(latencies_.size()) == total_) cv_.SignalAll();
  return started_ < total_;
}

bool Collector::RecordAndClaim(absl::Duration latency, bool ok) {
  common::MutexLock lock(&mu_);
  latencies_.push_back(absl::ToDoubleMicroseconds(latency));
  if (!ok) ++errors_;
  if (static_cast<int>(latencies_.size()) == total_) cv_.SignalAll();
  if (started_ >= total_) return false;
  ++started_;
  return true;
}

bool Collector::TryStart() {
  common::MutexLock lock(&mu_);
  if (started_ >= total_) return false;
  ++started_;
  return true;
}

Measured Collector::Wait(absl::Time start) {
  common::MutexLock lock(&mu_);
  while (static_cast<int>(latencies_.size()) < total_) cv_.Wait(&mu_);
  Measured m;
  m.per_second = total_ / absl::ToDoubleSeconds(absl::Now() - start);
  std::sort(latencies_.begin(), latencies_.end());
  m.p50_us = latencies_[latencies_.size() / 2];
  m.p99_us = latencies_[latencies_.size() * 99 / 100];
  m.errors = errors_;
  return m;
}

}  // namespace ctrlhost::bench
