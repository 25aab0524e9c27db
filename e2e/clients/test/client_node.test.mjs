// End-to-end test of `ctrlhost apiserver` with @kubernetes/client-node (pinned in
// package-lock.json): create, list with a label selector, paginated list, watch from a
// resourceVersion and an error path, against a server this test starts and kills.
//
//   CTRLHOST_BIN=$(bazel info bazel-bin)/runtime/exe/ctrlhost npm test
//
// Server features that are not there yet are listed in pending.json; a test that needs
// one is skipped with the reason. CTRLHOST_E2E_PENDING (comma separated) overrides the
// list, e.g. CTRLHOST_E2E_PENDING= npm test runs everything.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as k8s from '@kubernetes/client-node';

const START_TIMEOUT_MS = 20000;
const WATCH_TIMEOUT_MS = 20000;

const pendingFeatures = new Set(
  (process.env.CTRLHOST_E2E_PENDING ??
    JSON.parse(readFileSync(new URL('../pending.json', import.meta.url))).join(','))
    .split(',').map((s) => s.trim()).filter(Boolean));

function pending(feature) {
  return pendingFeatures.has(feature)
    ? `pending server feature ${feature} (CTRLHOST_E2E_PENDING; docs/e2e.md)` : false;
}

// Starts `ctrlhost apiserver` on a free port; resolves once it printed its kubeconfig path.
function startServer() {
  const bin = process.env.CTRLHOST_BIN;
  if (!bin) throw new Error('set CTRLHOST_BIN to the ctrlhost binary (tools/test does)');
  const dataDir = mkdtempSync(path.join(process.env.TEST_TMPDIR || tmpdir(), 'ctrlhost-node-'));
  const child = spawn(bin, ['apiserver', '--data-dir', dataDir, '--port', '0',
    '--print-kubeconfig-path'], { stdio: ['ignore', 'pipe', 'pipe'] });
  // Killed by PID whatever happens to the test run.
  process.on('exit', () => { try { process.kill(child.pid, 'SIGKILL'); } catch { /* gone */ } });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`ctrlhost apiserver did not start in time: ${stdout}\n${stderr}`));
    }, START_TIMEOUT_MS);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`ctrlhost apiserver exited (${code}): ${stderr}`));
    });
    child.stdout.on('data', (d) => {
      stdout += d;
      const m = stdout.match(/^kubeconfig: (.+)$/m);
      if (m) {
        clearTimeout(timer);
        child.removeAllListeners('exit');
        resolve({ child, kubeconfig: m[1].trim(), stderr: () => stderr });
      }
    });
  });
}

function configMap(name, labels = {}, data = {}) {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, labels }, data };
}

describe('@kubernetes/client-node against ctrlhost apiserver', () => {
  let server;
  let kc;
  let core;
  const ns = 'node-client';

  before(async () => {
    server = await startServer();
    kc = new k8s.KubeConfig();
    kc.loadFromFile(server.kubeconfig);
    core = kc.makeApiClient(k8s.CoreV1Api);
    await core.createNamespace({
      body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
    });
  });

  after(async () => {
    if (!server) return;
    const exited = new Promise((resolve) => server.child.on('exit', resolve));
    server.child.kill('SIGTERM');
    const timer = setTimeout(() => server.child.kill('SIGKILL'), 10000);
    await exited;
    clearTimeout(timer);
  });

  it('creates, reads, lists with a label selector and deletes', async () => {
    const created = await core.createNamespacedConfigMap({
      namespace: ns, body: configMap('gold', { tier: 'gold' }, { a: '1' }),
    });
    assert.ok(created.metadata.uid);
    await core.createNamespacedConfigMap({ namespace: ns, body: configMap('plain') });
    const read = await core.readNamespacedConfigMap({ name: 'gold', namespace: ns });
    assert.deepEqual(read.data, { a: '1' });
    assert.equal(read.metadata.uid, created.metadata.uid);
    const gold = await core.listNamespacedConfigMap({ namespace: ns, labelSelector: 'tier=gold' });
    assert.deepEqual(gold.items.map((c) => c.metadata.name), ['gold']);
    const notGold = await core.listNamespacedConfigMap({ namespace: ns, labelSelector: '!tier' });
    assert.deepEqual(notGold.items.map((c) => c.metadata.name), ['plain']);
    await core.deleteNamespacedConfigMap({ name: 'plain', namespace: ns });
    const all = await core.listNamespacedConfigMap({ namespace: ns });
    assert.deepEqual(all.items.map((c) => c.metadata.name), ['gold']);
  });

  it('pages through a list with limit and continue', async () => {
    const pageNs = 'node-pages';
    await core.createNamespace({
      body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: pageNs } },
    });
    const names = [0, 1, 2, 3, 4].map((i) => `item-${i}`);
    for (const name of names) {
      await core.createNamespacedConfigMap({ namespace: pageNs, body: configMap(name) });
    }
    const seen = [];
    let token;
    let pages = 0;
    do {
      const page = await core.listNamespacedConfigMap({ namespace: pageNs, limit: 2, _continue: token });
      seen.push(...page.items.map((c) => c.metadata.name));
      token = page.metadata._continue;
      pages += 1;
      assert.ok(pages < 10, 'pagination does not end');
    } while (token);
    assert.equal(pages, 3);
    assert.deepEqual(seen, names);
  });

  it('gets a 404 and a 409 as ApiException with a Status body', async () => {
    await assert.rejects(core.readNamespacedConfigMap({ name: 'missing', namespace: ns }),
      (err) => {
        assert.equal(err.code, 404);
        const status = typeof err.body === 'string' ? JSON.parse(err.body) : err.body;
        assert.equal(status.kind, 'Status');
        assert.equal(status.reason, 'NotFound');
        return true;
      });
    await core.createNamespacedConfigMap({ namespace: ns, body: configMap('twice') });
    await assert.rejects(core.createNamespacedConfigMap({ namespace: ns, body: configMap('twice') }),
      (err) => {
        assert.equal(err.code, 409);
        const status = typeof err.body === 'string' ? JSON.parse(err.body) : err.body;
        assert.equal(status.reason, 'AlreadyExists');
        return true;
      });
  });

  it('watches from a resourceVersion and sees the events in order',
    { skip: pending('uncompressed-watch') }, async () => {
      const watchNs = 'node-watch';
      await core.createNamespace({
        body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: watchNs } },
      });
      const start = (await core.listNamespacedConfigMap({ namespace: watchNs })).metadata.resourceVersion;
      await core.createNamespacedConfigMap({ namespace: watchNs, body: configMap('w1', {}, { v: '1' }) });
      const events = [];
      let controller;
      const done = new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(
          `watch events before the deadline: ${JSON.stringify(events)}`)), WATCH_TIMEOUT_MS);
        new k8s.Watch(kc).watch(`/api/v1/namespaces/${watchNs}/configmaps`,
          { resourceVersion: start },
          (type, obj) => {
            events.push([type, obj.metadata.name, Number(obj.metadata.resourceVersion)]);
            if (events.length === 1) {
              // Written while the watch is open.
              core.patchNamespacedConfigMap({ name: 'w1', namespace: watchNs, body: { data: { v: '2' } } },
                k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch))
                .then(() => core.deleteNamespacedConfigMap({ name: 'w1', namespace: watchNs }))
                .catch(reject);
            }
            if (events.length === 3) { clearTimeout(timer); resolve(); }
          },
          (err) => { if (err && events.length < 3) { clearTimeout(timer); reject(err); } })
          .then((c) => { controller = c; }, reject);
      });
      try {
        await done;
      } finally {
        controller?.abort();
      }
      assert.deepEqual(events.map((e) => [e[0], e[1]]),
        [['ADDED', 'w1'], ['MODIFIED', 'w1'], ['DELETED', 'w1']]);
      const revisions = events.map((e) => e[2]);
      assert.deepEqual(revisions, [...revisions].sort((a, b) => a - b));
    });
});
