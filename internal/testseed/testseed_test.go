package testseed

import "testing"

// TestSeed checks the rule's order: the test's own variable, then
// HAY_TEST_SEED mixed with the name (the same twice, different per name),
// then the clock.
func TestSeed(t *testing.T) {
	t.Setenv("HAY_TEST_SEED", "")
	t.Setenv("HAY_X_SEED", "42")
	if got := Seed(t, "HAY_X_SEED"); got != 42 {
		t.Errorf("own variable: %d, want 42", got)
	}
	t.Setenv("HAY_X_SEED", "")
	t.Setenv("HAY_TEST_SEED", "7")
	a, b, c := Seed(t, "HAY_X_SEED"), Seed(t, "HAY_X_SEED"), Seed(t, "HAY_Y_SEED")
	if a != b || a == c || a == 7 {
		t.Errorf("HAY_TEST_SEED=7: %d, %d for one name, %d for another", a, b, c)
	}
	t.Setenv("HAY_TEST_SEED", "")
	if Seed(t, "HAY_X_SEED") == a {
		t.Errorf("without variables the seed did not come from the clock")
	}
}

// TestScale: the native count without the variable (or with 0), the
// emulated one with it.
func TestScale(t *testing.T) {
	for _, c := range []struct {
		v    string
		emu  bool
		want int
	}{{"", false, 100}, {"0", false, 100}, {"1", true, 10}} {
		t.Setenv(EmulatedVar, c.v)
		if Emulated() != c.emu || Scale(100, 10) != c.want {
			t.Errorf("%s=%q: Emulated %v, Scale(100, 10) = %d; want %v, %d", EmulatedVar, c.v, Emulated(), Scale(100, 10), c.emu, c.want)
		}
	}
}
