package quantize

// Metadata keys of the FP8 KV cache scales (engine/model reads them).
const (
	kvKScaleKey = "edgellmd.kv_cache.k_scale"
	kvVScaleKey = "edgellmd.kv_cache.v_scale"
)

// Calibration is what running the unquantized model over calibration
// prompts saw (engine/calib makes it): the largest activation magnitude
// going into each weight (by base name, e.g. "blk.0.attn_q") and the
// largest key and value magnitudes of each attention layer.
type Calibration struct {
	Input  map[string]float32
	KAmax  []float32 // per layer (MTP blocks, which the trunk never runs, stay 0)
	VAmax  []float32
	Tokens int
}

// inputScale is ModelOpt's static activation scale for the weight with
// base name base: amax / (6 * 448), or 0 when calibration never saw its
// input (or saw only zeros).
func (c *Calibration) inputScale(base string) float32 {
	if c == nil {
		return 0
	}
	return c.Input[base] / (6 * 448)
}

// kvScales are the FP8 KV cache scales per block: amax / 448 (vLLM's and
// ModelOpt's k_scale, v_scale), 1 for blocks without attention or never
// run. blocks is the file's block_count (MTP blocks included).
func (c *Calibration) kvScales(blocks int) (k, v []float32) {
	k, v = make([]float32, blocks), make([]float32, blocks)
	for i := range k {
		k[i], v[i] = 1, 1
		if i < len(c.KAmax) && c.KAmax[i] > 0 && c.VAmax[i] > 0 {
			k[i], v[i] = c.KAmax[i]/448, c.VAmax[i]/448
		}
	}
	return k, v
}
