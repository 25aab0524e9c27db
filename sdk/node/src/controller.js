// @ts-check
'use strict';
// Controller declarations: what a controller reconciles (for / owns / watches), its finalizer,
// concurrency, resync, scope and what each request must carry, as a ControllerSpec for Describe.
//
//   plugin.controller('webapp')
//     .for('apps.ctrlhost.dev', 'v1alpha1', 'WebApp')
//     .owns('apps', 'v1', 'Deployment')
//     .watches('', 'v1', 'Secret', Mapping.fieldPath('spec.secretName'), { includeInRequests: true })
//     .finalizer('apps.ctrlhost.dev/cleanup')
//     .maxConcurrent(4)
//     .reconcile(async (req) => { ... });
//
// Not shared between threads (Node has one); a builder is frozen into a Controller by build().

/** The Kubernetes apiVersion of a group and version: "v1" for the core group. */
function apiVersionOf(group, version) {
  return group ? `${group}/${version}` : version;
}

function gvk(group, version, kind) {
  return { group: group || '', version: version || '', kind: kind || '' };
}

/** How events on a watched kind map to primary keys (WatchedKind.mapping). */
const Mapping = {
  ownerReference: (controllerOnly = false) => ({
    owner_reference: { controller_only: Boolean(controllerOnly) },
  }),
  nameLabel: (label) => ({ label: { name_label: String(label) } }),
  primarySelector: (path) => ({ label: { primary_selector_path: String(path) } }),
  fieldPath: (path) => ({ field_path: { primary_field_path: String(path) } }),
  enqueueAll: (sameNamespaceOnly = false) => ({
    enqueue_all: { same_namespace_only: Boolean(sameNamespaceOnly) },
  }),
};

const MAPPING_KEYS = ['owner_reference', 'label', 'field_path', 'enqueue_all'];

function msToDuration(ms) {
  const seconds = Math.floor(ms / 1000);
  return { seconds: String(seconds), nanos: Math.round((ms - seconds * 1000) * 1e6) };
}

function validControllerName(name) {
  return typeof name === 'string' && /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(name);
}

/** A built controller: its spec and its reconcile function. Immutable. */
class Controller {
  /**
   * @param {any} spec the ControllerSpec (proto-loader object form)
   * @param {(request: any) => any} reconcile
   * @param {ReadonlyArray<readonly [string, (ctx: any) => any]>} [tasks]
   */
  constructor(spec, reconcile, tasks = []) {
    this.spec = spec;
    this.reconcile = reconcile;
    /** @type {ReadonlyArray<readonly [string, (ctx: any) => any]>} [[name, fn]] */
    this.tasks = Object.freeze(tasks.map(([n, f]) => Object.freeze(
      /** @type {[string, (ctx: any) => any]} */ ([n, f]))));
    Object.freeze(this);
  }

  get name() {
    return this.spec.name;
  }

  /** Capabilities the host must offer for this controller to work (checked in Describe). */
  requiredCapabilities() {
    const caps = new Set();
    const rc = this.spec.request_contents;
    if (rc.children) caps.add('CAPABILITY_CHILDREN');
    if (rc.related_objects) caps.add('CAPABILITY_RELATED_OBJECTS');
    if (rc.metadata_only_kinds.length > 0) caps.add('CAPABILITY_METADATA_ONLY');
    if (this.spec.schedules.length > 0) caps.add('CAPABILITY_SCHEDULES');
    if (this.spec.background_tasks.length > 0) caps.add('CAPABILITY_BACKGROUND_TASKS');
    if (this.spec.owns.some((o) => o.delete_absent)) caps.add('CAPABILITY_SERVER_SIDE_APPLY');
    return [...caps].sort();
  }
}

class ControllerBuilder {
  /** @param {string} name */
  constructor(name) {
    this._name = name;
    this._primary = null;
    this._owns = [];
    this._watches = [];
    this._namespaces = [];
    this._labelSelector = '';
    this._finalizer = '';
    this._maxConcurrent = 0;
    this._resyncMs = null;
    this._schedules = [];
    this._predicates = null;
    this._request = {};
    this._reconcile = null;
    /** @type {Array<[string, (ctx: any) => any]>} [[name, fn]] */
    this._tasks = [];
  }

  /**
   * The primary kind.
   * @param {string} group
   * @param {string} version
   * @param {string} kind
   */
  for(group, version, kind) {
    this._primary = gvk(group, version, kind);
    return this;
  }

  /**
   * A kind of child objects: { deleteAbsent, clusterScoped } (both false by default).
   * @param {string} group
   * @param {string} version
   * @param {string} kind
   * @param {{deleteAbsent?: boolean, clusterScoped?: boolean}} [options]
   */
  owns(group, version, kind, options = {}) {
    this._owns.push({
      kind: gvk(group, version, kind),
      cluster_scoped: Boolean(options.clusterScoped),
      delete_absent: Boolean(options.deleteAbsent),
    });
    return this;
  }

  /**
   * Another kind whose events map to primary keys: { labelSelector, includeInRequests }.
   * @param {string} group
   * @param {string} version
   * @param {string} kind
   * @param {import('./index').WatchMapping} mapping
   * @param {{labelSelector?: string, includeInRequests?: boolean}} [options]
   */
  watches(group, version, kind, mapping, options = {}) {
    this._watches.push({
      kind: gvk(group, version, kind),
      ...(mapping || {}),
      label_selector: options.labelSelector || '',
      include_in_requests: Boolean(options.includeInRequests),
    });
    return this;
  }

  /** @param {string} name */
  finalizer(name) {
    this._finalizer = String(name);
    return this;
  }

  /** @param {number} n */
  maxConcurrent(n) {
    this._maxConcurrent = n;
    return this;
  }

  /**
   * Reconcile every primary again this often (milliseconds).
   * @param {number} ms
   */
  resync(ms) {
    this._resyncMs = ms;
    return this;
  }

  /** @param {string[]} list */
  namespaces(list) {
    this._namespaces = [...list].map(String);
    return this;
  }

  /** @param {string} selector */
  labelSelector(selector) {
    this._labelSelector = String(selector);
    return this;
  }

  /**
   * @param {string} cron
   * @param {string} [timeZone]
   */
  schedule(cron, timeZone = '') {
    this._schedules.push({ cron: String(cron), time_zone: String(timeZone) });
    return this;
  }

  /**
   * { primaryStatusChanges, ignoreChildStatusChanges }.
   * @param {{primaryStatusChanges?: boolean, ignoreChildStatusChanges?: boolean}} options
   */
  predicates(options) {
    this._predicates = {
      primary_status_changes: Boolean(options.primaryStatusChanges),
      ignore_child_status_changes: Boolean(options.ignoreChildStatusChanges),
    };
    return this;
  }

  /**
   * What requests carry: { children, relatedObjects, metadataOnlyKinds: [[group, version, kind]],
   * stripFields }. children defaults to "owns anything", relatedObjects to "a watch is included
   * in requests".
   * @param {{children?: boolean, relatedObjects?: boolean,
   *          metadataOnlyKinds?: [string, string, string][], stripFields?: string[]}} options
   */
  requestContents(options) {
    this._request = { ...options };
    return this;
  }

  /**
   * fn(request) -> Result | undefined | Promise of either.
   * @param {import('./index').ReconcileFn} fn
   */
  reconcile(fn) {
    this._reconcile = fn;
    return this;
  }

  /**
   * A background task (tasks.js): async fn(ctx) that runs while the host runs this controller
   * on this plugin instance. Names: lowercase RFC 1123 labels, unique within the controller.
   * @param {string} name
   * @param {import('./index').TaskFn} fn
   */
  backgroundTask(name, fn) {
    this._tasks.push([String(name), fn]);
    return this;
  }

  /** The ControllerSpec message as Describe sends it. */
  spec() {
    const r = this._request;
    const anyIncluded = this._watches.some((w) => w.include_in_requests);
    const spec = {
      name: this._name,
      primary: this._primary || gvk(),
      owns: this._owns.map((o) => ({ ...o, kind: { ...o.kind } })),
      watches: this._watches.map((w) => ({ ...w })),
      namespaces: [...this._namespaces],
      label_selector: this._labelSelector,
      finalizer: this._finalizer,
      max_concurrent_reconciles: this._maxConcurrent,
      resync_period: null,
      schedules: this._schedules.map((s) => ({ ...s })),
      predicates: this._predicates,
      request_contents: {
        children: r.children === undefined ? this._owns.length > 0 : Boolean(r.children),
        related_objects:
          r.relatedObjects === undefined ? anyIncluded : Boolean(r.relatedObjects),
        metadata_only_kinds: (r.metadataOnlyKinds || []).map((k) => gvk(...k)),
        strip_fields: (r.stripFields || []).map(String),
      },
      background_tasks: this._tasks.map(([name]) => ({ name })),
    };
    if (typeof this._resyncMs === 'number' && this._resyncMs > 0) {
      spec.resync_period = msToDuration(this._resyncMs);
    }
    return spec;
  }

  /** Validates the declaration; throws an Error naming the controller and the problem. */
  build() {
    const where = `controller "${this._name}": `;
    const fail = (msg) => {
      throw new Error(where + msg);
    };
    if (!validControllerName(this._name)) {
      fail('name must be a lowercase RFC 1123 label ([a-z0-9-], <= 63)');
    }
    if (!this._primary || !this._primary.version || !this._primary.kind) {
      fail('for(group, version, kind) is missing');
    }
    for (const o of this._owns) {
      if (!o.kind.version || !o.kind.kind) fail('an owns() kind needs version, kind');
    }
    for (const w of this._watches) {
      if (!w.kind.version || !w.kind.kind) fail('a watches() kind needs version, kind');
      if (MAPPING_KEYS.filter((k) => w[k]).length !== 1) {
        fail(`watches(${w.kind.kind}) needs exactly one mapping (see Mapping)`);
      }
    }
    if (this._finalizer && !this._finalizer.includes('/')) {
      fail(
        `finalizer "${this._finalizer}" must be qualified with a domain, e.g. example.com/cleanup`,
      );
    }
    if (!Number.isInteger(this._maxConcurrent) || this._maxConcurrent < 0) {
      fail('maxConcurrent must be a non-negative integer');
    }
    if (this._resyncMs !== null && !(typeof this._resyncMs === 'number' && this._resyncMs >= 0)) {
      fail('resync period must be a non-negative number of milliseconds');
    }
    if (typeof this._reconcile !== 'function') fail('no reconcile(fn)');
    const taskNames = new Set();
    for (const [name, fn] of this._tasks) {
      if (!validControllerName(name)) {
        fail(`background task "${name}": name must be a lowercase RFC 1123 label`);
      }
      if (taskNames.has(name)) fail(`background task "${name}" declared twice`);
      if (typeof fn !== 'function') fail(`background task "${name}" has no function`);
      taskNames.add(name);
    }
    return new Controller(this.spec(), this._reconcile, this._tasks);
  }
}

module.exports = { Controller, ControllerBuilder, Mapping, apiVersionOf, gvk, msToDuration };
