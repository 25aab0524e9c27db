// @ts-check
'use strict';
// Background tasks: long-running async functions of a controller that the host starts and
// stops (CAPABILITY_BACKGROUND_TASKS; docs/protocol.md section 13).
//
//   plugin.controller('poller')
//     .for('', 'v1', 'ConfigMap')
//     .backgroundTask('watch-file', async (ctx) => {
//       while (!(await ctx.wait(1000))) {          // true once the host stops the task
//         for (const [ns, name] of readChanges()) ctx.enqueue(ns, name);
//       }
//     })
//     .reconcile(reconcile);
//
// The host sends StartTasks when the controller starts on this plugin instance and StopTasks
// when it stops (operator removed, plugin swapped out, leadership lost, host shutting down); the
// tasks of a Reconcile stream also stop when that stream ends. A task that throws (or rejects)
// is logged, reported to the host (shown in /debug/dump with its restarts and last error) and
// started again after a backoff (1 s doubling up to 60 s by default); it never takes the plugin
// down. A task that returns while not stopped is finished and not restarted.
//
// Node runs JavaScript on one thread: no locks. A TaskRunner belongs to one stream.

const log = require('./log');

const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const SUBDOMAIN = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/;
let nextEnqueueId = 1;

/** Throws an Error when (namespace, name) is not a well-formed key (the host's rules). */
function checkTaskKey(namespace, name) {
  if (typeof name !== 'string' || name.length > 253 || !SUBDOMAIN.test(name)) {
    throw new Error(`name ${JSON.stringify(name)} is not a valid object name (RFC 1123 subdomain)`);
  }
  if (namespace && (typeof namespace !== 'string' || !LABEL.test(namespace))) {
    throw new Error(
      `namespace ${JSON.stringify(namespace)} is not a valid namespace (RFC 1123 label)`);
  }
}

/** What a task function gets. */
class TaskContext {
  constructor(controller, task, send) {
    this.controller = controller;
    this.task = task;
    this.stopReason = '';
    this._send = send;
    this._ac = new AbortController();
  }

  /** An AbortSignal aborted when the host stops the task. */
  get signal() {
    return this._ac.signal;
  }

  get cancelled() {
    return this._ac.signal.aborted;
  }

  /** Resolves after `ms`, or as soon as the task is stopped; true when stopped. */
  wait(ms) {
    if (this.cancelled) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this._ac.signal.removeEventListener('abort', done);
        resolve(this.cancelled);
      };
      const timer = setTimeout(done, ms);
      this._ac.signal.addEventListener('abort', done);
    });
  }

  /** Asks the host to reconcile the primary (namespace, name) of this controller. Throws for a
   * malformed key; does nothing once the task is stopped. */
  enqueue(namespace, name) {
    checkTaskKey(namespace, name);
    if (this.cancelled) return;
    this._send({
      request_id: '0',
      task_enqueue: {
        controller: this.controller, task: this.task, namespace: namespace || '', name,
        enqueue_id: String(nextEnqueueId++),
      },
    });
  }

  _cancel(reason) {
    if (this.cancelled) return;
    this.stopReason = reason;
    this._ac.abort(new Error(reason));
  }
}

/** The background tasks started on one Reconcile stream. */
class TaskRunner {
  /**
   * tasksOf(controller) -> [[name, fn]]; send(message) writes on the stream; backoffMs =
   * [first, largest] restart delay.
   */
  constructor(tasksOf, send, backoffMs = [1000, 60000]) {
    this._tasksOf = tasksOf;
    this._send = send;
    this._backoff = backoffMs;
    this._running = new Map(); // controller -> [TaskContext]
    this._done = []; // promises of every task run
  }

  start(controller) {
    const tasks = this._tasksOf(controller);
    if (tasks.length === 0) {
      log.warning('StartTasks for a controller without background tasks', { controller });
      return;
    }
    if (this._running.has(controller)) return; // idempotent
    const contexts = tasks.map(([name]) => new TaskContext(controller, name, this._send));
    this._running.set(controller, contexts);
    log.info('background tasks started', { controller, tasks: tasks.length });
    tasks.forEach(([, fn], i) => this._done.push(this._run(contexts[i], fn)));
  }

  /** Stops the tasks of `controller` ('' = all). */
  stop(controller, reason) {
    const names = controller ? [controller] : [...this._running.keys()];
    let stopped = 0;
    for (const n of names) {
      const contexts = this._running.get(n);
      if (!contexts) continue;
      this._running.delete(n);
      for (const ctx of contexts) ctx._cancel(reason);
      stopped++;
    }
    if (stopped > 0) log.info('background tasks stopped', { controller: controller || '*', reason });
  }

  running() {
    return [...this._running.keys()].sort();
  }

  /** Resolves once every task started so far has returned. */
  settled() {
    return Promise.allSettled(this._done);
  }

  _status(ctx, state, restarts, error = '') {
    this._send({
      request_id: '0',
      task_status: {
        controller: ctx.controller, task: ctx.task, state, restarts,
        last_error: String(error).slice(0, 1024),
      },
    });
  }

  async _run(ctx, fn) {
    let restarts = 0;
    let lastError = ''; // reported with every state: the last failure's message
    let delay = this._backoff[0];
    while (!ctx.cancelled) {
      this._status(ctx, 'TASK_STATE_RUNNING', restarts, lastError);
      try {
        await fn(ctx);
      } catch (e) {
        if (ctx.cancelled) break;
        restarts++;
        const error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
        lastError = error;
        log.error('background task failed; restarting after backoff', {
          controller: ctx.controller, task: ctx.task, restarts, backoff_ms: delay, error,
        });
        this._status(ctx, 'TASK_STATE_BACKOFF', restarts, error);
        if (await ctx.wait(delay)) break;
        delay = Math.min(delay * 2, this._backoff[1]);
        continue;
      }
      if (!ctx.cancelled) {
        log.info('background task finished', { controller: ctx.controller, task: ctx.task });
        this._status(ctx, 'TASK_STATE_FINISHED', restarts, lastError);
        return;
      }
    }
    this._status(ctx, 'TASK_STATE_STOPPED', restarts, lastError);
  }
}

module.exports = { TaskContext, TaskRunner, checkTaskKey };
