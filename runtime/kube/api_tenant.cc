#include "runtime/kube/api_tenant.h"

namespace ctrlhost::kube {
namespace {

const ApiTenant kHost;
thread_local const ApiTenant* current = nullptr;

}  // namespace

const ApiTenant& CurrentApiTenant() { return current != nullptr ? *current : kHost; }

ApiTenantScope::ApiTenantScope(const ApiTenant* tenant) : outer_(current) { current = tenant; }

ApiTenantScope::~ApiTenantScope() { current = outer_; }

}  // namespace ctrlhost::kube
