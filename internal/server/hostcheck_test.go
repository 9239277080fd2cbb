package server

import (
	"net/http"
	"strings"
	"testing"
)

// TestHostCheck: without auth, a browser request (Sec-Fetch-Site) naming a
// host other than localhost, an IP address or an allowed name is refused
// (421), so a page rebinding its own name to the server's address cannot
// read the logs; other clients, and servers with auth, are not checked.
func TestHostCheck(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.AllowedHosts = []string{"Logs.Example.com."} })
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base, "secret line"))
	get := func(host string, browser bool) (int, string) {
		req, err := http.NewRequest("GET", e.ts.URL+"/api/v1/search?q=secret", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if browser {
			req.Header.Set("Sec-Fetch-Site", "same-origin")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, b.String()
	}
	for _, c := range []struct {
		host    string
		browser bool
		code    int
	}{
		{"rebind.attacker.example:3100", true, 421},
		{"rebind.attacker.example", true, 421},
		{"rebind.attacker.example:3100", false, 200}, // not a browser
		{"localhost:3100", true, 200},
		{"app.localhost", true, 200},
		{"127.0.0.1:3100", true, 200},
		{"[::1]:3100", true, 200},
		{"10.1.2.3", true, 200},
		{"logs.example.com:3100", true, 200},
		{"LOGS.example.com.", true, 200},
	} {
		code, body := get(c.host, c.browser)
		if code != c.code || (code == 200) != strings.Contains(body, "secret line") {
			t.Errorf("Host %q (browser %v): %d %.200s, want %d", c.host, c.browser, code, body, c.code)
		}
	}
}
