package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func TestLokiTailWebSocket(t *testing.T) {
	e := newEnv(t, nil)
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
	wantJSON(t, "replay", read(), fmt.Sprintf(`{"streams":[{"stream":{"app":"x"},"values":[["%d","old timeout"]]}],"dropped_entries":null}`, base-1000))
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base, "no match", "new timeout"))
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"y"}`, base, "other stream timeout"))
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base+5, "later timeout"))
	wantJSON(t, "live 1", read(), fmt.Sprintf(`{"streams":[{"stream":{"app":"x"},"values":[["%d","new timeout"]]}],"dropped_entries":null}`, base+1))
	wantJSON(t, "live 2", read(), fmt.Sprintf(`{"streams":[{"stream":{"app":"x"},"values":[["%d","later timeout"]]}],"dropped_entries":null}`, base+5))
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
