package ctrlhost_test

import (
	"strings"
	"testing"
	"time"

	ctrlhost "ctrlhost.dev/sdk/go"
	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestParseCallRefusesMalformedObjects(t *testing.T) {
	for _, tc := range []struct {
		name string
		call *pb.ReconcileCall
		want string
	}{
		{"primary not JSON", &pb.ReconcileCall{Object: []byte("{")}, "the primary object is not valid JSON"},
		{"primary an array", &pb.ReconcileCall{Object: []byte("[1]")}, "the primary object is not a JSON object"},
		{"trailing data", &pb.ReconcileCall{Object: []byte(`{} {}`)}, "data after the object"},
		{"child", &pb.ReconcileCall{Object: []byte(`{}`), Children: []*pb.RawObject{{Kind: "Service", Object: []byte("x")}}}, "child Service is not valid JSON"},
		{"related", &pb.ReconcileCall{Object: []byte(`{}`), RelatedObjects: []*pb.RawObject{{Kind: "Secret", Object: []byte("7")}}}, "related object Secret is not a JSON object"},
		{"deadline", &pb.ReconcileCall{Deadline: &timestamppb.Timestamp{Nanos: -1}}, "the deadline is invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ctrlhost.ParseCall(tc.call)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseCall error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestRequestAccessorsNeverFailOnMistypedFields(t *testing.T) {
	deadline := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	req, err := ctrlhost.ParseCall(&pb.ReconcileCall{
		Name: "shop", Namespace: "default", Reason: pb.Reason_REASON_PRIMARY_CHANGED,
		Deadline: timestamppb.New(deadline),
		Object: []byte(`{"apiVersion":"v1","kind":"K","metadata":{"generation":"7",
			"labels":{"a":"b","n":3},"annotations":[]},"spec":{"replicas":2.5,"big":9007199254740993,"image":7},"status":"x"}`),
		Children: []*pb.RawObject{{ApiVersion: "v1", Kind: "Service", Object: []byte(`{"metadata":{"name":"shop"}}`)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if g := req.Generation(); g != 0 {
		t.Errorf("Generation of a string = %d, want 0", g)
	}
	if l := req.Labels(); len(l) != 1 || l["a"] != "b" {
		t.Errorf("Labels = %v, want only the string entry", l)
	}
	if a := req.Annotations(); len(a) != 0 {
		t.Errorf("Annotations of a list = %v", a)
	}
	if _, ok := ctrlhost.Int(req.Object, "spec.replicas"); ok {
		t.Error("Int(2.5) is ok")
	}
	if v, ok := ctrlhost.Int(req.Object, "spec.big"); !ok || v != 9007199254740993 {
		t.Errorf("Int(2^53+1) = %d, %v: integers must keep their exact value", v, ok)
	}
	if _, ok := ctrlhost.String(req.Object, "spec.image"); ok {
		t.Error("String(7) is ok")
	}
	if s := req.Status(); len(s) != 0 {
		t.Errorf("Status of a string = %v", s)
	}
	if !req.Deadline.Equal(deadline) || req.ReasonName() != "PrimaryChanged" {
		t.Errorf("Deadline %v, ReasonName %q", req.Deadline, req.ReasonName())
	}
	if req.Child("Service", "shop") == nil || req.Child("Service", "other") != nil {
		t.Error("Child finds by kind and name")
	}
	if req.Exists() != true || req.Deleting() {
		t.Error("Exists/Deleting")
	}
	gone, err := ctrlhost.ParseCall(&pb.ReconcileCall{Name: "shop"})
	if err != nil || gone.Exists() || gone.Kind() != "" || len(gone.Spec()) != 0 {
		t.Errorf("a gone primary: %v, exists %v", err, gone.Exists())
	}
}
