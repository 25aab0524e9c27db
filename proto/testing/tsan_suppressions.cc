// ThreadSanitizer suppressions for tests that run real gRPC servers and clients.
//
// Debian's gRPC and Abseil shared libraries are not built with -fsanitize=thread. TSan sees only
// the libc calls they make through its interceptors (epoll, memmove), without the
// synchronization that orders them inside those libraries, and so reports races that are not in
// our code. These entries ignore interceptor calls made from gRPC's libraries, and races whose
// stacks run through Debian's Abseil libraries (gRPC calls them from its threads); races in our
// own instrumented code, including handlers that gRPC calls, are still reported (checked by
// removing a lock in plugin_roundtrip_test.cc: TSan then reports the race). Linked into tests only
// (alwayslink), and only has an effect in a -fsanitize=thread build.

extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libgrpc.so\n"
         "called_from_lib:libgrpc++.so\n"
         "called_from_lib:libgpr.so\n"
         "race:libabsl_*.so*\n";
}
