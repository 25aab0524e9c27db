// @ts-check
'use strict';
// Plugin: a named set of controllers served over the plugin protocol.
//
//   const plugin = new Plugin('webapp', '1.0.0');
//   plugin.controller('webapp').for('apps.ctrlhost.dev', 'v1alpha1', 'WebApp').reconcile(fn);
//   plugin.run();   // serves on $CTRLHOST_PLUGIN_ADDRESS until SIGTERM
//
// Guarantees: every ReconcileCall gets exactly one answer unless the host cancelled it (then none)
// or the plugin is stopped first; a reconcile function that throws or rejects becomes a retryable
// error answer (a thrown TerminalError a terminal one); a result the host would refuse becomes a
// retryable error naming the mistake; at most `concurrency` reconcile functions run at once (the rest wait in arrival order).

const { ControllerBuilder } = require('./controller');
const { Request } = require('./request');
const {
  Result, ResultError, TerminalError, RetryableError, errorResponse, ALL_SDK_CAPABILITIES,
} = require('./result');
const log = require('./log');
const { checkPlaintextAllowed, serverTlsFromEnv } = require('./tls');

const PROTOCOL_VERSION = 'v1alpha1';
const ADDRESS_ENV = 'CTRLHOST_PLUGIN_ADDRESS';
const DEFAULT_MAX_MESSAGE_BYTES = 64 << 20;

/** Thrown by Describe; `code` is the gRPC status code to answer with. */
class DescribeError extends Error {
  constructor(message, code) {
    super(message);
    this.code = code;
  }
}

/**
 * unix:///abs/path, unix:/abs/path or host:port -> the address grpc-js binds. Throws an Error
 * with a message fit for the user otherwise.
 */
function parseListenAddress(address) {
  if (typeof address !== 'string' || address === '') throw new Error('the address is empty');
  if (address.startsWith('unix:')) {
    let p = address.slice(5);
    if (p.startsWith('//')) p = p.slice(2);
    if (!p.startsWith('/')) {
      throw new Error(`address "${address}": a unix socket path must be absolute (unix:///path)`);
    }
    if (Buffer.byteLength(p) > 107) {
      throw new Error(`address "${address}": socket path longer than 107 bytes`);
    }
    return `unix:${p}`;
  }
  if (address.includes('://')) {
    throw new Error(`address "${address}": expected unix:///path or host:port (no other scheme)`);
  }
  const colon = address.lastIndexOf(':');
  const port = colon > 0 ? address.slice(colon + 1) : '';
  if (!/^\d{1,5}$/.test(port) || Number(port) > 65535) {
    throw new Error(`address "${address}": expected unix:///path or host:port`);
  }
  return address;
}

class Plugin {
  /**
   * options: { concurrency (default 64), maxMessageBytes (64 MiB), shutdownGraceMs (8000),
   * taskBackoffMs ([1000, 60000]: a failed background task's first and largest restart delay) }.
   */
  constructor(name, version, options = {}) {
    this.name = name;
    this.version = version;
    this.options = {
      concurrency: 64,
      maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES,
      shutdownGraceMs: 8000,
      taskBackoffMs: [1000, 60000],
      ...options,
    };
    this._builders = [];
    this._controllers = null;
    this.capabilities = new Set(ALL_SDK_CAPABILITIES);
    this._servers = new Set(); // the servers start() returned that have not shut down
  }

  /**
   * Reports SERVING (true) or NOT_SERVING (false) on grpc.health.v1, for '' and the service
   * name, on every server this plugin runs (start or run), e.g. to pause while a dependency is
   * down: the host then sends no new reconciles (they wait in the host) until
   * setServing(true), and restarts the plugin if it stays so longer than its
   * notServingTimeout (docs/protocol.md, "Liveness"). A draining server ignores it.
   */
  setServing(serving) {
    for (const server of this._servers) server.setServing(serving);
  }

  /** Declares a controller; returns its builder (see controller.js). */
  controller(name) {
    const b = new ControllerBuilder(name);
    this._builders.push(b);
    this._controllers = null;
    return b;
  }

  /** Validates every declaration; returns Map name -> Controller or throws. */
  controllers() {
    if (this._controllers) return this._controllers;
    if (this._builders.length === 0) {
      throw new Error(`plugin "${this.name}" declares no controllers`);
    }
    const out = new Map();
    for (const b of this._builders) {
      const c = b.build();
      if (out.has(c.name)) throw new Error(`two controllers are named "${c.name}"`);
      out.set(c.name, c);
    }
    this._controllers = out;
    return out;
  }

  /** Answers a DescribeRequest (object form); throws DescribeError. */
  describe(request) {
    let controllers;
    try {
      controllers = this.controllers();
    } catch (e) {
      throw new DescribeError(e.message, 9 /* FAILED_PRECONDITION */);
    }
    const offered = request.protocol_versions || [];
    if (!offered.includes(PROTOCOL_VERSION)) {
      throw new DescribeError(
        `plugin "${this.name}" speaks protocol ${PROTOCOL_VERSION} only; the host offered ` +
          `[${offered.join(', ')}]`,
        9,
      );
    }
    const host = new Set((request.capabilities || []).filter((c) => typeof c === 'string'));
    for (const c of controllers.values()) {
      for (const needed of c.requiredCapabilities()) {
        if (!host.has(needed)) {
          throw new DescribeError(
            `controller "${c.name}" needs ${needed}, which the host does not offer`, 9);
        }
      }
    }
    this.capabilities = new Set(ALL_SDK_CAPABILITIES.filter((c) => host.has(c)));
    log.info('plugin described', {
      plugin: this.name,
      host_version: request.host_version || '',
      instance: request.instance_name || '',
      controllers: controllers.size,
    });
    return {
      protocol_version: PROTOCOL_VERSION,
      plugin_name: this.name,
      plugin_version: this.version,
      capabilities: [...ALL_SDK_CAPABILITIES],
      controllers: [...controllers.values()].map((c) => c.spec),
    };
  }

  /**
   * Runs one ReconcileCall (object form) to a ReconcileResponse. Never throws or rejects.
   * `signal` fires on the host's cancel notice.
   */
  async handle(requestId, call, signal) {
    const controller = this.controllers().get(call.controller);
    if (!controller) {
      return errorResponse(requestId, 'terminal',
        `plugin "${this.name}" has no controller "${call.controller}"`);
    }
    let response;
    let request;
    try {
      request = Request.fromCall(call, signal);
    } catch (e) {
      response = errorResponse(requestId, 'retryable', `cannot read the request: ${e.message}`);
    }
    if (request) {
      try {
        let result = await controller.reconcile(request);
        if (result === undefined || result === null) result = new Result();
        if (!(result instanceof Result)) {
          throw new ResultError('the reconcile function must return a Result (or nothing)');
        }
        response = result.toResponse(request, requestId, this.capabilities);
      } catch (e) {
        const message = e && e.message !== undefined ? e.message : String(e);
        if (e instanceof TerminalError) {
          response = errorResponse(requestId, 'terminal', message, { reason: e.reason });
        } else if (e instanceof RetryableError) {
          response = errorResponse(requestId, 'retryable', message,
            { reason: e.reason, retryAfterMs: e.retryAfterMs });
        } else {
          const what = e instanceof ResultError ? 'invalid reconcile result' : 'reconcile threw';
          response = errorResponse(requestId, 'retryable', `${what}: ${message}`);
        }
      }
    }
    if (response.error) {
      log.warning('reconcile failed', {
        controller: call.controller,
        namespace: call.namespace,
        name: call.name,
        trace_id: call.trace_id,
        error: response.error.message,
      });
    }
    return response;
  }

  /**
   * Serves on `address` (see parseListenAddress), with TLS when `tls` (tls.js loadServerTls) is
   * set; plaintext only on Unix sockets and loopback hosts. Resolves to a PluginServer.
   */
  async start(address, tls = null) {
    this.controllers();
    const listen = parseListenAddress(address);
    if (!tls) checkPlaintextAllowed(listen);
    const { PluginServer } = require('./server');
    const server = new PluginServer(this);
    await server.listen(listen, tls);
    this._servers.add(server);
    server.onStop(() => this._servers.delete(server));
    return server;
  }

  /**
   * Serves on $CTRLHOST_PLUGIN_ADDRESS until SIGTERM/SIGINT, then drains and exits 0, with TLS
   * or mutual TLS from $CTRLHOST_PLUGIN_TLS_CERT_FILE/_KEY_FILE/_CLIENT_CA_FILE (tls.js). Exits
   * 2 with a message on stderr when the address is unset or bad, the TLS files are, plaintext
   * is asked for on a non-loopback TCP address, or a declaration is invalid.
   */
  async run() {
    const address = process.env[ADDRESS_ENV];
    const die = (code, message) => {
      process.stderr.write(`${this.name}: ${message}\n`);
      process.exit(code);
    };
    if (!address) {
      die(2, `${ADDRESS_ENV} is not set. The ctrlhost host sets it when it starts the plugin; ` +
        'to run by hand, set it to unix:///path/to/socket or host:port.');
    }
    try {
      this.controllers();
      parseListenAddress(address);
    } catch (e) {
      die(2, `${ADDRESS_ENV}=${address}: ${e.message}`);
    }
    let tls = null;
    try {
      tls = serverTlsFromEnv();
      if (!tls) checkPlaintextAllowed(parseListenAddress(address));
    } catch (e) {
      die(2, e.message);
    }
    let server;
    try {
      server = await this.start(address, tls);
    } catch (e) {
      die(1, `cannot serve on ${address}: ${e.message}`);
    }
    log.info('plugin serving', {
      plugin: this.name, version: this.version, address: server.address,
      concurrency: this.options.concurrency, tls: tls ? tls.mode : 'off',
    });
    let stopping = false;
    const stop = async (signal) => {
      if (stopping) return;
      stopping = true;
      log.info('plugin stopping', { plugin: this.name, signal });
      await server.shutdown(this.options.shutdownGraceMs);
      const left = server.inFlight;
      if (left > 0) log.warning('abandoning reconciles still running', { count: left });
      log.info('plugin stopped', { plugin: this.name });
      process.exit(0);
    };
    // A promise a reconcile function forgot to await must not take the plugin down with it.
    process.on('unhandledRejection', (reason) => {
      log.error('unhandled promise rejection', { error: reason instanceof Error ? reason : String(reason) });
    });
    // Nor may an exception a user's timer or event handler throws later, outside any reconcile:
    // without a handler Node exits, and every in-flight reconcile of the plugin fails with it.
    process.on('uncaughtException', (error, origin) => {
      log.error('uncaught exception', { error: error instanceof Error ? error : String(error), origin });
    });
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
    return server;
  }
}

module.exports = { Plugin, DescribeError, parseListenAddress, PROTOCOL_VERSION, ADDRESS_ENV };
