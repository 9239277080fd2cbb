package ingest

import "testing"

// FuzzParseFormat: exactly the three names String prints are accepted,
// each as the Format that prints it; anything else (other case, spaces,
// "Format(3)") is an error.
func FuzzParseFormat(f *testing.F) {
	for _, s := range []string{"auto", "plain", "jsonl", "", "AUTO", " plain", "json", "jsonl\n", "Format(3)", "plain\x00"} {
		f.Add(s)
	}
	names := map[string]Format{}
	for _, fm := range []Format{FormatAuto, FormatPlain, FormatJSONL} {
		names[fm.String()] = fm
	}
	if len(names) != 3 || names["auto"] != FormatAuto || names["plain"] != FormatPlain || names["jsonl"] != FormatJSONL {
		f.Fatalf("Format names: %v", names)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseFormat(s)
		want, ok := names[s]
		if ok != (err == nil) || got != want {
			t.Fatalf("ParseFormat(%q) = %v, %v; want %v, %v", s, got, err, want, ok)
		}
		if err == nil && got.String() != s {
			t.Fatalf("ParseFormat(%q).String() = %q", s, got.String())
		}
	})
}
