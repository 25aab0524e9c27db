package ctrlhosttest

// What Replay compares: an answer normalized to a JSON document (so that key order, 1 vs 1.0,
// the order of desired objects and an error's message do not count), after the secret
// redaction the host applies to what it records.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"

	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// parseJSON is data as a JSON value (numbers as json.Number), or its text when it is not JSON.
func parseJSON(data []byte) any {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return string(data)
	}
	return v
}

// marshalJSON is v as JSON without HTML escaping (v holds only decoded JSON values).
func marshalJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // decoded JSON always encodes
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// secretDigest is what the host records instead of a Secret's value: "sha256:" and the
// lowercase hex SHA-256 of a string's UTF-8 bytes; "redacted" for a value that is not a string.
// A value that is a digest already is kept: a controller that copies a Secret's value from a
// replayed call (which carries digests) answers as it did when recorded.
func secretDigest(v any) any {
	s, ok := v.(string)
	if !ok {
		return "redacted"
	}
	if digestPattern.MatchString(s) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// redactValues replaces every value of obj, when it is a JSON object.
func redactValues(obj any) {
	if m, ok := obj.(map[string]any); ok {
		for k, v := range m {
			m[k] = secretDigest(v)
		}
	}
}

// redactResponse applies the host's secret redaction to an answer: desired v1 Secrets' data and
// stringData, and the same in patches of Secrets (owned ones, or the primary when it is one).
func redactResponse(resp *pb.ReconcileResponse, primaryIsSecret bool) {
	for i, data := range resp.GetDesiredObjects() {
		obj, ok := parseJSON(data).(map[string]any)
		if !ok || obj["apiVersion"] != "v1" || obj["kind"] != "Secret" {
			continue
		}
		redactValues(obj["data"])
		redactValues(obj["stringData"])
		resp.DesiredObjects[i] = marshalJSON(obj)
	}
	for _, p := range resp.GetPatches() {
		owned := p.GetTarget() == pb.PatchTarget_PATCH_TARGET_OWNED && p.GetApiVersion() == "v1" && p.GetKind() == "Secret"
		if !owned && !(p.GetTarget() == pb.PatchTarget_PATCH_TARGET_PRIMARY && primaryIsSecret) {
			continue
		}
		body := parseJSON(p.GetPatch())
		switch b := body.(type) {
		case map[string]any:
			if p.GetType() == pb.PatchType_PATCH_TYPE_MERGE_PATCH {
				redactValues(b["data"])
				redactValues(b["stringData"])
			}
		case []any:
			if p.GetType() == pb.PatchType_PATCH_TYPE_JSON_PATCH {
				redactJSONPatch(b)
			}
		default:
			continue // not JSON: nothing to redact
		}
		p.Patch = marshalJSON(body)
	}
}

// redactJSONPatch: an operation on /data or /stringData (its object's values), or on one key
// under them (its value).
func redactJSONPatch(ops []any) {
	for _, o := range ops {
		op, _ := o.(map[string]any)
		path, _ := op["path"].(string)
		value, has := op["value"]
		switch {
		case !has:
		case path == "/data" || path == "/stringData":
			redactValues(value)
		case strings.HasPrefix(path, "/data/") || strings.HasPrefix(path, "/stringData/"):
			op["value"] = secretDigest(value)
		}
	}
}

// How the protocol's enums read in a normalized answer (an unknown value stays its number).
var (
	conditionStatusNames = map[int32]string{int32(pb.ConditionStatus_CONDITION_STATUS_TRUE): "True",
		int32(pb.ConditionStatus_CONDITION_STATUS_FALSE): "False", int32(pb.ConditionStatus_CONDITION_STATUS_UNKNOWN): "Unknown"}
	eventTypeNames = map[int32]string{int32(pb.EventType_EVENT_TYPE_NORMAL): "Normal",
		int32(pb.EventType_EVENT_TYPE_WARNING): "Warning"}
	errorKindNames = map[int32]string{int32(pb.ErrorKind_ERROR_KIND_RETRYABLE): "retryable",
		int32(pb.ErrorKind_ERROR_KIND_TERMINAL): "terminal"}
	patchTargetNames = map[int32]string{int32(pb.PatchTarget_PATCH_TARGET_PRIMARY): "primary",
		int32(pb.PatchTarget_PATCH_TARGET_PRIMARY_STATUS): "status", int32(pb.PatchTarget_PATCH_TARGET_OWNED): "owned"}
	patchTypeNames = map[int32]string{int32(pb.PatchType_PATCH_TYPE_JSON_PATCH): "json",
		int32(pb.PatchType_PATCH_TYPE_MERGE_PATCH): "merge"}
)

func enumName(names map[int32]string, value int32) any {
	if name, ok := names[value]; ok {
		return name
	}
	return json.Number(strconv.Itoa(int(value)))
}

// replayMembers are the members of a normalized answer, in the order a difference names them.
var replayMembers = []string{"desired", "patches", "status", "conditions", "events", "requeueAfter", "error",
	"finalized"}

// withoutEmpty drops the members whose value is "".
func withoutEmpty(m map[string]any) map[string]any {
	for k, v := range m {
		if v == "" {
			delete(m, k)
		}
	}
	return m
}

// objectKey is "<apiVersion> <kind> <namespace>/<name>" ("<apiVersion> <kind> <name>" without a
// namespace); "desired_objects[i]" for something that is not a JSON object.
func objectKey(v any, i int) string {
	obj, ok := v.(map[string]any)
	if !ok {
		return fmt.Sprintf("desired_objects[%d]", i)
	}
	text := func(v any) string { // a string as it is, anything else as JSON ("null" when absent)
		if s, ok := v.(string); ok {
			return s
		}
		return string(marshalJSON(v))
	}
	meta, _ := obj["metadata"].(map[string]any)
	name := text(meta["name"])
	if ns, _ := meta["namespace"].(string); ns != "" {
		name = ns + "/" + name
	}
	return text(obj["apiVersion"]) + " " + text(obj["kind"]) + " " + name
}

func seconds(d *durationpb.Duration) float64 {
	return float64(d.GetSeconds()) + float64(d.GetNanos())/1e9
}

// normalize is the comparable form of an answer; members that are empty are left out.
func normalize(resp *pb.ReconcileResponse) map[string]any {
	out := map[string]any{}
	desired := map[string]any{}
	for i, data := range resp.GetDesiredObjects() {
		obj := parseJSON(data)
		key := objectKey(obj, i)
		for _, taken := desired[key]; taken; _, taken = desired[key] { // the same object twice: both count
			key += " (again)"
		}
		desired[key] = obj
	}
	var patches, events []any
	for _, p := range resp.GetPatches() {
		patches = append(patches, withoutEmpty(map[string]any{
			"target": enumName(patchTargetNames, int32(p.GetTarget())), "apiVersion": p.GetApiVersion(),
			"kind": p.GetKind(), "name": p.GetName(), "type": enumName(patchTypeNames, int32(p.GetType())),
			"body": parseJSON(p.GetPatch()), "resourceVersion": p.GetResourceVersion()}))
	}
	conditions := map[string]any{}
	for _, c := range resp.GetConditions() {
		conditions[c.GetType()] = map[string]any{"status": enumName(conditionStatusNames, int32(c.GetStatus())),
			"reason": c.GetReason(), "message": c.GetMessage()}
	}
	for _, e := range resp.GetEvents() {
		events = append(events, map[string]any{"type": enumName(eventTypeNames, int32(e.GetType())),
			"reason": e.GetReason(), "message": e.GetMessage()})
	}
	if e := resp.GetError(); e != nil {
		m := withoutEmpty(map[string]any{"kind": enumName(errorKindNames, int32(e.GetKind())), "reason": e.GetReason()})
		if e.GetRetryAfter() != nil {
			m["retryAfter"] = seconds(e.GetRetryAfter())
		}
		out["error"] = m
	}
	if r := resp.GetRequeueAfter(); r != nil {
		out["requeueAfter"] = seconds(r)
	}
	if len(resp.GetStatus()) > 0 {
		out["status"] = parseJSON(resp.GetStatus())
	}
	if resp.GetFinalized() {
		out["finalized"] = true
	}
	if len(desired) > 0 {
		out["desired"] = desired
	}
	if len(patches) > 0 {
		out["patches"] = patches
	}
	if len(conditions) > 0 {
		out["conditions"] = conditions
	}
	if len(events) > 0 {
		out["events"] = events
	}
	return out
}

// differingMembers names the members whose values differ, in replayMembers order.
func differingMembers(recorded, replayed map[string]any) []string {
	var names []string
	for _, name := range replayMembers {
		v, inRecorded := recorded[name]
		w, inReplayed := replayed[name]
		if inRecorded != inReplayed || !jsonEqual(v, w) {
			names = append(names, name)
		}
	}
	return names
}

// jsonEqual compares JSON values; numbers by value (1 equals 1.0; integers exactly, also beyond
// 2^53).
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number, float64:
		return numbersEqual(a, b)
	}
	return a == b
}

// numbersEqual: two integer literals compare exactly; anything else as float64.
func numbersEqual(a, b any) bool {
	x, xok := a.(json.Number)
	y, yok := b.(json.Number)
	if xok && yok {
		if x == y {
			return true
		}
		p, pok := new(big.Int).SetString(string(x), 10)
		q, qok := new(big.Int).SetString(string(y), 10)
		if pok && qok {
			return p.Cmp(q) == 0
		}
	}
	p, pok := float(a)
	q, qok := float(b)
	return pok && qok && p == q
}

func float(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(n), 64)
		return f, err == nil
	case float64:
		return n, true
	}
	return 0, false
}

// diffOp is one operation of the JSON patch (RFC 6902) that turns one value into another, with
// the value it removes or replaces (old).
type diffOp struct {
	op, path   string
	old, value any
}

func pointer(path, key string) string {
	return path + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// jsonDiff is the patch that turns before into after (add, remove, replace), descending into
// objects and arrays so that each operation is small; object keys in sorted order.
func jsonDiff(before, after any, path string) []diffOp {
	if jsonEqual(before, after) {
		return nil
	}
	switch b := before.(type) {
	case map[string]any:
		a, ok := after.(map[string]any)
		if !ok {
			break
		}
		var ops []diffOp
		for _, k := range sortedKeys(b) {
			if _, kept := a[k]; !kept {
				ops = append(ops, diffOp{op: "remove", path: pointer(path, k), old: b[k]})
			}
		}
		for _, k := range sortedKeys(a) {
			if old, ok := b[k]; ok {
				ops = append(ops, jsonDiff(old, a[k], pointer(path, k))...)
			} else {
				ops = append(ops, diffOp{op: "add", path: pointer(path, k), value: a[k]})
			}
		}
		return ops
	case []any:
		a, ok := after.([]any)
		if !ok {
			break
		}
		var ops []diffOp
		common := len(b)
		if len(a) < common {
			common = len(a)
		}
		for i := 0; i < common; i++ {
			ops = append(ops, jsonDiff(b[i], a[i], pointer(path, strconv.Itoa(i)))...)
		}
		for i := len(b) - 1; i >= common; i-- {
			ops = append(ops, diffOp{op: "remove", path: pointer(path, strconv.Itoa(i)), old: b[i]})
		}
		for i := common; i < len(a); i++ {
			ops = append(ops, diffOp{op: "add", path: pointer(path, strconv.Itoa(i)), value: a[i]})
		}
		return ops
	}
	return []diffOp{{op: "replace", path: path, old: before, value: after}}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
