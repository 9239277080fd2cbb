package server

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// TestQuerySlowFormHoldsNoSlot: a POSTed query whose body never comes
// takes no query slot: two such connections of one tenant, with two
// slots, left another tenant's queries a 429 until the server's read
// timeout (2 minutes; auth audit A6). The form is read, bounded in time,
// before the slot is taken.
func TestQuerySlowFormHoldsNoSlot(t *testing.T) {
	auth, err := ParseAuth(strings.NewReader("basic alice pw-a teama\nbasic bob pw-b teamb\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) {
		c.Auth = auth
		c.MaxConcurrentQueries = 2
		c.QueryQueueWait = 500 * time.Millisecond
	})
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"b"}`, base, "bob's"), "Authorization", basicHeader("bob", "pw-b"), "Content-Type", "application/json")
	addr := strings.TrimPrefix(e.ts.URL, "http://")
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /loki/api/v1/labels HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\nquery=", addr, basicHeader("alice", "pw-a"))
	}
	time.Sleep(200 * time.Millisecond)
	if code, body := e.get("/loki/api/v1/labels", "Authorization", basicHeader("bob", "pw-b")); code != 200 || !strings.Contains(body, `"app"`) {
		t.Errorf("tenant teamb's query while teama holds two unfinished POST bodies: %d %s, want 200", code, body)
	}
	// A whole POST form still works.
	code, body := e.do("POST", "/loki/api/v1/labels", []byte("start=0"), "Authorization", basicHeader("bob", "pw-b"), "Content-Type", "application/x-www-form-urlencoded")
	if code != 200 || !strings.Contains(body, `"app"`) {
		t.Errorf("POST form: %d %s", code, body)
	}
}
