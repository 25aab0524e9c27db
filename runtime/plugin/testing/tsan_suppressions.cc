// ThreadSanitizer suppressions for tests that use gRPC's C++ callback API (runtime/plugin).
//
// The same list as //proto/testing:tsan_suppressions (races inside Debian's uninstrumented gRPC
// and Abseil), plus one more: the callback API's tags (grpc::internal::CallbackWithSuccessTag and
// friends) are header templates, so they are compiled into our instrumented code, while the
// completion queue that hands them from thread to thread lives in the uninstrumented libgrpc.
// TSan sees the accesses but not the ordering and reports races whose top frame is in
// grpc::internal. `race_top` matches the top frame only, so a race in our own reactions (their
// top frame is ours) is still reported. Likewise messages: gRPC (de)serializes a reactor's
// message buffers in grpc::internal::CallOpSet on one thread and runs the reaction that reads
// them on another; races with a CallOpSet frame on either stack are suppressed, which is the
// price of an uninstrumented gRPC (our code touches those buffers only inside reactions or
// under our own locks, see session.cc). Only one __tsan_default_suppressions may exist per
// binary: link this instead of //proto/testing:tsan_suppressions, never both. OpenSSL's
// libraries (gRPC's TLS) are uninstrumented too and are treated like gRPC's.

extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libgrpc.so\n"
         "called_from_lib:libgrpc++.so\n"
         "called_from_lib:libgpr.so\n"
         "called_from_lib:libcrypto.so.3\n"
         "called_from_lib:libssl.so.3\n"
         "called_from_lib:libcpp-httplib.so\n"
         // httplib's ClientImpl::stop() (in the uninstrumented .so) unlocks a mutex whose lock
         // TSan did not see: reported as "unlock of an unlocked mutex" from our caller.
         "mutex:ctrlhost::kube::StreamCanceller::Cancel\n"
         "race:libabsl_*.so*\n"
         "race_top:grpc::internal::\n"
         "race:grpc::internal::CallOpSet\n";
}
