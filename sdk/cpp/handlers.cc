#include "sdk/cpp/handlers.h"

#include <utility>

namespace ctrlhost::sdk {

Handlers& Handlers::OnUpsert(ReconcileFn fn) {
  upsert_ = std::move(fn);
  return *this;
}

Handlers& Handlers::OnDelete(ReconcileFn fn) {
  delete_ = std::move(fn);
  return *this;
}

ReconcileFn Handlers::Build() const {
  return [upsert = upsert_, del = delete_](const Request& request) {
    if (!request.exists()) return del ? del(request) : Result();
    if (request.finalizing()) {
      Result result = del ? del(request) : Result();
      if (!result.error().has_value()) result.SetFinalized();
      return result;
    }
    if (request.deleting()) return Result();  // going away without our finalizer
    return upsert ? upsert(request) : Result();
  };
}

}  // namespace ctrlhost::sdk
