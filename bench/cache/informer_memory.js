// Side-by-side baseline for bench/cache (cache-memory and ingest): syncs
// @kubernetes/client-node's informer (makeInformer + the list function a TypeScript operator
// would pass) on one resource of the server named by $KUBECONFIG, and prints one JSON line:
//   {"resource":"configmaps","objects":100000,"heap_bytes":...,"heap_per_object":...,
//    "sync_ms":...}
// heap_bytes is process.memoryUsage().heapUsed after global.gc() with the informer synced
// minus the same before it started (run with --expose-gc); sync_ms is informer.start() until
// its promise resolved (the initial list fetched, parsed and cached).
//
//   KUBECONFIG=.../kubeconfig node --expose-gc informer_memory.js CLIENT_NODE_DIR \
//       v1 configmaps bench                      # core resource
//   ... informer_memory.js CLIENT_NODE_DIR bench.ctrlhost.dev/v1 podlikes bench   # custom
//
// CLIENT_NODE_DIR holds node_modules/@kubernetes/client-node (e2e/clients). Exits 1 with a
// message on stderr on any failure.
'use strict';

const path = require('node:path');
const { pathToFileURL } = require('node:url');

async function main() {
  const [clientDir, groupVersion, plural, namespace] = process.argv.slice(2);
  if (!clientDir || !groupVersion || !plural || !namespace) {
    throw new Error('usage: informer_memory.js CLIENT_NODE_DIR GROUP_VERSION PLURAL NAMESPACE');
  }
  if (typeof global.gc !== 'function') throw new Error('run node with --expose-gc');
  const entry = path.join(clientDir, 'node_modules/@kubernetes/client-node/dist/index.js');
  const k8s = await import(pathToFileURL(entry).href);

  const kc = new k8s.KubeConfig();
  kc.loadFromDefault();
  let listFn;
  let watchPath;
  if (!groupVersion.includes('/')) {
    if (plural !== 'configmaps') throw new Error('core resources: only configmaps');
    const core = kc.makeApiClient(k8s.CoreV1Api);
    listFn = () => core.listNamespacedConfigMap({ namespace });
    watchPath = `/api/${groupVersion}/namespaces/${namespace}/${plural}`;
  } else {
    const [group, version] = groupVersion.split('/');
    const custom = kc.makeApiClient(k8s.CustomObjectsApi);
    listFn = () => custom.listNamespacedCustomObject({ group, version, namespace, plural });
    watchPath = `/apis/${group}/${version}/namespaces/${namespace}/${plural}`;
  }

  global.gc();
  global.gc();
  const before = process.memoryUsage().heapUsed;
  const informer = k8s.makeInformer(kc, watchPath, listFn);
  let stopping = false;
  informer.on('error', (err) => {
    // stop() aborts the watch request, which the informer reports as an error.
    if (!stopping) process.stderr.write(`informer error: ${err}\n`);
  });
  const start = process.hrtime.bigint();
  await informer.start();
  const syncMs = Number(process.hrtime.bigint() - start) / 1e6;
  const objects = informer.list().length;
  global.gc();
  global.gc();
  const after = process.memoryUsage().heapUsed;
  const heapBytes = after - before;
  process.stdout.write(JSON.stringify({
    resource: plural,
    objects,
    heap_bytes: heapBytes,
    heap_per_object: objects > 0 ? heapBytes / objects : 0,
    sync_ms: syncMs,
  }) + '\n');
  stopping = true;
  await informer.stop();
  process.exit(0);
}

main().catch((err) => {
  process.stderr.write(`informer_memory.js: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
