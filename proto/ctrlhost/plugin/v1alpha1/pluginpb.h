// pluginpb: the one C++ name of the plugin protocol's generated code (package
// ctrlhost.plugin.v1alpha1). Code in namespace ctrlhost writes pluginpb::ReconcileRequest,
// never an alias of its own (docs/architecture.md, "Names"). Part of :plugin_cc.
#ifndef CTRLHOST_PROTO_CTRLHOST_PLUGIN_V1ALPHA1_PLUGINPB_H_
#define CTRLHOST_PROTO_CTRLHOST_PLUGIN_V1ALPHA1_PLUGINPB_H_

#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"

namespace ctrlhost {

namespace pluginpb = ::ctrlhost::plugin::v1alpha1;

}  // namespace ctrlhost

#endif  // CTRLHOST_PROTO_CTRLHOST_PLUGIN_V1ALPHA1_PLUGINPB_H_
