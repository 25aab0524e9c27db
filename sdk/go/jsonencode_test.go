package ctrlhost

import (
	"bytes"
	"encoding/json"
	"testing"
)

type jsonTestStruct struct {
	A int    `json:"a"`
	B string `json:"b,omitempty"`
}

type jsonTestMarshaler struct{}

func (jsonTestMarshaler) MarshalJSON() ([]byte, error) { return []byte(`{"m": "<x>"}`), nil }

// checkMarshalSameAsReference fails unless marshalJSON answers v as json.Marshal does.
func checkMarshalSameAsReference(t *testing.T, v any) {
	t.Helper()
	got, err := marshalJSON(v)
	want, wantErr := json.Marshal(v)
	if (err != nil) != (wantErr != nil) || (err != nil && err.Error() != wantErr.Error()) {
		t.Fatalf("marshalJSON(%#v): error %v, json.Marshal: %v", v, err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("marshalJSON(%#v) = %s, json.Marshal: %s", v, got, want)
	}
}

func TestMarshalJSONMatchesEncodingJSON(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	values := []any{
		nil, "", "plain", "quote\"back\\slash", "<html>&amp;", "héllo ✓", "line\u2028sep", "\xff\xfe bad",
		"ctl\x01\n\t", true, false, json.Number("12"), json.Number("-1.5e3"), json.Number(""),
		json.Number("01"), json.Number("abc"), 0, -7, int64(1) << 62, int32(-3), 1.5, 1e21, 3.0,
		float32(0.1), uint8(200), map[string]any(nil), []any(nil), map[string]any{}, []any{},
		map[string]string(nil), map[string]string{"b": "2", "a": "<1>"},
		map[string]any{"seen": "app-1", "b": []any{1, "x", nil, map[string]any{"z": true, "a": json.Number("2")}}},
		map[string]any{"<k>": 1, "é": 2, "": 3}, map[string]any{"s": jsonTestStruct{A: 1}, "m": jsonTestMarshaler{}},
		map[string]any{"f": func() {}}, map[string]any{"c": make(chan int)}, cyclic,
		[]any{map[string]any{"deep": []any{[]any{[]any{"x"}}}}},
	}
	for _, v := range values {
		checkMarshalSameAsReference(t, v)
	}
	obj, err := ParseObject(benchObject)
	if err != nil {
		t.Fatal(err)
	}
	checkMarshalSameAsReference(t, obj)
	if _, ok := appendJSON(nil, obj, 0); !ok {
		t.Error("the fast path gave up on the benchmark's object")
	}
}

// FuzzMarshalJSON compares marshalJSON with json.Marshal on every object ParseObject reads.
func FuzzMarshalJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, err := ParseObject(data)
		if err != nil {
			return
		}
		checkMarshalSameAsReference(t, obj)
	})
}

func BenchmarkMarshalJSON(b *testing.B) {
	obj, err := ParseObject(benchObject)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := marshalJSON(obj); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshalJSONEncodingJSON(b *testing.B) {
	obj, err := ParseObject(benchObject)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := json.Marshal(obj); err != nil {
			b.Fatal(err)
		}
	}
}
