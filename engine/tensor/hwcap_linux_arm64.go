package tensor

import "golang.org/x/sys/unix"

// hwcap2 returns the kernel's AT_HWCAP2 word, or 0 where the auxiliary
// vector cannot be read.
func hwcap2() uint {
	const atHWCAP2 = 26 // include/uapi/linux/auxvec.h
	auxv, err := unix.Auxv()
	if err != nil {
		return 0
	}
	for _, kv := range auxv {
		if kv[0] == atHWCAP2 {
			return uint(kv[1])
		}
	}
	return 0
}
