package model

import (
	"bytes"
	"strings"
	"testing"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// storiesAs rewrites stories260K with its weight matrices in type t where
// their rows allow it (the rest stay F32), in memory.
func storiesAs(t *testing.T, typ tensor.DType) *gguf.File {
	t.Helper()
	src, err := gguf.Open(storiesPath)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	w := gguf.NewWriter()
	for _, kv := range src.KVs {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for i := range src.Tensors {
		ti := &src.Tensors[i]
		data := append([]byte(nil), src.TensorData(ti)...)
		dt := ti.Type
		if len(ti.Shape) == 2 && strings.HasSuffix(ti.Name, ".weight") && ti.Type == tensor.F32 &&
			ti.Shape[0]%int64(typ.BlockElems()) == 0 {
			cols, rows := int(ti.Shape[0]), int(ti.Shape[1])
			row := make([]float32, cols)
			rb, _ := typ.RowBytes(int64(cols))
			out := make([]byte, int64(rows)*rb)
			for r := 0; r < rows; r++ {
				if err := tensor.DequantizeRow(tensor.F32, row, data[r*cols*4:(r+1)*cols*4]); err != nil {
					t.Fatal(err)
				}
				if err := tensor.QuantizeRow(typ, out[int64(r)*rb:int64(r+1)*rb], row); err != nil {
					t.Fatal(err)
				}
			}
			data, dt = out, typ
		}
		if err := w.AddTensor(ti.Name, dt, ti.Shape, data); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse("stories260K-"+typ.String()+".gguf", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestDecodeAllocsAllTypes: a decode step allocates nothing, for every
// weight type, NVFP4 activation mode and KV type, on stories260K and the
// synthetic qwen35 (whose DeltaNet and MTP-free trunk run too).
func TestDecodeAllocsAllTypes(t *testing.T) {
	files := map[tensor.DType]*gguf.File{
		tensor.F16:   storiesAs(t, tensor.F16),
		tensor.Q8_0:  storiesAs(t, tensor.Q8_0),
		tensor.NVFP4: storiesAs(t, tensor.NVFP4),
	}
	type tc struct {
		name string
		f    *gguf.File
		act  tensor.NVFP4Activations
		kv   tensor.DType
	}
	var cases []tc
	for _, kv := range []tensor.DType{tensor.F16, tensor.F32, tensor.E4M3} {
		cases = append(cases,
			tc{"F16/" + kv.String(), files[tensor.F16], 0, kv},
			tc{"Q8_0/" + kv.String(), files[tensor.Q8_0], 0, kv},
			tc{"NVFP4-W4A8/" + kv.String(), files[tensor.NVFP4], tensor.NVFP4ActQ8, kv},
			tc{"NVFP4-W4A16/" + kv.String(), files[tensor.NVFP4], tensor.NVFP4ActF32, kv},
			tc{"NVFP4-W4A4/" + kv.String(), files[tensor.NVFP4], tensor.NVFP4ActFP4, kv},
			tc{"qwen35-synth/" + kv.String(), buildSynth(t, defaultSpec(), 5).file, 0, kv},
		)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pool := testPool(t)
			pool.SetNVFP4Activations(c.act)
			m, err := Load(c.f, Options{KVType: c.kv, Pool: pool})
			if err != nil {
				t.Fatal(err)
			}
			st := m.NewState(128)
			logits := make([]float32, m.Hyper().Vocab)
			b := ChainBatch([]int32{1}, 0, false)
			if err := m.Forward(st, b, logits); err != nil {
				t.Fatal(err)
			}
			allocs := testing.AllocsPerRun(40, func() {
				b.Tokens[0], b.Pos[0] = argmax(logits), int32(st.Len())
				if err := m.Forward(st, b, logits); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("a decode step allocates %v times, want 0", allocs)
			}
		})
	}
}
