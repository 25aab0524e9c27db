package ctrlhost

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// referenceParse is ParseObject without its fast path: encoding/json with UseNumber.
func referenceParse(data []byte) (Object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errTrailing
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errNotObject
	}
	return obj, nil
}

var (
	errTrailing  = jsonTestError("data after the object")
	errNotObject = jsonTestError("not an object")
)

type jsonTestError string

func (e jsonTestError) Error() string { return string(e) }

// jsonSeeds are documents on and off the fast path: plain objects, escapes, UTF-8 (valid and
// not), every number form, nesting, and malformed input of each kind.
var jsonSeeds = []string{
	`{}`, ` {} `, "\t{\n}\r\n", `{"a":1}`, `{"a":"b","c":[1,2.5,-3e10,0,-0,1E+2,1e-2],"d":{"e":null,"f":true,"g":false}}`,
	`{"a":[]}`, `{"a":{}}`, `{"a":[[],[{}]]}`, `{"a":1,"a":2}`, `{"":""}`,
	`{"esc":"a\"b\\c\/d\b\f\n\r\t end"}`, `{"a":"\\"}`, `{"a":"x\\\""}`, `{"a":"\"`,
	`{"esc":"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00"}`, `{"k\u0041y":1}`, `{"utf8":"héllo ✓ 😀"}`,
	"{\"bad\":\"\xff\xfe\"}", "{\"k\xffy\":1}", `{"lone":"\ud800"}`, `{"big":123456789012345678901234567890}`,
	`{"apiVersion":"example.com/v1","kind":"WebApp","metadata":{"name":"shop","namespace":"default","labels":{"app":"shop"},"annotations":{"last":"{\"spec\":{}}"}},"spec":{"replicas":3,"image":"nginx:1.25","ports":[{"port":80}]}}`,
	// malformed or not an object: encoding/json decides
	``, `{`, `}`, `[1]`, `7`, `"s"`, `null`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,}`, `{"a":1 "b":2}`,
	`{"a":01}`, `{"a":-}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":+1}`, `{"a":tru}`, `{"a":nul}`,
	`{"a":"\x"}`, `{"a":"\u12"}`, "{\"a\":\"\x01\"}", `{"a":"unterminated`, `{"a":[1,2}`, `{"a":[1,]}`,
	`{} x`, `{}}`, `{}]`, `{} {}`, `{a:1}`, `{'a':1}`, `{"a":NaN}`, `{"a":Infinity}`,
	`{"a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
	`{"a":` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `}`,
}

// checkSameAsReference fails unless ParseObject answers data as encoding/json does: the same
// value, or an error both times (ParseObject's errors are encoding/json's, prefixed).
func checkSameAsReference(t *testing.T, data []byte) {
	t.Helper()
	got, err := ParseObject(data)
	want, wantErr := referenceParse(data)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("ParseObject(%q): error %v, encoding/json: %v", data, err, wantErr)
	}
	if err != nil {
		if _, ok := fastParseObject(data); ok {
			t.Fatalf("the fast path accepted %q, which encoding/json rejects: %v", data, wantErr)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseObject(%q) = %#v, encoding/json: %#v", data, got, want)
	}
}

func TestParseObjectMatchesEncodingJSON(t *testing.T) {
	for _, s := range jsonSeeds {
		checkSameAsReference(t, []byte(s))
	}
	checkSameAsReference(t, benchObject)
}

func TestFastParseObjectTakesPlainDocuments(t *testing.T) {
	// The fast path must actually serve the common case, or the benchmark gain is gone.
	for _, s := range []string{jsonSeeds[4], jsonSeeds[10], jsonSeeds[14], jsonSeeds[21], string(benchObject)} {
		if _, ok := fastParseObject([]byte(s)); !ok {
			t.Errorf("fast path gave up on %q", s)
		}
	}
	for _, s := range []string{`{`, `{} x`, `{}}`, `[1]`, `{"a":01}`} {
		if _, ok := fastParseObject([]byte(s)); ok {
			t.Errorf("fast path accepted %q", s)
		}
	}
}

// FuzzParseObject compares ParseObject with encoding/json on arbitrary input (`go test
// -fuzz=FuzzParseObject`); plain `go test` runs the seeds.
func FuzzParseObject(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkSameAsReference(t, data) })
}

// benchObject is the primary of the sdk-dispatch benchmark's request (bench/dispatch/harness.cc).
var benchObject = func() []byte {
	var b strings.Builder
	b.WriteString(`{"apiVersion":"example.com/v1","kind":"WebApp","metadata":{"name":"app-1",` +
		`"namespace":"team-a","uid":"6f0d1c3e-8f7e-4d4b-9a57-0c6a3d2f1b10",` +
		`"resourceVersion":"12345","generation":3,"labels":{"app":"web","tier":"front"}},` +
		`"spec":{"replicas":3,"image":"registry.example.com/web:1.4.0","env":[`)
	for i := 0; i < 12; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":"VAR_%d","value":"value-%d-xxxxxxxxxxxxxxxxxxxxxxxx"}`, i, i)
	}
	b.WriteString("]}}")
	return []byte(b.String())
}()

func BenchmarkParseObject(b *testing.B) {
	data := benchObject
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := ParseObject(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseObjectEncodingJSON(b *testing.B) {
	data := benchObject
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := referenceParse(data); err != nil {
			b.Fatal(err)
		}
	}
}
