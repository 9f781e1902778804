package gguf

import "fmt"

// fileTypes are llama.cpp's llama_ftype values (include/llama.h), the
// general.file_type a converter or llama-quantize writes, by the preset
// names people know them by (llama-quantize's, Ollama's and Hugging Face
// file names': "Q4_K_M").
var fileTypes = map[uint64]string{
	0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
	10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M",
	16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S",
	22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M",
	28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0",
	37: "TQ2_0", 38: "MXFP4_MOE", 39: "NVFP4", 40: "Q1_0", 41: "Q2_0",
}

// FileType is the file's quantization preset as general.file_type says
// ("Q4_K_M"), "" when the file does not say, or "file_type N" for a value
// llama.cpp does not define.
func (f *File) FileType() string {
	v, ok := f.GetUint("general.file_type")
	if !ok {
		return ""
	}
	if n, ok := fileTypes[v]; ok {
		return n
	}
	return fmt.Sprintf("file_type %d", v)
}
