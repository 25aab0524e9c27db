// The webapp plugin: serves the WebApp controller on $CTRLHOST_PLUGIN_ADDRESS.
#include "plugins/webapp/webapp.h"
#include "sdk/cpp/plugin.h"

int main() {
  ctrlhost::webapp::RecordStore records(ctrlhost::webapp::RecordStore::DefaultDir());
  ctrlhost::sdk::Plugin plugin("webapp", "1.0.0");
  plugin.Add(ctrlhost::webapp::MakeController(&records));
  return plugin.Run();
}
