package ctrlhosttest_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	ctrlhost "ctrlhost.dev/sdk/go"
	"ctrlhost.dev/sdk/go/ctrlhosttest"
)

// sharedCase is one case of sdk/testdata/host_judgement_cases.json: the judgement every SDK's
// harness makes alike (the C++, Python and Node harnesses run the same file).
type sharedCase struct {
	Name       string `json:"name"`
	Controller struct {
		Name          string      `json:"name"`
		Primary       [3]string   `json:"primary"`
		Owns          [][3]string `json:"owns"`
		LabelSelector string      `json:"labelSelector"`
		Namespaces    []string    `json:"namespaces"`
	} `json:"controller"`
	Primary      *string           `json:"primary"`
	Labels       map[string]any    `json:"labels"`
	Children     []ctrlhost.Object `json:"children"`
	Existing     []ctrlhost.Object `json:"existing"`
	Answer       map[string]any    `json:"answer"`
	NotSent      string            `json:"notSent"`
	Refused      *string           `json:"refused"`
	ChildrenSeen []string          `json:"childrenSeen"`
}

// The file sits beside the SDKs (sdk/testdata); build.sh copies it beside sdk/go too.
func loadSharedCases(t *testing.T) ([]sharedCase, map[string]ctrlhost.Object) {
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "host_judgement_cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases     []sharedCase               `json:"cases"`
		Primaries map[string]ctrlhost.Object `json:"primaries"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	return file.Cases, file.Primaries
}

func caseController(c sharedCase, seen *[]string) *ctrlhost.Controller {
	d := c.Controller
	ctl := ctrlhost.NewController(d.Name).For(d.Primary[0], d.Primary[1], d.Primary[2])
	for _, o := range d.Owns {
		ctl.Owns(o[0], o[1], o[2])
	}
	if d.LabelSelector != "" {
		ctl.LabelSelector(d.LabelSelector)
	}
	if len(d.Namespaces) > 0 {
		ctl.Namespaces(d.Namespaces...)
	}
	a := c.Answer
	return ctl.Reconcile(answer(func(req *ctrlhost.Request, res *ctrlhost.Result) {
		for _, child := range req.Children {
			ref := ctrlhost.Lookup(child.Object, "metadata.ownerReferences").([]any)[0].(map[string]any)
			*seen = append(*seen, fmt.Sprintf("%v:%v/%v/%v/%v", ctrlhost.Lookup(child.Object, "metadata.name"),
				ref["kind"], ref["name"], ref["uid"], ref["controller"]))
		}
		if desired, ok := a["desired"].([]any); ok {
			for _, obj := range desired {
				res.Desire(ctrlhost.DeepCopy(obj).(map[string]any))
			}
		}
		if status, ok := a["status"].(map[string]any); ok {
			res.MergeStatus(status)
		}
		if cond, ok := a["condition"].([]any); ok {
			status := ctrlhost.ConditionFalse
			if cond[1] == "True" {
				status = ctrlhost.ConditionTrue
			}
			res.SetCondition(cond[0].(string), status, cond[2].(string), "")
		}
		if patch, ok := a["statusPatch"]; ok {
			res.PatchStatus(ctrlhost.MergePatch, patch, "")
		}
		if p, ok := a["ownedPatch"].([]any); ok {
			res.PatchOwned(p[0].(string), p[1].(string), p[2].(string), ctrlhost.MergePatch, map[string]any{}, "")
		}
		if e, ok := a["event"].([]any); ok {
			typ := ctrlhost.EventNormal
			if e[0] == "Warning" {
				typ = ctrlhost.EventWarning
			}
			res.Event(typ, e[1].(string), e[2].(string))
		}
	}))
}

func TestStatusOnEveryKindWithoutAStatusSubresourceIsRefused(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "host_judgement_cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Kinds [][2]string `json:"withoutStatusSubresource"`
	}
	if err := json.Unmarshal(data, &file); err != nil || len(file.Kinds) != 20 {
		t.Fatalf("%v, %d kinds", err, len(file.Kinds))
	}
	for _, gk := range file.Kinds {
		apiVersion := "v1"
		if gk[0] != "" {
			apiVersion = gk[0] + "/v1"
		}
		c := ctrlhost.NewController("statusful").For(gk[0], "v1", gk[1]).
			Reconcile(answer(func(_ *ctrlhost.Request, res *ctrlhost.Result) {
				res.MergeStatus(map[string]any{"phase": "Done"})
			}))
		obj := ctrlhost.Object{"apiVersion": apiVersion, "kind": gk[1],
			"metadata": map[string]any{"name": "x", "namespace": "prod", "uid": "u-x"}}
		out, err := ctrlhosttest.Run(c, obj)
		want := "status: kind " + apiVersion + " " + gk[1] + " has no status subresource, so it has no status " +
			"to write; record the outcome with an event instead"
		if err != nil || out.Refused == nil || out.Refused.Error() != want {
			t.Errorf("%s: %v %v", gk[1], out, err)
		}
	}
}

func TestSharedHostJudgementCases(t *testing.T) {
	cases, primaries := loadSharedCases(t)
	if len(cases) < 20 {
		t.Fatalf("%d cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			var seen []string
			var obj ctrlhost.Object
			if c.Primary != nil {
				obj = ctrlhost.DeepCopy(primaries[*c.Primary]).(map[string]any)
				if c.Labels != nil {
					obj["metadata"].(map[string]any)["labels"] = c.Labels
				}
			}
			out, err := ctrlhosttest.Run(caseController(c, &seen), obj, ctrlhosttest.Children(c.Children...),
				ctrlhosttest.Existing(c.Existing...))
			if c.NotSent != "" {
				if err == nil || !strings.Contains(err.Error(), c.NotSent) {
					t.Errorf("not sent: want %q, got %v", c.NotSent, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.Error != nil {
				t.Fatalf("error answer: %v", out.Error)
			}
			switch {
			case c.Refused == nil && out.Refused != nil:
				t.Errorf("refused: %v", out.Refused)
			case c.Refused != nil && (out.Refused == nil || !strings.Contains(out.Refused.Error(), *c.Refused)):
				t.Errorf("refused: want %q, got %v", *c.Refused, out.Refused)
			}
			if c.ChildrenSeen != nil && !reflect.DeepEqual(seen, c.ChildrenSeen) {
				t.Errorf("children seen %v, want %v", seen, c.ChildrenSeen)
			}
		})
	}
}
