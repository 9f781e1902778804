package daemon

import (
	"reflect"
	"strings"
)

// configKeys lists every leaf key of Config, in file order.
func configKeys() []string {
	var keys []string
	var walk func(path string, t reflect.Type)
	walk = func(path string, t reflect.Type) {
		if t.Kind() != reflect.Struct || t == sizeType || t == durationType {
			keys = append(keys, path)
			return
		}
		for i := range t.NumField() {
			tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if path != "" {
				tag = path + "." + tag
			}
			walk(tag, t.Field(i).Type)
		}
	}
	walk("", reflect.TypeFor[Config]())
	return keys
}

// configDiff lists the dotted keys whose values differ between a and b.
func configDiff(a, b Config) []string {
	var keys []string
	var walk func(path string, x, y reflect.Value)
	walk = func(path string, x, y reflect.Value) {
		if x.Kind() == reflect.Struct && x.Type() != sizeType && x.Type() != durationType {
			for i := range x.NumField() {
				tag, _, _ := strings.Cut(x.Type().Field(i).Tag.Get("yaml"), ",")
				key := tag
				if path != "" {
					key = path + "." + tag
				}
				walk(key, x.Field(i), y.Field(i))
			}
			return
		}
		if !reflect.DeepEqual(x.Interface(), y.Interface()) {
			keys = append(keys, path)
		}
	}
	walk("", reflect.ValueOf(a), reflect.ValueOf(b))
	return keys
}
