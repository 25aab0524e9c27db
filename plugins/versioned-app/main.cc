// The versioned-app plugin: serves the VersionedApp controller on $CTRLHOST_PLUGIN_ADDRESS; the
// hold file is $VERSIONED_APP_HOLD_FILE (unset: nothing is ever on hold).
#include <cstdlib>

#include "plugins/versioned-app/versioned_app.h"
#include "sdk/cpp/plugin.h"

int main() {
  const char* hold_file = std::getenv(ctrlhost::versioned_app::kHoldFileEnv);
  ctrlhost::sdk::Plugin plugin("versioned-app", ctrlhost::versioned_app::kOperatorVersion);
  plugin.Add(ctrlhost::versioned_app::MakeController(hold_file != nullptr ? hold_file : ""));
  return plugin.Run();
}
