// TypeScript declarations for @ctrlhost/sdk, written by hand (the runtime is plain CommonJS).
//
//   import { Plugin, Result, handlers } from '@ctrlhost/sdk';
//   const plugin = new Plugin('hello', '0.1.0');
//   plugin.controller('hello').for('example.com', 'v1', 'Hello')
//     .reconcile(async (req) => { const r = new Result(); r.status().seen = req.name; return r; });
//   plugin.run();

/** Parsed JSON object. */
export type JsonObject = { [key: string]: any };

/** A child or related object as the request carries it. */
export interface RawObject {
  apiVersion: string;
  kind: string;
  object: JsonObject;
}

export type Reason =
  | 'PrimaryChanged' | 'PrimaryDeleted' | 'ChildChanged' | 'RelatedChanged' | 'Requeue'
  | 'Retry' | 'Resync' | 'Schedule' | 'PluginStarted' | 'Unspecified';

/** A ReconcileCall with typed accessors. Read-only. */
export class Request {
  /** Throws an Error when an object in the call is not a JSON object. */
  static fromCall(call: any, signal?: AbortSignal): Request;
  /** The primary, or null when it is gone. */
  readonly object: JsonObject | null;
  readonly children: RawObject[];
  readonly related: RawObject[];
  /** Fires on the host's CancelNotice. */
  readonly signal: AbortSignal;
  readonly controller: string;
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly reason: Reason;
  readonly attempt: number;
  readonly traceId: string;
  readonly finalizing: boolean;
  readonly deadline: Date | null;
  readonly cancelled: boolean;
  readonly exists: boolean;
  readonly deleting: boolean;
  readonly apiVersion: string;
  readonly kind: string;
  readonly resourceVersion: string;
  readonly metadata: JsonObject;
  readonly spec: JsonObject;
  readonly status: JsonObject;
  readonly generation: number;
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
  label(key: string): string | undefined;
  annotation(key: string): string | undefined;
  childrenOfKind(kind: string, apiVersion?: string): RawObject[];
  relatedOfKind(kind: string, apiVersion?: string): RawObject[];
  child(kind: string, name: string): JsonObject | undefined;
  relatedObject(kind: string, name: string, namespace?: string): JsonObject | undefined;
}

export type ConditionStatus = boolean | 'True' | 'False' | 'Unknown';
export type EventType = 'Normal' | 'Warning';
export type PatchType = 'json' | 'merge';
export type ErrorKind = 'retryable' | 'terminal';

/** Thrown by Result.toResponse for a result the host would refuse. */
export class ResultError extends Error {}

/** A machine-readable reason (CamelCase) and, for retryable errors, the least wait. */
export interface ErrorOptions {
  reason?: string;
  retryAfterMs?: number;
}

/** The reason of the terminal error answered instead of a response above the message limit. */
export const RESPONSE_TOO_LARGE: 'ResponseTooLarge';

/** Thrown from a reconcile (or desired) function: a terminal error answer. */
export class TerminalError extends Error {
  constructor(message?: string, options?: { reason?: string });
  readonly reason: string;
}

/** Thrown from a reconcile function: a retryable error with a reason and a retry-after. */
export class RetryableError extends Error {
  constructor(message?: string, options?: ErrorOptions);
  readonly reason: string;
  readonly retryAfterMs: number | null;
}

/** What a reconcile wants. See result.js for the contract. */
export class Result {
  static retryableError(message: string, options?: ErrorOptions): Result;
  static terminalError(message: string, options?: { reason?: string }): Result;
  static finalized(): Result;
  static requeue(ms: number): Result;
  readonly desired: JsonObject[];
  readonly conditions: { type: string; status: ConditionStatus; reason: string; message: string }[];
  readonly events: { type: EventType; reason: string; message: string }[];
  readonly error: { kind: ErrorKind; message: string } | null;
  readonly isFinalized: boolean;
  readonly requeueAfterMs: number | null;
  readonly statusPatch: JsonObject | null;
  /** Returns `object` to fill in; name, namespace and labels default from the primary (labels not
   * on an object of the primary's own kind). */
  desire<T extends JsonObject>(object: T): T;
  /** The status merge patch, created on first use. */
  status(): JsonObject;
  mergeStatus(patch: JsonObject): this;
  setCondition(type: string, status: ConditionStatus, reason: string, message?: string): this;
  event(type: EventType, reason: string, message?: string): this;
  patchPrimary(type: PatchType, patch: any, resourceVersion?: string): this;
  patchPrimaryStatus(type: PatchType, patch: any, resourceVersion?: string): this;
  patchOwned(apiVersion: string, kind: string, name: string, type: PatchType, patch: any,
    resourceVersion?: string): this;
  requeueAfter(ms: number): this;
  setError(kind: ErrorKind, message: string, options?: ErrorOptions): this;
  setFinalized(): this;
  merge(other: Result): this;
  /** The ReconcileResponse in @grpc/proto-loader object form; throws ResultError. */
  toResponse(request: Request, requestId: string, capabilities: Set<string>): any;
}

export type ReconcileFn = (request: Request) =>
  Result | undefined | void | Promise<Result | undefined | void>;

/** What the SDK's reconcile builders (handlers, DependentChain, CrudResource) return: always a
 * Promise of a Result, so callers (and tests) may read the result without checks. */
export type BuiltReconcileFn = (request: Request) => Promise<Result>;

/** A watch mapping (WatchedKind.mapping). */
export interface WatchMapping { readonly [key: string]: any }
export const Mapping: {
  ownerReference(controllerOnly?: boolean): WatchMapping;
  nameLabel(label: string): WatchMapping;
  primarySelector(path: string): WatchMapping;
  fieldPath(path: string): WatchMapping;
  enqueueAll(sameNamespaceOnly?: boolean): WatchMapping;
};

export class Controller {
  /** Made by ControllerBuilder.build(), which validates the declaration first. */
  constructor(spec: any, reconcile: ReconcileFn,
    tasks?: ReadonlyArray<readonly [string, TaskFn]>);
  readonly name: string;
  /** The ControllerSpec message (proto-loader object form). */
  readonly spec: any;
  readonly reconcile: ReconcileFn;
  /** Background tasks: [name, fn] in declaration order. */
  readonly tasks: ReadonlyArray<readonly [string, TaskFn]>;
  requiredCapabilities(): string[];
}

/** What a background task gets (tasks.js). */
export class TaskContext {
  readonly controller: string;
  readonly task: string;
  /** Why it was stopped, once cancelled. */
  readonly stopReason: string;
  /** Aborted when the host stops the task. */
  readonly signal: AbortSignal;
  readonly cancelled: boolean;
  /** Resolves after `ms` or as soon as the task is stopped; true when stopped. */
  wait(ms: number): Promise<boolean>;
  /** Asks the host to reconcile (namespace, name) of this controller; throws for a bad key. */
  enqueue(namespace: string, name: string): void;
}
export type TaskFn = (ctx: TaskContext) => void | Promise<void>;
/** Throws an Error when (namespace, name) is not a key the host accepts. */
export function checkTaskKey(namespace: string, name: string): void;

export class ControllerBuilder {
  constructor(name: string);
  for(group: string, version: string, kind: string): this;
  owns(group: string, version: string, kind: string,
    options?: { deleteAbsent?: boolean; clusterScoped?: boolean }): this;
  watches(group: string, version: string, kind: string, mapping: WatchMapping,
    options?: { labelSelector?: string; includeInRequests?: boolean }): this;
  finalizer(name: string): this;
  maxConcurrent(n: number): this;
  /** Milliseconds. */
  resync(ms: number): this;
  namespaces(list: string[]): this;
  labelSelector(selector: string): this;
  schedule(cron: string, timeZone?: string): this;
  predicates(options: { primaryStatusChanges?: boolean; ignoreChildStatusChanges?: boolean }): this;
  requestContents(options: {
    children?: boolean;
    relatedObjects?: boolean;
    metadataOnlyKinds?: [string, string, string][];
    stripFields?: string[];
  }): this;
  reconcile(fn: ReconcileFn): this;
  /** A background task that runs while the host runs this controller here (tasks.js). */
  backgroundTask(name: string, fn: TaskFn): this;
  spec(): any;
  /** Throws an Error naming the controller and the mistake. */
  build(): Controller;
}

export interface PluginOptions {
  /** Reconcile functions running at once (default 64); the rest wait in arrival order. */
  concurrency?: number;
  /** gRPC message limits both ways (default 64 MiB). */
  maxMessageBytes?: number;
  /** How long SIGTERM waits for in-flight reconciles (default 8000 ms). */
  shutdownGraceMs?: number;
  /** A failed background task's first and largest restart delay (default [1000, 60000]). */
  taskBackoffMs?: [number, number];
  /** Directory holding the protocol's .proto files (default: see proto.js). */
  protoPath?: string;
}

export class DescribeError extends Error {
  readonly code: number;
}

export class PluginServer {
  readonly address: string;
  readonly inFlight: number;
  readonly draining: boolean;
  /** SERVING (true) or NOT_SERVING (false) on grpc.health.v1 for '' and the service name;
   * ignored while draining. */
  setServing(serving: boolean): void;
  shutdown(graceMs?: number): Promise<void>;
  forceShutdown(): void;
}

/** The server side of TLS (loadServerTls / serverTlsFromEnv). */
export interface ServerTls {
  certChain: Buffer;
  privateKey: Buffer;
  /** null: no client certificate is asked for. */
  clientCa: Buffer | null;
  mode: 'tls' | 'mutual';
}
/** Reads the PEM files; null (plaintext) when none is named; throws naming a bad one. */
export function loadServerTls(certFile: string, keyFile: string,
  clientCaFile?: string): ServerTls | null;
/** loadServerTls with CTRLHOST_PLUGIN_TLS_CERT_FILE, _KEY_FILE and _CLIENT_CA_FILE. */
export function serverTlsFromEnv(env?: Record<string, string | undefined>): ServerTls | null;

export class Plugin {
  constructor(name: string, version: string, options?: PluginOptions);
  readonly name: string;
  readonly version: string;
  /** Capabilities in effect: every one the SDK supports until Describe, then the intersection
   * with the host's. */
  readonly capabilities: Set<string>;
  controller(name: string): ControllerBuilder;
  controllers(): Map<string, Controller>;
  describe(request: any): any;
  handle(requestId: string, call: any, signal?: AbortSignal): Promise<any>;
  /** unix:///path or host:port; TLS when `tls` is set (plaintext only on loopback). */
  start(address: string, tls?: ServerTls | null): Promise<PluginServer>;
  /** Serves on $CTRLHOST_PLUGIN_ADDRESS until SIGTERM (exit 0), with TLS from
   * $CTRLHOST_PLUGIN_TLS_CERT_FILE/_KEY_FILE/_CLIENT_CA_FILE; exits 2 on a bad setup. */
  run(): Promise<PluginServer>;
  /** SERVING (true) or NOT_SERVING (false) on grpc.health.v1, for '' and the service name, on
   * every server this plugin runs: the host sends no new work while NOT_SERVING
   * (docs/protocol.md, "Liveness"). Ignored by a draining server. */
  setServing(serving: boolean): void;
}

export interface Dependent {
  name: string;
  apiVersion: string;
  kind: string;
  /** The whole intended object; metadata.name defaults to the primary's. */
  desired: (request: Request) => JsonObject;
  /** Unset: always wanted; false: ensure deleted. */
  when?: (request: Request) => boolean;
  /** Unset: ready once it exists. */
  ready?: (current: JsonObject) => boolean;
  /** The step before a create or update (see PassContext). */
  onPass?: PassStep;
}

/** A step of a pass: the desired object and the current one (undefined: absent). */
export type PassStep = (request: Request, desired: JsonObject, current: JsonObject | undefined,
  ctx: PassContext) => void;

export const UPDATE_ALLOWED: 'updateAllowed';
export const UPDATE_NECESSARY: 'updateNecessary';

/** What the steps of one pass tell each other (see pass_context.js). */
export class PassContext {
  readonly passCancelled: boolean;
  readonly passCancelReason: string;
  readonly resourceCancelled: boolean;
  readonly resourceCancelReason: string;
  /** The flags set so far, keys sorted. */
  readonly flags: { [name: string]: boolean };
  /** The rest of the pass does not run (the calling step's own resource still does). */
  cancelPass(reason: string): void;
  /** Only the calling step's resource is skipped this pass. */
  cancelResource(reason: string): void;
  setFlag(name: string, value?: boolean): void;
  /** False when unset. */
  flag(name: string): boolean;
  beginStep(): void;
}

/** The fields of `desired` with their values in `current`: applying it changes nothing. */
export function freezeOnto(desired: JsonObject, current: JsonObject): JsonObject;

export type Stage = 'pre-create' | 'post-create' | 'pre-update' | 'post-update' | 'pre-delete' |
  'post-delete';
export const STAGES: Stage[];
/** desired: mutable at pre-create / pre-update, a copy at post-*, undefined at *-delete. */
export type StageCallback = (request: Request, stage: Stage, desired: JsonObject | undefined,
  current: JsonObject | undefined) => void;

/** Callbacks per child kind around each create, update and delete (see stage_callbacks.js). */
export class StageCallbacks {
  on(apiVersion: string, kind: string, stage: Stage, name: string, callback: StageCallback): this;
  run(request: Request, stage: Stage, apiVersion: string, kind: string,
    desired: JsonObject | undefined, current: JsonObject | undefined): void;
  runStep(request: Request, create: boolean, apiVersion: string, kind: string,
    desired: JsonObject, current: JsonObject | undefined): void;
}

export interface ChainState {
  ready: string[];
  pending: string[];
  deleting: string[];
  /** Skipped this pass (by their own step or after a cancelled pass), in chain order. */
  cancelled: string[];
  /** Dependents that cancelled themselves, with their reasons. */
  cancelReasons: { [name: string]: string };
  /** '' when the pass ran to the end. */
  passCancelledBy: string;
  passCancelReason: string;
  flags: { [name: string]: boolean };
  /** The dependent whose desired function, step or callback threw ('' when none); the walk
   * stopped there and the result carries the error. */
  failedAt: string;
  /** Nothing pending, deleting or skipped, the pass ran to the end and no dependent failed. */
  allReady: boolean;
}

/** Ordered ensure-created / ensure-deleted dependents (see chain.js). */
export class DependentChain {
  readonly dependents: Dependent[];
  add(dependent: Dependent): this;
  withCallbacks(callbacks: StageCallbacks): this;
  reconcile(request: Request, result: Result): ChainState;
  build(then?: (request: Request, state: ChainState, result: Result) => void | Promise<void>):
    BuiltReconcileFn;
}

export interface CrudPlan {
  create: JsonObject[];
  update: JsonObject[];
  /** With skipped objects that exist, frozen. */
  unchanged: JsonObject[];
  remove: JsonObject[];
  skipped: { object: JsonObject; reason: string }[];
  passCancelled: boolean;
  passCancelReason: string;
  flags: { [name: string]: boolean };
}

/** Desired list of one kind vs the current children: create / update / remove (see crud.js). */
export class CrudResource {
  constructor(apiVersion: string, kind: string, desired: (request: Request) => JsonObject[]);
  /** A step run before each create and update. */
  onPass(step: PassStep): this;
  withCallbacks(callbacks: StageCallbacks): this;
  plan(request: Request): CrudPlan;
  apply(plan: CrudPlan, result: Result): void;
  build(then?: (request: Request, plan: CrudPlan, result: Result) => void | Promise<void>):
    BuiltReconcileFn;
}

/** desired ⊆ current. */
export function isSubset(desired: any, current: any): boolean;

/** Upsert/delete routing over one reconcile function. */
export function handlers(fns?: { upsert?: ReconcileFn; delete?: ReconcileFn }): BuiltReconcileFn;
export function newObject(apiVersion: string, kind: string, name?: string): JsonObject;
export function composeMergePatch(base: any, patch: any): any;
export function findPath(obj: any, path: string): any;
export function apiVersionOf(group: string, version: string): string;
export function parseListenAddress(address: string): string;
export function findProtoRoot(explicit?: string): string;
export function loadProtocol(protoPath?: string): { plugin: any; health: any; definition: any; root: string };
export const log: {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warning(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
  formatLine(level: string, message: string, fields?: Record<string, unknown>, date?: Date): string;
  setSink(fn: (line: string) => void): (line: string) => void;
};
export const PROTOCOL_VERSION: 'v1alpha1';
export const ADDRESS_ENV: 'CTRLHOST_PLUGIN_ADDRESS';

// Resource builders (builders.js): the same output as the C++ and Python SDKs.
export type Labels = { [key: string]: string };

export interface ObjectOptions {
  /** Unset: the primary's name (filled in by the SDK). */
  name?: string;
  namespace?: string;
  labels?: Labels;
  annotations?: { [key: string]: string };
  /** An owner reference (see ownerReference); the host adds one to namespaced children. */
  owner?: JsonObject;
}

export const CONFIG_HASH_ANNOTATION: 'ctrlhost.dev/config-hash';
export function selectorLabels(app: string, instance: string): Labels;
export function commonLabels(app: string, instance: string): Labels;
/** Keys sorted by UTF-8 bytes, no spaces; throws TypeError for a number that is not an integer. */
export function canonicalJson(value: unknown): string;
/** FNV-1a 64 of canonicalJson(value), 16 hex digits. */
export function configHash(value: unknown): string;
export function ownerReference(request: Request): JsonObject;

export interface DeploymentOptions extends Omit<ObjectOptions, 'namespace'> {
  /** spec.selector.matchLabels; unset: labels. */
  selector?: Labels;
  replicas?: number;
  containers?: JsonObject[];
  podAnnotations?: { [key: string]: string };
  /** Extra pod spec fields (serviceAccountName, volumes, ...). */
  podSpec?: JsonObject;
}
export function buildDeployment(options?: DeploymentOptions): JsonObject;

export interface ServicePort {
  port: number;
  name?: string;
  targetPort?: number | string;
  /** Default 'TCP'. */
  protocol?: string;
}
export function servicePort(port: ServicePort): ServicePort;
export interface ServiceOptions extends Omit<ObjectOptions, 'namespace'> {
  selector?: Labels;
  ports?: ServicePort[];
  type?: string;
}
export function buildService(options?: ServiceOptions): JsonObject;
export function buildConfigMap(options?: ObjectOptions & { data?: { [key: string]: string } }):
  JsonObject;
export function buildSecret(options?: ObjectOptions &
  { stringData?: { [key: string]: string }; type?: string }): JsonObject;
export function buildServiceAccount(options?: ObjectOptions): JsonObject;
export function policyRule(apiGroups: string[], resources: string[], verbs: string[]): JsonObject;
export function serviceAccountSubject(name: string, namespace: string): JsonObject;
export function buildRole(options?: ObjectOptions & { rules?: JsonObject[] }): JsonObject;
export function buildClusterRole(options?: Omit<ObjectOptions, 'namespace'> &
  { rules?: JsonObject[] }): JsonObject;
export function buildRoleBinding(options?: ObjectOptions &
  { role?: string; subjects?: JsonObject[] }): JsonObject;
export function buildClusterRoleBinding(options?: Omit<ObjectOptions, 'namespace'> &
  { clusterRole?: string; subjects?: JsonObject[] }): JsonObject;

/** The standard operator status (operator_status.js). */
export interface OperatorStatusInput {
  /** The plugin's own version. */
  operatorVersion: string;
  /** The version the children should run; unset: operatorVersion. */
  targetVersion?: string;
  childrenReady?: boolean;
  /** Why not ready. */
  message?: string;
  /** Non-empty: a persistent failure (phase Error, Degraded and Stalled True). */
  failure?: string;
  /** CamelCase; default 'Failed'. */
  failureReason?: string;
}
export function setOperatorStatus(request: Request, result: Result, input: OperatorStatusInput):
  void;

/** Resource sets (resource_sets.js): exactly one set reconciles each object. */
export const REASON_AMBIGUOUS_ROUTE: 'AmbiguousRoute';
export interface ResourceSetOptions {
  handles: (request: Request) => boolean;
  reconcile: (request: Request, context: JsonObject) =>
    Result | undefined | null | Promise<Result | undefined | null>;
  /** Default: an empty object. */
  initContext?: (request: Request) => JsonObject;
}
export class ResourceRouter {
  /** Objects no set handled. */
  readonly skipped: number;
  add(name: string, options: ResourceSetOptions): this;
  route(request: Request): Result | undefined | null | Promise<Result | undefined | null>;
}

/**
 * The offline test harness (see testing.js): one reconcile in process, through Plugin.handle,
 * judged as the live host judges it.
 */
export namespace testing {
  interface CallOptions {
    children?: JsonObject[];
    related?: JsonObject[];
    finalizing?: boolean;
    /** A Reason enum name, e.g. 'REASON_CHILD_CHANGED' (default REASON_PRIMARY_CHANGED). */
    reason?: string;
    attempt?: number;
  }
  interface RunOptions extends CallOptions {
    /** Objects in the cluster that are not the primary's children (NotControlled). */
    existing?: JsonObject[];
    /** The capabilities in effect (default: every one the SDK supports). */
    capabilities?: Iterable<string>;
  }
  /** A ReconcileResponse decoded into plain values. */
  class Outcome {
    constructor(response: any);
    readonly response: any;
    desired: JsonObject[];
    status: JsonObject | null;
    conditions: Record<string, { status: string; reason: string; message: string }>;
    events: { type: string; reason: string; message: string }[];
    patches: any[];
    finalized: boolean;
    error: { kind: string; message: string; reason: string } | null;
    /** Why the live host would refuse this answer; null when it would apply it. */
    refused: string | null;
    desiredOfKind(kind: string): JsonObject[];
  }
  class HostWouldNotSend extends Error {}
  class HostWouldRefuse extends Error {
    constructor(message: string, outcome: Outcome);
    outcome: Outcome;
  }
  /** The ReconcileCall (object form) the host would send for obj (null: a gone primary). */
  function makeCall(controller: string, obj: JsonObject | null, options?: CallOptions): any;
  /** Rejects with HostWouldNotSend; outcome.refused says why the host would refuse the answer. */
  function run(controller: Controller | ControllerBuilder, obj: JsonObject | null,
    options?: RunOptions): Promise<Outcome>;
  /** run, rejecting with HostWouldRefuse when the host would refuse the answer. */
  function reconcile(controller: Controller | ControllerBuilder, obj: JsonObject | null,
    options?: RunOptions): Promise<Outcome>;

  /** A recording that cannot be found or read; the message names the file (and offset). */
  class RecordingError extends Error {
    constructor(message: string);
  }
  /** A recorded answer that the new one does not match. */
  class ReplayDifference {
    constructor(file: string, offset: number, sequence: number, key: string,
      recorded: Record<string, any>, replayed: Record<string, any>);
    readonly file: string;
    /** Where the record's length prefix starts in `file`. */
    readonly offset: number;
    readonly sequence: number;
    /** "namespace/name", or "name" for a cluster-scoped primary. */
    readonly key: string;
    /** The differing members of the normalized answers: "desired", "patches", "status",
     * "conditions", "events", "requeueAfter", "error", "finalized". */
    readonly members: string[];
    /** Those members of the recorded and the new answer (absent when empty). */
    readonly recorded: Record<string, any>;
    readonly replayed: Record<string, any>;
    /** The RFC 6902 JSON patch that turns `recorded` into `replayed`. */
    readonly patch: { op: string; path: string; value?: any }[];
    toString(): string;
  }
  /** What a replay found. compared = same + different; skipped: records without an answer. */
  class ReplayResult {
    constructor(files: string[]);
    readonly files: string[];
    compared: number;
    same: number;
    different: number;
    skipped: number;
    readonly differences: ReplayDifference[];
    /** The files rewritten with the new answers (options.update). */
    readonly updated: string[];
    add(difference: ReplayDifference | null): void;
    summary(): string;
    /** The summary, then the first `limit` (20) differences. */
    report(limit?: number): string;
  }
  interface ReplayOptions {
    /** The controller's subdirectory in a directory of one per controller (default: the
     * controller's name, or the only one). */
    controller?: string;
    /** Rewrite the records whose answers differ with the new answers as the recorded ones. */
    update?: boolean;
  }
  /**
   * Runs `target` (a plugin: the controller the recording names) in process on every call of
   * a recording (a .ctrlrec file, a directory of them, or one subdirectory per controller) and
   * compares its answers with the recorded ones. Rejects with RecordingError.
   */
  function replay(target: Controller | ControllerBuilder | Plugin, path: string,
    options?: ReplayOptions): Promise<ReplayResult>;
  /** replay, rejecting with an AssertionError listing the first `limit` (20) differences and
   * the totals when an answer differs (never with options.update). */
  function assertReplay(target: Controller | ControllerBuilder | Plugin, path: string,
    options?: ReplayOptions & { limit?: number }): Promise<ReplayResult>;
}
