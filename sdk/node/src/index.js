// @ts-check
'use strict';
// @ctrlhost/sdk: write ctrlhost controller plugins in Node.js. See ../README.md.

const { Plugin, DescribeError, parseListenAddress, PROTOCOL_VERSION, ADDRESS_ENV } =
  require('./plugin');
const { ControllerBuilder, Controller, Mapping, apiVersionOf } = require('./controller');
const { Request, findPath } = require('./request');
const {
  Result, ResultError, TerminalError, RetryableError, RESPONSE_TOO_LARGE, newObject, composeMergePatch,
} = require('./result');
const { DependentChain, isSubset } = require('./chain');
const { CrudResource } = require('./crud');
const { PassContext, freezeOnto, UPDATE_ALLOWED, UPDATE_NECESSARY } = require('./pass_context');
const { handlers } = require('./handlers');
const builders = require('./builders');
const { setOperatorStatus } = require('./operator_status');
const { StageCallbacks, STAGES } = require('./stage_callbacks');
const { ResourceRouter, REASON_AMBIGUOUS_ROUTE } = require('./resource_sets');
const { loadProtocol, findProtoRoot } = require('./proto');
const { PluginServer } = require('./server');
const log = require('./log');
const { TaskContext, checkTaskKey } = require('./tasks');
const tls = require('./tls');
const testing = require('./testing');

// The exports, typed as the shipped declarations (index.d.ts): tsc (npm run typecheck) checks
// each implementation against its declaration, so the two cannot drift apart unnoticed.
/** @type {typeof import('./index')} */
const api = {
  ...builders,
  Plugin,
  PluginServer,
  ControllerBuilder,
  Controller,
  Mapping,
  Request,
  Result,
  ResultError,
  TerminalError,
  RetryableError,
  RESPONSE_TOO_LARGE,
  DependentChain,
  CrudResource,
  isSubset,
  PassContext,
  setOperatorStatus,
  StageCallbacks,
  STAGES,
  ResourceRouter,
  REASON_AMBIGUOUS_ROUTE,
  freezeOnto,
  UPDATE_ALLOWED,
  UPDATE_NECESSARY,
  DescribeError,
  handlers,
  newObject,
  composeMergePatch,
  findPath,
  apiVersionOf,
  parseListenAddress,
  loadServerTls: tls.loadServerTls,
  serverTlsFromEnv: tls.serverTlsFromEnv,
  loadProtocol,
  findProtoRoot,
  log,
  PROTOCOL_VERSION,
  ADDRESS_ENV,
  TaskContext,
  checkTaskKey,
  testing,
};

module.exports = api;
