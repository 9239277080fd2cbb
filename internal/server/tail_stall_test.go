package server

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// tailsRunning is the server's count of live tails.
func tailsRunning(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tailCount
}

func waitTails(t *testing.T, s *Server, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for tailsRunning(s) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d tails running after %v, want %d", tailsRunning(s), within, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTailStalledClientsEnd: a live tail whose client stops reading (the
// UI's event stream) or answers no pings (a Loki WebSocket tail) ends,
// instead of holding its handler, goroutines, descriptor and queued
// batches for the life of the server (soak audit S1, S2).
func TestTailStalledClientsEnd(t *testing.T) {
	oldPing, oldPong, oldWrite := tailPingInterval, tailPongTimeout, tailWriteTimeout
	tailPingInterval, tailPongTimeout, tailWriteTimeout = 50*time.Millisecond, 200*time.Millisecond, 300*time.Millisecond
	t.Cleanup(func() { tailPingInterval, tailPongTimeout, tailWriteTimeout = oldPing, oldPong, oldWrite })
	e := newEnv(t, func(c *Config) { c.Now = time.Now })

	// S2: a WebSocket tail that reads nothing, so it answers no ping,
	// and whose query matches nothing, so the tail never writes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.ts.URL, "http")+"/loki/api/v1/tail?query="+q(`{app="none"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	waitTails(t, e.srv, 1, 2*time.Second)
	waitTails(t, e.srv, 0, 3*time.Second)

	// S1: an event-stream tail whose client reads its headers and then
	// stops reading while many entries match.
	addr := strings.TrimPrefix(e.ts.URL, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetReadBuffer(4096)
	}
	fmt.Fprintf(c, "GET /api/v1/tail?q=%s HTTP/1.1\r\nHost: %s\r\n\r\n", q(`{app="big"}`), addr)
	br := bufio.NewReader(c)
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("tail: %q %v", line, err)
	}
	waitTails(t, e.srv, 1, 2*time.Second)
	line := strings.Repeat("x", 4000)
	lines := make([]string, 200)
	for i := range lines {
		lines[i] = line
	}
	for i := range 20 { // 16 MB the client never reads
		e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"big"}`, time.Now().UnixNano()+int64(i*1000), lines...), "Content-Type", "application/json")
	}
	waitTails(t, e.srv, 0, 5*time.Second)
}
