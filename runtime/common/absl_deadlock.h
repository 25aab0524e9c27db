// Turns off Abseil's mutex deadlock detector, which Debian's Abseil runs in every process.
//
// Debian builds Abseil without NDEBUG, so absl::Mutex (which every lock inside gRPC is) checks
// each Lock against a process-wide graph of lock orders: a global lock and a graph update per
// acquisition (1.7 % of all CPU samples of bench/record's serving pipeline), and an abort ("dying
// due to potential deadlock") the first time two mutexes are taken in both orders, even by one
// thread and even when no deadlock can happen. gRPC has hit that detector on its own locks when
// a client cannot connect (grpc/grpc#40390, #39461): in the host, a plugin that is down. Release
// builds of Abseil have the detector off; ctrlhost's binaries turn it off the same way.
//
// Call at the start of main(), before threads start (the setting is process-wide).
//
//   int main(int argc, char** argv) {
//     ctrlhost::common::TurnOffAbslDeadlockDetection();
//     ...
#ifndef CTRLHOST_RUNTIME_COMMON_ABSL_DEADLOCK_H_
#define CTRLHOST_RUNTIME_COMMON_ABSL_DEADLOCK_H_

namespace ctrlhost::common {

void TurnOffAbslDeadlockDetection();

}  // namespace ctrlhost::common

#endif  // CTRLHOST_RUNTIME_COMMON_ABSL_DEADLOCK_H_
