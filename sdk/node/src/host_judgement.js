// @ts-check
'use strict';
// The live host's judgement of a reconcile, for the offline harness (testing.js).
//
// What the host would not send (a primary its label selector or namespaces exclude, a child of a
// kind it does not own or controlled by another object) and what it would refuse to apply
// (docs/protocol.md section 6: desired objects and OWNED patches of kinds the controller does
// not own, children outside the primary's namespace, status or conditions on a kind without a
// status subresource, an existing object the primary does not control: NotControlled). The
// same rules and messages as the host (runtime/controller/apply/validate.cc, the applier's
// ownership check, `ctrlhost test --check`) and the other SDKs' harnesses
// (sdk/go/ctrlhosttest/host_judgement.go); the cases all of them pass are
// sdk/testdata/host_judgement_cases.json. Pure functions of their arguments.

/**
 * Built-in kinds operators touch that serve no status subresource (they have no status at
 * all), as in `ctrlhost test --check`, as 'group/Kind'. Every other kind, custom ones included,
 * is taken to have one.
 */
const WITHOUT_STATUS_SUBRESOURCE = new Set([
  '/ConfigMap', '/Secret', '/ServiceAccount', '/Endpoints', '/Event', '/LimitRange',
  '/PodTemplate', 'events.k8s.io/Event', 'coordination.k8s.io/Lease',
  'discovery.k8s.io/EndpointSlice', 'rbac.authorization.k8s.io/Role',
  'rbac.authorization.k8s.io/RoleBinding', 'rbac.authorization.k8s.io/ClusterRole',
  'rbac.authorization.k8s.io/ClusterRoleBinding', 'storage.k8s.io/StorageClass',
  'scheduling.k8s.io/PriorityClass', 'node.k8s.io/RuntimeClass',
  'networking.k8s.io/IngressClass',
  'admissionregistration.k8s.io/ValidatingWebhookConfiguration',
  'admissionregistration.k8s.io/MutatingWebhookConfiguration',
]);

/** @param {string} apiVersion */
function groupOf(apiVersion) {
  const slash = apiVersion.indexOf('/');
  return slash < 0 ? '' : apiVersion.slice(0, slash);
}

/** @param {{group: string, version: string}} gvk */
function apiVersionOf(gvk) {
  return gvk.group ? `${gvk.group}/${gvk.version}` : gvk.version;
}

/**
 * @param {any} obj
 * @param {string} path
 * @returns {string}
 */
function str(obj, path) {
  let v = obj;
  for (const part of path.split('.')) {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return '';
    v = v[part];
  }
  return typeof v === 'string' ? v : '';
}

function owned(spec, group, kind) {
  return spec.owns.find((o) => o.kind.group === group && o.kind.kind === kind);
}

function isPrimaryKind(spec, group, kind) {
  return spec.primary.group === group && spec.primary.kind === kind;
}

/** @returns {Record<string, string>} */
function labelsOf(obj) {
  const labels = (obj.metadata && obj.metadata.labels) || {};
  /** @type {Record<string, string>} */
  const out = {};
  for (const [k, v] of Object.entries(labels)) if (typeof v === 'string') out[k] = v;
  return out;
}

/** obj's controller owner reference (undefined when none). */
function controllerRef(obj) {
  const refs = obj && obj.metadata && obj.metadata.ownerReferences;
  if (!Array.isArray(refs)) return undefined;
  return refs.find((r) => r !== null && typeof r === 'object' && r.controller === true);
}

function controllerUid(obj) {
  const ref = controllerRef(obj);
  return ref && typeof ref.uid === 'string' ? ref.uid : '';
}

/**
 * obj's controller reference names the primary (by uid; by kind and name when the fixture
 * primary has no uid).
 */
function controlledByPrimary(obj, spec, call) {
  const ref = controllerRef(obj);
  if (!ref) return false;
  if (call.uid) return ref.uid === call.uid;
  return isPrimaryKind(spec, groupOf(String(ref.apiVersion || '')), ref.kind) &&
    ref.name === call.name;
}

/**
 * child with the controller reference to the primary the host sets when it applies a child,
 * when the fixture has no ownerReferences at all (one with some is taken as written). The
 * caller's object is not changed.
 */
function withOwnerReference(child, spec, call) {
  const meta = child && child.metadata;
  if (!meta || typeof meta !== 'object' || call.object.length === 0 ||
      'ownerReferences' in meta) {
    return child;
  }
  const ref = { apiVersion: apiVersionOf(spec.primary), kind: spec.primary.kind, name: call.name,
    controller: true, blockOwnerDeletion: true };
  if (call.uid) ref.uid = call.uid;
  return { ...child, metadata: { ...meta, ownerReferences: [ref] } };
}

/**
 * Why the host would never send this reconcile ('' : it would). `obj`: the primary (null for
 * the deletion notice of a gone primary).
 * @returns {string}
 */
function judgeRequest(spec, call, obj) {
  if (obj === null || obj === undefined) return '';
  const apiVersion = str(obj, 'apiVersion');
  const kind = str(obj, 'kind');
  if (!isPrimaryKind(spec, groupOf(apiVersion), kind)) {
    return `the object is a ${apiVersion} ${kind}; controller ${spec.name} reconciles ` +
      `${apiVersionOf(spec.primary)} ${spec.primary.kind}`;
  }
  if (spec.label_selector) {
    const labels = labelsOf(obj);
    let ok;
    try {
      ok = matchesSelector(spec.label_selector, labels);
    } catch (e) {
      return `controller ${spec.name}: label selector ${JSON.stringify(spec.label_selector)}: ` +
        e.message;
    }
    if (!ok) {
      const shown = Object.keys(labels).sort().map((k) => `${k}=${labels[k]}`).join(',');
      return `the object's labels {${shown}} do not match controller ${spec.name}'s label ` +
        `selector ${JSON.stringify(spec.label_selector)}: the host would never reconcile it`;
    }
  }
  if (call.namespace && spec.namespaces.length > 0 && !spec.namespaces.includes(call.namespace)) {
    return `namespace ${JSON.stringify(call.namespace)} is not one of controller ${spec.name}'s ` +
      `namespaces [${spec.namespaces.join(' ')}]: the host would never reconcile it`;
  }
  for (const child of call.children) {
    let c;
    try {
      c = JSON.parse(child.object.toString('utf8'));
    } catch (e) {
      return `child ${child.api_version} ${child.kind}: ${e.message}`;
    }
    const name = str(c, 'metadata.name');
    if (!owned(spec, groupOf(child.api_version), child.kind)) {
      return `child ${child.api_version} ${child.kind} ${name}: controller ${spec.name} does ` +
        'not own that kind, so the host never passes one as a child';
    }
    if (!controlledByPrimary(c, spec, call)) {
      const uid = controllerUid(c);
      const why = uid ? `it is controlled by another object (uid ${uid})` : 'it has no controller';
      return `child ${child.api_version} ${child.kind} ${name}: ${why}, so the host never ` +
        'passes it as a child (pass it in `existing` to test an object in the way)';
    }
  }
  return '';
}

/**
 * Why the host would refuse `resp` ('' : it would apply it). `existing`: objects in the cluster
 * that are not the primary's children.
 * @returns {string}
 */
function judgeResponse(spec, call, existing, resp) {
  const hasStatus = resp.status !== undefined && resp.status !== null && resp.status.length > 0;
  if (resp.error && resp.desired_objects.length === 0 && resp.patches.length === 0 &&
      !hasStatus && resp.conditions.length === 0) {
    return ''; // an error answer (the SDK validated it)
  }
  if (call.object.length === 0) return ''; // a gone primary: only events, an error, a requeue
  const primary = spec.primary;
  if (WITHOUT_STATUS_SUBRESOURCE.has(`${primary.group}/${primary.kind}`)) {
    const what = hasStatus ? 'status' : resp.conditions.length > 0 ? 'conditions' : '';
    if (what) {
      return `${what}: kind ${apiVersionOf(primary)} ${primary.kind} has no status ` +
        'subresource, so it has no status to write; record the outcome with an event instead';
    }
    const i = resp.patches.findIndex((p) => p.target === 'PATCH_TARGET_PRIMARY_STATUS');
    if (i >= 0) {
      return `patches[${i}]: a PRIMARY_STATUS patch needs a status subresource; kind ` +
        `${apiVersionOf(primary)} ${primary.kind} has none (a PRIMARY patch changes the object)`;
    }
  }
  const namespaced = call.namespace !== '';
  const childNamespace = primary.group === '' && primary.kind === 'Namespace'
    ? call.name : call.namespace;
  for (let i = 0; i < resp.desired_objects.length; i++) {
    const where = `desired_objects[${i}]`;
    let d;
    try {
      d = JSON.parse(resp.desired_objects[i].toString('utf8'));
    } catch (e) {
      return `${where}: ${e.message}`;
    }
    const apiVersion = str(d, 'apiVersion');
    const kind = str(d, 'kind');
    const name = str(d, 'metadata.name');
    let ns = str(d, 'metadata.namespace');
    const group = groupOf(apiVersion);
    if (isPrimaryKind(spec, group, kind) && name === call.name) {
      if (namespaced && ns && ns !== call.namespace) {
        return `${where}: namespace ${JSON.stringify(ns)} is not the primary's ` +
          JSON.stringify(call.namespace);
      }
      continue;
    }
    const o = owned(spec, group, kind);
    if (!o) return `${where}: kind ${apiVersion} ${kind} is not owned by controller ${spec.name}`;
    if (o.cluster_scoped) {
      if (ns) return `${where}: kind ${kind} is cluster-scoped; metadata.namespace must be empty`;
    } else if (!childNamespace) {
      if (!ns) return `${where}: metadata.namespace is required (the primary is cluster-scoped)`;
    } else if (ns && ns !== childNamespace) {
      return `${where}: namespace ${JSON.stringify(ns)} is outside the primary's ` +
        JSON.stringify(childNamespace);
    } else {
      ns = childNamespace;
    }
    const refused = notControlled(spec, call, existing, where, group, kind, name, ns);
    if (refused) return refused;
  }
  for (let i = 0; i < resp.patches.length; i++) {
    const p = resp.patches[i];
    if (p.target !== 'PATCH_TARGET_OWNED') continue;
    if (!owned(spec, groupOf(p.api_version), p.kind)) {
      return `patches[${i}]: kind ${p.api_version} ${p.kind} is not owned by controller ` +
        spec.name;
    }
  }
  return '';
}

// The applier's NotControlled refusal when an existing object has the desired identity and the
// primary does not control it ('' : none).
function notControlled(spec, call, existing, where, group, kind, name, ns) {
  for (const e of existing) {
    if (groupOf(str(e, 'apiVersion')) !== group || str(e, 'kind') !== kind ||
        str(e, 'metadata.name') !== name || str(e, 'metadata.namespace') !== ns) {
      continue;
    }
    if (controlledByPrimary(e, spec, call)) continue;
    const uid = controllerUid(e);
    const state = uid ? `is controlled by another object (uid ${uid})` : 'has no controller';
    const target = ns ? `${ns}/${name}` : name;
    const primary = call.namespace ? `${call.namespace}/${call.name}` : call.name;
    const pk = spec.primary.kind;
    return `${where}: ${kind} ${target} exists and ${state}; ${pk} ${primary} does not adopt ` +
      `it (the protocol has no adoption): delete it (${pk} ${primary} is reconciled again when ` +
      'it is gone) or rename the child';
  }
  return '';
}

/**
 * kubectl's label selector syntax (a=b, a==b, a!=b, a in (x,y), a notin (x), a, !a;
 * requirements joined by commas) matched against labels. Throws for a bad selector.
 * @param {string} selector
 * @param {Record<string, string>} labels
 * @returns {boolean}
 */
function matchesSelector(selector, labels) {
  const parts = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < selector.length; i++) {
    const ch = selector[i];
    if (ch === '(') depth++;
    else if (ch === ')') depth--;
    else if (ch === ',' && depth === 0) {
      parts.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(selector.slice(start));
  for (const raw of parts) {
    const req = raw.trim();
    if (!req) throw new Error('empty requirement');
    if (!matchesRequirement(req, labels)) return false;
  }
  return true;
}

/**
 * @param {string} req
 * @param {Record<string, string>} labels
 * @returns {boolean}
 */
function matchesRequirement(req, labels) {
  const has = (k) => Object.prototype.hasOwnProperty.call(labels, k);
  if (req.startsWith('!')) return !has(req.slice(1).trim());
  for (const op of ['!=', '==', '=']) {
    const i = req.indexOf(op);
    if (i >= 0) {
      const key = req.slice(0, i).trim();
      const value = req.slice(i + op.length).trim();
      if (op === '!=') return !has(key) || labels[key] !== value;
      return has(key) && labels[key] === value;
    }
  }
  const fields = req.split(/\s+/).filter(Boolean);
  if (fields.length === 1) return has(fields[0]);
  if (fields.length >= 3 && (fields[1] === 'in' || fields[1] === 'notin')) {
    const rest = req.slice(req.indexOf(fields[1], fields[0].length) + fields[1].length).trim();
    if (!rest.startsWith('(') || !rest.endsWith(')')) {
      throw new Error(`${JSON.stringify(req)}: values must be in parentheses`);
    }
    const values = new Set(rest.slice(1, -1).split(',').map((v) => v.trim()));
    if (fields[1] === 'in') return has(fields[0]) && values.has(labels[fields[0]]);
    return !has(fields[0]) || !values.has(labels[fields[0]]);
  }
  throw new Error(`${JSON.stringify(req)} is not a label requirement`);
}

module.exports = {
  WITHOUT_STATUS_SUBRESOURCE,
  judgeRequest,
  judgeResponse,
  withOwnerReference,
  matchesSelector,
};
