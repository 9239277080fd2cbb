package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"haystack/internal/browsertest"
)

// TestBrowserMetadata: a row shows the entry's structured metadata as
// chips after its labels (names sorted, text not HTML), and a row of an
// entry without metadata only its labels.
func TestBrowserMetadata(t *testing.T) {
	env := newSecEnv(t)
	ts := time.Now().Add(-time.Minute).UnixNano()
	lokiPush(t, env.hay.URL, fmt.Sprintf(`{"streams":[{"stream":{"app":"metaui"},"values":[["%d","metamark one",{"trace_id":"abc","user":"<b>x</b>"}],["%d","metamark two"]]}]}`, ts, ts+1))
	ctx, _ := env.tab(t)
	env.open(t, ctx, "/?q=metamark")
	got := browsertest.Eval[[]string](t, ctx, `[...document.querySelectorAll('#rows .row')].map(r => [...r.querySelectorAll('.lbl')].map(l => l.textContent).join(' ') + ' | ' + r.querySelector('.line').textContent)`)
	want := []string{
		"app=metaui service_name=metaui | metamark two",
		"app=metaui service_name=metaui trace_id=abc user=<b>x</b> | metamark one",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n got %q\nwant %q", got, want)
	}
}

// TestBrowserMetadataMany: an entry with more metadata than a row shows
// (OTLP's dozen pairs) keeps its trace id in sight and a "+N metadata"
// button, which shows the others in name order.
func TestBrowserMetadataMany(t *testing.T) {
	env := newSecEnv(t)
	ts := time.Now().Add(-time.Minute).UnixNano()
	meta := `{"trace_id":"t1","span_id":"s1","severity_text":"ERROR","scope_name":"lib","host_name":"h","flags":"1"}`
	lokiPush(t, env.hay.URL, fmt.Sprintf(`{"streams":[{"stream":{"app":"metamany"},"values":[["%d","manymark otel",%s]]}]}`, ts, meta))
	ctx, _ := env.tab(t)
	env.open(t, ctx, "/?q=manymark")
	chips := `[...document.querySelectorAll('#rows .row .lbl')].map(l => l.textContent).join(' ')`
	if got, want := browsertest.Eval[string](t, ctx, chips), "app=metamany service_name=metamany trace_id=t1 +5 metadata"; got != want {
		t.Fatalf("chips before the click: %q, want %q", got, want)
	}
	browsertest.Eval[bool](t, ctx, `(document.querySelector('#rows .more-meta').click(), true)`)
	if got, want := browsertest.Eval[string](t, ctx, chips), "app=metamany service_name=metamany trace_id=t1 flags=1 host_name=h scope_name=lib severity_text=ERROR span_id=s1"; got != want {
		t.Fatalf("chips after the click: %q, want %q", got, want)
	}
}

// lokiPush posts a Loki JSON push body and requires a 204.
func lokiPush(t *testing.T, base, body string) {
	t.Helper()
	res, err := http.Post(base+"/loki/api/v1/push", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("push: %s", res.Status)
	}
}
