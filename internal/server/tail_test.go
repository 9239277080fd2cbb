package server

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
)

// It runs with and without detected_level; with, the live entry "ERROR
// later timeout" is a stream of its own (detected_level error).
func TestLokiTailWebSocket(t *testing.T) {
	levelModes(t, testLokiTailWebSocket)
}

func testLokiTailWebSocket(t *testing.T, on bool) {
	e := newEnv(t, levelMod(on))
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base-1000, "old timeout"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(e.ts.URL, "http") + "/loki/api/v1/tail?query=" + q(`{app="x"} |= "timeout"`) + fmt.Sprintf("&start=%d", base-2000)
	c, _, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	read := func() string {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	wantJSON(t, "replay", read(), fmt.Sprintf(`{"streams":[{"stream":{"app":"x",`+dlJSON(on, "old timeout")+`"service_name":"x"},"values":[["%d","old timeout"]]}],"dropped_entries":null}`, base-1000))
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base, "no match", "new timeout"))
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"y"}`, base, "other stream timeout"))
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base+5, "ERROR later timeout"))
	wantJSON(t, "live 1", read(), fmt.Sprintf(`{"streams":[{"stream":{"app":"x",`+dlJSON(on, "new timeout")+`"service_name":"x"},"values":[["%d","new timeout"]]}],"dropped_entries":null}`, base+1))
	wantJSON(t, "live 2", read(), fmt.Sprintf(`{"streams":[{"stream":{"app":"x",`+dlJSON(on, "ERROR later timeout")+`"service_name":"x"},"values":[["%d","ERROR later timeout"]]}],"dropped_entries":null}`, base+5))
}

func TestNativeTailSSE(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/api/v1/tail?q=ERR&fold=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	br := bufio.NewReader(resp.Body)
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base, "fine", "an error here"))
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := strings.CutPrefix(l, "data: "); ok {
			var got nativeLine
			if err := json.Unmarshal([]byte(d), &got); err != nil {
				t.Fatal(err)
			}
			if got.Line != "an error here" || got.TS != fmt.Sprint(base+1) || got.Labels["app"] != "x" {
				t.Fatalf("event %s", d)
			}
			return
		}
	}
}

func TestNativeTailBadQuery(t *testing.T) {
	e := newEnv(t, nil)
	code, body := e.get("/api/v1/tail?q=" + q(`{app=`))
	if code != 200 || !strings.HasPrefix(body, `data: {"error":`) {
		t.Fatalf("bad tail query: %d %q", code, body)
	}
}

// tailDial opens a Loki tail with the given raw query string (after
// "query=..."), and returns a reader of its messages.
func tailDial(t *testing.T, e *testEnv, ctx context.Context, params string) (*websocket.Conn, func() string) {
	t.Helper()
	u := "ws" + strings.TrimPrefix(e.ts.URL, "http") + "/loki/api/v1/tail?" + params
	c, _, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c, func() string {
		t.Helper()
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
}

// TestLokiTailParams: bad parameters are a 400 before the upgrade, with
// Loki's message for delay_for over 5.
func TestLokiTailParams(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct{ params, want string }{
		{"delay_for=6", "delay_for can't be greater than 5"},
		{"delay_for=-1", `delay_for=\"-1\": want a whole number of seconds`},
		{"delay_for=1.5", `delay_for=\"1.5\": want a whole number of seconds`},
		{"start=yesterday", `start=\"yesterday\": want Unix nanoseconds`},
		{"limit=x", `limit=\"x\": want a non-negative integer`},
	} {
		code, body := e.get("/loki/api/v1/tail?query=" + q(`{app="x"}`) + "&" + c.params)
		if code != 400 || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s; want 400 with %q", c.params, code, body, c.want)
		}
	}
	for _, ok := range []string{"delay_for=0", "delay_for=5", "limit=0", "start=1700000000"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, read := tailDial(t, e, ctx, "query="+q(`{app="x"}`)+"&"+ok)
		e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base, "line"))
		if got := read(); !strings.Contains(got, `"line"`) {
			t.Errorf("%s: %s", ok, got)
		}
		c.CloseNow()
		cancel()
	}
}

// TestLokiTailDefaultReplay: without start, the tail replays the newest
// limit entries of the last hour (the server's clock is base), oldest
// first, then goes live.
func TestLokiTailDefaultReplay(t *testing.T) {
	e := newEnv(t, nil)
	hour := int64(time.Hour)
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base-hour-10, "too old"))
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base-hour+10, "a", "b", "c"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, read := tailDial(t, e, ctx, "query="+q(`{app="x"}`)+"&limit=2")
	wantJSON(t, "replay", read(), fmt.Sprintf(`{"streams":[{"stream":{"app":"x",`+dlJSON(true, "b")+`"service_name":"x"},"values":[["%d","b"],["%d","c"]]}],"dropped_entries":null}`, base-hour+11, base-hour+12))
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base, "live"))
	wantJSON(t, "live", read(), fmt.Sprintf(`{"streams":[{"stream":{"app":"x",`+dlJSON(true, "live")+`"service_name":"x"},"values":[["%d","live"]]}],"dropped_entries":null}`, base))
}

// TestLokiTailDelay: with delay_for, entries that arrive in the wrong
// order within the delay go out sorted by time, in one message, and not
// before the delay is over.
func TestLokiTailDelay(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// start in an hour: no replay, which would race the pushes below.
	now := time.Now().UnixNano()
	_, read := tailDial(t, e, ctx, "query="+q(`{app=~"x|y"}`)+"&delay_for=1"+fmt.Sprintf("&start=%d", now+int64(time.Hour)))
	start := time.Now()
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, now+2e6, "third"))
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"y"}`, now+1e6, "second"))
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, now, "first"))
	got := read()
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Errorf("sent after %v, before delay_for=1", waited)
	}
	wantJSON(t, "delayed", got, fmt.Sprintf(`{"streams":[{"stream":{"app":"x",`+dlJSON(true, "first")+`"service_name":"x"},"values":[["%d","first"],["%d","third"]]},{"stream":{"app":"y",`+dlJSON(true, "second")+`"service_name":"y"},"values":[["%d","second"]]}],"dropped_entries":null}`, now, now+2e6, now+1e6))
}

// TestTailDelayOrder checks tailDelay against an oracle: whatever order
// entries arrive in, each goes out at its due time (its own time, or its
// arrival when that is earlier, plus the delay), and each message is
// sorted by time.
func TestTailDelayOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	t0 := time.Unix(1_700_000_000, 0)
	for round := 0; round < 200; round++ {
		d := &tailDelay{delay: time.Duration(1+r.IntN(5)) * time.Second}
		type want struct {
			due time.Time
			e   tailEntry
		}
		var all []want
		now := t0
		n := 0
		for step := 0; step < 20; step++ {
			now = now.Add(time.Duration(r.IntN(800)) * time.Millisecond)
			var batch []tailEntry
			for k := r.IntN(4); k > 0; k-- {
				ts := now.Add(time.Duration(r.IntN(6000)-4000) * time.Millisecond)
				e := tailEntry{labels: "{}", time: ts.UnixNano(), line: []byte(fmt.Sprint(n))}
				n++
				batch = append(batch, e)
				due := ts
				if due.After(now) {
					due = now
				}
				all = append(all, want{due.Add(d.delay), e})
			}
			d.add(batch, now)
			out := d.take(now)
			if !slices.IsSortedFunc(out, func(a, b tailEntry) int { return cmp.Compare(a.time, b.time) }) {
				t.Fatalf("round %d: a message out of time order", round)
			}
			for _, e := range out {
				i := slices.IndexFunc(all, func(w want) bool { return string(w.e.line) == string(e.line) })
				if i < 0 {
					t.Fatalf("round %d: %s sent twice or never added", round, e.line)
				}
				if all[i].due.After(now) {
					t.Fatalf("round %d: %s sent at %v, due %v", round, e.line, now, all[i].due)
				}
				all = slices.Delete(all, i, i+1)
			}
			for _, w := range all {
				if !w.due.After(now) {
					t.Fatalf("round %d: %s due %v still held at %v", round, w.e.line, w.due, now)
				}
			}
		}
		if rest := d.take(now.Add(time.Hour)); len(rest) != len(all) {
			t.Fatalf("round %d: %d held at the end, want %d", round, len(rest), len(all))
		}
	}
}

func TestCloseReason(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes
	got := closeReason(long)
	if len(got) > 123 || !utf8.ValidString(got) || !strings.HasPrefix(long, got) || len(got) < 121 {
		t.Errorf("closeReason: %d bytes %q", len(got), got)
	}
	if closeReason("short") != "short" {
		t.Error("short reason changed")
	}
}

// TestLokiTailReplayThenLive: a tail opened while entries keep coming
// gets every entry once, replayed or live, none lost in between and none
// twice (an entry committed while the replay reads the store reaches
// both the replay and the live side).
func TestLokiTailReplayThenLive(t *testing.T) {
	e := newEnv(t, nil)
	const total = 400
	pushed := make(chan int, total)
	go func() {
		defer close(pushed)
		for n := 0; n < total; n++ {
			code, body := e.do("POST", "/loki/api/v1/push", jsonPush(`{"app":"x"}`, base+int64(n), fmt.Sprintf("n=%03d", n)), "Content-Type", "application/json")
			if code != 204 {
				t.Errorf("push %d: %d %s", n, code, body)
				return
			}
			pushed <- n
		}
	}()
	for n := range pushed { // open the tail in the middle of the pushes
		if n == total/4 {
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, read := tailDial(t, e, ctx, "query="+q(`{app="x"}`)+fmt.Sprintf("&start=%d&limit=5000", base-1))
	seen := make([]int, total)
	for got := 0; got < total; {
		var msg struct {
			Streams []lokiStream `json:"streams"`
		}
		if err := json.Unmarshal([]byte(read()), &msg); err != nil {
			t.Fatal(err)
		}
		for _, s := range msg.Streams {
			for _, v := range s.Values {
				var n int
				if _, err := fmt.Sscanf(v[1], "n=%d", &n); err != nil || n < 0 || n >= total {
					t.Fatalf("unexpected line %q", v[1])
				}
				if seen[n]++; seen[n] > 1 {
					t.Fatalf("n=%d delivered twice", n)
				}
				got++
			}
		}
	}
	for range pushed {
	}
}
