package ctrlhost

import "context"

// Handlers is the upsert/delete style over a ReconcileFunc (the same rules as the other SDKs):
// OnUpsert runs while the object exists and is not being deleted; OnDelete runs when the request
// is finalizing (Finalized is set when it answers without error) and for the deletion notice of
// a gone primary (answer only events, an error or a requeue then). An object being deleted
// without our finalizer gets an empty answer. Either may be nil. Safe for concurrent use.
//
//	ctrl.Reconcile(ctrlhost.Handlers{OnUpsert: upsert, OnDelete: cleanup}.Reconcile)
type Handlers struct {
	OnUpsert ReconcileFunc
	OnDelete ReconcileFunc
}

// Reconcile is the ReconcileFunc dispatching to the handlers.
func (h Handlers) Reconcile(ctx context.Context, req *Request) (*Result, error) {
	call := func(fn ReconcileFunc) (*Result, error) {
		if fn == nil {
			return &Result{}, nil
		}
		res, err := fn(ctx, req)
		if res == nil && err == nil {
			res = &Result{}
		}
		return res, err
	}
	switch {
	case !req.Exists():
		return call(h.OnDelete)
	case req.Finalizing:
		res, err := call(h.OnDelete)
		if err == nil && res.Err == nil {
			res.Finalized = true
		}
		return res, err
	case req.Deleting():
		return &Result{}, nil // going away without our finalizer
	default:
		return call(h.OnUpsert)
	}
}
