"""The versioned-app-py plugin process: serves $CTRLHOST_PLUGIN_ADDRESS until SIGTERM; the hold
file is $VERSIONED_APP_HOLD_FILE (unset: nothing is ever on hold)."""

import os
import sys

from ctrlhost_sdk import Plugin

import versioned_app


def main():
    plugin = Plugin("versioned-app", versioned_app.OPERATOR_VERSION)
    plugin.add(versioned_app.make_controller(os.environ.get(versioned_app.HOLD_FILE_ENV, "")))
    return plugin.run()


if __name__ == "__main__":
    sys.exit(main())
