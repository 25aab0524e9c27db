package ctrlhost

import (
	"context"
	"errors"
	"fmt"
	"sort"
)

// SkippedObject is a desired object a step skipped this pass, with the reason.
type SkippedObject struct {
	Object Object
	Reason string
}

// CrudPlan is what CrudResource.Plan decided for one pass.
type CrudPlan struct {
	Create    []Object
	Update    []Object
	Unchanged []Object // with the skipped objects that exist, frozen (FreezeOnto)
	Remove    []Object // current children no longer desired (pruned by the host)
	Skipped   []SkippedObject
	// PassCancelled: a step cancelled the pass (PassCancelReason says why); Flags are the
	// per-pass flags as the last step left them (never nil).
	PassCancelled    bool
	PassCancelReason string
	Flags            map[string]bool
}

// Empty is true when the plan creates, updates and removes nothing.
func (p *CrudPlan) Empty() bool {
	return len(p.Create) == 0 && len(p.Update) == 0 && len(p.Remove) == 0
}

// CrudResource is the CRUD-resource style (as the C++, Python and Node SDKs' CrudResource): the
// desired list of one kind against the current children of that kind (by namespace/name),
// planned into create (missing), update (a desired field with another value in the current
// object), unchanged and remove (a current child no longer desired), and applied in that order:
// the creates, updates and unchanged objects are desired (server-side apply needs the whole
// intended state each time) with the Normal events Created, Updated and Deleted; removal is done
// by pruning, so declare the kind with Owns(..., DeleteAbsent()).
//
// OnPass runs before each create and update in desired-list order (PassContext): a skipped
// object is not created or is kept as it is, a cancelled pass skips every later create and
// update, and Apply records a Normal event "Skipped" for each. Removals are not cancellable.
// Callbacks run around each create, update and removal (StageCallbacks). An error of Desired, a
// step or a callback fails the reconcile (terminal when wrapped by Terminal; a desired object
// without a name, or two with one name, is terminal).
//
// Set the fields before use; then it is read-only and safe for concurrent use.
type CrudResource struct {
	APIVersion string
	Kind       string
	// Desired lists the objects of this kind that should exist (apiVersion and kind default to
	// the resource's; metadata.name is required, metadata.namespace defaults to the primary's).
	Desired   func(req *Request) ([]Object, error)
	OnPass    StepFunc
	Callbacks *StageCallbacks
}

// Current lists the current children of the resource's kind.
func (c *CrudResource) Current(req *Request) []RawObject {
	return req.ChildrenOfKind(c.Kind, c.APIVersion)
}

type crudKey struct{ namespace, name string }

func (c *CrudResource) keyOf(obj Object, req *Request) crudKey {
	ns, ok := String(obj, "metadata.namespace")
	if !ok {
		ns = req.Namespace
	}
	name, _ := String(obj, "metadata.name")
	return crudKey{ns, name}
}

// Plan compares the desired list with the current children; see CrudResource.
func (c *CrudResource) Plan(req *Request) (*CrudPlan, error) {
	var listed []Object
	if c.Desired != nil {
		var err error
		if listed, err = c.Desired(req); err != nil {
			return nil, err
		}
	}
	current := map[crudKey]Object{}
	var currentOrder []crudKey
	for _, o := range c.Current(req) {
		k := c.keyOf(o.Object, req)
		if _, dup := current[k]; !dup {
			currentOrder = append(currentOrder, k)
		}
		current[k] = o.Object
	}
	plan := &CrudPlan{}
	pc := &PassContext{}
	seen := map[crudKey]bool{}
	for _, d := range listed {
		if d == nil {
			return nil, Terminal(errors.New("a desired object is nil"))
		}
		obj := make(Object, len(d)+2)
		for k, v := range d {
			obj[k] = DeepCopy(v) // steps and callbacks may edit it; d may be shared
		}
		if _, ok := obj["apiVersion"]; !ok {
			obj["apiVersion"] = c.APIVersion
		}
		if _, ok := obj["kind"]; !ok {
			obj["kind"] = c.Kind
		}
		if name, _ := String(obj, "metadata.name"); name == "" {
			return nil, Terminal(fmt.Errorf("a desired %s has no name", c.Kind))
		}
		key := c.keyOf(obj, req)
		if seen[key] {
			return nil, Terminal(fmt.Errorf("two desired %s objects are named %s/%s", c.Kind,
				key.namespace, key.name))
		}
		seen[key] = true
		cur, exists := current[key]
		delete(current, key)
		if exists {
			compare := make(Object, len(obj))
			for k, v := range obj {
				compare[k] = v
			}
			meta := map[string]any{"namespace": key.namespace}
			for k, v := range Map(obj, "metadata") {
				meta[k] = v
			}
			compare["metadata"] = meta
			if IsSubset(compare, cur) {
				plan.Unchanged = append(plan.Unchanged, obj)
				continue
			}
		}
		label := fmt.Sprintf("%s %s/%s", c.Kind, key.namespace, key.name)
		skip, skipped := "", false
		if pc.passCancelled {
			skip, skipped = "pass cancelled: "+pc.passReason, true
		} else if c.OnPass != nil {
			pc.beginStep()
			if err := c.OnPass(req, obj, cur, pc); err != nil {
				return nil, fmt.Errorf("%s: %w", label, err)
			}
			if pc.resourceCancelled {
				skip, skipped = pc.resourceReason, true
			}
		}
		if skipped {
			if exists {
				plan.Unchanged = append(plan.Unchanged, FreezeOnto(obj, cur))
			}
			plan.Skipped = append(plan.Skipped, SkippedObject{obj, skip})
			continue
		}
		if err := c.Callbacks.RunStep(req, !exists, c.APIVersion, c.Kind, obj, cur); err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		if exists {
			plan.Update = append(plan.Update, obj)
		} else {
			plan.Create = append(plan.Create, obj)
		}
	}
	// The remaining current children go, in namespace/name order (as the other SDKs).
	var gone []crudKey
	for _, k := range currentOrder {
		if _, ok := current[k]; ok {
			gone = append(gone, k)
		}
	}
	sort.Slice(gone, func(i, j int) bool {
		if gone[i].namespace != gone[j].namespace {
			return gone[i].namespace < gone[j].namespace
		}
		return gone[i].name < gone[j].name
	})
	for _, k := range gone {
		if err := c.Callbacks.runDelete(req, c.APIVersion, c.Kind, current[k]); err != nil {
			return nil, fmt.Errorf("%s %s/%s: %w", c.Kind, k.namespace, k.name, err)
		}
		plan.Remove = append(plan.Remove, current[k])
	}
	plan.PassCancelled, plan.PassCancelReason = pc.PassCancelled()
	plan.Flags = pc.Flags()
	return plan, nil
}

func (c *CrudResource) describe(obj Object) string {
	out := c.Kind + " "
	if ns, ok := String(obj, "metadata.namespace"); ok {
		out += ns + "/"
	}
	name, _ := String(obj, "metadata.name")
	return out + name
}

// Apply adds the plan to res: creates, updates and unchanged objects as desired objects, and a
// Normal event per create ("Created"), update ("Updated"), removal ("Deleted", done by pruning)
// and skipped object ("Skipped", with the reason).
func (c *CrudResource) Apply(plan *CrudPlan, res *Result) {
	for _, o := range plan.Create {
		res.Desire(o)
		res.Event(EventNormal, "Created", c.describe(o))
	}
	for _, o := range plan.Update {
		res.Desire(o)
		res.Event(EventNormal, "Updated", c.describe(o))
	}
	for _, o := range plan.Unchanged {
		res.Desire(o)
	}
	for _, o := range plan.Remove {
		res.Event(EventNormal, "Deleted", c.describe(o))
	}
	for _, s := range plan.Skipped {
		res.Event(EventNormal, "Skipped", c.describe(s.Object)+": "+s.Reason)
	}
}

// Build is Plan then Apply as a ReconcileFunc (a Plan error is the reconcile's error); then
// (may be nil) adds the primary's status. A primary being deleted or gone gets the Handlers
// answer.
func (c *CrudResource) Build(then func(req *Request, plan *CrudPlan, res *Result)) ReconcileFunc {
	return func(ctx context.Context, req *Request) (*Result, error) {
		if !req.Exists() || req.Deleting() {
			return Handlers{}.Reconcile(ctx, req)
		}
		plan, err := c.Plan(req)
		if err != nil {
			return nil, err
		}
		res := &Result{}
		c.Apply(plan, res)
		if then != nil {
			then(req, plan, res)
		}
		return res, nil
	}
}
