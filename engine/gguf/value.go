package gguf

import "fmt"

// ValueType is the type of a metadata value, numbered as in GGUF (gguf_type).
type ValueType uint32

// The GGUF metadata value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{
	"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
	"BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64",
}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("gguf_type(%d)", uint32(t))
}

// fixedSize is the encoded size of one value of a fixed-size type, or 0 for
// STRING, ARRAY and unknown types.
func (t ValueType) fixedSize() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// minSize is the least number of bytes one encoded value of t takes, or 0
// when t is not a GGUF type.
func (t ValueType) minSize() int {
	switch t {
	case TypeString:
		return 8 // length
	case TypeArray:
		return 4 + 8 // element type, count
	}
	return t.fixedSize()
}

// KV is one metadata entry. Value holds the Go type matching Type:
// uint8 int8 uint16 int16 uint32 int32 float32 bool string uint64 int64
// float64; for TypeArray a typed slice ([]uint8 ... []string, []bool), and
// for an array of arrays a []any whose elements are again such slices.
type KV struct {
	Key   string
	Type  ValueType
	Value any
}

// typeOf returns the GGUF type for a Go value in the KV.Value mapping, and
// checks nested arrays all the way down.
func typeOf(v any) (ValueType, error) {
	return typeOfDepth(v, 0)
}

// depth counts the arrays enclosing v.
func typeOfDepth(v any, depth int) (ValueType, error) {
	switch v := v.(type) {
	case uint8:
		return TypeUint8, nil
	case int8:
		return TypeInt8, nil
	case uint16:
		return TypeUint16, nil
	case int16:
		return TypeInt16, nil
	case uint32:
		return TypeUint32, nil
	case int32:
		return TypeInt32, nil
	case float32:
		return TypeFloat32, nil
	case bool:
		return TypeBool, nil
	case string:
		return TypeString, nil
	case uint64:
		return TypeUint64, nil
	case int64:
		return TypeInt64, nil
	case float64:
		return TypeFloat64, nil
	case []uint8, []int8, []uint16, []int16, []uint32, []int32, []float32,
		[]bool, []string, []uint64, []int64, []float64:
		return TypeArray, nil
	case []any:
		if len(v) > 0 && depth+2 > maxArrayDepth {
			return 0, fmt.Errorf("arrays nested more than %d deep", maxArrayDepth)
		}
		for i, e := range v {
			t, err := typeOfDepth(e, depth+1)
			if err != nil {
				return 0, err
			}
			if t != TypeArray {
				return 0, fmt.Errorf("element %d of an array of arrays is %T, not an array", i, e)
			}
		}
		return TypeArray, nil
	}
	return 0, fmt.Errorf("unsupported Go type %T (use uint8, int8, uint16, int16, uint32, int32, float32, bool, string, uint64, int64, float64, a slice of one of them, or []any of slices)", v)
}

// elemType is the GGUF element type of an array value accepted by typeOf.
func elemType(v any) ValueType {
	switch v.(type) {
	case []uint8:
		return TypeUint8
	case []int8:
		return TypeInt8
	case []uint16:
		return TypeUint16
	case []int16:
		return TypeInt16
	case []uint32:
		return TypeUint32
	case []int32:
		return TypeInt32
	case []float32:
		return TypeFloat32
	case []bool:
		return TypeBool
	case []string:
		return TypeString
	case []uint64:
		return TypeUint64
	case []int64:
		return TypeInt64
	case []float64:
		return TypeFloat64
	}
	return TypeArray // []any
}
