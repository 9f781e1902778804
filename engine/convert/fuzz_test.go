package convert

import (
	"encoding/binary"
	"strings"
	"testing"
)

// FuzzSafetensorsHeader feeds arbitrary bytes to the safetensors parser: it
// must never panic, and whatever it accepts must describe tensors whose
// bytes lie inside the file and match their dtype and shape.
func FuzzSafetensorsHeader(f *testing.F) {
	f.Add(encodeSafetensors([]stEntry{
		{"a", "F32", []int64{2, 3}, make([]byte, 24)},
		{"b", "BF16", []int64{4}, make([]byte, 8)},
		{"c", "U8", []int64{}, make([]byte, 1)},
	}))
	f.Add(encodeSafetensors(nil))
	f.Add([]byte{})
	f.Add(binary.LittleEndian.AppendUint64(nil, 1<<62))
	f.Add(append(binary.LittleEndian.AppendUint64(nil, 60), []byte(`{"x":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}    `+"\x01\x02\x03\x04")...))
	f.Fuzz(func(t *testing.T, data []byte) {
		sf, err := parseSafetensors("fuzz.safetensors", data)
		if err != nil {
			return
		}
		var total int64
		for _, tn := range sf.Tensors {
			size := stDTypes[tn.DType]
			if size == 0 {
				t.Fatalf("tensor %q accepted with dtype %q", tn.Name, tn.DType)
			}
			if int64(len(tn.Data)) != tn.elems()*int64(size) {
				t.Fatalf("tensor %q: %d bytes for %s %v", tn.Name, len(tn.Data), tn.DType, tn.Shape)
			}
			total += int64(len(tn.Data))
		}
		if total > int64(len(data)) {
			t.Fatalf("tensors hold %d bytes of a %d-byte file", total, len(data))
		}
	})
}

// rawSafetensors is a file with the given JSON header and n data bytes.
func rawSafetensors(header string, n int) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(out, header...), make([]byte, n)...)
}

// TestParseSafetensorsErrors: each malformed header is refused with an
// error that names what is wrong.
func TestParseSafetensorsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, header string
		data         int
		want         string
	}{
		{"valid", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"format":"pt"}}`, 8, ""},
		{"not JSON", `{"a":`, 0, "not a JSON object"},
		{"unknown dtype", `{"a":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}}`, 16, `unknown dtype "F128"`},
		{"missing field", `{"a":{"dtype":"F32","shape":[1]}}`, 4, "lacks dtype, shape or data_offsets"},
		{"negative dimension", `{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, 4, "negative dimension"},
		{"huge shape", `{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, 8, "too large"},
		{"offsets past the data", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4, "outside the 4 data bytes"},
		{"offsets reversed", `{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, 8, "outside"},
		{"size disagrees with shape", `{"a":{"dtype":"F16","shape":[3],"data_offsets":[0,8]}}`, 8, "needs 6"},
		{"overlap", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8, "overlap"},
		{"bad metadata", `{"__metadata__":{"format":1}}`, 0, "__metadata__"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseSafetensors("x.safetensors", rawSafetensors(tc.header, tc.data))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused a valid file: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
