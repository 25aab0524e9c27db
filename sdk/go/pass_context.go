package ctrlhost

import (
	"bytes"
	"encoding/json"
	"math/big"
)

// Per-pass flags with a conventional meaning (any name may be used): whether later resources
// may update what exists, and whether an earlier one found an update necessary.
const (
	UpdateAllowed   = "updateAllowed"
	UpdateNecessary = "updateNecessary"
)

// StepFunc is a resource's step in one pass of a DependentChain or CrudResource: it runs before
// the resource is created or updated, with its desired object (which it may change) and its
// current state (nil: absent). It may cancel the rest of the pass, cancel only this resource,
// and set or read flags (PassContext). An error fails the reconcile (retryable, or terminal when
// wrapped by Terminal), prefixed with the resource.
type StepFunc func(req *Request, desired, current Object, pc *PassContext) error

// PassContext is what the resources of one reconcile pass tell each other (as the C++, Python
// and Node SDKs' PassContext):
//   - CancelPass(reason): the rest of this pass does not run (later resources are neither
//     created, updated nor deleted); the step's own resource still is, unless it cancels itself
//     too;
//   - CancelResource(reason): only this resource is skipped this pass;
//   - SetFlag(name, value) / Flag(name): per-pass booleans (unset reads false) that later steps
//     read, e.g. UpdateAllowed and UpdateNecessary.
//
// A skipped resource that exists is kept as it is (FreezeOnto: its current values for the
// fields the pass would set); one that does not exist is not created.
//
// A PassContext belongs to one pass: it is not safe for concurrent use.
type PassContext struct {
	flags             map[string]bool
	passCancelled     bool
	passReason        string
	resourceCancelled bool
	resourceReason    string
}

// CancelPass cancels the rest of the pass; the first reason wins.
func (c *PassContext) CancelPass(reason string) {
	if !c.passCancelled {
		c.passCancelled, c.passReason = true, reason
	}
}

// CancelResource skips the current resource this pass; the first reason wins.
func (c *PassContext) CancelResource(reason string) {
	if !c.resourceCancelled {
		c.resourceCancelled, c.resourceReason = true, reason
	}
}

// SetFlag sets a per-pass flag.
func (c *PassContext) SetFlag(name string, value bool) {
	if c.flags == nil {
		c.flags = map[string]bool{}
	}
	c.flags[name] = value
}

// Flag reads a per-pass flag (false when unset).
func (c *PassContext) Flag(name string) bool { return c.flags[name] }

// Flags is a copy of every flag set so far (never nil).
func (c *PassContext) Flags() map[string]bool {
	out := make(map[string]bool, len(c.flags))
	for k, v := range c.flags {
		out[k] = v
	}
	return out
}

// PassCancelled reports whether a step cancelled the pass, and the first reason given.
func (c *PassContext) PassCancelled() (bool, string) { return c.passCancelled, c.passReason }

// ResourceCancelled reports whether the current step cancelled its resource, and why.
func (c *PassContext) ResourceCancelled() (bool, string) {
	return c.resourceCancelled, c.resourceReason
}

func (c *PassContext) beginStep() { c.resourceCancelled, c.resourceReason = false, "" }

// FreezeOnto is the fields of desired with their values in current (fields absent from current
// left out): applying it leaves the object as it is. apiVersion, kind, metadata.name and
// metadata.namespace come from desired.
func FreezeOnto(desired, current Object) Object {
	out, _ := project(desired, current).(map[string]any)
	if out == nil {
		out = Object{}
	}
	for _, key := range []string{"apiVersion", "kind"} {
		if v, ok := desired[key]; ok {
			out[key] = v
		}
	}
	if meta, ok := desired["metadata"].(map[string]any); ok {
		for _, key := range []string{"name", "namespace"} {
			v, ok := meta[key]
			if !ok {
				continue
			}
			outMeta, isMap := out["metadata"].(map[string]any)
			if !isMap {
				outMeta = map[string]any{}
				out["metadata"] = outMeta
			}
			outMeta[key] = v
		}
	}
	return out
}

func project(desired, current any) any {
	d, ok1 := desired.(map[string]any)
	c, ok2 := current.(map[string]any)
	if !ok1 || !ok2 {
		return DeepCopy(current)
	}
	out := map[string]any{}
	for k, v := range d {
		if cv, ok := c[k]; ok {
			out[k] = project(v, cv)
		}
	}
	return out
}

// IsSubset reports whether every field of desired has the same value in current (objects
// compared key by key, recursively; arrays and scalars whole; numbers by value, so the
// json.Number 2 of a request equals an int 2), as the other SDKs' IsSubset.
func IsSubset(desired, current any) bool {
	d, ok1 := desired.(map[string]any)
	c, ok2 := current.(map[string]any)
	if ok1 && ok2 {
		for k, v := range d {
			cv, ok := c[k]
			if !ok || !IsSubset(v, cv) {
				return false
			}
		}
		return true
	}
	return jsonEqual(desired, current)
}

// jsonEqual compares two JSON values as JSON: numbers by value, whatever their Go type.
func jsonEqual(a, b any) bool {
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && x.Cmp(y) == 0
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := plain(b).(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := plain(b).([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case string, bool, nil:
		return a == plain(b)
	}
	// Other Go values (map[string]string, []string, structs): compare their JSON.
	pa, pb := plain(a), plain(b)
	if !isPlain(pa) || !isPlain(pb) {
		return false
	}
	return jsonEqual(pa, pb)
}

func isPlain(v any) bool {
	switch v.(type) {
	case map[string]any, []any, string, bool, nil, json.Number:
		return true
	}
	_, ok := number(v)
	return ok
}

// notJSON stands for a value encoding/json cannot write: it equals nothing.
type notJSON struct{}

// plain is v as plain JSON values (notJSON when it is not JSON).
func plain(v any) any {
	if isPlain(v) {
		return v
	}
	n, err := normalizeJSON(v)
	if err != nil {
		return notJSON{}
	}
	return n
}

// number is v as an exact rational when it is a JSON number.
func number(v any) (*big.Rat, bool) {
	r := new(big.Rat)
	switch n := v.(type) {
	case json.Number:
		if _, ok := r.SetString(string(n)); !ok {
			return nil, false
		}
	case int:
		r.SetInt64(int64(n))
	case int8:
		r.SetInt64(int64(n))
	case int16:
		r.SetInt64(int64(n))
	case int32:
		r.SetInt64(int64(n))
	case int64:
		r.SetInt64(n)
	case uint:
		r.SetInt(new(big.Int).SetUint64(uint64(n)))
	case uint8:
		r.SetInt64(int64(n))
	case uint16:
		r.SetInt64(int64(n))
	case uint32:
		r.SetInt64(int64(n))
	case uint64:
		r.SetInt(new(big.Int).SetUint64(n))
	case float32:
		if r.SetFloat64(float64(n)) == nil {
			return nil, false
		}
	case float64:
		if r.SetFloat64(n) == nil {
			return nil, false
		}
	default:
		return nil, false
	}
	return r, true
}

// normalizeJSON is v as plain JSON values (map[string]any, []any, json.Number, string, bool,
// nil) through encoding/json.
func normalizeJSON(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// DeepCopy copies a JSON value (maps and slices recursively; other values as they are).
func DeepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = DeepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = DeepCopy(e)
		}
		return out
	case map[string]string:
		out := make(map[string]string, len(x))
		for k, e := range x {
			out[k] = e
		}
		return out
	case []string:
		return append([]string(nil), x...)
	default:
		return v
	}
}
