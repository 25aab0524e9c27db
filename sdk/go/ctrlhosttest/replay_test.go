package ctrlhosttest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	ctrlhost "ctrlhost.dev/sdk/go"
	"ctrlhost.dev/sdk/go/ctrlhosttest"
	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The recordings here are written by the test itself, following the format of plugin.proto
// ("Recordings") rather than with the code under test: "CTRLREC\n", then the header and the
// records, each preceded by its length as a varint.

// greeterOptions vary the greeter between the recorded build and the new one.
type greeterOptions struct {
	text  func(who string) string    // the greeting ("Hello, <who>!")
	token func(token string) string  // the Secret's value (the token itself)
	panic string                     // panic when spec.name is this
	extra func(res *ctrlhost.Result) // anything more the answer carries
	build func(*ctrlhost.Controller) // changes to the declaration
}

// greeter answers a Greeting with a ConfigMap, a Secret when spec.token is set, a status, a
// condition and an event; a retryable error with a timestamp when spec.name is missing.
func greeter(o greeterOptions) *ctrlhost.Controller {
	if o.text == nil {
		o.text = func(who string) string { return "Hello, " + who + "!" }
	}
	if o.token == nil {
		o.token = func(token string) string { return token }
	}
	c := ctrlhost.NewController("greeter").For("example.com", "v1", "Greeting").
		Owns("", "v1", "ConfigMap").Owns("", "v1", "Secret").
		Reconcile(func(_ context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
			who, _ := ctrlhost.String(req.Object, "spec.name")
			if who == "" {
				return nil, fmt.Errorf("spec.name is missing (checked at %s)", time.Now().Format(time.RFC3339Nano))
			}
			if who == o.panic {
				panic("no greeting for " + who)
			}
			res := &ctrlhost.Result{}
			cm := res.Desire(ctrlhost.NewObject("v1", "ConfigMap", req.Name+"-greeting"))
			cm["data"] = map[string]any{"text": o.text(who)}
			if token, _ := ctrlhost.String(req.Object, "spec.token"); token != "" {
				secret := res.Desire(ctrlhost.NewObject("v1", "Secret", req.Name+"-token"))
				secret["stringData"] = map[string]any{"token": o.token(token)}
			}
			res.MergeStatus(map[string]any{"greetings": 1})
			res.SetCondition("Ready", ctrlhost.ConditionTrue, "Greeted", "")
			res.Event(ctrlhost.EventNormal, "Greeted", o.text(who))
			if o.extra != nil {
				o.extra(res)
			}
			return res, nil
		})
	if o.build != nil {
		o.build(c)
	}
	return c
}

func greetingCall(name string, spec map[string]any) *pb.ReconcileCall {
	obj, _ := json.Marshal(map[string]any{"apiVersion": "example.com/v1", "kind": "Greeting",
		"metadata": map[string]any{"name": name, "namespace": "prod", "uid": "u-" + name}, "spec": spec})
	return &pb.ReconcileCall{Controller: "greeter", Namespace: "prod", Name: name, Uid: "u-" + name,
		Reason: pb.Reason_REASON_PRIMARY_CHANGED, Attempt: 1, Object: obj}
}

func digest(value string) string {
	sum := sha256.Sum256([]byte(value))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// recorded is the record the host would have written for c's answer to call: the Secrets'
// values redacted (by the test's own reading of the rule), desired objects in reverse order and
// numbers written as 1.0, which must not count.
func recorded(t *testing.T, c *ctrlhost.Controller, seq uint64, call *pb.ReconcileCall) *pb.ReconcileRecord {
	t.Helper()
	resp := c.Invoke(context.Background(), seq, call, ctrlhost.AllCapabilities())
	var desired [][]byte
	for _, d := range resp.DesiredObjects {
		var obj map[string]any
		if err := json.Unmarshal(d, &obj); err != nil {
			t.Fatal(err)
		}
		if obj["kind"] == "Secret" {
			data := obj["stringData"].(map[string]any)
			for k, v := range data {
				data[k] = digest(v.(string))
			}
		}
		text, _ := json.Marshal(obj)
		desired = append([][]byte{text}, desired...)
	}
	resp.DesiredObjects = desired
	if len(resp.Status) > 0 {
		resp.Status = bytes.ReplaceAll(resp.Status, []byte(":1}"), []byte(":1.0}"))
	}
	return &pb.ReconcileRecord{Sequence: seq, Call: call, Time: timestamppb.New(time.Unix(1700000000+int64(seq), 0)),
		Took: durationpb.New(3 * time.Millisecond), Answer: &pb.ReconcileRecord_Response{Response: resp},
		Capabilities: ctrlhost.AllCapabilities().Sorted(),
		Action:       &pb.HostAction{Result: pb.HostActionResult_HOST_ACTION_RESULT_WRITTEN, Writes: 3}}
}

func header(controller string) *pb.RecordingHeader {
	return &pb.RecordingHeader{Format: 1, Operator: "greetings", Plugin: "greeter-plugin", HostVersion: "0.9.0",
		Controller: &pb.RecordedController{Name: controller,
			Primary: &pb.RecordedKind{Group: "example.com", Version: "v1", Resource: "greetings", Kind: "Greeting",
				Namespaced: true, HasStatus: true}}}
}

// frame is msg preceded by its length as a varint.
func frame(t *testing.T, msg proto.Message) []byte {
	t.Helper()
	body, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.AppendUvarint(nil, uint64(len(body))), body...)
}

func writeRecording(t *testing.T, path string, h *pb.RecordingHeader, records ...*pb.ReconcileRecord) {
	t.Helper()
	data := append([]byte("CTRLREC\n"), frame(t, h)...)
	for _, r := range records {
		data = append(data, frame(t, r)...)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// greeterRecording writes the original greeter's answers into two files of dir: Ada (with a
// Secret) and a failed dispatch, then Bob and a Greeting without a name (an error answer).
func greeterRecording(t *testing.T, dir string) {
	t.Helper()
	c := greeter(greeterOptions{})
	failed := &pb.ReconcileRecord{Sequence: 2, Call: greetingCall("hi", map[string]any{"name": "Ada"}),
		Answer: &pb.ReconcileRecord_Failure{Failure: &pb.DispatchFailure{Code: 4, Message: "deadline exceeded"}}}
	writeRecording(t, filepath.Join(dir, "00000001.ctrlrec"), header("greeter"),
		recorded(t, c, 1, greetingCall("hi", map[string]any{"name": "Ada", "token": "s3cret"})), failed)
	writeRecording(t, filepath.Join(dir, "00000002.ctrlrec"), header("greeter"),
		recorded(t, c, 3, greetingCall("ho", map[string]any{"name": "Bob"})),
		recorded(t, c, 4, greetingCall("nameless", map[string]any{})))
}

func keysOf(res *ctrlhosttest.ReplayResult) []string {
	var keys []string
	for _, d := range res.Differences {
		keys = append(keys, d.Key+": "+strings.Join(d.Members, ", "))
	}
	return keys
}

func TestReplayOfTheSameControllerFindsNoDifference(t *testing.T) {
	dir := t.TempDir()
	greeterRecording(t, dir)
	res := ctrlhosttest.AssertReplay(t, greeter(greeterOptions{}), dir, ctrlhosttest.ReplayOptions{})
	if res.Compared != 3 || res.Same != 3 || res.Different != 0 || res.Skipped != 1 || len(res.Files) != 2 {
		t.Errorf("result %s", res)
	}
	// A single file, and a directory with one subdirectory per controller.
	res, err := ctrlhosttest.Replay(greeter(greeterOptions{}), filepath.Join(dir, "00000002.ctrlrec"), ctrlhosttest.ReplayOptions{})
	if err != nil || res.Compared != 2 || res.Same != 2 {
		t.Errorf("one file: %v %v", res, err)
	}
	root := t.TempDir()
	greeterRecording(t, filepath.Join(root, "greeter"))
	if res := ctrlhosttest.AssertReplay(t, greeter(greeterOptions{}), root, ctrlhosttest.ReplayOptions{}); res.Same != 3 {
		t.Errorf("per controller: %s", res)
	}
}

func TestReplayOfAChangedControllerNamesExactlyTheChangedKeys(t *testing.T) {
	dir := t.TempDir()
	greeterRecording(t, dir)
	changed := greeter(greeterOptions{text: func(who string) string {
		if who == "Bob" {
			return "Hi, Bob."
		}
		return "Hello, " + who + "!"
	}})
	res, err := ctrlhosttest.Replay(changed, dir, ctrlhosttest.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(res); !reflect.DeepEqual(got, []string{"prod/ho: desired, events"}) || res.Same != 2 {
		t.Fatalf("differences %q\n%s", got, res)
	}
	d := res.Differences[0]
	if d.File != filepath.Join(dir, "00000002.ctrlrec") || d.Sequence != 3 || d.Offset != 8+len(frame(t, header("greeter"))) {
		t.Errorf("where: %s offset %d sequence %d", d.File, d.Offset, d.Sequence)
	}
	want := []map[string]any{
		{"op": "replace", "path": "/desired/v1 ConfigMap prod~1ho-greeting/data/text", "value": "Hi, Bob."},
		{"op": "replace", "path": "/events/0/message", "value": "Hi, Bob."}}
	if got := d.Patch(); !reflect.DeepEqual(got, want) {
		t.Errorf("patch %v", got)
	}
	text := d.String()
	for _, line := range []string{fmt.Sprintf("00000002.ctrlrec: record at offset %d (sequence 3) prod/ho: desired, events differ", d.Offset),
		`~ /desired/v1 ConfigMap prod~1ho-greeting/data/text: "Hello, Bob!" -> "Hi, Bob."`} {
		if !strings.Contains(text, line) {
			t.Errorf("%q not in\n%s", line, text)
		}
	}
}

func TestReplayComparesSecretsRedactedAndErrorsByKindAndReason(t *testing.T) {
	dir := t.TempDir()
	greeterRecording(t, dir)
	// A new token value: the difference shows the digests, never the value.
	res, err := ctrlhosttest.Replay(greeter(greeterOptions{token: func(s string) string { return s + "2" }}), dir,
		ctrlhosttest.ReplayOptions{})
	if err != nil || !reflect.DeepEqual(keysOf(res), []string{"prod/hi: desired"}) {
		t.Fatalf("%v %v", res, err)
	}
	if text := res.String(); strings.Contains(text, "s3cret") || !strings.Contains(text, digest("s3cret2")) {
		t.Errorf("secret shown:\n%s", text)
	}
	// A panic is the new run's answer (a retryable error), compared like any other.
	res, err = ctrlhosttest.Replay(greeter(greeterOptions{panic: "Bob"}), dir, ctrlhosttest.ReplayOptions{})
	if err != nil || !reflect.DeepEqual(keysOf(res), []string{"prod/ho: desired, status, conditions, events, error"}) {
		t.Fatalf("%v %v", res, err)
	}
	if e := res.Differences[0].Replayed["error"]; !reflect.DeepEqual(e, map[string]any{"kind": "retryable"}) {
		t.Errorf("error member %v", e)
	}
	// An error's kind counts (its message does not: "nameless" carries a new time at each run).
	res, err = ctrlhosttest.Replay(greeter(greeterOptions{build: func(c *ctrlhost.Controller) {
		c.Reconcile(func(context.Context, *ctrlhost.Request) (*ctrlhost.Result, error) {
			return nil, ctrlhost.Terminal(errors.New("spec.name is missing"))
		})
	}}), dir, ctrlhosttest.ReplayOptions{})
	if err != nil || len(res.Differences) != 3 || !reflect.DeepEqual(res.Differences[2].Replayed["error"],
		map[string]any{"kind": "terminal"}) {
		t.Errorf("%v %v", res, err)
	}
}

func TestReplayRedactsPatchesOfSecrets(t *testing.T) {
	patches := func(res *ctrlhost.Result) {
		res.PatchOwned("v1", "Secret", "hi-token", ctrlhost.MergePatch,
			map[string]any{"data": map[string]any{"a": "x"}, "stringData": map[string]any{"b": 2}}, "")
		res.PatchOwned("v1", "Secret", "hi-token", ctrlhost.JSONPatch, []any{
			map[string]any{"op": "add", "path": "/data/a", "value": "x"},
			map[string]any{"op": "replace", "path": "/stringData", "value": map[string]any{"b": "y"}},
			map[string]any{"op": "remove", "path": "/data/c"}}, "")
		res.PatchOwned("v1", "ConfigMap", "hi-greeting", ctrlhost.MergePatch, map[string]any{"data": map[string]any{"a": "x"}}, "")
	}
	c := greeter(greeterOptions{extra: patches})
	rec := recorded(t, c, 1, greetingCall("hi", map[string]any{"name": "Ada"}))
	resp := rec.GetResponse()
	resp.Patches[0].Patch = []byte(fmt.Sprintf(`{"data":{"a":%q},"stringData":{"b":"redacted"}}`, digest("x")))
	resp.Patches[1].Patch = []byte(fmt.Sprintf(`[{"op":"add","path":"/data/a","value":%q},`+
		`{"op":"replace","path":"/stringData","value":{"b":%q}},{"op":"remove","path":"/data/c"}]`, digest("x"), digest("y")))
	dir := t.TempDir()
	writeRecording(t, filepath.Join(dir, "00000001.ctrlrec"), header("greeter"), rec)
	ctrlhosttest.AssertReplay(t, c, dir, ctrlhosttest.ReplayOptions{})
	// With secret data recorded, the values are compared as they are.
	h := header("greeter")
	h.SecretData = true
	writeRecording(t, filepath.Join(dir, "00000001.ctrlrec"), h, rec)
	res, err := ctrlhosttest.Replay(c, dir, ctrlhosttest.ReplayOptions{})
	if err != nil || !reflect.DeepEqual(keysOf(res), []string{"prod/hi: patches"}) {
		t.Errorf("%v %v", res, err)
	}
}

func TestReplayRedactsPatchesOfASecretPrimary(t *testing.T) {
	c := ctrlhost.NewController("rotator").For("", "v1", "Secret").
		Reconcile(func(_ context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
			res := &ctrlhost.Result{}
			res.PatchPrimary(ctrlhost.MergePatch, map[string]any{"data": map[string]any{"k": "new"}}, "")
			return res, nil
		})
	obj := []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"prod"}}`)
	call := &pb.ReconcileCall{Controller: "rotator", Namespace: "prod", Name: "s", Object: obj, Attempt: 1}
	resp := &pb.ReconcileResponse{RequestId: 1, Patches: []*pb.Patch{{Target: pb.PatchTarget_PATCH_TARGET_PRIMARY,
		Type: pb.PatchType_PATCH_TYPE_MERGE_PATCH, Patch: []byte(`{"data":{"k":"` + digest("new") + `"}}`)}}}
	h := header("rotator")
	h.Controller.Primary = &pb.RecordedKind{Version: "v1", Resource: "secrets", Kind: "Secret", Namespaced: true}
	dir := t.TempDir()
	writeRecording(t, filepath.Join(dir, "00000001.ctrlrec"), h,
		&pb.ReconcileRecord{Sequence: 1, Call: call, Answer: &pb.ReconcileRecord_Response{Response: resp}})
	ctrlhosttest.AssertReplay(t, c, dir, ctrlhosttest.ReplayOptions{})
}

func TestReplayUpdateRewritesTheChangedFilesThenReplaysClean(t *testing.T) {
	dir := t.TempDir()
	greeterRecording(t, dir)
	first, _ := os.ReadFile(filepath.Join(dir, "00000001.ctrlrec"))
	before, _ := os.ReadFile(filepath.Join(dir, "00000002.ctrlrec"))
	changed := greeter(greeterOptions{text: func(who string) string { return "Hi, " + who + "." }})
	r := &recorder{TB: t}
	res := ctrlhosttest.AssertReplay(r, changed, dir, ctrlhosttest.ReplayOptions{Update: true})
	if res.Different != 2 || len(r.errors) != 0 || !reflect.DeepEqual(res.Updated, res.Files) {
		t.Fatalf("update: %s, updated %v, reported %q", res, res.Updated, r.errors)
	}
	ctrlhosttest.AssertReplay(t, changed, dir, ctrlhosttest.ReplayOptions{})
	if res, _ := ctrlhosttest.Replay(greeter(greeterOptions{}), dir, ctrlhosttest.ReplayOptions{}); res.Different != 2 {
		t.Errorf("the old controller against the updated recording: %s", res)
	}
	// The header, the skipped record and the record that did not change keep their bytes; the
	// changed one keeps every field but its answer.
	after, _ := os.ReadFile(filepath.Join(dir, "00000002.ctrlrec"))
	start := 8 + len(frame(t, header("greeter")))
	if !bytes.Equal(after[:start], before[:start]) {
		t.Error("the header changed")
	}
	firstAfter, _ := os.ReadFile(filepath.Join(dir, "00000001.ctrlrec"))
	failed := frame(t, &pb.ReconcileRecord{Sequence: 2, Call: greetingCall("hi", map[string]any{"name": "Ada"}),
		Answer: &pb.ReconcileRecord_Failure{Failure: &pb.DispatchFailure{Code: 4, Message: "deadline exceeded"}}})
	if !bytes.HasSuffix(firstAfter, failed) || !bytes.HasSuffix(first, failed) {
		t.Error("the skipped record changed")
	}
	length, n := binary.Uvarint(after[start:])
	rec := &pb.ReconcileRecord{}
	if err := proto.Unmarshal(after[start+n:start+n+int(length)], rec); err != nil {
		t.Fatal(err)
	}
	want := recorded(t, greeter(greeterOptions{}), 3, greetingCall("ho", map[string]any{"name": "Bob"}))
	if rec.GetSequence() != 3 || !proto.Equal(rec.GetCall(), want.GetCall()) || !proto.Equal(rec.GetAction(), want.GetAction()) ||
		!proto.Equal(rec.GetTime(), want.GetTime()) || !proto.Equal(rec.GetTook(), want.GetTook()) ||
		len(rec.GetCapabilities()) != len(want.GetCapabilities()) || !strings.Contains(string(rec.GetResponse().GetDesiredObjects()[0]), "Hi, Bob.") {
		t.Errorf("rewritten record %v", rec)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("temporary files left: %v", entries)
	}
}

func TestReplayRefusesBrokenRecordingsNamingFileAndOffset(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.ctrlrec")
	rec := recorded(t, greeter(greeterOptions{}), 1, greetingCall("hi", map[string]any{"name": "Ada"}))
	writeRecording(t, good, header("greeter"), rec)
	data, _ := os.ReadFile(good)
	start := 8 + len(frame(t, header("greeter")))
	newer := header("greeter")
	newer.Format = 2
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"magic":    {[]byte("CTRLREX\n" + string(data[8:])), "%s: not a ctrlhost recording (no CTRLREC magic at offset 0)"},
		"empty":    {nil, "%s: not a ctrlhost recording (no CTRLREC magic at offset 0)"},
		"format":   {append([]byte("CTRLREC\n"), frame(t, newer)...), "%s: recording format 2 is newer than this reader (it reads format 1)"},
		"body":     {data[:len(data)-3], fmt.Sprintf("%%s: record at offset %d is cut short (%d of %d bytes): the recording was interrupted", start, len(data)-3-start, len(data)-start)},
		"varint":   {append(append([]byte{}, data...), 0x80), fmt.Sprintf("%%s: record at offset %d is cut short (1 of 2 bytes): the recording was interrupted", len(data))},
		"invalid":  {append(append([]byte{}, data...), 2, 0xff, 0xff), fmt.Sprintf("%%s: record at offset %d is not a valid ReconcileRecord", len(data))},
		"too long": {append(append([]byte{}, data...), binary.AppendUvarint(nil, 300<<20)...), fmt.Sprintf("%%s: record at offset %d claims %d bytes, more than the limit of 268435456 bytes: the file is corrupt", len(data), 300<<20)},
		"header":   {[]byte("CTRLREC\n"), "%s: ends before its header at offset 8: the recording was interrupted"},
	} {
		path := filepath.Join(dir, name+".ctrlrec")
		if err := os.WriteFile(path, tc.data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ctrlhosttest.Replay(greeter(greeterOptions{}), path, ctrlhosttest.ReplayOptions{})
		if want := fmt.Sprintf(tc.want, path); err == nil || err.Error() != want {
			t.Errorf("%s: got %v\nwant %s", name, err, want)
		}
	}
	other := ctrlhost.NewController("other").For("example.com", "v1", "Greeting").
		Reconcile(func(context.Context, *ctrlhost.Request) (*ctrlhost.Result, error) { return nil, nil })
	if _, err := ctrlhosttest.Replay(other, good, ctrlhosttest.ReplayOptions{}); err == nil ||
		err.Error() != good+": holds controller greeter, not other" {
		t.Errorf("other controller: %v", err)
	}
}

func TestReplayPluginPicksTheControllerOfTheHeader(t *testing.T) {
	root := t.TempDir()
	greeterRecording(t, filepath.Join(root, "greeter"))
	other := ctrlhost.NewController("other").For("example.com", "v1", "Greeting").
		Reconcile(func(context.Context, *ctrlhost.Request) (*ctrlhost.Result, error) { return nil, nil })
	call := greetingCall("hi", map[string]any{"name": "Ada"})
	call.Controller = "other"
	writeRecording(t, filepath.Join(root, "other", "00000001.ctrlrec"), header("other"),
		&pb.ReconcileRecord{Sequence: 1, Call: call, Answer: &pb.ReconcileRecord_Response{Response: &pb.ReconcileResponse{}}})
	p := ctrlhost.NewPlugin("greetings", "1.0.0", greeter(greeterOptions{}), other)
	if _, err := ctrlhosttest.ReplayPlugin(p, root, ctrlhosttest.ReplayOptions{}); err == nil ||
		err.Error() != root+": holds recordings of several controllers (found: greeter, other): name one" {
		t.Errorf("several: %v", err)
	}
	if _, err := ctrlhosttest.ReplayPlugin(p, root, ctrlhosttest.ReplayOptions{Controller: "gone"}); err == nil ||
		err.Error() != root+": holds no recording of controller gone (found: greeter, other)" {
		t.Errorf("missing: %v", err)
	}
	for _, name := range []string{"greeter", "other"} {
		res := ctrlhosttest.AssertReplayPlugin(t, p, root, ctrlhosttest.ReplayOptions{Controller: name})
		if res.Different != 0 || res.Compared == 0 {
			t.Errorf("%s: %s", name, res)
		}
	}
	res := ctrlhosttest.AssertReplayPlugin(t, p, filepath.Join(root, "other", "00000001.ctrlrec"), ctrlhosttest.ReplayOptions{})
	if res.Same != 1 {
		t.Errorf("one file: %s", res)
	}
	lone := ctrlhost.NewPlugin("lone", "1.0.0", other)
	if _, err := ctrlhosttest.ReplayPlugin(lone, filepath.Join(root, "greeter"), ctrlhosttest.ReplayOptions{}); err == nil ||
		!strings.HasSuffix(err.Error(), `00000001.ctrlrec: plugin "lone" has no controller "greeter"`) {
		t.Errorf("undeclared: %v", err)
	}
}

func TestAssertReplayListsTheFirst20DifferencesAndTheTotals(t *testing.T) {
	c := greeter(greeterOptions{})
	var records []*pb.ReconcileRecord
	for i := 1; i <= 25; i++ {
		records = append(records, recorded(t, c, uint64(i), greetingCall(fmt.Sprintf("g%02d", i), map[string]any{"name": "Ada"})))
	}
	dir := t.TempDir()
	writeRecording(t, filepath.Join(dir, "00000001.ctrlrec"), header("greeter"), records...)
	r := &recorder{TB: t}
	ctrlhosttest.AssertReplay(r, greeter(greeterOptions{text: func(string) string { return "Yo" }}), dir, ctrlhosttest.ReplayOptions{})
	if len(r.errors) != 1 {
		t.Fatalf("reported %q", r.errors)
	}
	report := r.errors[0]
	if !strings.HasPrefix(report, "25 of 25 replayed answers differ (0 same, 0 skipped, 1 files)\n") ||
		strings.Count(report, " differ\n") != 20 || !strings.Contains(report, "prod/g20:") ||
		strings.Contains(report, "prod/g21:") || !strings.HasSuffix(report, "\n... and 5 more") {
		t.Errorf("report:\n%s", report)
	}
}

func TestReplayJudgesTheNewAnswerAsTheHost(t *testing.T) {
	dir := t.TempDir()
	greeterRecording(t, dir)
	unowned := greeter(greeterOptions{extra: func(res *ctrlhost.Result) {
		res.Desire(ctrlhost.NewObject("apps/v1", "Deployment", "web"))
	}, build: func(c *ctrlhost.Controller) { c.LabelSelector("greet=yes") }})
	res, err := ctrlhosttest.Replay(unowned, dir, ctrlhosttest.ReplayOptions{})
	if err != nil || res.Different != 2 {
		t.Fatalf("%v %v", res, err)
	}
	text := res.Differences[0].String()
	for _, want := range []string{"the host would not send this request: the object's labels",
		"the host would refuse the replayed answer: desired_objects[2]: kind apps/v1 Deployment is not owned by controller greeter"} {
		if !strings.Contains(text, want) {
			t.Errorf("%q not in\n%s", want, text)
		}
	}
}
