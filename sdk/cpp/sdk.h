// The ctrlhost C++ plugin SDK in one include. See sdk/cpp/README.md.
//
//   #include "sdk/cpp/sdk.h"
//
//   int main() {
//     ctrlhost::sdk::Plugin plugin("hello", "1.0.0");
//     plugin.Add(ctrlhost::sdk::ControllerBuilder("hello")
//                    .For("", "v1", "ConfigMap")
//                    .Reconcile([](const ctrlhost::sdk::Request& req) {
//                      ctrlhost::sdk::Result result;
//                      result.Status()["seen"] = true;
//                      return result;
//                    }));
//     return plugin.Run();
//   }
#ifndef CTRLHOST_SDK_CPP_SDK_H_
#define CTRLHOST_SDK_CPP_SDK_H_

#include "sdk/cpp/builders.h"         // IWYU pragma: export
#include "sdk/cpp/chain.h"            // IWYU pragma: export
#include "sdk/cpp/controller.h"       // IWYU pragma: export
#include "sdk/cpp/crud.h"             // IWYU pragma: export
#include "sdk/cpp/handlers.h"         // IWYU pragma: export
#include "sdk/cpp/operator_status.h"  // IWYU pragma: export
#include "sdk/cpp/plugin.h"           // IWYU pragma: export
#include "sdk/cpp/request.h"          // IWYU pragma: export
#include "sdk/cpp/resource_sets.h"    // IWYU pragma: export
#include "sdk/cpp/result.h"           // IWYU pragma: export

#endif  // CTRLHOST_SDK_CPP_SDK_H_
