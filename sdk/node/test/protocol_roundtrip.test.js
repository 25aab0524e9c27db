'use strict';
// Round trip of ctrlhost.plugin.v1alpha1 through @grpc/proto-loader and @grpc/grpc-js.
//
// A plugin server on a Unix socket in a temporary directory; a host-side client that calls
// Describe, then sends several reconciles and a cancel notice on one Reconcile stream. The server
// answers the reconciles in reverse order; the client matches them by request_id and checks that
// every field survived, including raw JSON bytes, Durations, Timestamps and enums.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTO_ROOT = path.resolve(__dirname, '..', '..', '..', 'proto');
const MAX_MESSAGE_BYTES = 64 << 20; // The limit the protocol documents.
const TIMEOUT_MS = 20000;

// The loader options an SDK would use: proto field names as written, 64-bit integers as decimal
// strings (request_id is uint64), enums by name, bytes as Buffers, unset fields filled with their
// defaults, and the name of the set member of each oneof.
const LOADER_OPTIONS = {
  keepCase: true,
  longs: String,
  enums: String,
  bytes: Buffer,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_ROOT, '/usr/include'],
};

const CHANNEL_OPTIONS = {
  'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
  'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
};

const definition = protoLoader.loadSync('ctrlhost/plugin/v1alpha1/plugin.proto', LOADER_OPTIONS);
// grpc-js types a loaded package loosely (any of its definition kinds): read it as `any`.
const pkg = /** @type {any} */ (grpc.loadPackageDefinition(definition)).ctrlhost.plugin.v1alpha1;

function objectJson(id) {
  return Buffer.from(
    `{"apiVersion":"example.com/v1","kind":"WebApp","metadata":{"name":"app-${id}",` +
      `"namespace":"team-a"},"spec":{"note":"caf\u00e9 \u2603"}}`,
    'utf8',
  );
}

// The request the host would send; every field set.
function makeReconcile(id) {
  return {
    request_id: String(id),
    reconcile: {
      controller: 'webapp',
      namespace: 'team-a',
      name: `app-${id}`,
      uid: `uid-${id}`,
      reason: id % 2 === 0 ? 'REASON_CHILD_CHANGED' : 'REASON_REQUEUE',
      object: objectJson(id),
      children: [
        {
          api_version: 'apps/v1',
          kind: 'Deployment',
          object: Buffer.from(`{"kind":"Deployment","metadata":{"name":"c${id}"}}`),
        },
      ],
      related_objects: [
        { api_version: 'v1', kind: 'ConfigMap', object: Buffer.from([0x7b, 0x7d, 0x00, 0xff]) },
      ],
      finalizing: id === 3,
      attempt: id + 1,
      deadline: { seconds: String(1700000000 + id), nanos: 123456789 },
      trace_id: '4bf92f3577b34da6a3ce929d0e0e4736',
    },
  };
}

// The fake plugin's answer; every outcome set, derived from the request.
function makeResponse(id, call) {
  return {
    request_id: String(id),
    desired_objects: [
      Buffer.from(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"${call.name}"}}`),
    ],
    patches: [
      {
        target: 'PATCH_TARGET_OWNED',
        api_version: 'v1',
        kind: 'ConfigMap',
        name: `cm-${id}`,
        type: 'PATCH_TYPE_JSON_PATCH',
        patch: Buffer.from('[{"op":"test","path":"/data/a","value":"1"}]'),
        resource_version: String(1000 + id),
      },
      {
        target: 'PATCH_TARGET_PRIMARY',
        type: 'PATCH_TYPE_MERGE_PATCH',
        patch: Buffer.from('{"metadata":{"labels":{"seen":"yes"}}}'),
      },
    ],
    status: Buffer.from(`{"observedReplicas":${id}}`),
    conditions: [
      {
        type: 'Ready',
        status: 'CONDITION_STATUS_UNKNOWN',
        reason: 'Waiting',
        message: `waiting for ${call.name}`,
      },
    ],
    events: [{ type: 'EVENT_TYPE_WARNING', reason: 'Scaled', message: 'scaled' }],
    requeue_after: { seconds: String(id * 60), nanos: 750000000 },
    error: {
      message: `retry ${id}`,
      kind: id % 2 === 0 ? 'ERROR_KIND_TERMINAL' : 'ERROR_KIND_RETRYABLE',
      reason: `Attempt${id}`,
      // Only a retryable error may say when to retry (null: unset, as proto-loader decodes it).
      retry_after: id % 2 === 0 ? null : { seconds: String(id * 30), nanos: 5 },
    },
    finalized: call.finalizing,
  };
}

const received = { describe: null, stream: [] };

// The fake plugin: records what it receives and answers a stream's reconciles in reverse order
// once the host half-closes. Cancel notices get no answer.
const pluginImpl = {
  Describe(call, callback) {
    received.describe = call.request;
    callback(null, {
      protocol_version: 'v1alpha1',
      plugin_name: 'webapp-operator',
      plugin_version: '1.4.0',
      capabilities: ['CAPABILITY_CANCELLATION', 'CAPABILITY_CHILDREN'],
      controllers: [
        {
          name: 'webapp',
          primary: { group: 'example.com', version: 'v1', kind: 'WebApp' },
          owns: [
            { kind: { group: 'apps', version: 'v1', kind: 'Deployment' }, delete_absent: true },
          ],
          watches: [
            {
              kind: { group: '', version: 'v1', kind: 'Secret' },
              owner_reference: { controller_only: true },
            },
          ],
          finalizer: 'example.com/cleanup',
          max_concurrent_reconciles: 2,
          resync_period: { seconds: '900', nanos: 0 },
          request_contents: { children: true, strip_fields: ['metadata.managedFields'] },
        },
      ],
    });
  },
  Reconcile(call) {
    const requests = [];
    call.on('data', (req) => requests.push(req));
    call.on('error', () => {}); // A client cancel ends the call; nothing to do.
    call.on('end', () => {
      received.stream = requests;
      for (const req of [...requests].reverse()) {
        if (req.payload === 'reconcile') {
          call.write(makeResponse(Number(req.request_id), req.reconcile));
        }
      }
      call.end();
    });
  },
};

let dir;
let server;
let client;

function socketBase() {
  // Unix socket paths are limited to 107 bytes; TEST_TMPDIR can leave too little room.
  const t = process.env.TEST_TMPDIR;
  return t && t.length < 70 ? t : os.tmpdir();
}

before(async () => {
  dir = fs.mkdtempSync(path.join(socketBase(), 'rt-'));
  const address = `unix:${path.join(dir, 'plugin.sock')}`;
  server = new grpc.Server(CHANNEL_OPTIONS);
  server.addService(pkg.ControllerPluginService.service, pluginImpl);
  await new Promise((resolve, reject) => {
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err) =>
      err ? reject(err) : resolve(),
    );
  });
  client = new pkg.ControllerPluginService(
    address,
    grpc.credentials.createInsecure(),
    CHANNEL_OPTIONS,
  );
});

after(async () => {
  if (client) client.close();
  if (server) {
    await new Promise((resolve) => {
      const timer = setTimeout(() => {
        server.forceShutdown();
        resolve();
      }, 5000);
      server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

function deadline() {
  return new Date(Date.now() + TIMEOUT_MS);
}

test('Describe negotiates both ways', async () => {
  const resp = await new Promise((resolve, reject) => {
    client.Describe(
      {
        protocol_versions: ['v1alpha1'],
        capabilities: ['CAPABILITY_CANCELLATION', 'CAPABILITY_CONDITIONS'],
        host_version: '0.1.0',
        max_message_bytes: MAX_MESSAGE_BYTES,
        max_in_flight: 64,
        instance_name: 'webapp-3',
      },
      { deadline: deadline() },
      (err, r) => (err ? reject(err) : resolve(r)),
    );
  });
  const seen = received.describe;
  assert.deepEqual(seen.protocol_versions, ['v1alpha1']);
  assert.deepEqual(seen.capabilities, ['CAPABILITY_CANCELLATION', 'CAPABILITY_CONDITIONS']);
  assert.equal(seen.max_message_bytes, MAX_MESSAGE_BYTES);
  assert.equal(seen.max_in_flight, 64);
  assert.equal(seen.instance_name, 'webapp-3');

  assert.equal(resp.protocol_version, 'v1alpha1');
  assert.equal(resp.plugin_version, '1.4.0');
  assert.deepEqual(resp.capabilities, ['CAPABILITY_CANCELLATION', 'CAPABILITY_CHILDREN']);
  assert.equal(resp.controllers.length, 1);
  const spec = resp.controllers[0];
  assert.deepEqual(spec.primary, { group: 'example.com', version: 'v1', kind: 'WebApp' });
  assert.equal(spec.owns[0].delete_absent, true);
  assert.equal(spec.owns[0].cluster_scoped, false);
  assert.equal(spec.watches[0].mapping, 'owner_reference');
  assert.equal(spec.watches[0].owner_reference.controller_only, true);
  assert.equal(spec.watches[0].include_in_requests, false);
  assert.equal(spec.finalizer, 'example.com/cleanup');
  assert.equal(spec.max_concurrent_reconciles, 2);
  assert.deepEqual(spec.resync_period, { seconds: '900', nanos: 0 });
  assert.deepEqual(spec.request_contents.strip_fields, ['metadata.managedFields']);
  assert.equal(spec.request_contents.related_objects, false);
  assert.deepEqual(spec.schedules, []);
  assert.equal(spec.label_selector, '');
});

test('Reconcile stream: responses in any order, matched by request_id', async () => {
  const ids = [1, 2, 3];
  const responses = await new Promise((resolve, reject) => {
    const got = [];
    const call = client.Reconcile({ deadline: deadline() });
    call.on('data', (r) => got.push(r));
    call.on('error', reject);
    call.on('end', () => resolve(got));
    for (const id of ids) call.write(makeReconcile(id));
    call.write({ request_id: '9', cancel: { reason: 'host shutting down' } });
    call.end();
  });

  assert.deepEqual(
    responses.map((r) => r.request_id),
    ['3', '2', '1'],
  );
  const byId = new Map(responses.map((r) => [Number(r.request_id), r]));
  for (const id of ids) {
    const got = byId.get(id);
    const want = makeResponse(id, makeReconcile(id).reconcile);
    assert.equal(got.desired_objects.length, 1);
    assert.ok(got.desired_objects[0].equals(want.desired_objects[0]));
    assert.equal(got.patches[0].target, 'PATCH_TARGET_OWNED');
    assert.equal(got.patches[0].type, 'PATCH_TYPE_JSON_PATCH');
    assert.equal(got.patches[0].name, `cm-${id}`);
    assert.ok(got.patches[0].patch.equals(want.patches[0].patch));
    assert.equal(got.patches[0].resource_version, String(1000 + id));
    assert.equal(got.patches[1].target, 'PATCH_TARGET_PRIMARY');
    assert.equal(got.patches[1].type, 'PATCH_TYPE_MERGE_PATCH');
    assert.equal(got.patches[1].name, '');
    assert.equal(got.patches[1].resource_version, '');
    assert.ok(got.status.equals(want.status));
    assert.deepEqual(got.conditions, want.conditions);
    assert.deepEqual(got.events, want.events);
    assert.deepEqual(got.requeue_after, { seconds: String(id * 60), nanos: 750000000 });
    assert.deepEqual(got.error, want.error);
    assert.equal(got.finalized, id === 3);
  }

  const seen = received.stream;
  assert.equal(seen.length, 4);
  for (let i = 0; i < ids.length; i++) {
    const want = makeReconcile(ids[i]).reconcile;
    assert.equal(seen[i].payload, 'reconcile');
    assert.equal(seen[i].request_id, String(ids[i]));
    const call = seen[i].reconcile;
    assert.ok(call.object.equals(objectJson(ids[i]))); // Raw bytes, UTF-8 intact.
    assert.equal(call.reason, want.reason);
    assert.equal(call.name, want.name);
    assert.equal(call.uid, want.uid);
    assert.equal(call.children[0].api_version, 'apps/v1');
    assert.ok(call.children[0].object.equals(want.children[0].object));
    assert.ok(call.related_objects[0].object.equals(Buffer.from([0x7b, 0x7d, 0x00, 0xff])));
    assert.equal(call.finalizing, want.finalizing);
    assert.equal(call.attempt, want.attempt);
    assert.deepEqual(call.deadline, want.deadline);
    assert.equal(call.trace_id, want.trace_id);
  }
  assert.equal(seen[3].payload, 'cancel');
  assert.equal(seen[3].request_id, '9');
  assert.equal(seen[3].cancel.reason, 'host shutting down');
});

test('unset enums read as their _UNSPECIFIED zero value', () => {
  // The same (de)serializers grpc-js uses for the Reconcile stream.
  const method = /** @type {any} */ (
    definition['ctrlhost.plugin.v1alpha1.ControllerPluginService']).Reconcile;
  const roundTripResponse = (obj) => method.responseDeserialize(method.responseSerialize(obj));
  const roundTripRequest = (obj) => method.requestDeserialize(method.requestSerialize(obj));

  const empty = roundTripResponse({});
  assert.equal(empty.request_id, '0');
  assert.equal(empty.error, null); // Unset message fields stay unset.
  assert.equal(empty.requeue_after, null);
  assert.deepEqual(empty.desired_objects, []);
  const bare = roundTripResponse({ patches: [{}], conditions: [{}], events: [{}], error: {} });
  assert.equal(bare.patches[0].target, 'PATCH_TARGET_UNSPECIFIED');
  assert.equal(bare.patches[0].type, 'PATCH_TYPE_UNSPECIFIED');
  assert.equal(bare.conditions[0].status, 'CONDITION_STATUS_UNSPECIFIED');
  assert.equal(bare.events[0].type, 'EVENT_TYPE_UNSPECIFIED');
  assert.equal(bare.error.kind, 'ERROR_KIND_UNSPECIFIED');

  const request = roundTripRequest({ request_id: '1', reconcile: {} });
  assert.equal(request.payload, 'reconcile');
  assert.equal(request.reconcile.reason, 'REASON_UNSPECIFIED');
  assert.equal(roundTripRequest({}).payload, undefined);
  // A value from a later version survives as its number (proto3 enums are open).
  const future = roundTripRequest({ request_id: '2', reconcile: { reason: 42 } });
  assert.equal(future.reconcile.reason, 42);
});
