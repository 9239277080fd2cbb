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
	time.Sleep(100 * time.Millisecond)
	p.Done.Store(30)
	time.Sleep(400 * time.Millisecond)
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
