package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

func basicHeader(user, pw string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
}

// syncBuffer is a log destination safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAuthFailureLimit: a client address gets DefaultFailureBurst failed
// logins, then 429 with Retry-After and no credential check, whatever it
// sends; other addresses are not affected; requests without credentials
// do not count; a failed login is logged once a minute per address; and
// a negative FailuresPerMinute turns the limit off. Before, one client
// made ~22,000 guesses a second, unlogged (auth audit A4).
func TestAuthFailureLimit(t *testing.T) {
	auth, err := ParseAuth(strings.NewReader("basic carol carolpw teamc\ntoken tok1 teamt\n"))
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	e := newEnv(t, func(c *Config) {
		c.Auth = auth
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	const path = "/loki/api/v1/labels"
	for range 50 {
		if code, _ := e.get(path); code != 401 {
			t.Fatalf("no credentials: %d, want 401", code)
		}
	}
	for i := range DefaultFailureBurst {
		if code, body := e.get(path, "Authorization", basicHeader("carol", fmt.Sprint("guess", i))); code != 401 {
			t.Fatalf("guess %d: %d %s, want 401", i, code, body)
		}
	}
	for _, h := range []string{basicHeader("carol", "again"), "Bearer nope", basicHeader("carol", "carolpw")} {
		req, _ := http.NewRequest("GET", e.ts.URL+path, nil)
		req.Header.Set("Authorization", h)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != 429 || ra < 1 || ra > 6 {
			t.Fatalf("after %d failures, %q: %d with Retry-After %q, want 429 within 6 s", DefaultFailureBurst, h, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if n := strings.Count(logs.String(), "failed login"); n != 1 {
		t.Errorf("%d failed-login log lines, want 1 (once a minute per address):\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "user=carol") || strings.Contains(logs.String(), "guess") {
		t.Errorf("log should name the user and never the password:\n%s", logs.String())
	}
	// Another address still logs in.
	for _, c := range []struct {
		h    string
		want int
	}{{basicHeader("carol", "carolpw"), 200}, {"Bearer tok1", 200}, {basicHeader("carol", "x"), 401}} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", path, nil)
		req.RemoteAddr = "10.1.2.3:4567"
		req.Header.Set("Authorization", c.h)
		e.srv.Handler().ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Fatalf("from another address, %q: %d, want %d", c.h, rec.Code, c.want)
		}
	}

	// No limit.
	auth2, err := ParseAuth(strings.NewReader("basic carol carolpw\n"))
	if err != nil {
		t.Fatal(err)
	}
	auth2.FailuresPerMinute = -1
	e2 := newEnv(t, func(c *Config) { c.Auth = auth2; c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	for i := range 3 * DefaultFailureBurst {
		if code, _ := e2.get(path, "Authorization", basicHeader("carol", fmt.Sprint("g", i))); code != 401 {
			t.Fatalf("no limit, guess %d: %d", i, code)
		}
	}
	if code, _ := e2.get(path, "Authorization", basicHeader("carol", "carolpw")); code != 200 {
		t.Fatalf("no limit, right password: %d", code)
	}
}

// TestFailLimiterRefill: the allowance comes back at FailuresPerMinute,
// the wait is what is left of the next one, and addresses are separate.
func TestFailLimiterRefill(t *testing.T) {
	var l failLimiter
	t0 := time.Unix(1000, 0)
	const perMin, burst = 60, 3 // one a second
	for i := range 3 {
		if w := l.take("a", perMin, burst, t0); w != 0 {
			t.Fatalf("failure %d: wait %v", i, w)
		}
	}
	if w := l.take("a", perMin, burst, t0); w != time.Second {
		t.Fatalf("spent: wait %v, want 1s", w)
	}
	if w := l.take("b", perMin, burst, t0); w != 0 {
		t.Fatalf("another address: wait %v", w)
	}
	if w := l.take("a", perMin, burst, t0.Add(400*time.Millisecond)); w != 600*time.Millisecond {
		t.Fatalf("0.4 s later: wait %v, want 600ms", w)
	}
	if w := l.take("a", perMin, burst, t0.Add(time.Second)); w != 0 {
		t.Fatalf("1 s later: wait %v", w)
	}
	if w := l.take("a", perMin, burst, t0.Add(time.Second)); w != time.Second {
		t.Fatalf("spent again: wait %v", w)
	}
	if w := l.take("a", perMin, burst, t0.Add(time.Hour)); w != 0 {
		t.Fatalf("an hour later: wait %v", w)
	}
	// The table forgets addresses back at full allowance past its bound.
	for i := range maxFailAddrs + 5 {
		l.take(fmt.Sprint("x", i), perMin, burst, t0.Add(time.Duration(i)*time.Minute))
	}
	if n := len(l.m); n > maxFailAddrs {
		t.Fatalf("%d addresses remembered, bound %d", n, maxFailAddrs)
	}
}

// TestAuthBcryptBounded: bcrypt checks run at most GOMAXPROCS/2 at a time
// (a flood of bearer guesses against bcrypt tokens took every core from
// the queries: auth audit A5), and an unknown basic user costs a bcrypt
// check like a known one's wrong password, so timing does not tell which
// users exist (A3).
func TestAuthBcryptBounded(t *testing.T) {
	var lines []string
	for i := range 3 {
		h, err := bcrypt.GenerateFromPassword([]byte(fmt.Sprint("tok", i)), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("token %s tenant%d", h, i))
	}
	h, _ := bcrypt.GenerateFromPassword([]byte("alicepw"), bcrypt.MinCost)
	lines = append(lines, fmt.Sprintf("basic alice %s", h), "basic carol carolpw")
	auth, err := ParseAuth(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	auth.FailuresPerMinute = -1
	var running, most, calls atomic.Int64
	old := bcryptCompare
	t.Cleanup(func() { bcryptCompare = old })
	bcryptCompare = func(hash, pw []byte) error {
		calls.Add(1)
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
		running.Add(-1)
		return old(hash, pw)
	}
	e := newEnv(t, func(c *Config) { c.Auth = auth })
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			if code, _ := e.get("/loki/api/v1/labels", "Authorization", fmt.Sprint("Bearer guess", i)); code != 401 {
				t.Errorf("guess: %d", code)
			}
		})
	}
	wg.Wait()
	slots := int64(max(1, runtimeProcs()/2))
	if m := most.Load(); m > slots || m < 1 {
		t.Fatalf("%d bcrypt checks at once, want at most %d", m, slots)
	}
	if c := calls.Load(); c != 16*3 {
		t.Fatalf("%d bcrypt checks for 16 bearer guesses against 3 bcrypt tokens, want 48", c)
	}
	for _, c := range []struct {
		user, pw string
		code     int
		checks   int64
	}{
		{"alice", "alicepw", 200, 1},
		{"alice", "wrong", 401, 1},
		{"nosuchuser", "x", 401, 1}, // the dummy check
		{"carol", "x", 401, 1},      // a plain user's wrong password: the dummy check too
		{"carol", "carolpw", 200, 0},
	} {
		calls.Store(0)
		auth.mu.Lock()
		auth.accepted = nil // no remembered success
		auth.mu.Unlock()
		if code, _ := e.get("/loki/api/v1/labels", "Authorization", basicHeader(c.user, c.pw)); code != c.code || calls.Load() != c.checks {
			t.Errorf("%s: %d after %d bcrypt checks, want %d after %d", c.user, code, calls.Load(), c.code, c.checks)
		}
	}
}

// TestAuthFileDuplicates: a user or token secret on two lines is refused,
// naming both lines: the first would win, so a leftover line without a
// tenant kept access to every tenant; and so is a malformed bcrypt hash
// (auth audit A7).
func TestAuthFileDuplicates(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"basic carol a teamc\nbasic carol b\n", `auth file line 2: user "carol" is already on line 1`},
		{"# x\ntoken t1 a\n\ntoken t1 b\n", "auth file line 4: this token is already on line 2"},
		{"token t1 a\ntoken sha256:" + sha256Hex("t1") + " b\n", "auth file line 2: this token is already on line 1"},
	} {
		if _, err := ParseAuth(strings.NewReader(c.file)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.file, err, c.want)
		}
	}
	// A bcrypt hash with a typo (bcrypt.Cost reads only its prefix)
	// would match no password.
	h, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{string(h[:59]) + "!", string(h[:59]), string(h) + "x"} {
		if _, err := ParseAuth(strings.NewReader("basic alice " + bad + "\n")); err == nil || !strings.Contains(err.Error(), "auth file line 1: bad bcrypt hash") {
			t.Errorf("hash %q: %v", bad, err)
		}
	}
	if _, err := ParseAuth(strings.NewReader("basic alice " + string(h) + "\n")); err != nil {
		t.Fatal(err)
	}
	// Same secret, different kinds or users: fine.
	if _, err := ParseAuth(strings.NewReader("basic a pw\nbasic b pw\ntoken pw\n")); err != nil {
		t.Fatal(err)
	}
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestAuthConcurrentGuessesWithinLimit: simultaneous guesses from one
// address are bounded by its allowance too: each takes one before its
// check. Charged after the check, 20 guesses were bcrypt-checked with a
// burst of 3 (review A1).
func TestAuthConcurrentGuessesWithinLimit(t *testing.T) {
	h, _ := bcrypt.GenerateFromPassword([]byte("alicepw"), bcrypt.MinCost)
	auth, err := ParseAuth(strings.NewReader("basic alice " + string(h) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	auth.FailureBurst, auth.FailuresPerMinute = 3, 1
	var calls atomic.Int64
	release := make(chan struct{})
	old := bcryptCompare
	t.Cleanup(func() { bcryptCompare = old })
	bcryptCompare = func(hash, pw []byte) error {
		calls.Add(1)
		<-release
		return old(hash, pw)
	}
	e := newEnv(t, func(c *Config) { c.Auth = auth })
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { e.get("/loki/api/v1/labels", "Authorization", basicHeader("alice", fmt.Sprint("guess", i))) })
	}
	// The first check holds the only slot(s); the others have passed
	// wait() and queue for a slot.
	time.Sleep(300 * time.Millisecond)
	close(release)
	wg.Wait()
	if c := calls.Load(); c > int64(auth.FailureBurst) {
		t.Errorf("%d guesses were bcrypt-checked from one address with a burst of %d", c, auth.FailureBurst)
	}
}

// TestAuthCancelledWaitNotAFailure: a right-password request whose client
// gives up while it waits for a bcrypt slot (Grafana cancelling a
// dashboard's queries) is not a failed login; two of them locked the
// user out with a burst of 2 (review A2).
func TestAuthCancelledWaitNotAFailure(t *testing.T) {
	h, _ := bcrypt.GenerateFromPassword([]byte("alicepw"), bcrypt.MinCost)
	auth, err := ParseAuth(strings.NewReader("basic alice " + string(h) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	auth.FailureBurst, auth.FailuresPerMinute = 2, 1
	auth.slots = make(chan struct{}, 1)
	auth.slots <- struct{}{} // a slot held by someone else's bcrypt check
	e := newEnv(t, func(c *Config) { c.Auth = auth })
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/loki/api/v1/labels", nil)
		req.Header.Set("Authorization", basicHeader("alice", "alicepw"))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		cancel()
	}
	time.Sleep(300 * time.Millisecond) // the server sees the closed connections
	<-auth.slots                       // the slot is free again
	if code, body := e.get("/loki/api/v1/labels", "Authorization", basicHeader("alice", "alicepw")); code != 200 {
		t.Errorf("right password after two cancelled requests: %d %s", code, body)
	}
}
