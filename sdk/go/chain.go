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
}

// ChainState is what one pass of a chain found: names of ready, pending and deleting
// dependents.
type ChainState struct {
	Ready, Pending, Deleting []string
}

// AllReady is true when nothing is pending or being deleted.
func (s ChainState) AllReady() bool { return len(s.Pending) == 0 && len(s.Deleting) == 0 }

// DependentChain is the resource-chain style (as in the C++, Python and Node SDKs): an ordered
// list of dependents, each ensure-created once every earlier one is ready, or, when its When
// says no, ensure-deleted in reverse order (one is kept until every later unwanted one is gone).
// The built ReconcileFunc adds the condition DependentsReady (True AllReady / False Waiting).
// Immutable once built; safe for concurrent use.
type DependentChain struct {
	dependents []Dependent
}

// Add appends a dependent.
func (c *DependentChain) Add(d Dependent) *DependentChain {
	c.dependents = append(c.dependents, d)
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
			obj[k] = v
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

// Apply adds the desired objects of one pass to res and returns what it found; a Desired error
// becomes res's error.
func (c *DependentChain) Apply(req *Request, res *Result) ChainState {
	var state ChainState
	deps := c.dependents
	wanted := make([]bool, len(deps))
	keepForOrder := make([]bool, len(deps))
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
		if findChild(req, d.APIVersion, d.Kind, name) != nil {
			state.Deleting = append(state.Deleting, d.Name)
			keepForOrder[i] = laterUnwantedPresent
			laterUnwantedPresent = true
		}
	}
	predecessorsReady := true
	for i, d := range deps {
		if !wanted[i] && !keepForOrder[i] {
			continue
		}
		desired, err := c.desiredOf(d, req)
		if err != nil {
			res.SetError(IsTerminal(err), fmt.Sprintf("dependent %s: %v", d.Name, err))
			return state
		}
		current := findChild(req, d.APIVersion, d.Kind, nameOf(desired, req))
		if !wanted[i] {
			res.Desire(desired) // kept only until the later unwanted ones are gone
			continue
		}
		if current == nil && !predecessorsReady {
			state.Pending = append(state.Pending, d.Name) // waits for its predecessors
			continue
		}
		res.Desire(desired)
		ready := current != nil && (d.Ready == nil || d.Ready(current))
		if ready {
			state.Ready = append(state.Ready, d.Name)
		} else {
			state.Pending = append(state.Pending, d.Name)
		}
		predecessorsReady = predecessorsReady && ready
	}
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
			if state.AllReady() {
				res.SetCondition("DependentsReady", ConditionTrue, "AllReady",
					fmt.Sprintf("%d dependents ready", len(state.Ready)))
			} else {
				waiting := append(append([]string{}, state.Pending...), state.Deleting...)
				res.SetCondition("DependentsReady", ConditionFalse, "Waiting",
					"waiting for "+strings.Join(waiting, ", "))
			}
		}
		if then != nil {
			then(req, state, res)
		}
		return res, nil
	}
}
