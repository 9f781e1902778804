//go:build !linux

package tensor

// hwcap2 is Linux's AT_HWCAP2; elsewhere no HWCAP2 feature is claimed.
func hwcap2() uint { return 0 }
