package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/klauspost/compress/snappy"

	"haystack/internal/attrs"
	"haystack/internal/search"
)

// metaStr renders an attrs encoding as name="value" pairs in name order
// joined by ", " ("" for none), decoding it by hand from the format
// attrs' doc draws (uvarint count, then uvarint-length-prefixed name and
// value), independently of attrs.Decode.
func metaStr(t testing.TB, b []byte) string {
	t.Helper()
	if len(b) == 0 {
		return ""
	}
	uv := func() int {
		v, s := 0, 0
		for {
			if len(b) == 0 {
				t.Fatalf("metadata runs short")
			}
			c := b[0]
			b = b[1:]
			v |= int(c&0x7f) << s
			if c < 0x80 {
				return v
			}
			s += 7
		}
	}
	field := func() string {
		n := uv()
		if n > len(b) {
			t.Fatalf("metadata field of %d bytes, %d left", n, len(b))
		}
		f := string(b[:n])
		b = b[n:]
		return f
	}
	var parts []string
	for range uv() {
		name := field()
		parts = append(parts, name+"="+strconv.Quote(field()))
	}
	if len(b) != 0 {
		t.Fatalf("%d bytes after the metadata's pairs", len(b))
	}
	return strings.Join(parts, ", ")
}

// stored reads every entry of the tenant's store (head and segments)
// through search.Run, as "labels time line | metadata" strings, sorted.
func (e *testEnv) stored(tenant string) []string {
	e.t.Helper()
	ts, err := e.srv.openTenant(tenant, false)
	if err != nil {
		e.t.Fatal(err)
	}
	if ts == nil {
		return nil
	}
	v, err := ts.w.View()
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	_, err = search.Run(context.Background(), v.Parts, search.Query{Order: search.Oldest}, func(m *search.Match) error {
		out = append(out, fmt.Sprintf("%s %d %q | %s", v.Labels(m.Stream), m.Time, m.Line, metaStr(e.t, m.Attrs)))
		return nil
	}, func(err error) { e.t.Error(err) })
	if err != nil {
		e.t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// errText is the message of an error answer {"error": "..."}.
func errText(t *testing.T, body string) string {
	var v struct{ Error string }
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return v.Error
}

// decodedMeta is what a decoder made of each entry: "line | metadata",
// or "line refused: reason" for an entry refused for its metadata.
func decodedMeta(t *testing.T, streams []pushStream) []string {
	var out []string
	for _, s := range streams {
		for j, e := range s.entries {
			if r := s.metaErrs[j]; r != nil {
				out = append(out, fmt.Sprintf("%s refused: %s", e.Line, r.reason))
				continue
			}
			out = append(out, fmt.Sprintf("%s | %s", e.Line, metaStr(t, e.Attrs)))
		}
	}
	return out
}

// metaCases are the metadata of entries l0, l1, ... pushed in every
// encoding, and what each entry's stored metadata is (or why it is
// refused), written out by hand from Loki's rules.
var metaCases = []struct {
	pairs []attrs.Pair
	want  string
}{
	{nil, ""},
	{pp("trace_id", "0af7651916cd43dd8448eb211c80319c", "user", "bob"), `trace_id="0af7651916cd43dd8448eb211c80319c", user="bob"`},
	// Sorted by name; empty values dropped, as Loki's distributor drops
	// them.
	{pp("z", "1", "a", "", "m", "é\n\"x\""), `m="é\n\"x\"", z="1"`},
	// Names normalized as Loki's distributor does (otlptranslator).
	{pp("k8s.pod-name", "p", "1st", "a", "_priv", "b", "__sys", "c", "éa", "d", ".", "e"),
		`__sys="c", k8s_pod_name="p", key_="e", key_1st="a", key_a="d", key_priv="b"`},
	// The same pair twice is one pair.
	{pp("a", "1", "a", "1"), `a="1"`},
	// One name, two values (also after normalization): the last given
	// wins, as in Loki.
	{pp("a", "1", "a", "2"), `a="2"`},
	{pp("a.b", "1", "a_b", "2"), `a_b="2"`},
	// Refused: an empty name, one normalized to underscores only.
	{pp("", "1"), "refused: bad_metadata"},
	{pp("__.", "1"), "refused: bad_metadata"},
	// Loki's limits: 128 pairs, 64 KiB.
	{manyPairs(attrs.MaxPairs), fmt.Sprintf("%d pairs", attrs.MaxPairs)},
	{manyPairs(attrs.MaxPairs + 1), "refused: structured_metadata_too_many"},
	{pp("big", strings.Repeat("x", attrs.MaxBytes)), "refused: structured_metadata_too_large"},
	// A last empty value drops the name (Loki sets the pairs into a
	// labels builder, where an empty value deletes); an earlier one
	// loses to the later value.
	{pp("a", "1", "b", "x", "a", ""), `b="x"`},
	{pp("a", "", "a", "2"), `a="2"`},
	// Only empty values: no metadata.
	{pp("a", ""), ""},
}

// pp makes pairs of name, value arguments.
func pp(kv ...string) []attrs.Pair {
	var ps []attrs.Pair
	for i := 0; i+1 < len(kv); i += 2 {
		ps = append(ps, attrs.Pair{Name: kv[i], Value: kv[i+1]})
	}
	return ps
}

func manyPairs(n int) []attrs.Pair {
	var ps []attrs.Pair
	for i := range n {
		ps = append(ps, attrs.Pair{Name: fmt.Sprintf("k%03d", i), Value: "v"})
	}
	return ps
}

// wantMeta is what metaCases' entries decode to (decodedMeta's form).
func wantMeta(t *testing.T) []string {
	var out []string
	for i, c := range metaCases {
		w := c.want
		if strings.HasSuffix(w, " pairs") {
			enc, err := attrs.Encode(nil, c.pairs)
			if err != nil {
				t.Fatal(err)
			}
			w = metaStr(t, enc)
		}
		if strings.HasPrefix(w, "refused:") {
			out = append(out, fmt.Sprintf("l%d %s", i, w))
		} else {
			out = append(out, fmt.Sprintf("l%d | %s", i, w))
		}
	}
	return out
}

// metaJSONObject writes pairs as a JSON object in their order, repeated
// names included.
func metaJSONObject(ps []attrs.Pair) string {
	var parts []string
	for _, p := range ps {
		parts = append(parts, jsonQ(p.Name)+":"+jsonQ(p.Value))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// metaBodies are metaCases as a push body of each encoding.
func metaBodies() (lokiJSON, lokiProto, jsonl []byte) {
	var vals []string
	ps := PushStream{Labels: `{app="m"}`}
	var lines []string
	for i, c := range metaCases {
		line := fmt.Sprintf("l%d", i)
		ts := base - int64(len(metaCases)-i)
		v := fmt.Sprintf(`[%q,%q`, fmt.Sprint(ts), line)
		jl := fmt.Sprintf(`{"labels":{"app":"m"},"ts":%d,"line":%q`, ts, line)
		if c.pairs != nil {
			v += "," + metaJSONObject(c.pairs)
			key := "structuredMetadata"
			if i%2 == 1 {
				key = "metadata" // the synonym
			}
			jl += fmt.Sprintf(`,%q:%s`, key, metaJSONObject(c.pairs))
		}
		vals = append(vals, v+"]")
		lines = append(lines, jl+"}")
		ps.Entries = append(ps.Entries, PushEntry{ts, line})
		ps.Metadata = append(ps.Metadata, c.pairs)
	}
	lokiJSON = []byte(`{"streams":[{"stream":{"app":"m"},"values":[` + strings.Join(vals, ",") + `]}]}`)
	return lokiJSON, EncodePushProto([]PushStream{ps}), []byte(strings.Join(lines, "\n"))
}

// TestPushMetadataDecode: each push encoding's decoder makes exactly
// the hand-written metadata of metaCases of the same pairs.
func TestPushMetadataDecode(t *testing.T) {
	lj, lp, jl := metaBodies()
	want := wantMeta(t)
	for _, c := range []struct {
		name   string
		decode func() ([]pushStream, error)
	}{
		{"json", func() ([]pushStream, error) { return decodePushJSON(lj) }},
		{"protobuf", func() ([]pushStream, error) { return decodePushProto(lp) }},
		{"jsonl", func() ([]pushStream, error) { return decodePushJSONL(jl, 0) }},
	} {
		streams, err := c.decode()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := decodedMeta(t, streams); !slices.Equal(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, want)
		}
	}
}

// TestPushMetadataMalformed: metadata that is not an object of strings
// makes the whole push malformed, as Loki answers it (400, nothing
// stored); jsonl's null is no metadata.
func TestPushMetadataMalformed(t *testing.T) {
	e := newEnv(t, nil)
	val := func(third string) string {
		return `{"streams":[{"stream":{"app":"ok"},"values":[["1700000000000000000","good"]]},{"stream":{"app":"m"},"values":[["1700000000000000000","x",` + third + `]]}]}`
	}
	for _, c := range []struct{ body, want string }{
		{val(`{"a":1}`), `stream 1, entry 0: structured metadata "a": value must be a string, got a number`},
		{val(`{"a":null}`), `value must be a string, got null`},
		{val(`{"a":{"b":"c"}}`), `value must be a string, got an object`},
		{val(`{"a":["b"]}`), `value must be a string, got an array`},
		{val(`{"a":true}`), `value must be a string, got a boolean`},
		{val(`"a=b"`), `structured metadata must be an object of strings, got a string`},
		{val(`[]`), `got an array`},
	} {
		code, body := e.do("POST", "/loki/api/v1/push", []byte(c.body), "Content-Type", "application/json")
		body = errText(t, body)
		if code != 400 || !strings.Contains(body, c.want) || !strings.Contains(body, "nothing was stored") {
			t.Errorf("%s: %d %s, want 400 with %q", c.body, code, body, c.want)
		}
	}
	for _, c := range []struct{ body, want string }{
		{`{"labels":{"app":"m"},"line":"x","structuredMetadata":{"a":1}}`, `line 1: structured metadata "a": value must be a string`},
		{"{\"labels\":{\"app\":\"ok\"},\"line\":\"good\"}\n{\"labels\":{\"app\":\"m\"},\"line\":\"x\",\"structuredMetadata\":[]}", `line 2: structured metadata must be an object`},
	} {
		code, body := e.do("POST", "/api/v1/push/jsonl", []byte(c.body))
		body = errText(t, body)
		if code != 400 || !strings.Contains(body, c.want) || !strings.Contains(body, "nothing was stored") {
			t.Errorf("%s: %d %s, want 400 with %q", c.body, code, body, c.want)
		}
	}
	if got := e.stored("fake"); len(got) != 0 {
		t.Errorf("malformed pushes stored %q", got)
	}
	e.mustPush("/api/v1/push/jsonl", []byte(`{"labels":{"app":"n"},"ts":1700000000000000000,"line":"x","structuredMetadata":null,"metadata":null}`))
	if got := e.stored("fake"); !slices.Equal(got, e.withLevels([]string{`{app="n", service_name="n"} 1700000000000000000 "x" | `})) {
		t.Errorf("null metadata: %q", got)
	}
}

// TestPushMetadataStored pushes metaCases in each encoding and reads the
// store back: the valid entries with exactly their metadata, the refused
// ones named in the 400 (stream and entry) and not stored; then again
// after a flush to a segment, a restart, and a replay of the WAL.
func TestPushMetadataStored(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, func(c *Config) { c.DataDir = dir })
	lj, lp, jl := metaBodies()
	var want []string
	for i, c := range metaCases {
		if strings.HasPrefix(c.want, "refused") {
			continue
		}
		w := c.want
		if strings.HasSuffix(w, " pairs") {
			enc, _ := attrs.Encode(nil, c.pairs)
			w = metaStr(t, enc)
		}
		want = append(want, fmt.Sprintf(`{app="m", service_name="m"} %d "l%d" | %s`, base-int64(len(metaCases)-i), i, w))
	}
	slices.Sort(want)
	refused := 0
	for _, c := range metaCases {
		if strings.HasPrefix(c.want, "refused") {
			refused++
		}
	}
	for _, c := range []struct {
		tenant, path string
		body         []byte
		hdr          []string
		entryWord    string
	}{
		{"json", "/loki/api/v1/push", lj, []string{"Content-Type", "application/json"}, "entry 7"},
		{"proto", "/loki/api/v1/push", snappy.Encode(nil, lp), []string{"Content-Type", "application/x-protobuf"}, "entry 7"},
		{"jsonl", "/api/v1/push/jsonl", jl, nil, "line 8"},
	} {
		code, body := e.do("POST", c.path, c.body, append(c.hdr, "X-Scope-OrgID", c.tenant)...)
		body = errText(t, body)
		wantMsg := fmt.Sprintf("%d entries refused, the other %d stored", refused, len(want))
		if code != 400 || !strings.Contains(body, `stream 0 {app="m", service_name="m"}, entry 7:`) ||
			!strings.Contains(body, "empty name") || !strings.Contains(body, wantMsg) || !strings.Contains(body, c.entryWord) {
			t.Errorf("%s: %d %s\nwant 400 naming stream 0, entry 7 and %q", c.tenant, code, body, wantMsg)
		}
		wantStored(t, c.tenant, e, c.tenant, want)
	}
	// And OTLP, to its own tenant.
	if code, _, b := e.otlpPost(otlpProtoReq(otlpSample()), "Content-Type", "application/x-protobuf", "X-Scope-OrgID", "otlp"); code != 200 {
		t.Fatalf("otlp: %d %q", code, b)
	}
	wantStored(t, "otlp", e, "otlp", otlpSampleStored())
	wants := map[string][]string{"json": want, "proto": want, "jsonl": want, "otlp": otlpSampleStored()}
	tenants := []string{"json", "proto", "jsonl", "otlp"}

	// The metrics count the stored metadata bytes.
	_, m := e.get("/metrics")
	if !strings.Contains(m, "hay_ingested_structured_metadata_bytes_total ") || strings.Contains(m, "hay_ingested_structured_metadata_bytes_total 0\n") {
		t.Errorf("metadata bytes metric missing or 0")
	}
	if !strings.Contains(m, `hay_rejected_total{reason="bad_metadata"} 3`) {
		t.Errorf("bad_metadata rejections not counted: %s", grepLines(m, "hay_rejected_total"))
	}

	// A crash: the WAL (fsynced before the 204/400) of a copy of the data
	// directory taken now is replayed by a server opened on the copy.
	crash := t.TempDir()
	copyDir(t, dir, crash)
	e2 := newEnv(t, func(c *Config) { c.DataDir = crash })
	for _, tenant := range tenants {
		wantStored(t, tenant+" after a WAL replay", e2, tenant, wants[tenant])
		if ts, _ := e2.srv.openTenant(tenant, false); ts.w.Stats().Segments != 0 {
			t.Errorf("%s: the copy has segments: not a WAL replay", tenant)
		}
	}

	// Flushed to a segment, then after a clean restart.
	for _, tenant := range tenants {
		ts, err := e.srv.openTenant(tenant, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := ts.w.Flush(); err != nil {
			t.Fatal(err)
		}
		if st := ts.w.Stats(); st.Segments == 0 {
			t.Fatalf("%s: no segment after Flush: %+v", tenant, st)
		}
		wantStored(t, tenant+" after a flush", e, tenant, wants[tenant])
	}
	e.ts.Close()
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	e3 := newEnv(t, func(c *Config) { c.DataDir = dir })
	for _, tenant := range tenants {
		wantStored(t, tenant+" after a restart", e3, tenant, wants[tenant])
	}
}

// copyDir copies the regular files of src to dst (the data directory's
// lock file included: a flock does not travel with the copy).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkPushDecodeMetadata decodes a push of 1000 ~100-byte lines in
// each Loki encoding, without metadata and with a trace and span id an
// entry (what Alloy sends from OTel-instrumented services).
func BenchmarkPushDecodeMetadata(b *testing.B) {
	for _, meta := range []bool{false, true} {
		ps := PushStream{Labels: `{app="api", env="prod"}`}
		for i := range 1000 {
			ps.Entries = append(ps.Entries, PushEntry{base + int64(i), fmt.Sprintf("request %06d handled in 12.5ms method=GET path=/api/v1/items user=alice status=200 bytes=5120", i)})
			if meta {
				ps.Metadata = append(ps.Metadata, pp("trace_id", fmt.Sprintf("%032x", i*7919), "span_id", fmt.Sprintf("%016x", i)))
			}
		}
		var vals []string
		for i, e := range ps.Entries {
			v := fmt.Sprintf("[%q,%q", fmt.Sprint(e.Time), e.Line)
			if meta {
				v += "," + metaJSONObject(ps.Metadata[i])
			}
			vals = append(vals, v+"]")
		}
		js := []byte(`{"streams":[{"stream":{"app":"api","env":"prod"},"values":[` + strings.Join(vals, ",") + `]}]}`)
		pb := EncodePushProto([]PushStream{ps})
		for _, c := range []struct {
			name   string
			body   []byte
			decode func([]byte) ([]pushStream, error)
		}{{"protobuf", pb, decodePushProto}, {"json", js, decodePushJSON}} {
			b.Run(fmt.Sprintf("%s/metadata=%t", c.name, meta), func(b *testing.B) {
				b.SetBytes(int64(len(c.body)))
				b.ReportAllocs()
				for b.Loop() {
					s, err := c.decode(c.body)
					if err != nil || len(s[0].entries) != 1000 {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// parseMetaJSONTokens is parseMetaJSON written plainly on a
// json.Decoder's tokens: the oracle of FuzzParseMetaJSON.
func parseMetaJSONTokens(raw []byte, dst []attrs.Pair) ([]attrs.Pair, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber() // (1e700 is a number, not an error)
	tok, err := d.Token()
	if err != nil {
		return dst, fmt.Errorf("structured metadata: %w", err)
	}
	if tok != json.Delim('{') {
		return dst, fmt.Errorf("structured metadata must be an object of strings, got %s", jsonKind(tok))
	}
	for d.More() {
		tok, err = d.Token()
		if err != nil {
			return dst, fmt.Errorf("structured metadata: %w", err)
		}
		name := tok.(string) // a key, the decoder guarantees it
		tok, err = d.Token()
		if err != nil {
			return dst, fmt.Errorf("structured metadata: %w", err)
		}
		v, ok := tok.(string)
		if !ok {
			return dst, fmt.Errorf("structured metadata %q: value must be a string, got %s", name, jsonKind(tok))
		}
		dst = append(dst, attrs.Pair{Name: name, Value: v})
	}
	if _, err := d.Token(); err != nil { // the closing '}'
		return dst, fmt.Errorf("structured metadata: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return dst, errors.New("structured metadata: data after the object")
	}
	return dst, nil
}

// jsonKind names the JSON type of a token.
func jsonKind(tok json.Token) string {
	switch t := tok.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case json.Delim:
		if t == '[' {
			return "an array"
		}
		return "an object"
	}
	return fmt.Sprintf("%T", tok)
}

// FuzzParseMetaJSON: parseMetaJSON, which walks JSON encoding/json has
// already checked, reads every valid JSON value as the json.Decoder
// tokens do: the same pairs, in order, or the same error.
func FuzzParseMetaJSON(f *testing.F) {
	for _, s := range []string{`{}`, ` { "a" : "b" , "c":"d\u00e9\"\\"} `, `{"a":1}`, `{"a":null}`, `null`, `"x"`, `[]`,
		`{"a":{"b":"c"}}`, `{"a":"1","a":"2"}`, `{"\u0061":"\ud83d\ude00","b":"\/"}`, `{"a":"\ud800"}`, `{"a":"x"} `, `{"a":true}`, `-1.5e3`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		got, err := parseMetaJSON(raw, nil)
		want, werr := parseMetaJSONTokens(raw, nil)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: error %v, oracle %v", raw, err, werr)
		}
		if err != nil {
			if utf8.Valid(raw) && err.Error() != werr.Error() {
				t.Fatalf("%q: error %q, oracle %q", raw, err, werr)
			}
			return
		}
		// (encoding/json makes a byte that is not UTF-8 U+FFFD; the
		// walk keeps it, and fromJSON refuses such metadata.)
		if utf8.Valid(raw) && !slices.Equal(got, want) {
			t.Fatalf("%q: %q, oracle %q", raw, got, want)
		}
	})
}

// FuzzMetaName: metaName against Loki's rule written with a regexp (as
// Prometheus' strutil.SanitizeLabelName writes the replacement), and its
// results are label names that normalize to themselves.
func FuzzMetaName(f *testing.F) {
	for _, s := range []string{"", "a", "k8s.pod.name", "1st", "_x", "__x", "_", "__", ".", "__.", "é", "a\xffb", "A_b9", "9", "_9"} {
		f.Add(s)
	}
	nonAlnum := regexp.MustCompile(`[^a-zA-Z0-9]`)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := metaName(s)
		want := nonAlnum.ReplaceAllString(s, "_")
		switch {
		case want == "":
		case want[0] >= '0' && want[0] <= '9':
			want = "key_" + want
		case want[0] == '_' && !strings.HasPrefix(want, "__"):
			want = "key" + want
		}
		if s == "" || want != s && strings.Trim(want, "_") == "" {
			if err == nil {
				t.Fatalf("%q: %q, want an error", s, got)
			}
			return
		}
		if err != nil || got != want {
			t.Fatalf("%q: %q %v, want %q", s, got, err, want)
		}
		if !attrs.ValidName(got) {
			t.Fatalf("%q: %q is not a label name", s, got)
		}
		if again, err := metaName(got); err != nil || again != got {
			t.Fatalf("%q: %q normalizes again to %q %v", s, got, again, err)
		}
	})
}
