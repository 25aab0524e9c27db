// What a controller's watches mean for readiness (/readyz, `Manager::Ready`).
//
// A watch that fails while its cache is synced keeps serving the last known objects; that is
// fine for a short outage (an API server restart) but not for long: after `stale_after` of
// failing, the cache is reported stale. Denied access (401/403) is reported at once, because
// it does not go away by waiting: an RBAC rule is missing. The server's message is kept as it
// is, since kube's 403 Status already names the verb, resource and namespace.
//
//   std::string problem = WatchReadinessProblem(reflector.Metrics(), clock->Now(),
//                                               absl::Seconds(30));
//   // "watch v1 ConfigMap ns=x forbidden (403) for 2s: configmaps is forbidden: User ..."
//
// Thread-safety: a pure function.
#ifndef CTRLHOST_RUNTIME_MANAGER_WATCH_READINESS_H_
#define CTRLHOST_RUNTIME_MANAGER_WATCH_READINESS_H_

#include <string>

#include "absl/time/time.h"
#include "runtime/watch/reflector.h"

namespace ctrlhost::manager {

// The default grace period before a failing watch makes readiness fail.
inline constexpr absl::Duration kDefaultWatchStaleAfter = absl::Seconds(30);

// "" when the watch does not make its controller unready; otherwise why, one of:
//   watch <description> forbidden (403) for <d>: <server message>
//   watch <description> unauthorized (401) for <d>: <server message>
//   watch <description> stale: failing for <d>: <error>          (failing >= stale_after)
//   watch <description> not synced: failing for <d>: <error>     (never listed, failing)
//   watch <description> not synced                               (never listed yet)
// `now` must be on the clock the reflector uses; <d> is rounded down to whole seconds.
std::string WatchReadinessProblem(const watch::ReflectorMetrics& metrics, absl::Time now,
                                  absl::Duration stale_after);

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_WATCH_READINESS_H_
