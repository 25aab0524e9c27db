// The WebApp controller (apps.ctrlhost.dev/v1alpha1) on the Go SDK.
//
// The same behaviour as the C++ reference plugin (plugins/webapp/webapp.cc) on the same inputs:
// a WebApp owns a ConfigMap (<name>-config, spec.config), a Deployment (<name>: spec.image,
// spec.replicas, spec.port, spec.env) and a Service (<name>: spec.port); status reports
// observedGeneration, replicas, readyReplicas (from the Deployment child), url and the
// conditions Ready and Progressing. The finalizer apps.ctrlhost.dev/external-record stands for
// cleanup outside the cluster: one record file per WebApp (RecordStore), removed before the
// answer says finalized.
//
// Reconciles run concurrently for different WebApps (never for one: the host guarantees per-key
// exclusivity); RecordStore touches one file per key, so it needs no lock.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"syscall"

	ctrlhost "ctrlhost.dev/sdk/go"
)

const (
	group     = "apps.ctrlhost.dev"
	version   = "v1alpha1"
	kind      = "WebApp"
	finalizer = "apps.ctrlhost.dev/external-record"
)

// spec is a validated WebApp spec.
type spec struct {
	image          string
	replicas, port int64
	env, config    map[string]string
}

func stringMap(s map[string]any, field string) (map[string]string, error) {
	value := s[field]
	if value == nil {
		return map[string]string{}, nil
	}
	m, ok := value.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("spec.%s must be a map of strings", field)
	}
	out := map[string]string{}
	for _, key := range sortedKeys(m) {
		str, ok := m[key].(string)
		if !ok {
			return nil, fmt.Errorf("spec.%s.%s must be a string", field, key)
		}
		out[key] = str
	}
	return out, nil
}

func intField(s map[string]any, field string, fallback, lo, hi int64) (int64, error) {
	if s[field] == nil {
		return fallback, nil
	}
	v, ok := ctrlhost.Int(s, field)
	if !ok {
		return 0, fmt.Errorf("spec.%s must be an integer", field)
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("spec.%s must be between %d and %d, not %d", field, lo, hi, v)
	}
	return v, nil
}

// parseSpec validates a spec with the C++ plugin's messages.
func parseSpec(s map[string]any) (*spec, error) {
	image, _ := s["image"].(string)
	if image == "" {
		return nil, errors.New("spec.image is required (a container image reference)")
	}
	out := &spec{image: image}
	var err error
	if out.replicas, err = intField(s, "replicas", 1, 0, 1000); err != nil {
		return nil, err
	}
	if out.port, err = intField(s, "port", 8080, 1, 65535); err != nil {
		return nil, err
	}
	if out.env, err = stringMap(s, "env"); err != nil {
		return nil, err
	}
	if out.config, err = stringMap(s, "config"); err != nil {
		return nil, err
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// configHashAnnotation is the pod template annotation holding ctrlhost.ConfigHash(spec.config),
// as the other languages' WebApp plugins name it.
const configHashAnnotation = "apps.ctrlhost.dev/config-hash"

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// desireChildren builds the children with the SDK's builders (sdk/go/builders.go): the same
// objects as the C++, Python and Node WebApp plugins, checked by e2e/conformance.
func desireChildren(req *ctrlhost.Request, s *spec, res *ctrlhost.Result) error {
	name := req.Name
	configName := name + "-config"
	labels := ctrlhost.CommonLabels("webapp", name)
	selector := ctrlhost.SelectorLabels("webapp", name)
	// The pod template carries the configuration's hash, so pods restart when (and only when)
	// the configuration changes.
	hash, err := ctrlhost.ConfigHash(toAny(s.config))
	if err != nil {
		return err
	}
	res.Desire(ctrlhost.BuildConfigMap(ctrlhost.Meta{Name: configName, Labels: labels}, s.config))

	container := ctrlhost.Object{
		"name":    "web",
		"image":   s.image,
		"ports":   []any{map[string]any{"name": "http", "containerPort": s.port}},
		"envFrom": []any{map[string]any{"configMapRef": map[string]any{"name": configName}}},
	}
	if len(s.env) > 0 {
		var env []any
		for _, k := range sortedKeys(s.env) {
			env = append(env, map[string]any{"name": k, "value": s.env[k]})
		}
		container["env"] = env
	}
	res.Desire(ctrlhost.BuildDeployment(ctrlhost.Deployment{
		Name:           name,
		Labels:         labels,
		Selector:       selector,
		Replicas:       ctrlhost.Replicas(int32(s.replicas)), // 0..1000: parseSpec checked it
		Containers:     []ctrlhost.Object{container},
		PodAnnotations: map[string]string{configHashAnnotation: hash},
	}))
	res.Desire(ctrlhost.BuildService(ctrlhost.Service{
		Name:     name,
		Labels:   labels,
		Selector: selector,
		Ports:    []ctrlhost.ServicePort{{Name: "http", Port: int32(s.port), TargetPort: "http"}},
	}))
	return nil
}

func reportStatus(req *ctrlhost.Request, s *spec, res *ctrlhost.Result) {
	var ready int64
	if dep := req.Child("Deployment", req.Name); dep != nil {
		if r, ok := ctrlhost.Int(dep, "status.readyReplicas"); ok {
			ready = r
		}
	}
	res.MergeStatus(map[string]any{
		"observedGeneration": req.Generation(),
		"replicas":           s.replicas,
		"readyReplicas":      ready,
		"url":                fmt.Sprintf("http://%s.%s.svc:%d", req.Name, req.Namespace, s.port),
	})
	progress := fmt.Sprintf("%d/%d replicas ready", ready, s.replicas)
	if ready >= s.replicas {
		res.SetCondition("Ready", ctrlhost.ConditionTrue, "AllReplicasReady", progress)
		res.SetCondition("Progressing", ctrlhost.ConditionFalse, "Stable", progress)
	} else {
		res.SetCondition("Ready", ctrlhost.ConditionFalse, "ReplicasNotReady", progress)
		res.SetCondition("Progressing", ctrlhost.ConditionTrue, "RollingOut", progress)
	}
}

// recordError is a RecordStore failure; invalid: a bad name, retrying cannot help.
type recordError struct {
	msg     string
	invalid bool
}

func (e *recordError) Error() string { return e.msg }

// RecordStore keeps one JSON file per WebApp, "<namespace>_<name>.json", written atomically
// (temporary file and rename) and only when its content changes.
type RecordStore struct{ Dir string }

// DefaultRecordDir is $WEBAPP_RECORD_DIR, else $TMPDIR/ctrlhost-webapp-records.
func DefaultRecordDir() string {
	if d := os.Getenv("WEBAPP_RECORD_DIR"); d != "" {
		return d
	}
	tmp := os.Getenv("TMPDIR")
	if tmp == "" {
		tmp = "/tmp"
	}
	return tmp + "/ctrlhost-webapp-records"
}

var dnsName = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$`)

func (s RecordStore) pathFor(ns, name string) (string, error) {
	ok := func(v string) bool { return len(v) > 0 && len(v) <= 253 && dnsName.MatchString(v) }
	if !ok(ns) || !ok(name) {
		return "", &recordError{msg: `"` + ns + "/" + name + `" is not a valid namespace/name`, invalid: true}
	}
	return fmt.Sprintf("%s/%s_%s.json", s.Dir, ns, name), nil
}

// osReason is the C library's words for an errno ("Permission denied"), as the other plugins
// report it.
func osReason(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		text := errno.Error()
		return strings.ToUpper(text[:1]) + text[1:]
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func recordJSON(record map[string]any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(record) // strings and integers only: cannot fail
	return buf.Bytes()     // Encode ends the text with "\n", as the other plugins do
}

func (s RecordStore) read(ns, name string) map[string]any {
	path, err := s.pathFor(ns, name)
	if err != nil {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var v map[string]any
	if json.Unmarshal(data, &v) != nil {
		return nil
	}
	return v
}

// Write stores the record unless the same one is stored.
func (s RecordStore) Write(ns, name string, record map[string]any) error {
	path, err := s.pathFor(ns, name)
	if err != nil {
		return err
	}
	text := recordJSON(record)
	var want map[string]any
	_ = json.Unmarshal(text, &want)
	if reflect.DeepEqual(s.read(ns, name), want) {
		return nil
	}
	if err := os.Mkdir(s.Dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return &recordError{msg: fmt.Sprintf("mkdir %s: %s", s.Dir, osReason(err))}
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, text, 0o666); err != nil {
		return &recordError{msg: "cannot write " + tmp}
	}
	if err := os.Rename(tmp, path); err != nil {
		return &recordError{msg: fmt.Sprintf("rename %s: %s", tmp, osReason(err))}
	}
	return nil
}

// Remove deletes the record; a missing one is not an error.
func (s RecordStore) Remove(ns, name string) error {
	path, err := s.pathFor(ns, name)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &recordError{msg: fmt.Sprintf("remove %s: %s", path, osReason(err))}
	}
	return nil
}

func upsert(records RecordStore, req *ctrlhost.Request) *ctrlhost.Result {
	s, err := parseSpec(req.Spec())
	if err != nil {
		// Retrying cannot fix the spec; the next edit of the WebApp reconciles it again.
		// Children that exist are kept as they are.
		msg := err.Error()
		res := &ctrlhost.Result{}
		res.SetError(true, msg)
		res.MergeStatus(map[string]any{"observedGeneration": req.Generation()})
		res.SetCondition("Ready", ctrlhost.ConditionFalse, "InvalidSpec", msg)
		res.SetCondition("Progressing", ctrlhost.ConditionFalse, "InvalidSpec", msg)
		res.Event(ctrlhost.EventWarning, "InvalidSpec", msg)
		return res
	}
	res := &ctrlhost.Result{}
	if err := desireChildren(req, s, res); err != nil {
		// Not reached: the spec holds strings only, which always hash.
		res.SetError(true, err.Error())
		return res
	}
	reportStatus(req, s, res)
	record := map[string]any{"uid": req.UID, "namespace": req.Namespace, "name": req.Name,
		"image": s.image, "replicas": s.replicas, "port": s.port}
	if err := records.Write(req.Namespace, req.Name, record); err != nil {
		// The children and status are still applied; the record is retried with backoff.
		var re *recordError
		res.SetError(errors.As(err, &re) && re.invalid, "external record: "+err.Error())
	}
	return res
}

func remove(records RecordStore, req *ctrlhost.Request) *ctrlhost.Result {
	if !req.Finalizing {
		return &ctrlhost.Result{} // deletion notice: nothing left to forget
	}
	if err := records.Remove(req.Namespace, req.Name); err != nil {
		res := &ctrlhost.Result{}
		res.SetError(false, "removing the external record: "+err.Error())
		return res
	}
	res := &ctrlhost.Result{}
	res.Event(ctrlhost.EventNormal, "RecordRemoved", "external record removed")
	return res // Handlers sets Finalized
}

// NewController is the controller "webapp".
func NewController(records RecordStore) *ctrlhost.Controller {
	h := ctrlhost.Handlers{
		OnUpsert: func(_ context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
			return upsert(records, req), nil
		},
		OnDelete: func(_ context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
			return remove(records, req), nil
		},
	}
	return ctrlhost.NewController("webapp").For(group, version, kind).
		Owns("apps", "v1", "Deployment").Owns("", "v1", "Service").Owns("", "v1", "ConfigMap").
		Finalizer(finalizer).MaxConcurrent(4).Reconcile(h.Reconcile)
}
