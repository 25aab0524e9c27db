// The webapp-go plugin process: serves $CTRLHOST_PLUGIN_ADDRESS until SIGTERM.
package main

import ctrlhost "ctrlhost.dev/sdk/go"

func main() {
	records := RecordStore{Dir: DefaultRecordDir()}
	ctrlhost.NewPlugin("webapp", "1.0.0", NewController(records)).Main()
}
