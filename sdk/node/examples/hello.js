#!/usr/bin/env node
// A Greeting gets a ConfigMap with its message, a status and a Ready condition.
const { Plugin, Result, newObject } = require('../src'); // or require('@ctrlhost/sdk')

const plugin = new Plugin('hello', '0.1.0');
plugin.controller('greeting')
  .for('example.com', 'v1', 'Greeting')
  .owns('', 'v1', 'ConfigMap')
  .reconcile(async (req) => {
    if (!req.exists || req.deleting) return undefined; // children go with their owner
    if (typeof req.spec.message !== 'string') {
      return Result.terminalError('spec.message must be a string');
    }
    const result = new Result();
    const cm = result.desire(newObject('v1', 'ConfigMap', `${req.name}-greeting`));
    cm.data = { message: req.spec.message };
    const published = Boolean(req.child('ConfigMap', `${req.name}-greeting`));
    result.status().observedGeneration = req.generation;
    result.setCondition('Ready', published, published ? 'Published' : 'Publishing', '');
    return result;
  });
plugin.run();
