// ThreadSanitizer suppressions for cmd_plugin_test, which runs a real gRPC server and client.
//
// Debian's gRPC and Abseil shared libraries are not instrumented (docs/design/sanitizers.md):
// TSan sees their libc calls without the synchronisation that orders them, and reports races
// that are not ours. Ignored here: interceptor calls made from gRPC's libraries, and races whose
// stacks run through Debian's Abseil. Races in our instrumented code (the fake service's
// handlers, the CLI) are still reported. Same list as //proto/testing:tsan_suppressions, which
// is not visible outside proto/; use that one once it is shared.
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libgrpc.so\n"
         "called_from_lib:libgrpc++.so\n"
         "called_from_lib:libgpr.so\n"
         "race:libabsl_*.so*\n";
}
