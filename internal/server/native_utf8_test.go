package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"haystack/internal/store"
)

// TestNativeInvalidUTF8: the native search sends a line that is not valid
// UTF-8 with U+FFFD in "line" and its exact bytes in "line_base64", which
// is absent for valid lines.
func TestNativeInvalidUTF8(t *testing.T) {
	lines := [][]byte{[]byte("ok line \xffx"), []byte("valid line x"), {0xfe, 'x', 0xc3}}
	e := newEnv(t, func(c *Config) {
		st, err := store.Open(filepath.Join(c.DataDir, DefaultTenant), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		id := st.Stream(`{app="a"}`)
		var b store.Batch
		for i, l := range lines {
			b.Entries = append(b.Entries, store.Entry{Time: base - int64(10-i)*1e9, Stream: id, Line: l})
		}
		if err := st.Append(&b); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	})
	code, body := e.get(fmt.Sprintf("/api/v1/search?q=x&direction=forward&start=%d&end=%d", base-60e9, base))
	if code != 200 {
		t.Fatalf("search: %d %s", code, body)
	}
	var got []nativeLine
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		var l nativeLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.TS == "" {
			continue // the trailer
		}
		got = append(got, l)
	}
	if len(got) != len(lines) {
		t.Fatalf("%d lines, want %d: %s", len(got), len(lines), body)
	}
	for i, l := range got {
		switch {
		case i == 1: // the valid one
			if l.Line != string(lines[i]) || l.LineBase64 != nil {
				t.Errorf("valid line: %q, base64 %q", l.Line, l.LineBase64)
			}
		case string(l.LineBase64) != string(lines[i]) || l.Line != strings.ToValidUTF8(string(lines[i]), "\uFFFD"):
			t.Errorf("line %d: %q base64 %q, want the bytes %q", i, l.Line, l.LineBase64, lines[i])
		}
	}
	if !strings.Contains(body, `"line_base64":"b2sgbGluZSD/eA=="`) || strings.Count(body, "line_base64") != 2 {
		t.Fatalf("line_base64 not as expected in:\n%s", body)
	}
}
