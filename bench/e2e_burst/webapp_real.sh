#!/usr/bin/env bash
# N (500) WebApps (the C++ reference plugin: a finalizer, a ConfigMap, a Deployment and a
# Service each) through `ctrlhost run` against a fresh real Kubernetes 1.20 cluster (e2e/kube,
# service range widened to /16 so 500 Services fit), host client defaults (50 QPS / burst 100;
# HOST_ARGS=--kube-api-qps=0 lifts them). Prints the time from the first create (kubectl create
# of all N) until every WebApp's status has observedGeneration == generation, and the host's API
# requests per WebApp (not watches) from the API server's audit log. The issue 13 figure.
# Needs: bazel build //runtime/exe:ctrlhost //plugins/webapp; tools/kubernetes (built).
set -uo pipefail
cd "$(dirname "$0")/../.."
N=${N:-500}
w=$(mktemp -d /tmp/ctrlhost-webapp-bench.XXXXXX)
trap 'rm -rf "$w"' EXIT
PYTHONPATH=. /usr/bin/python3 -m e2e.kube.kube_fixture --dir "$w/cluster" \
  --apiserver-arg=--service-cluster-ip-range=10.96.0.0/16 > "$w/kube.out" 2> "$w/kube.err" &
kpid=$!
for i in $(seq 240); do grep -q '^ready' "$w/kube.out" && break; sleep 1; done
kc=$(sed -n 's/^kubeconfig: //p' "$w/kube.out")
cat > "$w/op.yaml" <<YAML
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: bench
spec:
  plugins:
    - name: webapp
      exec:
        command: $PWD/bazel-bin/plugins/webapp/webapp
YAML
kubectl --kubeconfig "$kc" apply -f plugins/webapp/deploy/crd.yaml > /dev/null
bazel-bin/runtime/exe/ctrlhost run -f "$w/op.yaml" --kubeconfig "$kc" --data-dir "$w/data" \
  --metrics-addr 127.0.0.1:0 --admin-socket "$w/admin.sock" --plugin-user host ${HOST_ARGS:-} > "$w/host.out" 2> "$w/host.log" &
hpid=$!
for i in $(seq 120); do grep -q '^ready' "$w/host.out" && break; sleep 0.5; done
python3 - "$N" > "$w/webapps.yaml" <<'PY'
import sys
for i in range(int(sys.argv[1])):
    print("---\napiVersion: apps.ctrlhost.dev/v1alpha1\nkind: WebApp\nmetadata:\n  name: app-%d\n  namespace: default\nspec:\n  image: nginx:1.25\n  replicas: 1\n  port: 8080\n  config:\n    GREETING: hello" % i)
PY
uptime
start=$(date +%s.%N)
kubectl --kubeconfig "$kc" create -f "$w/webapps.yaml" > /dev/null
created=$(date +%s.%N)
while :; do
  done_count=$(kubectl --kubeconfig "$kc" get webapps -n default -o json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
print(sum(1 for o in items if o.get("status", {}).get("observedGeneration") == o["metadata"].get("generation")))')
  [[ "$done_count" -ge "$N" ]] && break
  now=$(date +%s.%N)
  if (( $(echo "$now - $start > 600" | bc) )); then echo "timeout at $done_count"; break; fi
  sleep 0.5
done
end=$(date +%s.%N)
sleep 5
python3 - "$w/cluster/audit.log" "$N" <<'PY'
import json, sys
counts = {}
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("stage") != "ResponseComplete" or not e.get("userAgent", "").startswith("ctrlhost"):
        continue
    if e.get("verb") == "watch":
        continue
    key = (e["verb"], e["objectRef"].get("resource", "") if e.get("objectRef") else "",
           e["objectRef"].get("subresource", "") if e.get("objectRef") else "")
    counts[key] = counts.get(key, 0) + 1
total = sum(counts.values())
print("host requests (not watches): %d = %.2f per WebApp" % (total, total / int(sys.argv[2])))
for k, v in sorted(counts.items(), key=lambda kv: -kv[1])[:12]:
    print("  %-8s %-14s %-8s %d" % (k[0], k[1], k[2], v))
PY
echo "creates took $(echo "$created - $start" | bc) s; all $N WebApps converged after $(echo "$end - $start" | bc) s"
uptime
kill -TERM $hpid; wait $hpid
kill -TERM $kpid; wait $kpid
