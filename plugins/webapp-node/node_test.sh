#!/usr/bin/env bash
# Runs node --test on the given test files (paths relative to the workspace runfiles root).
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}"
exec /usr/bin/node --test "$@"
