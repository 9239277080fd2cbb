// Package testseed gives the randomized tests their seeds, one rule for
// all of them:
//
//  1. the test's own variable (HAY_ORDER_SEED and so on), to replay a
//     failure a test printed;
//  2. else HAY_TEST_SEED, which CI sets (.ci/run): every test then
//     derives its own seed from it and its name, so a CI run is
//     reproducible and cannot turn red on a case no earlier run drew;
//  3. else a new seed from the clock, so that each developer run of
//     scripts/test explores new cases (tests print the seed they use).
//
// It also tells the tests whether they run under an emulator (Emulated,
// Scale), so that the slowest random oracles draw fewer rounds there.
package testseed

import (
	"hash/fnv"
	"os"
	"strconv"
	"testing"
	"time"
)

// Seed returns t's seed under the rule above; name is the test's own
// variable.
func Seed(t testing.TB, name string) uint64 {
	t.Helper()
	if v := os.Getenv(name); v != "" {
		return parse(t, name, v)
	}
	if v := os.Getenv("HAY_TEST_SEED"); v != "" {
		h := fnv.New64a()
		h.Write([]byte(name + "/" + t.Name()))
		return parse(t, "HAY_TEST_SEED", v) ^ h.Sum64()
	}
	return uint64(time.Now().UnixNano())
}

func parse(t testing.TB, name, v string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: want an unsigned integer", name, v)
	}
	return n
}

// EmulatedVar is the variable scripts/test sets (to 1) for its runs under
// qemu-user (GOARCH=s390x and arm64).
const EmulatedVar = "HAY_TEST_EMULATED"

// Emulated reports whether the test binary runs under an emulator, as
// scripts/test says by EmulatedVar (the binary itself cannot tell qemu-user
// from a real machine of its architecture).
//
// Under qemu code runs 5-10 times slower, and the random oracles are most
// of the big-endian run's time. Their rounds test planner logic, which is
// the same on every architecture and which the native run of the same CI
// (step 1 of scripts/test) does in full; what the emulated run adds is byte
// order, and every encoder and decoder an oracle reaches runs on its
// first rounds already. So under emulation the slowest oracles run a
// fraction of their rounds (Scale) and keep that coverage. They are never
// skipped, and they keep enough rounds to check what they check.
func Emulated() bool {
	v := os.Getenv(EmulatedVar)
	return v != "" && v != "0"
}

// Scale returns native, or emulated when Emulated: a test's count of random
// rounds (or similar), with the smaller count for the emulated runs.
func Scale(native, emulated int) int {
	if Emulated() {
		return emulated
	}
	return native
}
