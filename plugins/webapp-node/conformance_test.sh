#!/usr/bin/env bash
# `ctrlhost test` against the Node and the C++ WebApp plugins on the same fixtures; the JSON
# responses must be identical (compared after sorting keys; the request id is the same).
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}"
ctrlhost=runtime/exe/ctrlhost
node_plugin=plugins/webapp-node/webapp-node
cpp_plugin=plugins/webapp/webapp
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/conf.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

normalize() {
  /usr/bin/python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin), sort_keys=True, indent=1))'
}

failures=0
check() {  # check NAME ARGS...
  local name=$1; shift
  local out_node out_cpp
  out_node=$(WEBAPP_RECORD_DIR="$tmp/node" timeout 60 "$ctrlhost" test --plugin "$node_plugin" \
    -o json --check "$@" 2>"$tmp/$name.node.log" | normalize)
  out_cpp=$(WEBAPP_RECORD_DIR="$tmp/cpp" timeout 60 "$ctrlhost" test --plugin "$cpp_plugin" \
    -o json --check "$@" 2>"$tmp/$name.cpp.log" | normalize)
  if [[ "$out_node" != "$out_cpp" ]]; then
    echo "FAIL $name: the responses differ"
    diff <(echo "$out_cpp") <(echo "$out_node") || true
    tail -20 "$tmp/$name.node.log"
    failures=$((failures + 1))
  else
    echo "ok $name"
  fi
}

sample=plugins/webapp/testdata/webapp.yaml
check fresh --object "$sample"
check ready --object "$sample" --children plugins/webapp-node/testdata/children
check invalid --object plugins/webapp-node/testdata/invalid.yaml
check finalizing --object "$sample" --finalizing

# The external record files are byte for byte the same.
if ! cmp -s "$tmp/node/default_shop.json" "$tmp/cpp/default_shop.json" 2>/dev/null; then
  # Finalizing removed them: write them again and compare.
  WEBAPP_RECORD_DIR="$tmp/node" "$ctrlhost" test --plugin "$node_plugin" --object "$sample" \
    >/dev/null 2>&1
  WEBAPP_RECORD_DIR="$tmp/cpp" "$ctrlhost" test --plugin "$cpp_plugin" --object "$sample" \
    >/dev/null 2>&1
  if cmp "$tmp/node/default_shop.json" "$tmp/cpp/default_shop.json"; then
    echo "ok record"
  else
    echo "FAIL record files differ"; failures=$((failures + 1))
  fi
fi
exit $((failures > 0))
