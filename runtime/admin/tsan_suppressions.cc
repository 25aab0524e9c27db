// ThreadSanitizer suppressions for tests of the admin server (gRPC's callback server API).
//
// The list of //runtime/plugin/testing:tsan_suppressions (races inside Debian's uninstrumented
// gRPC, Abseil and OpenSSL, and in gRPC's header-only callback machinery under grpc::internal),
// plus one more frame: grpc::ServerUnaryReactor. Its Finish() may be called from any thread, even
// before gRPC has bound the reactor to its call (InternalBindCall, right after the handler
// returns); the two are ordered by the reactor's own grpc::internal::Mutex, an absl::Mutex inside
// the uninstrumented libabsl, so TSan sees both accesses and no lock. `race_top` matches the top
// frame only: a race in our own code is still reported. Only one __tsan_default_suppressions may
// exist per binary: link this instead of the plugin one, never both. (If the lead adds the
// ServerUnaryReactor line to //runtime/plugin/testing:tsan_suppressions, this file can go.)

extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libgrpc.so\n"
         "called_from_lib:libgrpc++.so\n"
         "called_from_lib:libgpr.so\n"
         "called_from_lib:libcrypto.so.3\n"
         "called_from_lib:libssl.so.3\n"
         "race:libabsl_*.so*\n"
         "race_top:grpc::internal::\n"
         "race:grpc::internal::CallOpSet\n"
         "race_top:grpc::ServerUnaryReactor::\n"
         "race:ServerCallbackUnaryImpl::~ServerCallbackUnaryImpl\n";
}
