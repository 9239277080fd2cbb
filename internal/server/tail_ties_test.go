package server

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestTailReplayKeepsPushOrderOfTies: a Loki tail's replay is oldest
// first and keeps push order among entries of one time, as query_range
// does in both directions and Loki's tail does: a stack trace stamped
// with one time replayed upside down (review 15c F2).
func TestTailReplayKeepsPushOrderOfTies(t *testing.T) {
	e := newEnv(t, nil)
	t1, t2 := base-int64(time.Minute), base-int64(30*time.Second)
	var want []string
	var b strings.Builder
	b.WriteString(`{"streams":[{"stream":{"app":"st"},"values":[`)
	for i, at := range []int64{t1, t1, t1, t2, t2, t2, t2 + 1} {
		l := fmt.Sprintf("frame %d at %d", i, at)
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `["%d",%q]`, at, l)
		want = append(want, l)
	}
	b.WriteString("]}]}")
	e.mustPush("/loki/api/v1/push", []byte(b.String()))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(e.ts.URL, "http") + "/loki/api/v1/tail?query=" + q(`{app="st"}`) + fmt.Sprintf("&start=%d&limit=100", t1-1)
	c, _, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	var got []string
	for len(got) < len(want) {
		_, msg, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		var m struct {
			Streams []struct {
				Values [][2]string `json:"values"`
			} `json:"streams"`
		}
		if err := json.Unmarshal(msg, &m); err != nil {
			t.Fatal(err)
		}
		for _, s := range m.Streams {
			for _, v := range s.Values {
				got = append(got, v[1])
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("tail replay %q, want push order %q", got, want)
	}
}
