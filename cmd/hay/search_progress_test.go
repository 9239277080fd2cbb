package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"haystack/internal/search"
)

// TestShowProgress: after the delay the line shows done of total and the
// percentage, is redrawn in place, and stop erases it; stop is idempotent.
func TestShowProgress(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var p search.Progress
	p.Total.Store(40)
	p.Done.Store(10)
	stop := showProgress(f, &p, 10*time.Millisecond)
	// Wait for each state to be drawn (redraws come every 250 ms).
	waitFor := func(text string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			if out, _ := os.ReadFile(f.Name()); strings.Contains(string(out), text) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %q drawn after 10 s", text)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("10 of 40 blocks (25%)")
	p.Done.Store(30)
	waitFor("30 of 40 blocks (75%)")
	stop()
	stop()
	out, _ := os.ReadFile(f.Name())
	s := string(out)
	if !strings.HasPrefix(s, "\rhay search: 10 of 40 blocks (25%) ") || !strings.Contains(s, "\rhay search: 30 of 40 blocks (75%) ") || !strings.HasSuffix(s, "\r\033[K") {
		t.Fatalf("progress output %q", s)
	}
	// Stopped before the delay: nothing is drawn.
	g, _ := os.CreateTemp(t.TempDir(), "stderr2")
	defer g.Close()
	showProgress(g, &p, time.Hour)()
	if out, _ := os.ReadFile(g.Name()); len(out) != 0 {
		t.Fatalf("drawn before the delay: %q", out)
	}
}
