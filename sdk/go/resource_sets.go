package ctrlhost

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Resource sets: one controller, several ways of reconciling, chosen per object (operatorkit's
// ResourceRouter / ResourceSet). The same semantics and messages as sdk/cpp resource_sets.h,
// sdk/python ctrlhost_sdk/resource_sets.py and sdk/node src/resource_sets.js; the conformance
// suite checks that they answer alike.
//
// Per object:
//   - exactly one set's Handles(req) is true: its InitContext(req) (nil: an empty map) then its
//     Reconcile(ctx, req, setContext) run, and their answer is the answer;
//   - none: the object is skipped: an empty Result, Skipped counts it, a debug line;
//   - several: nothing runs; the answer is a terminal error, the condition Reconciled=False
//     reason AmbiguousRoute and a Warning event AmbiguousRoute, all with the message
//     `the object matches 2 resource sets: "v2", "canary"; exactly one must handle it`;
//   - a request whose object is gone asks no set: an empty Result, not counted.

// ReasonAmbiguousRoute is the condition and event reason of an object several sets handle.
const ReasonAmbiguousRoute = "AmbiguousRoute"

// ResourceSetFunc reconciles one object with the context its set's InitContext made.
type ResourceSetFunc func(ctx context.Context, req *Request, setContext map[string]any) (*Result, error)

// ResourceSet is one way of reconciling: which objects it handles, its per-object context, its
// reconcile.
type ResourceSet struct {
	Name string
	// Handles says whether the set reconciles the object (any field: apiVersion, labels,
	// annotations, spec).
	Handles func(req *Request) bool
	// InitContext (nil: an empty map) makes the per-object context given to Reconcile.
	InitContext func(req *Request) map[string]any
	Reconcile   ResourceSetFunc
}

// ResourceRouter runs exactly one ResourceSet per object (see above). Add sets before serving;
// Route is then safe from concurrent reconciles (the skipped count is guarded by mu).
type ResourceRouter struct {
	// Log receives the debug line of a skipped object (nil: stderr at $CTRLHOST_LOG_LEVEL).
	Log *Logger

	sets []ResourceSet // written by Add before serving, then only read

	mu      sync.Mutex
	skipped int64 // guarded by mu
}

// NewResourceRouter returns a router without sets.
func NewResourceRouter() *ResourceRouter { return &ResourceRouter{} }

// Add declares a set. It refuses an empty or duplicate name and a missing Handles or Reconcile.
func (r *ResourceRouter) Add(set ResourceSet) error {
	if set.Name == "" {
		return errors.New("a resource set needs a name")
	}
	if set.Handles == nil || set.Reconcile == nil {
		return fmt.Errorf(`resource set "%s" needs handles and reconcile`, set.Name)
	}
	for _, s := range r.sets {
		if s.Name == set.Name {
			return fmt.Errorf(`resource set "%s" is already defined`, set.Name)
		}
	}
	r.sets = append(r.sets, set)
	return nil
}

// MustAdd is Add for declarations in code: it panics on an invalid set and returns the router.
func (r *ResourceRouter) MustAdd(set ResourceSet) *ResourceRouter {
	if err := r.Add(set); err != nil {
		panic(err)
	}
	return r
}

// Skipped counts the objects no set handled since the router was made.
func (r *ResourceRouter) Skipped() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.skipped
}

// Route answers req; it is a ReconcileFunc (Controller.Reconcile(router.Route)).
func (r *ResourceRouter) Route(ctx context.Context, req *Request) (*Result, error) {
	if !req.Exists() {
		return &Result{}, nil
	}
	var matches []*ResourceSet
	for i := range r.sets {
		if r.sets[i].Handles(req) {
			matches = append(matches, &r.sets[i])
		}
	}
	switch len(matches) {
	case 1:
		chosen := matches[0]
		setContext := map[string]any{}
		if chosen.InitContext != nil {
			if c := chosen.InitContext(req); c != nil {
				setContext = c
			}
		}
		return chosen.Reconcile(ctx, req, setContext)
	case 0:
		r.mu.Lock()
		r.skipped++
		r.mu.Unlock()
		log := r.Log
		if log == nil {
			log = defaultLogger()
		}
		log.Debug("no resource set handles the object: skipped", "key", req.Namespace+"/"+req.Name)
		return &Result{}, nil
	}
	names := make([]string, len(matches))
	for i, s := range matches {
		names[i] = `"` + s.Name + `"` // as the other SDKs: no escaping
	}
	message := fmt.Sprintf("the object matches %d resource sets: %s; exactly one must handle it",
		len(matches), strings.Join(names, ", "))
	res := &Result{}
	res.SetError(true, message)
	res.SetCondition("Reconciled", ConditionFalse, ReasonAmbiguousRoute, message)
	res.Event(EventWarning, ReasonAmbiguousRoute, message)
	return res, nil
}
