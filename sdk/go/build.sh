#!/usr/bin/env bash
# Builds and tests the Go SDK and the Go plugins offline, from Debian's Go packages, in GOPATH
# mode (no module download): golang-1.19 (or newer), golang-google-grpc-dev,
# golang-google-protobuf-dev, golang-github-golang-protobuf-1-5-dev, protoc-gen-go,
# protoc-gen-go-grpc (tools/deps/debian.txt).
#
#   sdk/go/build.sh vet                      go vet on every Go package of the repository
#   sdk/go/build.sh test [go test flags]     go test (e.g. -race -count=1) on them
#   sdk/go/build.sh build IMPORT_PATH OUT    builds one command, e.g.
#                                            ctrlhost.dev/plugins/webapp-go bazel-bin/webapp-go
#   sdk/go/build.sh build DIR OUT            builds the main package in DIR (an existing
#                                            directory: ., ~/src/greeter), e.g. a plugin outside
#                                            this repository, against this checkout's SDK
#   sdk/go/build.sh env                      puts the sources and generated code in place, then
#                                            prints the environment: eval it to run go yourself
#                                            (run it again after changing the SDK's sources)
#
# The generated protocol code is never committed: each run copies the Go sources into a GOPATH
# under $CTRLHOST_GO_WORK (default ~/.cache/ctrlhost-go/<hash of this checkout>) and generates
# ctrlhost.dev/sdk/go/gen/... there with protoc (the exact lines are in docs/protocol.md,
# "Generating code for another language"). Go's build cache ($CTRLHOST_GO_CACHE, default
# ~/.cache/ctrlhost-go/cache) is content-addressed and shared between checkouts.
#
# Import paths: the repository's folders below map to ctrlhost.dev/<folder>.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# Folders holding Go packages, relative to the repository root.
GO_DIRS=(sdk/go plugins/webapp-go e2e/conformance/scenario/go e2e/host/tasks/go bench/sdk_dispatch/go)

find_go() {
  local candidate
  for candidate in $(ls -d /usr/lib/go-1.* 2>/dev/null | sort -V -r); do
    if [[ -x "$candidate/bin/go" ]]; then
      echo "$candidate/bin/go"
      return
    fi
  done
  command -v go || { echo "build.sh: no Go toolchain (install golang-1.19: tools/setup)" >&2; exit 1; }
}

GO="$(find_go)"
base="${HOME:-/tmp}/.cache/ctrlhost-go"
hash="$(printf '%s' "$root" | sha1sum | cut -c1-12)"
work="${CTRLHOST_GO_WORK:-$base/$hash}"
export GOPATH="$work/gopath:/usr/share/gocode"
export GOCACHE="${CTRLHOST_GO_CACHE:-$base/cache}"
export GO111MODULE=off GOFLAGS= GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=1
export PATH="$(dirname "$GO"):$PATH"
src="$work/gopath/src/ctrlhost.dev"

sync_sources() {
  mkdir -p "$src" "$GOCACHE"
  # Two runs on one checkout (parallel Bazel actions) must not copy over each other.
  exec 9>"$work/lock"
  flock 9
  local d
  for d in "${GO_DIRS[@]}"; do
    [[ -d "$root/$d" ]] || continue
    mkdir -p "$src/$d"
    # --delete keeps removed files from lingering; gen/ is produced below, not copied.
    rsync -a --delete --exclude=/gen/ "$root/$d/" "$src/$d/"
  done
  # Test data the SDKs share (sdk/testdata/host_judgement_cases.json), at the same place
  # relative to the Go packages as in the repository.
  mkdir -p "$src/sdk/testdata"
  rsync -a --delete "$root/sdk/testdata/" "$src/sdk/testdata/"
  local gen="$work/gen.tmp"
  rm -rf "$gen" && mkdir -p "$gen"
  protoc -I "$root/proto" --go_out="$gen" --go-grpc_out="$gen" \
    "$root/proto/ctrlhost/plugin/v1alpha1/plugin.proto" \
    "$root/proto/ctrlhost/admin/v1alpha1/admin.proto"
  rm -rf "$src/sdk/go/gen"
  mv "$gen/ctrlhost.dev/sdk/go/gen" "$src/sdk/go/gen"
  rm -rf "$gen"
}

packages() {
  local d
  for d in "${GO_DIRS[@]}"; do
    if [[ -d "$root/$d" ]]; then echo "ctrlhost.dev/$d/..."; fi
  done
}

cmd="${1:-}"
shift || true
case "$cmd" in
  env)
    # The GOPATH it prints must hold the sources: on a fresh machine nothing else put them there.
    sync_sources
    echo "export GOPATH='$GOPATH' GOCACHE='$GOCACHE' GO111MODULE=off GOFLAGS= GOPROXY=off PATH='$(dirname "$GO"):'\"\$PATH\""
    echo "# sources and generated code: $src"
    ;;
  vet)
    sync_sources
    cd "$src"
    "$GO" vet $(packages)
    ;;
  test)
    sync_sources
    cd "$src"
    # buildscript_test.go runs this script from a fresh work directory, as a new user would.
    CTRLHOST_REPO_ROOT="$root" "$GO" test "$@" $(packages)
    ;;
  build)
    [[ $# -eq 2 ]] || { echo "usage: build.sh build IMPORT_PATH|DIR OUT" >&2; exit 2; }
    out="$2"
    [[ "$out" = /* ]] || out="$PWD/$out"
    if [[ "$1" != ctrlhost.dev/* && -d "$1" ]]; then
      # A directory of your own (GOPATH mode builds a main package in any directory; its
      # imports come from the GOPATH above).
      dir="$(cd "$1" && pwd)"
      sync_sources
      (cd "$dir" && "$GO" build -o "$out" .)
    else
      sync_sources
      (cd "$src" && "$GO" build -o "$out" "$1")
    fi
    ;;
  *)
    sed -n '2,16p' "${BASH_SOURCE[0]}" >&2
    exit 2
    ;;
esac
