'use strict';
// Background tasks (tasks.js): start/stop, enqueue, restarts with backoff, key checks, and the
// controller declaration. No host: the runner's `send` collects the messages.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const sdk = require('../src');
const { TaskRunner, checkTaskKey } = require('../src/tasks');

sdk.log.setSink(() => {});

function harness(tasks) {
  const sent = [];
  const waiters = [];
  const send = (m) => {
    sent.push(m);
    for (const w of waiters.splice(0)) w();
  };
  const runner = new TaskRunner((c) => (c === 'web' ? tasks : []), send, [10, 50]);
  // Resolves with the first message from index `from` on matching `match` (bounded: 10 s).
  const next = async (match, from = 0) => {
    const deadline = Date.now() + 10000;
    for (;;) {
      const i = sent.findIndex((m, j) => j >= from && match(m));
      if (i >= 0) return [sent[i], i];
      if (Date.now() > deadline) throw new Error('no matching message');
      await new Promise((resolve) => {
        waiters.push(resolve);
        setTimeout(resolve, 50);
      });
    }
  };
  return { sent, runner, next };
}

const stateIs = (s) => (m) => m.task_status && m.task_status.state === s;

test('a task enqueues until stopped, with the reason', async () => {
  let reason = '';
  const { sent, runner, next } = harness([['poll', async (ctx) => {
    ctx.enqueue('default', 'a');
    while (!(await ctx.wait(5)));
    reason = ctx.stopReason;
  }]]);
  runner.start('web');
  runner.start('web'); // idempotent
  const [m] = await next((x) => x.task_enqueue);
  assert.equal(m.request_id, '0');
  assert.deepEqual([m.task_enqueue.controller, m.task_enqueue.task, m.task_enqueue.namespace,
    m.task_enqueue.name], ['web', 'poll', 'default', 'a']);
  assert.deepEqual(runner.running(), ['web']);
  runner.stop('web', 'plugin swapped out');
  await runner.settled();
  assert.equal(reason, 'plugin swapped out');
  assert.equal(sent.filter(stateIs('TASK_STATE_RUNNING')).length, 1);
  assert.equal(sent.filter(stateIs('TASK_STATE_STOPPED')).length, 1);
  assert.deepEqual(runner.running(), []);
});

test('a throwing task is reported and restarted; enqueue after stop sends nothing', async () => {
  let runs = 0;
  /** @type {any} */
  let ctxSeen = null;
  const { sent, runner, next } = harness([['flaky', async (ctx) => {
    ctxSeen = ctx;
    runs++;
    if (runs < 3) throw new Error(`boom ${runs}`);
    await ctx.wait(30000);
  }]]);
  runner.start('web');
  const [b1, i1] = await next(stateIs('TASK_STATE_BACKOFF'));
  const [b2, i2] = await next(stateIs('TASK_STATE_BACKOFF'), i1 + 1);
  assert.equal(b1.task_status.restarts, 1);
  assert.equal(b2.task_status.restarts, 2);
  assert.match(b2.task_status.last_error, /boom 2/);
  const [r] = await next(stateIs('TASK_STATE_RUNNING'), i2 + 1);
  assert.equal(r.task_status.restarts, 2);
  assert.match(r.task_status.last_error, /boom 2/); // why it restarted
  runner.stop('', 'stream ended');
  await runner.settled();
  assert.ok(ctxSeen);
  ctxSeen.enqueue('default', 'late');
  assert.equal(sent.filter((m) => m.task_enqueue).length, 0);
});

test('a task that returns is finished, not restarted', async () => {
  const { sent, runner } = harness([['once', async () => {}]]);
  runner.start('web');
  await runner.settled();
  assert.equal(sent.filter(stateIs('TASK_STATE_FINISHED')).length, 1);
  assert.equal(sent.filter(stateIs('TASK_STATE_RUNNING')).length, 1);
});

test('keys are checked like the host does', () => {
  checkTaskKey('default', 'a.b-c');
  checkTaskKey('', 'node-1');
  for (const [ns, name] of [['default', ''], ['default', 'A'], ['default', 'a/b'], ['a.b', 'x'],
    ['default', '-a'], ['default', 'a'.repeat(254)]]) {
    assert.throws(() => checkTaskKey(ns, name), /not a valid/, `${ns}/${name}`);
  }
});

test('the builder declares tasks and needs the capability', () => {
  const fn = async () => {};
  const c = new sdk.ControllerBuilder('web').for('', 'v1', 'ConfigMap')
    .reconcile(() => undefined).backgroundTask('poll', fn).build();
  assert.deepEqual(c.spec.background_tasks, [{ name: 'poll' }]);
  assert.equal(c.tasks[0][0], 'poll');
  assert.ok(c.requiredCapabilities().includes('CAPABILITY_BACKGROUND_TASKS'));
  assert.throws(() => new sdk.ControllerBuilder('web').for('', 'v1', 'ConfigMap')
    .reconcile(() => undefined).backgroundTask('poll', fn).backgroundTask('poll', fn).build(),
  /declared twice/);
  assert.throws(() => new sdk.ControllerBuilder('web').for('', 'v1', 'ConfigMap')
    .reconcile(() => undefined).backgroundTask('Bad_Name', fn).build(), /RFC 1123/);
});
