// Thin layers over `Reconcile(const Request&) -> Result` for three common controller styles.
// Each produces an ordinary ReconcileFn for ControllerBuilder::Reconcile; nothing here talks to
// the host, so every layer is a pure function of the request.
//
// 1. Upsert / delete handlers (event-handler style):
//
//      .Reconcile(sdk::Handlers()
//                     .OnUpsert([](const sdk::Request& r) { ...; return sdk::Result(); })
//                     .OnDelete([](const sdk::Request& r) { cleanup(); return sdk::Result(); })
//                     .Build())
//
//    OnUpsert runs while the object exists and is not being deleted. OnDelete runs when the
//    request is finalizing (the layer adds Finalized() when OnDelete answers without error) and
//    for the deletion notice of a gone primary (answer only events/error/requeue then). An
//    object being deleted without our finalizer gets an empty answer.
//
// 2. An ordered chain of dependent resources: DependentChain (chain.h).
// 3. A CRUD resource (current state, desired state, plan): CrudResource (crud.h).
//
// This header includes chain.h and crud.h, so one include brings the three styles.
//
// Thread-safety: the layers are immutable once built and may be called concurrently.
#ifndef CTRLHOST_SDK_CPP_HANDLERS_H_
#define CTRLHOST_SDK_CPP_HANDLERS_H_

#include "sdk/cpp/chain.h"  // IWYU pragma: export
#include "sdk/cpp/controller.h"
#include "sdk/cpp/crud.h"  // IWYU pragma: export

namespace ctrlhost::sdk {

class Handlers {
 public:
  Handlers& OnUpsert(ReconcileFn fn);
  Handlers& OnDelete(ReconcileFn fn);
  ReconcileFn Build() const;

 private:
  ReconcileFn upsert_;
  ReconcileFn delete_;
};

}  // namespace ctrlhost::sdk

#endif  // CTRLHOST_SDK_CPP_HANDLERS_H_
