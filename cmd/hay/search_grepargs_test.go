package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// grepArgsStore ingests content as one file and returns the store and the
// file's path.
func grepArgsStore(t *testing.T, content string) (data, file string) {
	t.Helper()
	dir := t.TempDir()
	file = filepath.Join(dir, "f.log")
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	data = filepath.Join(dir, "data")
	if _, code := hayInProcess(t, "ingest", "--data", data, file); code != 0 {
		t.Fatalf("ingest exit %d", code)
	}
	return data, file
}

// TestSearchPatternLines: a pattern with newlines is one pattern per line,
// as in grep (an entry never holds a newline, so the whole pattern could
// match nothing); an empty line matches every entry. Found by the
// differential test.
func TestSearchPatternLines(t *testing.T) {
	data, file := grepArgsStore(t, "a1\nb2\nc3\nA4\n")
	for _, c := range []struct{ hay, grep []string }{
		{[]string{"--", "a\nb"}, []string{"-F", "--", "a\nb"}},
		{[]string{"-c", "--", "a\nb"}, []string{"-F", "-c", "--", "a\nb"}},
		{[]string{"-i", "--", "a\nB"}, []string{"-F", "-i", "--", "a\nB"}},
		{[]string{"--", "a\n"}, []string{"-F", "--", "a\n"}},
		{[]string{"--", "\n"}, []string{"-F", "--", "\n"}},
		{[]string{"-v", "a\nb"}, []string{"-F", "-v", "-e", "a\nb"}},
		{[]string{"-e", "a\nb", "-e", "c"}, []string{"-F", "-e", "a\nb", "-e", "c"}},
		{[]string{"-e", "zz\nyy"}, []string{"-F", "-e", "zz\nyy"}},
		{[]string{"-E", "a|x\nc"}, []string{"-E", "-e", "a|x\nc"}},
		{[]string{"-A", "1", "--", "b\nz"}, []string{"-F", "-A", "1", "--", "b\nz"}},
	} {
		want, wcode := grepArgs(t, file, c.grep...)
		got, code := hayInProcess(t, append([]string{"search", "--data", data}, c.hay...)...)
		if code != wcode || !bytes.Equal(got, want) {
			t.Errorf("hay search %q: %q exit %d; grep %q: %q exit %d", c.hay, got, code, c.grep, want, wcode)
		}
	}
}

// TestSearchFlagValuesNotRewritten: grep's attached context counts (-A3)
// are accepted, but not rewritten where they are the value of a flag:
// `-e -A3` searches for "-A3". Found by the differential test.
func TestSearchFlagValuesNotRewritten(t *testing.T) {
	data, file := grepArgsStore(t, "x -A3 y\nx -A=3 y\nplain\nx -C2\n")
	for _, c := range []struct{ hay, grep []string }{
		{[]string{"-e", "-A3"}, []string{"-F", "-e", "-A3"}},
		{[]string{"-v", "-A3"}, []string{"-F", "-v", "-e", "-A3"}},
		{[]string{"-e", "-C2", "-A1"}, []string{"-F", "-e", "-C2", "-A1"}},
		{[]string{"-A1", "-e", "-A3"}, []string{"-F", "-A1", "-e", "-A3"}},
		{[]string{"-c", "-e", "-A=3"}, []string{"-F", "-c", "-e", "-A=3"}},
		{[]string{"-E", "-A3"}, []string{"-E", "-e", "-A3"}},
	} {
		want, wcode := grepArgs(t, file, c.grep...)
		got, code := hayInProcess(t, append([]string{"search", "--data", data}, c.hay...)...)
		if code != wcode || !bytes.Equal(got, want) {
			t.Errorf("hay search %q: %q exit %d; grep %q: %q exit %d", c.hay, got, code, c.grep, want, wcode)
		}
	}
}

// TestSearchFoldASCII: -i folds ASCII letters only in every literal, as
// grep -F -i in the C locale: a PATTERN of several lines, -e and -v (not
// σ for Σ, not the Kelvin sign for k), and a literal that is not valid
// UTF-8 works with -i too. Only -E regexes fold as (?i). Found by the
// differential test.
func TestSearchFoldASCII(t *testing.T) {
	data, file := grepArgsStore(t, "\xcf\x83\n\xce\xa3\nx\n\xff\n\xe2\x84\xaa\nk\nK\n")
	for _, c := range []struct{ hay, grep []string }{
		{[]string{"-i", "--", "\xce\xa3\nx"}, []string{"-F", "-i", "--", "\xce\xa3\nx"}},
		{[]string{"-i", "--", "x\n\xff"}, []string{"-F", "-i", "--", "x\n\xff"}},
		{[]string{"-i", "--", "k\nzz"}, []string{"-F", "-i", "--", "k\nzz"}},
		{[]string{"-i", "-e", "k", "-e", "\xce\xa3"}, []string{"-F", "-i", "-e", "k", "-e", "\xce\xa3"}},
		{[]string{"-i", "-e", "\xff"}, []string{"-F", "-i", "-e", "\xff"}},
		{[]string{"-i", "-v", "zzz", "k"}, []string{"-F", "-i", "k"}},
		{[]string{"-i", "-v", "K"}, []string{"-F", "-i", "-v", "-e", "K"}},
	} {
		want, wcode := grepArgs(t, file, c.grep...)
		got, code := hayInProcess(t, append([]string{"search", "--data", data}, c.hay...)...)
		if code != wcode || !bytes.Equal(got, want) {
			t.Errorf("hay search %q: %q exit %d; grep %q: %q exit %d", c.hay, got, code, c.grep, want, wcode)
		}
	}
	// -E folds as (?i): the Kelvin sign is a k there.
	got, code := hayInProcess(t, "search", "--data", data, "-i", "-E", "^k$")
	if code != 0 || string(got) != "\xe2\x84\xaa\nk\nK\n" {
		t.Errorf("hay search -i -E ^k$: %q exit %d", got, code)
	}
}
