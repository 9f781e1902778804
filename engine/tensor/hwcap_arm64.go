package tensor

import "golang.org/x/sys/cpu"

// The arm64 features beyond SDOT that the kernels were weighed against
// (gemm_arm64.go says why they are not used): I8MM (SMMLA, the int8
// matrix multiply-accumulate) and BF16 (BFDOT, BFMMLA). x/sys/cpu knows
// I8MM but not BF16, which comes from Linux's HWCAP2 here.
var (
	hasI8MM = cpu.ARM64.HasI8MM
	hasBF16 = hwcap2()&hwcap2BF16 != 0
)

// hwcap2BF16 is Linux's HWCAP2_BF16 (arch/arm64/include/uapi/asm/hwcap.h).
const hwcap2BF16 = 1 << 14
