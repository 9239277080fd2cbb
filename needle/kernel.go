package needle

import (
	"fmt"
	"os"
)

// kernel names one implementation of the scan contract (see scanGeneric).
type kernel uint8

const (
	kernGeneric kernel = iota
	kernAVX2
	kernAVX512
)

var kernelNames = [...]string{kernGeneric: "generic", kernAVX2: "avx2", kernAVX512: "avx512"}

func (k kernel) String() string { return kernelNames[k] }

// width is the number of positions one step of the kernel examines.
func (k kernel) width() int {
	switch k {
	case kernAVX2:
		return 32
	case kernAVX512:
		return 64
	}
	return 8
}

// laneShift converts a mask bit index to a lane: the generic kernel marks
// lane k with bit 8k+7, the vector kernels with bit k.
func (k kernel) laneShift() uint {
	if k == kernGeneric {
		return 3
	}
	return 0
}

func (k kernel) scan(a *scanArgs, h []byte, from, last int) (int, uint64) {
	switch k {
	case kernAVX2:
		return scanAVX2(a, h, from, last)
	case kernAVX512:
		return scanAVX512(a, h, from, last)
	}
	return scanGeneric(a, h, from, last)
}

// best is the kernel every Searcher uses unless told otherwise, chosen once.
var best = chooseKernel(os.Getenv("HAYSTACK_NEEDLE"), supported())

// chooseKernel returns the kernel named by env when it is supported, else
// the best supported one. supported is ordered worst to best.
func chooseKernel(env string, supported []kernel) kernel {
	for _, k := range supported {
		if k.String() == env {
			return k
		}
	}
	return supported[len(supported)-1]
}

// Impl names the kernel in use: "avx512", "avx2" or "generic".
func Impl() string { return best.String() }

// Kernels names the kernels this machine (and build) supports, worst to best.
func Kernels() []string {
	var names []string
	for _, k := range supported() {
		names = append(names, k.String())
	}
	return names
}

// NewKernel is New (or NewFold when fold is set) with the kernel named impl
// instead of the default, for benchmarks and tests that compare kernels. It
// fails when this machine or build lacks that kernel.
func NewKernel(needle []byte, fold bool, impl string) (*Searcher, error) {
	for _, k := range supported() {
		if k.String() == impl {
			s := new(Searcher)
			s.init(needle, fold, k)
			return s, nil
		}
	}
	return nil, fmt.Errorf("needle: kernel %q is not supported here (have %v)", impl, Kernels())
}
