#!/usr/bin/env bash
# shell_quote's output, pasted into a shell (sh and bash), gives back exactly the arguments:
# the commands tools/demo prints for users to paste, jsonpath expressions included.
set -uo pipefail
here=$(dirname "$0")
# shellcheck source=tools/internal/shell_quote.sh
source "$here/shell_quote.sh"

failures=0
check() {
  local quoted expected actual shell
  quoted=$(shell_quote "$@")
  expected=$(printf '<%s>' "$@")
  for shell in sh bash; do
    actual=$("$shell" -c "printf '<%s>' $quoted")
    if [[ "$actual" != "$expected" ]]; then
      echo "FAIL ($shell): $quoted"
      echo "  want $expected"
      echo "  got  $actual"
      failures=$((failures + 1))
    fi
  done
}

check kubectl get webapps,deployments,services,configmaps
check kubectl get webapp shop -o 'jsonpath={.status.observedGeneration}'
check kubectl get webapp shop -o 'jsonpath={range .status.conditions[*]}{.type}={.status} ({.reason}: {.message}){"\n"}{end}'
check kubectl patch webapp shop --type=merge -p '{"spec":{"replicas":3}}'
check kubectl apply -f plugins/configmap-replicator/samples/
check echo "it's" '' '$HOME' '`date`' 'a b' '*' '!x' 'tab	x' "new
line" '\' "''" '"'

# Plain words are not quoted (the printed command stays readable).
plain=$(shell_quote kubectl get -n team-a configmaps)
[[ "$plain" == "kubectl get -n team-a configmaps" ]] || { echo "FAIL: quoted plain words: $plain"; failures=$((failures + 1)); }
# Shell syntax is quoted.
jp=$(shell_quote -o 'jsonpath={.spec.replicas}')
[[ "$jp" == "-o 'jsonpath={.spec.replicas}'" ]] || { echo "FAIL: $jp"; failures=$((failures + 1)); }

if ((failures)); then
  echo "$failures failures"
  exit 1
fi
echo "PASS"
