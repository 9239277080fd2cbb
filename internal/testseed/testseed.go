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
