package tensor

// smmlaOnce and bfmmlaOnce (mmla_arm64.s) run one SMMLA and one BFMMLA
// for mmla_arm64_test.go, which checks what gemm_arm64.go says of them.

//go:noescape
func smmlaOnce(a, b *[16]int8, c *[4]int32)

//go:noescape
func bfmmlaOnce(a, b *[8]uint16, c *[4]float32)
