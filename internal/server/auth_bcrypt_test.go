package server

import (
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// TestAuthBcrypt: an auth file may hold htpasswd-style bcrypt hashes
// ($2a$, $2b$, $2y$): the right secret passes (and is remembered), a
// wrong one fails every time, and a malformed hash is refused when the
// file is read.
func TestAuthBcrypt(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("open sesame"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	y := "$2y$" + strings.TrimPrefix(string(hash), "$2a$") // as htpasswd -B writes it
	tok, err := bcrypt.GenerateFromPassword([]byte("tok-secret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := ParseAuth(strings.NewReader("basic carol " + string(hash) + " team-c\nbasic dave " + y + "\ntoken " + string(tok) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.Auth = auth })
	push := jsonPush(`{"app":"x"}`, base, "x")
	basic := func(u, p string) string {
		h, _ := httpNewRequest(u, p)
		return h
	}
	for range 2 { // the second time from memory
		e.mustPush("/loki/api/v1/push", push, "Authorization", basic("carol", "open sesame"))
		e.mustPush("/loki/api/v1/push", push, "Authorization", basic("dave", "open sesame"))
		e.mustPush("/loki/api/v1/push", push, "Authorization", "Bearer tok-secret")
	}
	if n := len(auth.accepted); n != 3 {
		t.Errorf("%d bcrypt successes remembered, want 3", n)
	}
	for _, hdr := range []string{basic("carol", "open sesam"), basic("carol", ""), basic("eve", "open sesame"), basic("dave", "tok-secret"), "Bearer open sesame", "Bearer " + string(tok)} {
		for range 2 {
			if code, _ := e.do("POST", "/loki/api/v1/push", push, "Authorization", hdr); code != 401 {
				t.Errorf("%s: %d, want 401", hdr, code)
			}
		}
	}
	if n := len(auth.accepted); n != 3 {
		t.Errorf("%d bcrypt results remembered after wrong secrets, want 3", n)
	}
	if n := e.storedCount("team-c"); n != 2 {
		t.Errorf("team-c has %d entries, want 2", n)
	}
	if n := e.storedCount("fake"); n != 4 {
		t.Errorf("the default tenant has %d entries, want 4", n)
	}
	for _, bad := range []string{"basic a $2y$10$short", "basic a $2b$99$" + strings.Repeat("a", 53), "token $2a$xx"} {
		if _, err := ParseAuth(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "bcrypt") {
			t.Errorf("ParseAuth(%q): %v, want a bcrypt error", bad, err)
		}
	}
}
