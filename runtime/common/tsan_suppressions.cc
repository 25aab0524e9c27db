// ThreadSanitizer suppressions, one list for every test that runs real gRPC, OpenSSL or httplib
// code and for the product binaries (ctrlhost and the plugins) when they are built with
// --config=tsan and run by tests as child processes.
//
// Debian's gRPC, Abseil, OpenSSL and cpp-httplib shared libraries are not instrumented: TSan sees
// their libc calls through its interceptors (memcmp, memmove, epoll) but not the
// synchronization that orders them inside those libraries, and reports races that are not in our
// code. Our own code, including handlers that gRPC calls, stays fully checked (checked by removing
// a lock in proto/ctrlhost/plugin/v1alpha1/plugin_roundtrip_test.cc: TSan then reports the race).
// Tests link it directly (harmless outside tsan builds); product binaries only in tsan builds
// (select on //tools/build:tsan).
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libgrpc.so\n"
         "called_from_lib:libgrpc++.so\n"
         "called_from_lib:libgpr.so\n"
         // gRPC's upb (message encoding inside libgrpc): its memcpy of a buffer another gRPC
         // thread wrote (bench/dispatch:loops_test under load, 2026-11-29).
         "called_from_lib:libupb.so\n"
         "called_from_lib:libcrypto.so.3\n"
         "called_from_lib:libssl.so.3\n"
         "called_from_lib:libcpp-httplib.so\n"
         // httplib's ClientImpl::stop() (in the uninstrumented .so) unlocks a mutex whose lock
         // TSan did not see: reported as "unlock of an unlocked mutex" from our caller.
         "mutex:ctrlhost::kube::StreamCanceller::Cancel\n"
         "race:libabsl_*.so*\n"
         // An absl::Status copied under the session's mutex (its refcount increment is inline,
         // so instrumented) against the delete of that StatusRep after its last decrement,
         // which runs in Debian's uninstrumented libabsl_status and reaches the delete by a tail
         // call, so no libabsl frame is left to match above (plugin_slot_test under TSan, a
         // remote plugin's stream broken while the supervisor reads the session's health).
         "race:ctrlhost::plugin::Session::health\n"
         "race_top:grpc::internal::\n"
         "race:grpc::internal::CallOpSet\n"
         // gRPC's callback-API server reactors (the admin server).
         "race_top:grpc::ServerUnaryReactor::\n"
         "race:ServerCallbackUnaryImpl::~ServerCallbackUnaryImpl\n"
         // The same reactors' std::function, destroyed by gRPC's callback thread after the
         // call's last use on ours (runtime/admin:server_cli_test, 2026-11-29, once in four).
         "race:grpc::Server::CallbackRequest\n"
         // std::regex's matchers (_CharMatcher, _BracketMatcher, ...) as the top frame, called
         // from Debian's uninstrumented cpp-httplib: the matcher's code
         // is an inline instantiation TSan instruments (in whichever of our libraries emitted
         // it), its data the regex that httplib built and synchronises itself
         // (runtime/manager:operator_balance_test, several electors' clients at once).
         "race_top:std::_Function_handler<bool (char), std::__detail::\n";
}
