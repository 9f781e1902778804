package chat

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/builtins/methods"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// The gonja environment differs from gonja's defaults where Jinja2 under
// transformers behaves otherwise and a chat template can tell: tojson writes
// Python's json.dumps format, dicts keep their key order in items(), keys(),
// values() and |items, strings split and strip as Python's str does, lists
// index from the end, and the true/false/sequence tests follow Jinja2.

var (
	envOnce sync.Once
	env     *exec.Environment
)

// environment is built once and only read afterwards (gonja's own sets lock
// on every read), so templates share it.
func environment() *exec.Environment {
	envOnce.Do(func() {
		filters := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
		mustReplace(filters.Replace("tojson", filterToJSON))
		mustReplace(filters.Replace("items", filterItems))
		mustReplace(filters.Replace("trim", filterTrim))
		mustReplace(filters.Replace("dictsort", filterDictSort))

		tests := exec.NewTestSet(map[string]exec.TestFunction{}).Update(builtins.Tests)
		mustReplace(tests.Replace("true", testIs(true)))
		mustReplace(tests.Replace("false", testIs(false)))
		mustReplace(tests.Replace("sequence", testSequence))
		mustReplace(tests.Replace("iterable", testIterable))
		mustReplace(tests.Replace("none", testNone))
		mustReplace(tests.Replace("defined", testDefined(true)))
		mustReplace(tests.Replace("undefined", testDefined(false)))

		ctx := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
		env = &exec.Environment{
			Context:           ctx,
			Filters:           filters,
			Tests:             tests,
			ControlStructures: builtins.ControlStructures,
			Methods: exec.Methods{
				Bool:  methods.All.Bool,
				Int:   methods.All.Int,
				Float: methods.All.Float,
				Str:   strMethods(),
				Dict:  dictMethods(),
				List:  methods.All.List,
			},
		}
	})
	return env
}

func mustReplace(err error) {
	if err != nil {
		panic(err) // a gonja upgrade renamed a builtin: caught by every test
	}
}

// filterToJSON is transformers' tojson: json.dumps(x, ensure_ascii=False,
// indent=indent, separators=separators, sort_keys=sort_keys).
func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	opt := defaultDumpOptions()
	if len(params.Args) > 0 {
		return exec.AsValue(errors.New("tojson: takes keyword arguments only"))
	}
	for k, v := range params.KwArgs {
		switch k {
		case "ensure_ascii":
			opt.ensureASCII = v.IsTrue()
		case "indent":
			if v.IsNil() {
				continue
			}
			if !v.IsInteger() {
				return exec.AsValue(fmt.Errorf("tojson: indent must be an integer, not %s", v.String()))
			}
			opt.indent = max(v.Integer(), 0)
			opt.itemSep = ","
		case "sort_keys":
			opt.sortKeys = v.IsTrue()
		case "separators":
			if v.IsNil() {
				continue
			}
			if !v.IsList() || v.Len() != 2 {
				return exec.AsValue(errors.New("tojson: separators must be a pair of strings"))
			}
			opt.itemSep, opt.keySep = v.Index(0).String(), v.Index(1).String()
		default:
			return exec.AsValue(fmt.Errorf("tojson: unexpected keyword argument %q", k))
		}
	}
	// json.dumps applies separators after choosing the indent default.
	if sep, ok := params.KwArgs["separators"]; ok && !sep.IsNil() {
		opt.itemSep, opt.keySep = sep.Index(0).String(), sep.Index(1).String()
	}
	s, err := pyDumps(in, opt)
	if err != nil {
		return exec.AsValue(err)
	}
	return exec.AsValue(s) // a plain str in transformers: |e still escapes it
}

// filterItems is dict.items() in insertion order.
func filterItems(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if in.IsNil() {
		return exec.AsValue(list{})
	}
	if !in.IsDict() {
		return exec.AsValue(errors.New("items: requires a mapping"))
	}
	out := list{}
	in.Iterate(func(_, _ int, key, value *exec.Value) bool {
		out = append(out, list{key.Interface(), value.Interface()})
		return true
	}, func() {})
	return exec.AsValue(out)
}

// filterDictSort is Jinja2's dictsort(case_sensitive=False, by="key",
// reverse=False) for ordered dicts too.
func filterDictSort(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if !in.IsDict() {
		return exec.AsValue(errors.New("dictsort: requires a mapping"))
	}
	caseSensitive, byValue, reverse := false, false, false
	for i, a := range params.Args {
		switch i {
		case 0:
			caseSensitive = a.IsTrue()
		case 1:
			byValue = a.String() == "value"
		case 2:
			reverse = a.IsTrue()
		}
	}
	if v, ok := params.KwArgs["case_sensitive"]; ok {
		caseSensitive = v.IsTrue()
	}
	if v, ok := params.KwArgs["by"]; ok {
		byValue = v.String() == "value"
	}
	if v, ok := params.KwArgs["reverse"]; ok {
		reverse = v.IsTrue()
	}
	pairs := orderedPairs(in)
	less := func(a, b *exec.Value) bool {
		if a.IsNumber() && b.IsNumber() {
			return a.Float() < b.Float()
		}
		x, y := a.String(), b.String()
		if !caseSensitive {
			x, y = strings.ToLower(x), strings.ToLower(y)
		}
		return x < y
	}
	col := 0
	if byValue {
		col = 1
	}
	sort.SliceStable(pairs, func(i, j int) bool {
		a, b := exec.ToValue(pairs[i][col]), exec.ToValue(pairs[j][col])
		if reverse {
			return less(b, a)
		}
		return less(a, b)
	})
	out := make(list, len(pairs))
	for i, p := range pairs {
		out[i] = list{p[0], p[1]}
	}
	return exec.AsValue(out)
}

// filterTrim is Jinja2's trim: str.strip(chars).
func filterTrim(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var chars *exec.Value
	if len(params.Args) > 0 {
		chars = params.Args[0]
	}
	if c, ok := params.KwArgs["chars"]; ok {
		chars = c
	}
	return exec.AsValue(pyStrip(in.String(), chars, true, true))
}

func testIs(want bool) exec.TestFunction {
	return func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
		return in.IsBool() && in.Bool() == want, nil
	}
}

// testSequence: Jinja2 calls anything with len() and [] a sequence.
func testSequence(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
	return !isNone(in) && (in.IsList() || in.IsString() || in.IsDict()), nil
}

func testIterable(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
	return !isNone(in) && (in.IsList() || in.IsString() || in.IsDict()), nil
}

func testNone(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
	return !in.IsError() && isNone(in), nil
}

// testDefined: a JSON null is defined (and none); a missing name or key is not.
func testDefined(want bool) exec.TestFunction {
	return func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
		defined := !in.IsError() && !in.IsNil()
		return defined == want, nil
	}
}

// pyStrMethodNames are the str methods gonja implements and this package
// passes through unchanged.
var pyStrMethodNames = []string{
	"capitalize", "capwords", "casefold", "center", "count", "encode", "endswith",
	"expandtabs", "find", "format", "index", "isalnum", "isalpha", "isascii",
	"isdecimal", "isdigit", "isidentifier", "islower", "isnumeric", "isprintable",
	"isspace", "istitle", "isupper", "join", "ljust", "lower", "partition",
	"removeprefix", "removesuffix", "rfind", "rindex", "rjust",
	"rpartition", "splitlines", "startswith", "swapcase", "title", "translate",
	"upper", "zfill",
}

func strMethods() *exec.MethodSet[string] {
	m := map[string]exec.Method[string]{}
	for _, name := range pyStrMethodNames {
		if f, ok := methods.All.Str.Get(name); ok {
			m[name] = f
		}
	}
	strip := func(left, right bool) exec.Method[string] {
		return func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
			var chars *exec.Value
			if len(args.Args) > 0 {
				chars = args.Args[0]
			}
			return pyStrip(self, chars, left, right), nil
		}
	}
	m["strip"] = strip(true, true)
	m["lstrip"] = strip(true, false)
	m["rstrip"] = strip(false, true)
	split := func(fromRight bool) exec.Method[string] {
		return func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
			var sep *exec.Value
			maxsplit := -1
			if len(args.Args) > 0 {
				sep = args.Args[0]
			}
			if len(args.Args) > 1 {
				maxsplit = args.Args[1].Integer()
			}
			if v, ok := args.KwArgs["sep"]; ok {
				sep = v
			}
			if v, ok := args.KwArgs["maxsplit"]; ok {
				maxsplit = v.Integer()
			}
			if sep != nil && !sep.IsNil() && sep.String() == "" {
				return nil, errors.New("split: empty separator")
			}
			return pySplit(self, sep, maxsplit, fromRight), nil
		}
	}
	m["replace"] = func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		if len(args.Args) < 2 || len(args.Args) > 3 {
			return nil, errors.New("replace() takes 2 or 3 arguments")
		}
		count := -1
		if len(args.Args) == 3 {
			count = args.Args[2].Integer()
		}
		return strings.Replace(self, args.Args[0].String(), args.Args[1].String(), count), nil
	}
	m["split"] = split(false)
	m["rsplit"] = split(true)
	return exec.NewMethodSet(m)
}

// pyIsSpace is Python's str.isspace for one rune.
func pyIsSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r', 0x1c, 0x1d, 0x1e, 0x1f, 0x85, 0xa0,
		0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// pyStrip is str.strip/lstrip/rstrip: whitespace when chars is None,
// otherwise any of the given characters.
func pyStrip(s string, chars *exec.Value, left, right bool) string {
	cut := pyIsSpace
	if chars != nil && !chars.IsNil() {
		set := chars.String()
		cut = func(r rune) bool { return strings.ContainsRune(set, r) }
	}
	if left {
		s = strings.TrimLeftFunc(s, cut)
	}
	if right {
		s = strings.TrimRightFunc(s, cut)
	}
	return s
}

// pySplit is str.split/rsplit.
func pySplit(s string, sep *exec.Value, maxsplit int, fromRight bool) list {
	var parts []string
	if sep == nil || sep.IsNil() {
		parts = splitWhitespace(s, maxsplit, fromRight)
	} else if fromRight {
		parts = rsplitN(s, sep.String(), maxsplit)
	} else {
		parts = strings.SplitN(s, sep.String(), max(maxsplit+1, 0))
		if maxsplit < 0 {
			parts = strings.Split(s, sep.String())
		}
	}
	out := make(list, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out
}

func rsplitN(s, sep string, maxsplit int) []string {
	if maxsplit < 0 {
		return strings.Split(s, sep)
	}
	var rev []string
	for len(rev) < maxsplit {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		rev = append(rev, s[i+len(sep):])
		s = s[:i]
	}
	out := []string{s}
	for i := len(rev) - 1; i >= 0; i-- {
		out = append(out, rev[i])
	}
	return out
}

// splitWhitespace is str.split() without a separator: runs of whitespace
// separate, and empty strings never appear.
func splitWhitespace(s string, maxsplit int, fromRight bool) []string {
	if fromRight {
		var rev []string
		s = strings.TrimRightFunc(s, pyIsSpace)
		for s != "" {
			if maxsplit >= 0 && len(rev) == maxsplit {
				rev = append(rev, s)
				s = ""
				break
			}
			i := strings.LastIndexFunc(s, pyIsSpace)
			if i < 0 {
				rev = append(rev, s)
				break
			}
			_, size := utf8.DecodeRuneInString(s[i:])
			rev = append(rev, s[i+size:])
			s = strings.TrimRightFunc(s[:i], pyIsSpace)
		}
		out := make([]string, 0, len(rev))
		for i := len(rev) - 1; i >= 0; i-- {
			out = append(out, rev[i])
		}
		return out
	}
	var out []string
	s = strings.TrimLeftFunc(s, pyIsSpace)
	for s != "" {
		if maxsplit >= 0 && len(out) == maxsplit {
			out = append(out, s)
			break
		}
		i := strings.IndexFunc(s, pyIsSpace)
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i])
		s = strings.TrimLeftFunc(s[i:], pyIsSpace)
	}
	return out
}

// dictMethods: keys(), values(), items() and get() in insertion order; the
// rest as gonja has them.
func dictMethods() *exec.MethodSet[map[string]any] {
	m := map[string]exec.Method[map[string]any]{}
	for _, name := range []string{"pop", "setdefault", "update", "copy", "clear"} {
		if f, ok := methods.All.Dict.Get(name); ok {
			m[name] = f
		}
	}
	m["keys"] = func(_ map[string]any, self *exec.Value, _ *exec.VarArgs) (any, error) {
		out := list{}
		for _, p := range orderedPairs(self) {
			out = append(out, p[0])
		}
		return out, nil
	}
	m["values"] = func(_ map[string]any, self *exec.Value, _ *exec.VarArgs) (any, error) {
		out := list{}
		for _, p := range orderedPairs(self) {
			out = append(out, p[1])
		}
		return out, nil
	}
	m["items"] = func(_ map[string]any, self *exec.Value, _ *exec.VarArgs) (any, error) {
		out := list{}
		for _, p := range orderedPairs(self) {
			out = append(out, list{p[0], p[1]})
		}
		return out, nil
	}
	m["get"] = func(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
		if len(args.Args) < 1 || len(args.Args) > 2 {
			return nil, errors.New("get() takes 1 or 2 positional arguments")
		}
		for _, p := range orderedPairs(self) {
			if exec.ToValue(p[0]).EqualValueTo(args.Args[0]) {
				return p[1], nil
			}
		}
		if len(args.Args) == 2 {
			return args.Args[1].Interface(), nil
		}
		return nil, nil
	}
	return exec.NewMethodSet(m)
}

// orderedPairs lists a dict's (key, value) pairs: insertion order for gonja's
// Dict (JSON objects, dict literals), sorted keys for Go maps (namespace()).
func orderedPairs(v *exec.Value) [][2]any {
	var out [][2]any
	if _, isMap := v.Interface().(map[string]any); isMap {
		m := v.Interface().(map[string]any)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, [2]any{k, m[k]})
		}
		return out
	}
	v.Iterate(func(_, _ int, key, value *exec.Value) bool {
		out = append(out, [2]any{key.Interface(), value.Interface()})
		return true
	}, func() {})
	return out
}
