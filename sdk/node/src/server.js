// @ts-check
'use strict';
// The grpc-js server behind Plugin.start: Describe, the Reconcile streams and grpc.health.v1.
//
// Concurrency: Node runs JavaScript on one thread, so no locks are needed; what is bounded is
// the number of reconcile functions started and not yet settled (Plugin options.concurrency).
// Reconciles past the bound wait in arrival order. Answers are written as they settle, so they
// leave in any order; the host matches them by request_id.
//
// Shutdown: health turns NOT_SERVING, new reconciles are answered "plugin shutting down"
// (retryable), running ones get up to the grace period to settle and be answered, then the
// server stops (streams are cancelled; the host requeues whatever was left).

const fs = require('node:fs');
const grpc = require('@grpc/grpc-js');
const { loadProtocol } = require('./proto');
const { errorResponse, RESPONSE_TOO_LARGE } = require('./result');
const { TaskRunner } = require('./tasks');
const log = require('./log');
const { serverCredentials } = require('./tls');

const SERVICE_NAME = 'ctrlhost.plugin.v1alpha1.ControllerPluginService';

// Health status names of grpc.health.v1.HealthCheckResponse.ServingStatus.
const SERVING = 'SERVING';
const NOT_SERVING = 'NOT_SERVING';

// A lower bound of a response's encoded size: its byte payloads. Enough to refuse a response
// that cannot fit before grpc-js fails the whole stream over it.
function approximateSize(resp) {
  let n = 0;
  for (const d of resp.desired_objects || []) n += d.length;
  for (const p of resp.patches || []) n += p.patch.length;
  if (resp.status) n += resp.status.length;
  for (const c of resp.conditions || []) n += c.message.length;
  for (const e of resp.events || []) n += e.message.length;
  return n;
}

class PluginServer {
  constructor(plugin) {
    this.plugin = plugin;
    this.address = '';
    this.inFlight = 0; // reconcile functions started or waiting, not yet answered
    this._running = 0;
    this._waiting = []; // thunks waiting for a concurrency slot
    this._draining = false;
    this._serving = true; // setServing; NOT_SERVING regardless while draining
    this._onStop = [];
    this._healthWatchers = new Set();
    this._streamTasks = new Set(); // the TaskRunner of each open stream
    this._idleWaiters = [];
    this._proto = loadProtocol(plugin.options.protoPath);
    const limit = plugin.options.maxMessageBytes;
    this._server = new grpc.Server({
      'grpc.max_receive_message_length': limit,
      'grpc.max_send_message_length': limit,
      // The host pings every 10 s, also on an idle connection (docs/protocol.md, "Liveness").
      // Nothing to set: grpc-js servers answer every ping and enforce no minimum interval.
    });
    this._server.addService(this._proto.plugin.ControllerPluginService.service, {
      Describe: (call, cb) => this._describe(call, cb),
      Reconcile: (call) => this._reconcile(call),
    });
    this._server.addService(this._proto.health.Health.service, {
      Check: (call, cb) => this._healthCheck(call, cb),
      Watch: (call) => this._healthWatch(call),
    });
  }

  /** Binds `listen`, with TLS when `tls` (from tls.js loadServerTls) is set. */
  async listen(listen, tls = null) {
    if (listen.startsWith('unix:')) {
      const p = listen.slice(5);
      try {
        if (fs.lstatSync(p).isSocket()) fs.unlinkSync(p); // a stale socket from a crash
      } catch {
        // absent: fine
      }
    }
    const port = await new Promise((resolve, reject) => {
      this._server.bindAsync(listen, serverCredentials(grpc, tls), (err, p) =>
        err ? reject(err) : resolve(p));
    });
    this.address = listen.startsWith('unix:')
      ? listen
      : `${listen.slice(0, listen.lastIndexOf(':'))}:${port}`;
  }

  get draining() {
    return this._draining;
  }

  _status() {
    return this._draining || !this._serving ? NOT_SERVING : SERVING;
  }

  /**
   * SERVING (true) or NOT_SERVING (false) for '' and the service name, on Check and every open
   * Watch (see Plugin.setServing). Ignored while draining: shutdown keeps NOT_SERVING.
   */
  setServing(serving) {
    if (this._draining) return;
    const before = this._status();
    this._serving = Boolean(serving);
    const now = this._status();
    if (now === before) return;
    for (const w of this._healthWatchers) {
      try {
        w.write({ status: now });
      } catch {
        // the watcher went away
      }
    }
  }

  /** Runs `fn` once the server begins to stop (shutdown or forceShutdown). */
  onStop(fn) {
    this._onStop.push(fn);
  }

  _stopping() {
    const fns = this._onStop;
    this._onStop = [];
    for (const fn of fns) fn();
  }

  _describe(call, cb) {
    try {
      cb(null, this.plugin.describe(call.request));
    } catch (e) {
      log.error('describe refused', { error: e.message });
      cb({ code: e.code || grpc.status.INTERNAL, details: e.message });
    }
  }

  _healthCheck(call, cb) {
    const service = call.request.service || '';
    if (service !== '' && service !== SERVICE_NAME) {
      cb({ code: grpc.status.NOT_FOUND, details: 'unknown service' });
      return;
    }
    cb(null, { status: this._status() });
  }

  _healthWatch(call) {
    const service = call.request.service || '';
    if (service !== '' && service !== SERVICE_NAME) {
      call.write({ status: 'SERVICE_UNKNOWN' });
      call.end();
      return;
    }
    call.write({ status: this._status() });
    this._healthWatchers.add(call);
    const forget = () => this._healthWatchers.delete(call);
    call.on('cancelled', forget);
    call.on('error', forget);
    call.on('close', forget);
  }

  _reconcile(call) {
    // request_id -> AbortController of the reconciles of this stream not yet answered.
    const pending = new Map();
    let open = true;
    // Background tasks started on this stream; they stop when it ends.
    const tasks = new TaskRunner((controller) => {
      const c = this.plugin.controllers().get(controller);
      return c ? c.tasks : [];
    }, (message) => write(message), this.plugin.options.taskBackoffMs);
    this._streamTasks.add(tasks);
    const closeStream = () => {
      open = false;
      tasks.stop('', 'stream ended');
      this._streamTasks.delete(tasks);
      for (const ac of pending.values()) ac.abort(new Error('stream closed'));
    };
    call.on('error', closeStream); // cancelled by the host or the server stopping
    call.on('cancelled', closeStream);
    const write = (resp) => {
      if (!open) return;
      try {
        call.write(resp);
      } catch (e) {
        log.warning('cannot write a reconcile answer', { error: e.message });
      }
    };
    const maybeEnd = () => {
      if (ended && pending.size === 0 && open) {
        tasks.stop('', 'stream ended');
        this._streamTasks.delete(tasks);
        open = false;
        call.end();
      }
    };
    let ended = false;
    call.on('end', () => {
      ended = true; // the host half-closed: answer what is in flight, then end
      maybeEnd();
    });
    call.on('data', (req) => {
      const id = req.request_id;
      if (req.payload === 'cancel') {
        const ac = pending.get(id);
        if (ac) ac.abort(new Error(req.cancel.reason || 'cancelled by the host'));
        return;
      }
      if (req.payload === 'start_tasks') {
        if (!this._draining) tasks.start(req.start_tasks.controller);
        return;
      }
      if (req.payload === 'stop_tasks') {
        tasks.stop(req.stop_tasks.controller, req.stop_tasks.reason);
        return;
      }
      if (req.payload === 'enqueue_refused') {
        const r = req.enqueue_refused;
        log.warning("the host refused a background task's enqueue",
          { enqueue_id: r.enqueue_id, code: r.code, error: r.message });
        return;
      }
      if (req.payload !== 'reconcile' || id === '0') {
        log.warning('ignoring a malformed reconcile request', { request_id: id });
        return;
      }
      if (this._draining) {
        write(errorResponse(id, 'retryable', 'plugin shutting down'));
        return;
      }
      const ac = new AbortController();
      pending.set(id, ac);
      this.inFlight++;
      this._schedule(async () => {
        let resp = ac.signal.aborted ? null : await this.plugin.handle(id, req.reconcile, ac.signal);
        if (resp) {
          const limit = this.plugin.options.maxMessageBytes;
          const size = approximateSize(resp);
          if (size > limit - 4096) {
            // Only this request fails; terminal, since it would not shrink on a retry.
            resp = errorResponse(id, 'terminal',
              `response of at least ${size} bytes exceeds the message limit of ${limit}`,
              { reason: RESPONSE_TOO_LARGE });
          }
        }
        pending.delete(id);
        if (resp && !ac.signal.aborted) write(resp);
        this.inFlight--;
        this._notifyIdle();
        maybeEnd();
      });
    });
  }

  _schedule(task) {
    const run = () => {
      this._running++;
      task().finally(() => {
        this._running--;
        const next = this._waiting.shift();
        if (next) next();
      });
    };
    if (this._running < this.plugin.options.concurrency) run();
    else this._waiting.push(run);
  }

  _notifyIdle() {
    if (this.inFlight > 0) return;
    const waiters = this._idleWaiters;
    this._idleWaiters = [];
    for (const w of waiters) w();
  }

  /** Resolves once nothing is in flight, or after `ms` (then some reconciles are abandoned). */
  _waitIdle(ms) {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this._idleWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Drains (see the file comment) and stops; resolves when the server is closed. */
  async shutdown(graceMs = 8000) {
    if (this._draining) return;
    this._draining = true;
    this._stopping();
    for (const t of this._streamTasks) t.stop('', 'plugin shutting down');
    for (const w of this._healthWatchers) {
      try {
        w.write({ status: NOT_SERVING });
      } catch {
        // the watcher went away
      }
    }
    await this._waitIdle(graceMs);
    for (const w of this._healthWatchers) w.end();
    this._healthWatchers.clear();
    await new Promise((resolve) => {
      const timer = setTimeout(() => {
        this._server.forceShutdown();
        resolve();
      }, 500);
      this._server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Stops at once, cancelling every stream. */
  forceShutdown() {
    this._draining = true;
    this._stopping();
    this._server.forceShutdown();
  }
}

module.exports = { PluginServer, SERVICE_NAME };
