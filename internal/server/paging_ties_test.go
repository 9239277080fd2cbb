package server

import (
	"fmt"
	"strings"
	"testing"
)

// TestPagingManyEqualTimes: the UI's "load more" pages past more entries
// sharing one time than the server's limit cap. With the skip on the
// client (limit = page + rows shown at the boundary), the capped limit
// returned only rows the client dropped from the 10th page on, and the UI
// called the search done after 5,000 of 12,010 entries.
func TestPagingManyEqualTimes(t *testing.T) {
	e := newEnv(t, nil)
	const same, older = 12000, 10
	var b strings.Builder
	push := func(from, to int, ts func(int) int64) {
		b.Reset()
		b.WriteString(`{"streams":[{"stream":{"app":"pg"},"values":[`)
		for i := from; i < to; i++ {
			if i > from {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `["%d","id=%d x"]`, ts(i), i)
		}
		b.WriteString(`]}]}`)
		e.mustPush("/loki/api/v1/push", []byte(b.String()), "Content-Type", "application/json")
	}
	push(0, older, func(i int) int64 { return base - 1e9 + int64(i) })
	for i := older; i < older+same; i += 3000 {
		push(i, i+3000, func(int) int64 { return base })
	}
	for _, forward := range []bool{false, true} {
		rows, reqs := uiPage(t, e, "", `{app="pg"}`, forward, 500, base-2e9, base, nil)
		seen := map[int]int{}
		for _, r := range rows {
			seen[r.id]++
		}
		if len(rows) != same+older || len(seen) != same+older {
			t.Errorf("forward=%v: %d rows, %d distinct, in %d pages; want all %d once", forward, len(rows), len(seen), reqs, same+older)
		}
	}
}
