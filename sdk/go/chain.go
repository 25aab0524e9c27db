package ctrlhost

import (
	"context"
	"fmt"
	"strings"
)

// Dependent is one step of a DependentChain.
type Dependent struct {
	Name       string
	APIVersion string
	Kind       string
	// Desired is the object (apiVersion and kind are set from the Dependent). An error fails
	// the reconcile (retryable, or terminal when wrapped by Terminal).
	Desired func(req *Request) (Object, error)
	// When says whether the dependent is wanted (nil: always); an unwanted one is deleted.
	When func(req *Request) bool
	// Ready says whether the current object is ready (nil: it exists).
	Ready func(current Object) bool
	// OnPass (nil: none) is the dependent's step before it is created or updated (PassContext).
	OnPass StepFunc
}

// ChainState is what one pass of a chain found.
type ChainState struct {
	// Ready: wanted, existing and ready; Pending: wanted but not ready or not created yet;
	// Deleting: unwanted and still present.
	Ready, Pending, Deleting []string
	// Cancelled: skipped this pass (by their own step, or after a step cancelled the pass), in
	// chain order; CancelReasons: the reasons of those that cancelled themselves.
	Cancelled     []string
	CancelReasons map[string]string
	// PassCancelledBy is the dependent whose step cancelled the pass ("": the pass ran to the
	// end), PassCancelReason its reason.
	PassCancelledBy  string
	PassCancelReason string
	// Flags are the per-pass flags as the last step left them (never nil).
	Flags map[string]bool
	// FailedAt is the dependent whose Desired, step or callback failed ("": none); the walk
	// stopped there and the result carries the error.
	FailedAt string
}

// AllReady is true when nothing is pending, being deleted or skipped, the pass ran to the end
// and no dependent failed.
func (s ChainState) AllReady() bool {
	return len(s.Pending) == 0 && len(s.Deleting) == 0 && len(s.Cancelled) == 0 &&
		s.PassCancelledBy == "" && s.FailedAt == ""
}

// NotReadyMessage says why the chain is not ready: "<dependent> cancelled the pass: <reason>;
// skipped: <a> (<its reason>), <b>; waiting for <c>" (each part only when it applies).
func (s ChainState) NotReadyMessage() string {
	var parts []string
	if s.PassCancelledBy != "" {
		parts = append(parts, s.PassCancelledBy+" cancelled the pass: "+s.PassCancelReason)
	}
	if len(s.Cancelled) > 0 {
		names := make([]string, len(s.Cancelled))
		for i, n := range s.Cancelled {
			names[i] = n
			if reason, ok := s.CancelReasons[n]; ok {
				names[i] = n + " (" + reason + ")"
			}
		}
		parts = append(parts, "skipped: "+strings.Join(names, ", "))
	}
	if waiting := append(append([]string{}, s.Pending...), s.Deleting...); len(waiting) > 0 {
		parts = append(parts, "waiting for "+strings.Join(waiting, ", "))
	}
	return strings.Join(parts, "; ")
}

// DependentChain is the resource-chain style (as in the C++, Python and Node SDKs): an ordered
// list of dependents, each ensure-created once every earlier one is ready, or, when its When
// says no, ensure-deleted in reverse order (one is kept until every later unwanted one is gone;
// declare the kind with Owns(..., DeleteAbsent()) so the host prunes it). Dependents that exist
// are always kept up to date.
//
// A dependent's OnPass step runs before it is created or updated: it may cancel the rest of the
// pass (later dependents are neither created, updated nor deleted; those that exist are kept as
// they are), cancel only itself (kept as it is, or not created), and set flags later steps read
// (PassContext). WithCallbacks adds stage callbacks per child kind around each create, update
// and delete (StageCallbacks).
//
// The built ReconcileFunc adds the condition DependentsReady: True "AllReady", False "Waiting"
// naming what it waits for, or False "Cancelled" when a step skipped something
// (ChainState.NotReadyMessage). Immutable once built; safe for concurrent use.
type DependentChain struct {
	dependents []Dependent
	callbacks  *StageCallbacks
}

// Add appends a dependent.
func (c *DependentChain) Add(d Dependent) *DependentChain {
	c.dependents = append(c.dependents, d)
	return c
}

// WithCallbacks sets the stage callbacks run around each create, update and delete.
func (c *DependentChain) WithCallbacks(callbacks *StageCallbacks) *DependentChain {
	c.callbacks = callbacks
	return c
}

func (c *DependentChain) desiredOf(d Dependent, req *Request) (Object, error) {
	obj := Object{}
	if d.Desired != nil {
		got, err := d.Desired(req)
		if err != nil {
			return nil, err
		}
		if got == nil {
			return nil, Terminal(fmt.Errorf("desired() returned no object"))
		}
		for k, v := range got {
			obj[k] = DeepCopy(v) // steps and callbacks may edit it; got may be shared
		}
	}
	obj["apiVersion"] = d.APIVersion
	obj["kind"] = d.Kind
	return obj, nil
}

func nameOf(obj Object, req *Request) string {
	if name, ok := String(obj, "metadata.name"); ok {
		return name
	}
	return req.Name
}

func findChild(req *Request, apiVersion, kind, name string) Object {
	for _, o := range req.ChildrenOfKind(kind, apiVersion) {
		if o.Name() == name {
			return o.Object
		}
	}
	return nil
}

func failDependent(res *Result, name string, err error) {
	res.Err = ErrorOf(err, fmt.Sprintf("dependent %s: %v", name, err))
}

// Apply adds the desired objects of one pass to res and returns what it found; an error of a
// Desired function, a step or a callback becomes res's error and stops the walk.
func (c *DependentChain) Apply(req *Request, res *Result) ChainState {
	state := ChainState{Flags: map[string]bool{}}
	deps := c.dependents
	wanted := make([]bool, len(deps))
	presentUnwanted := make([]bool, len(deps))
	keepForOrder := make([]bool, len(deps))
	unwantedCurrent := make([]Object, len(deps))
	laterUnwantedPresent := false
	for i := len(deps) - 1; i >= 0; i-- {
		d := deps[i]
		wanted[i] = d.When == nil || d.When(req)
		if wanted[i] {
			continue
		}
		name := req.Name
		if obj, err := c.desiredOf(d, req); err == nil {
			name = nameOf(obj, req)
		}
		if cur := findChild(req, d.APIVersion, d.Kind, name); cur != nil {
			unwantedCurrent[i] = cur
			state.Deleting = append(state.Deleting, d.Name)
			presentUnwanted[i] = true
			keepForOrder[i] = laterUnwantedPresent
			laterUnwantedPresent = true
		}
	}
	pc := &PassContext{}
	predecessorsReady := true
	for i, d := range deps {
		if !wanted[i] {
			// After a cancelled pass nothing more is deleted: unwanted ones present are kept.
			keep := keepForOrder[i]
			if pc.passCancelled {
				keep = presentUnwanted[i]
			}
			if !keep {
				if presentUnwanted[i] && !pc.passCancelled { // left out: pruned
					if err := c.callbacks.runDelete(req, d.APIVersion, d.Kind, unwantedCurrent[i]); err != nil {
						failDependent(res, d.Name, err)
						state.FailedAt = d.Name
						return state
					}
				}
				continue
			}
		}
		desired, err := c.desiredOf(d, req)
		if err != nil {
			failDependent(res, d.Name, err)
			state.FailedAt = d.Name
			return state
		}
		current := findChild(req, d.APIVersion, d.Kind, nameOf(desired, req))
		if pc.passCancelled {
			if current != nil {
				res.Desire(FreezeOnto(desired, current))
			}
			state.Cancelled = append(state.Cancelled, d.Name)
			continue
		}
		if !wanted[i] {
			res.Desire(desired) // kept only until the later unwanted ones are gone
			continue
		}
		if current == nil && !predecessorsReady {
			state.Pending = append(state.Pending, d.Name) // waits for its predecessors
			continue
		}
		ready := current != nil && (d.Ready == nil || d.Ready(current))
		predecessorsReady = predecessorsReady && ready
		if d.OnPass != nil {
			wasCancelled := pc.passCancelled
			pc.beginStep()
			if err := d.OnPass(req, desired, current, pc); err != nil {
				failDependent(res, d.Name, err)
				state.FailedAt = d.Name
				return state
			}
			if !wasCancelled && pc.passCancelled {
				state.PassCancelledBy, state.PassCancelReason = d.Name, pc.passReason
			}
			if pc.resourceCancelled {
				if current != nil {
					res.Desire(FreezeOnto(desired, current))
				}
				state.Cancelled = append(state.Cancelled, d.Name)
				if state.CancelReasons == nil {
					state.CancelReasons = map[string]string{}
				}
				state.CancelReasons[d.Name] = pc.resourceReason
				continue
			}
		}
		if current == nil || !IsSubset(desired, current) {
			if err := c.callbacks.RunStep(req, current == nil, d.APIVersion, d.Kind, desired, current); err != nil {
				failDependent(res, d.Name, err)
				state.FailedAt = d.Name
				return state
			}
		}
		res.Desire(desired)
		if ready {
			state.Ready = append(state.Ready, d.Name)
		} else {
			state.Pending = append(state.Pending, d.Name)
		}
	}
	state.Flags = pc.Flags()
	return state
}

// Build is the ReconcileFunc of the chain; then (may be nil) adds the primary's own status.
func (c *DependentChain) Build(then func(req *Request, state ChainState, res *Result)) ReconcileFunc {
	return func(ctx context.Context, req *Request) (*Result, error) {
		if !req.Exists() || req.Deleting() {
			return Handlers{}.Reconcile(ctx, req)
		}
		res := &Result{}
		state := c.Apply(req, res)
		if res.Err == nil {
			switch {
			case state.AllReady():
				res.SetCondition("DependentsReady", ConditionTrue, "AllReady",
					fmt.Sprintf("%d dependents ready", len(state.Ready)))
			case state.PassCancelledBy != "" || len(state.Cancelled) > 0:
				res.SetCondition("DependentsReady", ConditionFalse, "Cancelled", state.NotReadyMessage())
			default:
				res.SetCondition("DependentsReady", ConditionFalse, "Waiting", state.NotReadyMessage())
			}
		}
		if then != nil {
			then(req, state, res)
		}
		return res, nil
	}
}
