// adminpb: the one C++ name of the host admin API's generated code (package
// ctrlhost.admin.v1alpha1). Code in namespace ctrlhost writes adminpb::SwapPluginRequest,
// never an alias of its own (docs/architecture.md, "Names"). Part of :admin_cc.
#ifndef CTRLHOST_PROTO_CTRLHOST_ADMIN_V1ALPHA1_ADMINPB_H_
#define CTRLHOST_PROTO_CTRLHOST_ADMIN_V1ALPHA1_ADMINPB_H_

#include "ctrlhost/admin/v1alpha1/admin.pb.h"

namespace ctrlhost {

namespace adminpb = ::ctrlhost::admin::v1alpha1;

}  // namespace ctrlhost

#endif  // CTRLHOST_PROTO_CTRLHOST_ADMIN_V1ALPHA1_ADMINPB_H_
