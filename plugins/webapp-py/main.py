"""The webapp-py plugin process: serves $CTRLHOST_PLUGIN_ADDRESS until SIGTERM."""

import sys

from ctrlhost_sdk import Plugin

import webapp


def main():
    plugin = Plugin("webapp", "1.0.0")
    plugin.add(webapp.make_controller(webapp.RecordStore(webapp.RecordStore.default_dir())))
    return plugin.run()


if __name__ == "__main__":
    sys.exit(main())
