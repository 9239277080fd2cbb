//go:build !purego

package needle

import "golang.org/x/sys/cpu"

// supported lists the kernels this CPU runs, worst to best. The vector
// kernels compare bytes, so AVX-512 needs BW as well as F; x/sys/cpu also
// checks that the OS saves the wide registers.
func supported() []kernel {
	ks := []kernel{kernGeneric}
	if cpu.X86.HasAVX2 {
		ks = append(ks, kernAVX2)
	}
	// The AVX-512 Searcher hands lines shorter than a vector to the AVX2
	// kernel, so it is offered only beside AVX2 (every such CPU has both).
	if cpu.X86.HasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW {
		ks = append(ks, kernAVX512)
	}
	return ks
}
