package testdiff

import "testing"

func TestFirst(t *testing.T) {
	for _, c := range []struct {
		got, want []string
		d         int
	}{
		{nil, nil, -1},
		{[]string{"a"}, []string{"a"}, -1},
		{[]string{"a", "b"}, []string{"a", "c"}, 1},
		{[]string{"x", "b"}, []string{"a", "b"}, 0},
		{[]string{"a"}, []string{"a", "b"}, 1},
		{[]string{"a", "b"}, []string{"a"}, 1},
		{nil, []string{""}, 0},
	} {
		if d := First(c.got, c.want); d != c.d {
			t.Errorf("First(%q, %q) = %d, want %d", c.got, c.want, d, c.d)
		}
	}
}

func TestAt(t *testing.T) {
	s := []int{7, 8}
	if At(s, 1) != any(8) || At(s, 2) != any("(none)") || At(s, -1) != any("(none)") {
		t.Errorf("At: %v %v %v", At(s, 1), At(s, 2), At(s, -1))
	}
}
