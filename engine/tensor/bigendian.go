//go:build armbe || arm64be || m68k || mips || mips64 || mips64p32 || ppc || ppc64 || s390 || s390x || shbe || sparc || sparc64

package tensor

// The kernels read F32 and F16 weights in place as little-endian values
// (f32View, u16View). Rather than compute garbage, refuse to build on a
// big-endian machine: this constant does not compile, and says why.
const littleEndianOnly = "engine/tensor reads weights in place and needs a little-endian machine" + 1
