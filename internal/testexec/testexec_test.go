package testexec

import (
	"slices"
	"testing"
)

func TestCommand(t *testing.T) {
	t.Setenv(Env, "")
	if got := Command("/bin/x", "-a", "b").Args; !slices.Equal(got, []string{"/bin/x", "-a", "b"}) {
		t.Errorf("native: args %q", got)
	}
	t.Setenv(Env, " qemu-s390x-static  -L /usr ")
	c := Command("/bin/x", "-a")
	if want := []string{"qemu-s390x-static", "-L", "/usr", "/bin/x", "-a"}; !slices.Equal(c.Args, want) {
		t.Errorf("wrapped: args %q, want %q", c.Args, want)
	}
	if c.Path == "/bin/x" {
		t.Errorf("wrapped: runs %q, not the wrapper", c.Path)
	}
}
