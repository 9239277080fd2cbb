package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"haystack/internal/attrs"
	"haystack/internal/store"
)

// TestOTLPMetadataRefused: records whose metadata breaks attrs' limits or
// has a name that normalizes to nothing are refused one by one (200 with
// partial_success naming resource and record), the others stored with
// exactly their metadata (names given twice: the last wins; values not
// UTF-8 kept as their bytes); an attribute name Loki's normalization
// refuses on a resource refuses every record of it.
func TestOTLPMetadataRefused(t *testing.T) {
	many := make([]tkv, attrs.MaxPairs+1)
	for i := range many {
		many[i] = kvS(fmt.Sprintf("k%03d", i), "v")
	}
	rec := func(d time.Duration, line string, a ...tkv) tRec {
		return tRec{time: ns(d), body: strBody(line), attrs: a}
	}
	req := []tRes{
		{attrs: []tkv{kvS("service.name", "a")}, scopes: []tScope{{recs: []tRec{
			rec(9*time.Second, "kept", kvS("a.b", "1"), kvS("c", "same"), kvS("c", "same")),
			rec(8*time.Second, "collides", kvS("a.b", "1"), kvS("a_b", "2")),
			rec(7*time.Second, "empty name", kvS("", "x")),
			rec(6*time.Second, "too many", many...),
			rec(5*time.Second, "too large", kvS("big", strings.Repeat("x", attrs.MaxBytes))),
			rec(4*time.Second, "not utf-8", kvS("bad", "\xff")),
			rec(3*time.Second, "kept too"),
		}}}},
		{attrs: []tkv{kvS("service.name", "b"), kvS("", "x")}, scopes: []tScope{{recs: []tRec{rec(2*time.Second, "bad resource")}}}},
	}
	e := newEnv(t, nil)
	code, _, body := e.otlpPost(otlpProtoReq(req), "Content-Type", "application/x-protobuf")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	// ExportLogsServiceResponse{partial_success = 1 {rejected_log_records = 1, error_message = 2}}
	_, _, _, ps, _, err := protoField(body)
	if err != nil {
		t.Fatal(err)
	}
	_, _, n, _, rest, err := protoField(ps)
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, msg, _, _ := protoField(rest)
	if n != 4 {
		t.Errorf("rejected_log_records %d, want 4", n)
	}
	for _, w := range []string{
		"resource 0, log record 2: structured metadata: attribute \"\": empty name", "resource 0, log record 3: 129 structured metadata pairs, more than the limit of 128",
		"4 entries refused, the other 4 stored"} {
		if !strings.Contains(string(msg), w) {
			t.Errorf("message %q lacks %q", msg, w)
		}
	}
	labels := `{service_name="a"}`
	wantStored(t, "stored", e, "fake", []string{
		fmt.Sprintf(`%s %d "kept" | a_b="1", c="same"`, labels, ns(9*time.Second)),
		fmt.Sprintf(`%s %d "collides" | a_b="2"`, labels, ns(8*time.Second)),
		fmt.Sprintf(`%s %d "not utf-8" | bad="\xff"`, labels, ns(4*time.Second)),
		fmt.Sprintf(`%s %d "kept too" | `, labels, ns(3*time.Second)),
	})
	// The JSON encoding refuses the same, with the resource's records
	// (its strings are UTF-8: the record with \xff is left out).
	req[0].scopes[0].recs = slices.Delete(req[0].scopes[0].recs, 5, 6)
	code, _, body = e.otlpPost(otlpJSONReq(req), "Content-Type", "application/json", "X-Scope-OrgID", "j")
	if code != 200 || !strings.Contains(string(body), `"rejectedLogRecords":"4"`) {
		t.Errorf("JSON: %d %s", code, body)
	}
	if got := e.stored("j"); len(got) != 3 {
		t.Errorf("JSON stored %q", got)
	}
}

// TestOTLPMetadataFields: severity names in OTLP/JSON, all-zero ids (no
// id), ids of the wrong length and uint32 fields past 32 bits (a
// malformed request, as the collector's decoder refuses them).
func TestOTLPMetadataFields(t *testing.T) {
	e := newEnv(t, nil)
	post := func(tenant, rec string) (int, string) {
		body := `{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"s"}}]},"scopeLogs":[{"logRecords":[` + rec + `]}]}]}`
		code, _, b := e.otlpPost([]byte(body), "Content-Type", "application/json", "X-Scope-OrgID", tenant)
		return code, string(b)
	}
	t0 := fmt.Sprintf(`"timeUnixNano":"%d"`, base)
	for i, c := range []struct{ rec, want string }{
		{`{` + t0 + `,"severityNumber":"SEVERITY_NUMBER_WARN2","severityText":"warn"}`, `severity_number="14", severity_text="warn"`},
		{`{` + t0 + `,"severityNumber":"SEVERITY_NUMBER_FATAL4"}`, `severity_number="24"`},
		{`{` + t0 + `,"severityNumber":"9"}`, `severity_number="9"`},
		{`{` + t0 + `,"traceId":"00000000000000000000000000000000","spanId":"0000000000000000"}`, ``},
		{`{` + t0 + `,"traceId":"","spanId":"","eventName":""}`, ``},
		{`{` + t0 + `,"observedTimeUnixNano":"5","flags":4294967295}`, `flags="4294967295", observed_timestamp="5"`},
		{`{"observedTimeUnixNano":"` + fmt.Sprint(base) + `"}`, ``}, // the observed time is the entry's time
	} {
		tenant := fmt.Sprintf("t%d", i)
		if code, b := post(tenant, c.rec); code != 200 {
			t.Errorf("%s: %d %s", c.rec, code, b)
			continue
		}
		want := fmt.Sprintf(`{service_name="s"} %d "" | %s`, base, c.want)
		wantStored(t, c.rec, e, tenant, []string{want})
	}
	for _, c := range []struct{ rec, want string }{
		{`{"traceId":"5b8efff798038103d269b633813fc6"}`, "traceId \"5b8efff798038103d269b633813fc6\" is not 16 bytes of hex"},
		{`{"spanId":"xyz"}`, "spanId \"xyz\" is not 8 bytes of hex"},
		{`{"severityNumber":"SEVERITY_NUMBER_LOUD"}`, "neither a number nor a SeverityNumber name"},
		{`{"flags":4294967296}`, "flags 4294967296 does not fit 32 bits"},
		{`{"droppedAttributesCount":"4294967296"}`, "droppedAttributesCount 4294967296 does not fit 32 bits"},
	} {
		code, b := post("bad", c.rec)
		var m struct{ Message string }
		json.Unmarshal([]byte(b), &m)
		if code != 400 || !strings.Contains(m.Message, c.want) || !strings.Contains(m.Message, "nothing was stored") {
			t.Errorf("%s: %d %s, want 400 with %q", c.rec, code, b, c.want)
		}
	}
	// Protobuf: ids of the wrong length.
	for _, c := range []struct {
		field int
		id    []byte
		want  string
	}{{9, make([]byte, 15), "trace_id of 15 bytes, want 16"}, {10, make([]byte, 16), "span_id of 16 bytes, want 8"}} {
		lr := append(pbFixed64(1, uint64(base)), pbLen(c.field, c.id)...)
		body := pbLen(1, pbLen(2, pbLen(2, lr)))
		code, _, b := e.otlpPost(body, "Content-Type", "application/x-protobuf", "X-Scope-OrgID", "bad")
		if code != 400 || !strings.Contains(string(b), c.want) {
			t.Errorf("field %d: %d %q, want 400 with %q", c.field, code, b, c.want)
		}
	}
	if got := e.stored("bad"); len(got) != 0 {
		t.Errorf("malformed requests stored %q", got)
	}
}

// TestOTLPMetadataBudget: a small request whose resource attributes,
// repeated in each record's metadata, come to more than the in-flight
// budget is refused (413, nothing stored) instead of expanding in memory;
// within the budget it is stored.
func TestOTLPMetadataBudget(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxInflightPushBytes = 1 << 20 })
	recs := make([]tRec, 2000)
	for i := range recs {
		recs[i] = tRec{time: ns(time.Duration(i)), body: strBody("x")}
	}
	big := []tRes{{attrs: []tkv{kvS("service.name", "s"), kvS("host.tags", strings.Repeat("t", 1000))}, scopes: []tScope{{recs: recs}}}}
	body := otlpProtoReq(big)
	if len(body) > 100<<10 {
		t.Fatalf("request of %d bytes: not small", len(body))
	}
	code, _, b := e.otlpPost(body, "Content-Type", "application/x-protobuf")
	if code != 413 || !strings.Contains(string(b), "repeated as the structured metadata of each of its records") {
		t.Errorf("%d %q, want 413", code, b)
	}
	if got := e.stored("fake"); len(got) != 0 {
		t.Errorf("refused request stored %d entries", len(got))
	}
	big[0].scopes[0].recs = recs[:500] // ~0.5 MB repeated: within the budget
	if code, _, b := e.otlpPost(otlpProtoReq(big), "Content-Type", "application/x-protobuf"); code != 200 {
		t.Errorf("%d %q", code, b)
	}
	if got := e.stored("fake"); len(got) != 500 || !strings.HasSuffix(got[0], e.withLevels([]string{`{service_name="s"} 1 "x" | host_tags="` + strings.Repeat("t", 1000) + `"`})[0][len(`{service_name="s"} 1 "x" `):]) {
		t.Errorf("stored %d entries: %.80q", len(got), got)
	}
	e.srv.pushLim.mu.Lock()
	peak := e.srv.pushLim.peak
	e.srv.pushLim.mu.Unlock()
	if peak < 500*1000 {
		t.Errorf("budget peak %d: the repeated metadata took no budget", peak)
	}
}

// TestPushFingerprintMetadata: entries differing only in their metadata
// are other entries for the resend check of the stream limit, while a
// resent identical batch still stores only what it did not store before.
func TestPushFingerprintMetadata(t *testing.T) {
	a := []store.LabeledEntry{{Labels: `{a="1"}`, Time: 1, Line: []byte("x"), Attrs: []byte{1, 1, 'k', 1, 'v'}}}
	b := []store.LabeledEntry{{Labels: `{a="1"}`, Time: 1, Line: []byte("x"), Attrs: []byte{1, 1, 'k', 1, 'w'}}}
	c := []store.LabeledEntry{{Labels: `{a="1"}`, Time: 1, Line: []byte("x")}}
	// The metadata's length is hashed apart: moving a byte between
	// line and metadata is another push.
	d := []store.LabeledEntry{{Labels: `{a="1"}`, Time: 1, Line: []byte("x\x01"), Attrs: []byte{1, 'k', 1, 'v'}}}
	fps := map[uint64]bool{}
	for _, es := range [][]store.LabeledEntry{a, b, c, d} {
		fps[pushFingerprint("t", es)] = true
	}
	if len(fps) != 4 {
		t.Errorf("%d fingerprints of 4 pushes differing in metadata", len(fps))
	}
	if pushFingerprint("t", a) != pushFingerprint("t", []store.LabeledEntry{{Labels: `{a="1"}`, Time: 1, Line: []byte("x"), Attrs: []byte{1, 1, 'k', 1, 'v'}}}) {
		t.Error("equal pushes, different fingerprints")
	}

	// Through the server: a limit of one stream; a push of an old and a
	// new stream stores the old one's entry and gets 429; its resend
	// stores nothing twice; the same batch with other metadata on the
	// stored entry is a new push and stores it.
	e := newEnv(t, func(c *Config) { c.MaxStreamsPerTenant = 1 })
	e.mustPush("/loki/api/v1/push", []byte(fmt.Sprintf(`{"streams":[{"stream":{"app":"old"},"values":[["%d","first"]]}]}`, base-10)), "Content-Type", "application/json")
	batch := func(trace string) []byte {
		return []byte(fmt.Sprintf(`{"streams":[{"stream":{"app":"old"},"values":[["%d","again",{"trace_id":%q}]]},{"stream":{"app":"new"},"values":[["%d","n"]]}]}`, base, trace, base))
	}
	for i, trace := range []string{"t1", "t1", "t2"} {
		if code, body := e.do("POST", "/loki/api/v1/push", batch(trace), "Content-Type", "application/json"); code != 429 {
			t.Fatalf("push %d: %d %s", i, code, body)
		}
	}
	old := `{app="old", service_name="old"}`
	wantStored(t, "stored", e, "fake", []string{
		fmt.Sprintf(`%s %d "first" | `, old, base-10),
		fmt.Sprintf(`%s %d "again" | trace_id="t1"`, old, base),
		fmt.Sprintf(`%s %d "again" | trace_id="t2"`, old, base),
	})
}
