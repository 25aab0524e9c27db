// @ts-check
'use strict';
// Loads the protocol's .proto files with @grpc/proto-loader.
//
// Where the files come from, first match wins:
//   1. the `protoPath` option of loadProtocol(), or the CTRLHOST_PROTO_PATH environment variable
//      (a directory holding ctrlhost/plugin/v1alpha1/plugin.proto and grpc/health/v1/health.proto;
//      a vendored copy of the SDK points it at a copy of the repository's proto/ folder);
//   2. <this package>/proto (a copy placed beside src/ when the SDK is vendored);
//   3. the repository's proto/ folder, ../../../proto from this file (sdk/node/src in the repo).
// The well-known types (google/protobuf/duration.proto, timestamp.proto) are found in
// /usr/include (Debian's libprotobuf-dev) or, failing that, in protobufjs' bundled copies.

const fs = require('node:fs');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');

const PLUGIN_PROTO = 'ctrlhost/plugin/v1alpha1/plugin.proto';
const HEALTH_PROTO = 'grpc/health/v1/health.proto';

// Proto field names as written (request_id), uint64 as decimal strings (never lose precision),
// enums by name, bytes as Buffers, defaults filled in, and the set member of each oneof named.
const LOADER_OPTIONS = {
  keepCase: true,
  longs: String,
  enums: String,
  bytes: Buffer,
  defaults: true,
  oneofs: true,
};

function candidateRoots(explicit) {
  const roots = [];
  if (explicit) roots.push(explicit);
  if (process.env.CTRLHOST_PROTO_PATH) roots.push(process.env.CTRLHOST_PROTO_PATH);
  roots.push(path.resolve(__dirname, '..', 'proto'));
  roots.push(path.resolve(__dirname, '..', '..', '..', 'proto'));
  return roots;
}

/** The directory that holds the protocol's .proto files; throws a clear Error when none does. */
function findProtoRoot(explicit) {
  const roots = candidateRoots(explicit);
  for (const root of roots) {
    if (fs.existsSync(path.join(root, PLUGIN_PROTO)) && fs.existsSync(path.join(root, HEALTH_PROTO))) {
      return root;
    }
  }
  throw new Error(
    `cannot find ${PLUGIN_PROTO} and ${HEALTH_PROTO} under any of: ${roots.join(', ')} ` +
      '(set CTRLHOST_PROTO_PATH to a copy of the repository\'s proto/ folder)',
  );
}

const cache = new Map();
const rootCache = new Map();

/** The directories imports are looked up in: `root`, then the well-known types' home. */
function includeDirsOf(root) {
  const includeDirs = [root];
  if (fs.existsSync('/usr/include/google/protobuf/duration.proto')) includeDirs.push('/usr/include');
  return includeDirs;
}

/**
 * Loads both services. Returns { plugin, health, definition, root } where `plugin` is the
 * ctrlhost.plugin.v1alpha1 package object and `health` is grpc.health.v1. Cached per root.
 */
function loadProtocol(protoPath) {
  const root = findProtoRoot(protoPath);
  if (cache.has(root)) return cache.get(root);
  const includeDirs = includeDirsOf(root);
  const definition = protoLoader.loadSync([PLUGIN_PROTO, HEALTH_PROTO], {
    ...LOADER_OPTIONS,
    includeDirs,
  });
  /** @type {any} the packages loaded from the .proto files, untyped */
  const loaded = grpc.loadPackageDefinition(definition);
  const result = {
    plugin: loaded.ctrlhost.plugin.v1alpha1,
    health: loaded.grpc.health.v1,
    definition,
    root,
  };
  cache.set(root, result);
  return result;
}

/**
 * The protobufjs Root of plugin.proto, from the same files as loadProtocol and with field names
 * as written, for the messages no RPC carries (the recording format, recording.js). Decode with
 * `type.toObject(type.decode(bytes), LOADER_OPTIONS)` and encode with
 * `type.encode(type.fromObject(object))`, as grpc-js does, to get the object form the rest of
 * the SDK uses. Cached per root.
 * @param {string} [protoPath]
 * @returns {protobuf.Root}
 */
function loadProtocolRoot(protoPath) {
  const dir = findProtoRoot(protoPath);
  const cached = rootCache.get(dir);
  if (cached) return cached;
  const root = new protobuf.Root();
  const includeDirs = includeDirsOf(dir);
  const resolve = root.resolvePath;
  root.resolvePath = (origin, target) => {
    if (path.isAbsolute(target)) return target;
    const found = includeDirs.map((d) => path.join(d, target)).find((f) => fs.existsSync(f));
    return found || resolve(origin, target); // protobufjs' bundled well-known types
  };
  root.loadSync(PLUGIN_PROTO, { keepCase: true });
  root.resolveAll();
  rootCache.set(dir, root);
  return root;
}

module.exports = { loadProtocol, loadProtocolRoot, findProtoRoot, LOADER_OPTIONS };
