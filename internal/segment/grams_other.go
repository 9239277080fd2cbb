//go:build !amd64 || purego

package segment

// scanGrams is scanGramsGo; amd64 has an assembly version (not with the purego tag).
func scanGrams(cache *[1 << gramCacheBits]uint16, cand []uint32, g uint32, chunk []byte) (int, uint32) {
	return scanGramsGo(cache, cand, g, chunk)
}
