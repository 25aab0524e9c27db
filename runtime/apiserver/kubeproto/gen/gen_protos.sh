#!/bin/bash
# Regenerates the wire-schema subset in runtime/apiserver/kubeproto/ from a kubectl binary.
# Usage (from the repository root): runtime/apiserver/kubeproto/gen/gen_protos.sh [KUBECTL]
set -euo pipefail
kubectl="${1:-/usr/lib/google-cloud-sdk/bin/kubectl.1.32}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/desc" "$work/out"
python3 "$here/extract_descriptors.py" "$kubectl" "$work/desc" >/dev/null
g++ -std=c++17 -O1 "$here/gen_protos.cc" -o "$work/gen_protos" -lprotobuf
(cd "$work" && ./gen_protos desc/k8s.io__*.proto)
cp "$work"/out/*.proto "$here/.."
echo "regenerated: $(ls "$work/out" | tr '\n' ' ')"
