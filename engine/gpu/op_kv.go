package gpu

import (
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// attKVType is the shaders' number for a KV cache type (their KV
// specialization constant), and the bytes of one value.
func attKVType(t tensor.DType) (code uint32, size int64, ok bool) {
	switch t {
	case tensor.F32:
		return 0, 4, true
	case tensor.F16:
		return 1, 2, true
	case tensor.E4M3:
		return 2, 1, true
	}
	return 0, 0, false
}

// StoreKV records writing n rows of dim float32 values, kSrc and vSrc,
// into the cache slots firstSlot.. of the K and V caches k and v (rows of
// dim values of kvType from each range's offset), as the CPU engine
// stores them: F32 copied, F16 by tensor.F32ToF16, E4M3 by
// tensor.EncodeE4M3Row with kScale and vScale, the same bits. An F16
// cache needs an even dim, an E4M3 one a multiple of 4 (one invocation
// writes one 32-bit word).
func (r *Recorder) StoreKV(k, v Range, kvType tensor.DType, kSrc, vSrc Range, firstSlot, n, dim int, kScale, vScale float32) {
	if n <= 0 || dim <= 0 || r.err != nil {
		return
	}
	code, size, ok := attKVType(kvType)
	if !ok {
		r.ewFail("StoreKV: KV cache type %s (want F32, F16 or E4M3)", kvType)
		return
	}
	per := 4 / size // values a word
	if int64(dim)%per != 0 {
		r.ewFail("StoreKV: rows of %d values of %s (want a multiple of %d)", dim, kvType, per)
		return
	}
	if kvType == tensor.E4M3 {
		if err := tensor.CheckKVScale(kScale); err != nil {
			r.ewFail("StoreKV: K: %v", err)
			return
		}
		if err := tensor.CheckKVScale(vScale); err != nil {
			r.ewFail("StoreKV: V: %v", err)
			return
		}
	}
	end := int64(firstSlot+n) * int64(dim) * size
	src := 4 * int64(n) * int64(dim)
	if firstSlot < 0 || !r.ewCheck("StoreKV", "K cache", k, end) || !r.ewCheck("StoreKV", "V cache", v, end) ||
		!r.ewCheck("StoreKV", "K rows", kSrc, src) || !r.ewCheck("StoreKV", "V rows", vSrc, src) {
		return
	}
	words := int64(n) * int64(dim) / per
	first := int64(firstSlot) * int64(dim) / per
	r.Dispatch("store_kv", []uint32{code}, ewGroups(int(2*words)), []uint32{
		uint32(words), ewWord(k) + uint32(first), ewWord(v) + uint32(first), ewWord(kSrc), ewWord(vSrc), F32(kScale), F32(vScale),
	}, k.Buf.All(), v.Buf.All(), kSrc.Buf.All(), vSrc.Buf.All())
}
