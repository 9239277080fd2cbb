//go:build purego || !amd64

package needle

// supported: only the portable kernel exists in this build.
func supported() []kernel { return []kernel{kernGeneric} }

// The vector kernels are never selected in this build.
func scanAVX2(a *scanArgs, h []byte, from, last int) (int, uint64) {
	panic("needle: avx2 kernel not built")
}

func scanAVX512(a *scanArgs, h []byte, from, last int) (int, uint64) {
	panic("needle: avx512 kernel not built")
}
