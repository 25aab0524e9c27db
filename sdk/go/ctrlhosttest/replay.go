package ctrlhosttest

// Replay runs a controller on the reconciles a host recorded (`ctrlhost run --record`) and
// reports where its answers differ from the recorded ones:
//
//	func TestReplay(t *testing.T) {
//		ctrlhosttest.AssertReplay(t, greeter, "testdata/recording", ctrlhosttest.ReplayOptions{})
//	}
//
// Each recorded call goes through the production path (Controller.Invoke) with the capabilities
// recorded with it; records whose dispatch failed (no answer) are skipped. The new answer gets
// the host's secret redaction (unless the recording holds secret data), then both answers are
// compared as JSON documents (replay_compare.go). A difference carries the new answer decoded
// (Outcome) with the host's judgement of it (Refused) and of the call under the new
// declaration (NotSent).

import (
	"context"
	"fmt"
	"strings"
	"testing"

	ctrlhost "ctrlhost.dev/sdk/go"
	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
	"google.golang.org/protobuf/proto"
)

// ReplayOptions refine a replay.
type ReplayOptions struct {
	// Controller is the recorded controller to replay: it picks DIR/<Controller>/ in a directory
	// with one subdirectory per controller, and every file's header must name it. Default: the
	// controller's own name for Replay; for ReplayPlugin, the only subdirectory and each file's
	// header.
	Controller string
	// Update rewrites every file with differing answers, the new answers becoming the recorded
	// ones (header, calls, actions and every other field kept; records that did not change keep
	// their bytes), through a temporary file in the same directory renamed over it.
	Update bool
	// Context is the reconciles' context (default: background).
	Context context.Context
}

// ReplayResult says how a replay went.
type ReplayResult struct {
	// Files replayed, in order, and those Update rewrote.
	Files   []string
	Updated []string
	// Compared = Same + Different records; Skipped ones have no recorded answer.
	Compared, Same, Different, Skipped int
	Differences                        []Difference
}

// Difference is one record whose new answer differs from the recorded one.
type Difference struct {
	File string
	// Offset is where the record starts in File; Sequence its ReconcileRecord.sequence.
	Offset   int
	Sequence uint64
	// Key is the primary's "namespace/name" ("name" when cluster-scoped).
	Key string
	// Members names the differing members of the normalized answers ("desired", "events", ...);
	// Recorded and Replayed hold their values (a member absent from one side is absent there).
	Members            []string
	Recorded, Replayed map[string]any
	// Answer is the new answer decoded, with Refused set when the host would refuse it (nil when
	// it cannot be decoded). NotSent says why the host would no longer send the recorded call
	// to the new declaration (label selector, namespaces, owned kinds), nil when it would.
	Answer  *Outcome
	NotSent error
}

// Replay replays the recording at path (a .ctrlrec file, a directory of them, or a directory
// with one subdirectory per controller) against c. An error for a recording that cannot be
// read (naming the file and offset), a header naming another controller, or a controller
// without a valid declaration.
func Replay(c *ctrlhost.Controller, path string, opts ReplayOptions) (*ReplayResult, error) {
	if opts.Controller == "" {
		opts.Controller = c.Name()
	}
	return replay(path, opts, func(string) (*ctrlhost.Controller, error) { return c, nil })
}

// ReplayPlugin is Replay with the controller of p each file's header names.
func ReplayPlugin(p *ctrlhost.Plugin, path string, opts ReplayOptions) (*ReplayResult, error) {
	return replay(path, opts, func(name string) (*ctrlhost.Controller, error) {
		if c := p.Controller(name); c != nil {
			return c, nil
		}
		return nil, fmt.Errorf("plugin %q has no controller %q", p.Name, name)
	})
}

// AssertReplay is Replay in a test: it fails the test (t.Fatal) when the recording cannot be
// replayed, and (t.Errorf) when answers differ, listing the first 20 differences and the
// totals. With Update the differences are written and only logged.
func AssertReplay(t testing.TB, c *ctrlhost.Controller, path string, opts ReplayOptions) *ReplayResult {
	t.Helper()
	res, err := Replay(c, path, opts)
	assertReplay(t, res, err, opts)
	return res
}

// AssertReplayPlugin is AssertReplay for ReplayPlugin.
func AssertReplayPlugin(t testing.TB, p *ctrlhost.Plugin, path string, opts ReplayOptions) *ReplayResult {
	t.Helper()
	res, err := ReplayPlugin(p, path, opts)
	assertReplay(t, res, err, opts)
	return res
}

func assertReplay(t testing.TB, res *ReplayResult, err error, opts ReplayOptions) {
	t.Helper()
	switch {
	case err != nil:
		t.Fatal(err)
	case res.Different > 0 && opts.Update:
		t.Logf("%s\nrewrote %s", res.Summary(20), strings.Join(res.Updated, ", "))
	case res.Different > 0:
		t.Errorf("%s", res.Summary(20))
	}
}

// pickController is the controller that answers the records of the named recorded controller.
type pickController func(name string) (*ctrlhost.Controller, error)

func replay(path string, opts ReplayOptions, pick pickController) (*ReplayResult, error) {
	files, err := findRecording(path, opts.Controller)
	if err != nil {
		return nil, err
	}
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	res := &ReplayResult{Files: files}
	for _, file := range files {
		if err := replayFile(file, opts, pick, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// replayFile replays one file into res (and rewrites it when asked).
func replayFile(file string, opts ReplayOptions, pick pickController, res *ReplayResult) error {
	f, err := readRecording(file)
	if err != nil {
		return err
	}
	name := f.header.GetController().GetName()
	if opts.Controller != "" && name != opts.Controller {
		return fmt.Errorf("%s: holds controller %s, not %s", file, name, opts.Controller)
	}
	c, err := pick(name)
	if err != nil {
		return fmt.Errorf("%s: %v", file, err)
	}
	spec, err := c.Spec()
	if err != nil {
		return err
	}
	primary := f.header.GetController().GetPrimary()
	primaryIsSecret := primary.GetGroup() == "" && primary.GetKind() == "Secret"
	replaced := map[int]*pb.ReconcileRecord{}
	for i, r := range f.records {
		if r.record.GetFailure() != nil {
			res.Skipped++
			continue
		}
		res.Compared++
		resp := c.Invoke(opts.Context, r.record.GetResponse().GetRequestId(), r.record.GetCall(),
			capabilitiesOf(r.record))
		if !f.header.GetSecretData() {
			redactResponse(resp, primaryIsSecret)
		}
		d := compareRecord(spec, r.record, resp)
		if d == nil {
			res.Same++
			continue
		}
		d.File, d.Offset = file, r.offset
		res.Different++
		res.Differences = append(res.Differences, *d)
		updated := proto.Clone(r.record).(*pb.ReconcileRecord)
		updated.Answer = &pb.ReconcileRecord_Response{Response: resp}
		replaced[i] = updated
	}
	if !opts.Update || len(replaced) == 0 {
		return nil
	}
	res.Updated = append(res.Updated, file)
	return rewriteRecording(f, replaced)
}

// capabilitiesOf is the set recorded with r (every capability when none was recorded).
func capabilitiesOf(r *pb.ReconcileRecord) ctrlhost.CapabilitySet {
	if len(r.GetCapabilities()) == 0 {
		return ctrlhost.AllCapabilities()
	}
	caps := ctrlhost.CapabilitySet{}
	for _, c := range r.GetCapabilities() {
		caps[c] = true
	}
	return caps
}

// compareRecord is the difference between r's answer and resp (nil when they are the same).
func compareRecord(spec *pb.ControllerSpec, r *pb.ReconcileRecord, resp *pb.ReconcileResponse) *Difference {
	recorded, replayed := normalize(r.GetResponse()), normalize(resp)
	members := differingMembers(recorded, replayed)
	if len(members) == 0 {
		return nil
	}
	call := r.GetCall()
	d := &Difference{Sequence: r.GetSequence(), Key: call.GetName(), Members: members,
		Recorded: map[string]any{}, Replayed: map[string]any{}}
	if call.GetNamespace() != "" {
		d.Key = call.GetNamespace() + "/" + call.GetName()
	}
	for _, m := range members {
		if v, ok := recorded[m]; ok {
			d.Recorded[m] = v
		}
		if v, ok := replayed[m]; ok {
			d.Replayed[m] = v
		}
	}
	var obj ctrlhost.Object
	if len(call.GetObject()) > 0 {
		obj, _ = ctrlhost.ParseObject(call.GetObject()) // a malformed one was answered with an error
	}
	if err := judgeRequest(spec, call, obj); err != nil {
		d.NotSent = fmt.Errorf("the host would not send this request: %v", err)
	}
	if out, err := Decode(resp); err == nil {
		out.Refused = judgeResponse(spec, call, nil, resp)
		d.Answer = out
	}
	return d
}

// Patch is the JSON patch (RFC 6902) that turns Recorded into Replayed.
func (d Difference) Patch() []map[string]any {
	var ops []map[string]any
	for _, op := range jsonDiff(d.Recorded, d.Replayed, "") {
		m := map[string]any{"op": op.op, "path": op.path}
		if op.op != "remove" {
			m["value"] = op.value
		}
		ops = append(ops, m)
	}
	return ops
}

// String is the difference for people: where, which members, and the changes from the
// recorded answer to the replayed one ("+" added, "-" removed, "~" replaced).
func (d Difference) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: record at offset %d (sequence %d) %s: %s differ", d.File, d.Offset, d.Sequence, d.Key,
		strings.Join(d.Members, ", "))
	for _, op := range jsonDiff(d.Recorded, d.Replayed, "") {
		switch op.op {
		case "add":
			fmt.Fprintf(&b, "\n    + %s: %s", op.path, show(op.value))
		case "remove":
			fmt.Fprintf(&b, "\n    - %s: %s", op.path, show(op.old))
		default:
			fmt.Fprintf(&b, "\n    ~ %s: %s -> %s", op.path, show(op.old), show(op.value))
		}
	}
	if d.NotSent != nil {
		fmt.Fprintf(&b, "\n    %v", d.NotSent)
	}
	if d.Answer != nil && d.Answer.Refused != nil {
		fmt.Fprintf(&b, "\n    the host would refuse the replayed answer: %v", d.Answer.Refused)
	}
	return b.String()
}

// show is v as JSON, cut after 300 bytes.
func show(v any) string {
	text := string(marshalJSON(v))
	if len(text) > 300 {
		return text[:300] + "..."
	}
	return text
}

// Summary is the totals, then the first max differences.
func (r *ReplayResult) Summary(max int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d replayed answers differ (%d same, %d skipped, %d files)",
		r.Different, r.Compared, r.Same, r.Skipped, len(r.Files))
	for i, d := range r.Differences {
		if i == max {
			fmt.Fprintf(&b, "\n... and %d more", len(r.Differences)-max)
			break
		}
		b.WriteString("\n" + d.String())
	}
	return b.String()
}

// String is Summary(20).
func (r *ReplayResult) String() string { return r.Summary(20) }
