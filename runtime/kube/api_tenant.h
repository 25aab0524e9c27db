// ApiTenant: on whose behalf the host makes an API request (an operator's controller, or the
// host itself), so that the shared request budget is split fairly (fair_limiter.h).
//
// The tenant travels with the thread: the runner sets it around a reconcile's reads and writes,
// and every request the thread makes meanwhile is charged to it.
//
//   const kube::ApiTenant tenant{"billing", "invoices"};   // outlives the scope
//   {
//     kube::ApiTenantScope scope(&tenant);
//     client.Patch(...);   // charged to billing/invoices
//   }
//   client.Get(...);       // charged to the host ("", "")
//
// Thread-compatible values; the scope is per thread (a thread_local), so a request made on
// another thread for this one (none in the host today) would be charged to that thread's tenant.
#ifndef CTRLHOST_RUNTIME_KUBE_API_TENANT_H_
#define CTRLHOST_RUNTIME_KUBE_API_TENANT_H_

#include <string>

namespace ctrlhost::kube {

struct ApiTenant {
  std::string operator_name;  // "": the host itself (watches, leases, events of its own)
  std::string controller;
};

// The tenant of the calling thread: the innermost live ApiTenantScope's, else the host.
const ApiTenant& CurrentApiTenant();

// Sets the calling thread's tenant for its lifetime (nests; restores the outer one).
class ApiTenantScope {
 public:
  explicit ApiTenantScope(const ApiTenant* tenant);
  ApiTenantScope(const ApiTenantScope&) = delete;
  ApiTenantScope& operator=(const ApiTenantScope&) = delete;
  ~ApiTenantScope();

 private:
  const ApiTenant* const outer_;
};

}  // namespace ctrlhost::kube

#endif  // CTRLHOST_RUNTIME_KUBE_API_TENANT_H_
