package grammar

import (
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// The grammar of each JSON type under its keywords.

// count reads a non-negative integer keyword; -1 when absent.
func count(s *jsonValue, path, kw string) (int, error) {
	v, ok := s.get(kw)
	if !ok {
		return -1, nil
	}
	var r *big.Rat
	if v.kind == 'n' {
		r, _ = new(big.Rat).SetString(v.str)
	}
	if r == nil || !r.IsInt() || r.Sign() < 0 {
		return 0, &SchemaError{Path: path + "/" + kw, Keyword: kw, Msg: "must be a non-negative integer"}
	}
	if r.Cmp(new(big.Rat).SetInt64(maxRepeat)) > 0 {
		return 0, &SchemaError{Path: path + "/" + kw, Keyword: kw, Msg: fmt.Sprintf("values above %d are not supported", maxRepeat)}
	}
	return int(r.Num().Int64()), nil
}

func (c *schemaConv) stringValue(s *jsonValue, path, hint string) (string, error) {
	lo, err := count(s, path, "minLength")
	if err != nil {
		return "", err
	}
	hi, err := count(s, path, "maxLength")
	if err != nil {
		return "", err
	}
	if f, ok := s.get("format"); ok {
		if lo >= 0 || hi >= 0 {
			return "", &SchemaError{Path: path + "/format", Keyword: "format", Msg: "cannot be combined with minLength or maxLength"}
		}
		switch {
		case f.kind != 's':
			return "", &SchemaError{Path: path + "/format", Keyword: "format", Msg: "must be a string"}
		case f.str == "date" || f.str == "time" || f.str == "date-time" || f.str == "uuid":
			return c.need(f.str), nil
		}
		return "", &SchemaError{Path: path + "/format", Keyword: "format", Msg: fmt.Sprintf("format %q is not supported (supported: date, time, date-time, uuid)", f.str)}
	}
	if lo < 0 && hi < 0 {
		return c.need("string"), nil
	}
	lo = max(lo, 0)
	if hi >= 0 && hi < lo {
		return "", &SchemaError{Path: path + "/maxLength", Keyword: "maxLength", Msg: "is below minLength"}
	}
	name := c.fresh(hint)
	c.rule(name, `"\"" `+c.need("char")+repSuffix(lo, hi)+` "\""`, path)
	return name, nil
}

// bound reads a numeric keyword; nil when absent.
func bound(s *jsonValue, path, kw string) (*big.Rat, error) {
	v, ok := s.get(kw)
	if !ok {
		return nil, nil
	}
	if v.kind != 'n' {
		return nil, &SchemaError{Path: path + "/" + kw, Keyword: kw, Msg: "must be a number"}
	}
	r, ok := new(big.Rat).SetString(v.str)
	if !ok {
		return nil, &SchemaError{Path: path + "/" + kw, Keyword: kw, Msg: "must be a number"}
	}
	return r, nil
}

var boundKeywords = []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}

func (c *schemaConv) numberValue(s *jsonValue, path string) (string, error) {
	var present []string
	for _, kw := range boundKeywords {
		if _, ok := s.get(kw); ok {
			present = append(present, kw)
		}
	}
	if len(present) == 0 {
		return c.need("number"), nil
	}
	if len(present) == 1 && (present[0] == "minimum" || present[0] == "exclusiveMinimum") {
		r, err := bound(s, path, present[0])
		if err != nil {
			return "", err
		}
		if r.Sign() == 0 {
			if present[0] == "minimum" {
				return c.need("number-nonneg"), nil
			}
			return c.need("number-positive"), nil
		}
	}
	return "", &SchemaError{Path: path + "/" + present[0], Keyword: present[0], Msg: "bounds on numbers are supported only as minimum 0 or exclusiveMinimum 0 (use type integer for other bounds)"}
}

func (c *schemaConv) integerValue(s *jsonValue, path, hint string) (string, error) {
	limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(maxIntDigits), nil)
	limit.Sub(limit, big.NewInt(1))
	lo, hi := new(big.Int).Neg(limit), new(big.Int).Set(limit)
	bounded := false
	for _, kw := range boundKeywords {
		r, err := bound(s, path, kw)
		if err != nil {
			return "", err
		}
		if r == nil {
			continue
		}
		bounded = true
		fl := new(big.Int).Div(r.Num(), r.Denom()) // floor, as Denom > 0 and Div is Euclidean
		ce := new(big.Int).Set(fl)
		if !r.IsInt() {
			ce.Add(ce, big.NewInt(1))
		}
		switch kw {
		case "minimum":
			if ce.Cmp(lo) > 0 {
				lo = ce
			}
		case "exclusiveMinimum":
			if x := new(big.Int).Add(fl, big.NewInt(1)); x.Cmp(lo) > 0 {
				lo = x
			}
		case "maximum":
			if fl.Cmp(hi) < 0 {
				hi = fl
			}
		case "exclusiveMaximum":
			if x := new(big.Int).Sub(ce, big.NewInt(1)); x.Cmp(hi) < 0 {
				hi = x
			}
		}
	}
	if !bounded {
		return c.need("integer"), nil
	}
	if lo.Cmp(hi) > 0 {
		return "", &SchemaError{Path: path, Keyword: "minimum", Msg: fmt.Sprintf("no integer of at most %d digits lies within the bounds", maxIntDigits)}
	}
	name := c.fresh(hint)
	c.rule(name, intRange(lo.Int64(), hi.Int64()), path)
	return name, nil
}

// intRange is an expression for the integers lo..hi written in decimal
// without leading zeros.
func intRange(lo, hi int64) string {
	var alts []string
	if lo < 0 {
		for _, a := range natRange(max(-hi, 1), -lo) {
			alts = append(alts, `"-" `+a)
		}
	}
	if hi >= 0 {
		alts = append(alts, natRange(max(lo, 0), hi)...)
	}
	return strings.Join(alts, " | ")
}

func natRange(a, b int64) []string {
	var out []string
	for d := len(strconv.FormatInt(a, 10)); d <= len(strconv.FormatInt(b, 10)); d++ {
		lo, hi := int64(0), int64(9)
		if d > 1 {
			lo = pow10(d - 1)
			hi = pow10(d) - 1
		}
		lo, hi = max(lo, a), min(hi, b)
		if lo <= hi {
			out = append(out, sameLengthRange(strconv.FormatInt(lo, 10), strconv.FormatInt(hi, 10))...)
		}
	}
	return out
}

func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}

// sameLengthRange is the alternatives for the digit strings x..y of equal
// length, x <= y.
func sameLengthRange(x, y string) []string {
	if x == y {
		return []string{gbnfLiteral(x)}
	}
	n := len(x)
	if n == 1 {
		return []string{fmt.Sprintf("[%c-%c]", x[0], y[0])}
	}
	if x[0] == y[0] {
		var out []string
		for _, s := range sameLengthRange(x[1:], y[1:]) {
			out = append(out, gbnfLiteral(x[:1])+" "+s)
		}
		return out
	}
	zeros, nines := strings.Repeat("0", n-1), strings.Repeat("9", n-1)
	anyDigits := fmt.Sprintf("[0-9]{%d}", n-1)
	if x[1:] == zeros && y[1:] == nines {
		return []string{fmt.Sprintf("[%c-%c] %s", x[0], y[0], anyDigits)}
	}
	var out []string
	lo, hi := x[0], y[0]
	if x[1:] != zeros {
		for _, s := range sameLengthRange(x[1:], nines) {
			out = append(out, gbnfLiteral(x[:1])+" "+s)
		}
		lo++
	}
	if y[1:] != nines {
		hi--
	}
	if lo <= hi {
		out = append(out, fmt.Sprintf("[%c-%c] %s", lo, hi, anyDigits))
	}
	if y[1:] != nines {
		for _, s := range sameLengthRange(zeros, y[1:]) {
			out = append(out, gbnfLiteral(y[:1])+" "+s)
		}
	}
	return out
}

type objectProp struct {
	key      string
	value    string // expression
	required bool
}

func (c *schemaConv) objectValue(s *jsonValue, path, hint string) (string, error) {
	var props []objectProp
	propsV, hasProps := s.get("properties")
	if hasProps && propsV.kind != 'o' {
		return "", &SchemaError{Path: path + "/properties", Keyword: "properties", Msg: "must be an object"}
	}
	required := map[string]bool{}
	var requiredOrder []string
	if r, ok := s.get("required"); ok {
		if r.kind != 'a' {
			return "", &SchemaError{Path: path + "/required", Keyword: "required", Msg: "must be an array of strings"}
		}
		for i, it := range r.items {
			if it.kind != 's' {
				return "", &SchemaError{Path: path + "/required/" + strconv.Itoa(i), Keyword: "required", Msg: "must be an array of strings"}
			}
			if !required[it.str] {
				required[it.str] = true
				requiredOrder = append(requiredOrder, it.str)
			}
		}
	}
	// additionalProperties: absent means none when properties are listed
	// (the output keeps to the declared keys) and any otherwise.
	extraAllowed := !hasProps
	var extraSchema *jsonValue
	apPath := path + "/additionalProperties"
	if ap, ok := s.get("additionalProperties"); ok {
		switch {
		case ap.kind == 'b':
			extraAllowed = ap.b
		case ap.kind == 'o':
			extraAllowed, extraSchema = true, ap
		default:
			return "", &SchemaError{Path: apPath, Keyword: "additionalProperties", Msg: "must be a boolean or a schema"}
		}
	}
	extraValue := ""
	if extraAllowed {
		if extraSchema != nil {
			v, err := c.gen(extraSchema, apPath, childHint(hint, "extra"))
			if err != nil {
				return "", err
			}
			extraValue = v
		} else {
			extraValue = c.need("any-value")
		}
	}
	declared := map[string]bool{}
	if hasProps {
		for _, m := range propsV.members {
			declared[m.key] = true
			ppath := path + "/properties/" + pointerEscape(m.key)
			if m.val.kind == 'b' && !m.val.b {
				if required[m.key] {
					return "", &SchemaError{Path: ppath, Keyword: "required", Msg: fmt.Sprintf("property %q is required but its schema is false", m.key)}
				}
				continue
			}
			v, err := c.gen(m.val, ppath, childHint(hint, nameHint(m.key)))
			if err != nil {
				return "", err
			}
			props = append(props, objectProp{key: m.key, value: v, required: required[m.key]})
		}
	}
	for _, k := range requiredOrder {
		if declared[k] {
			continue
		}
		if !extraAllowed {
			return "", &SchemaError{Path: path + "/required", Keyword: "required", Msg: fmt.Sprintf("property %q is required but neither declared in properties nor allowed by additionalProperties", k)}
		}
		declared[k] = true
		props = append(props, objectProp{key: k, value: extraValue, required: true})
	}

	ws := c.need("ws")
	kv := func(key, value string) string {
		return fmt.Sprintf(`%s %s ":" %s %s %s`, key, ws, ws, value, ws)
	}
	// After the declared properties, in order, come the others if allowed:
	// keys of raw characters (no escapes) that are not declared names.
	var tailFirst, tailMore string // with no comma needed yet / after a property
	if extraAllowed {
		key := c.need("string")
		if len(declared) > 0 {
			names := make([]string, 0, len(declared))
			for k := range declared {
				names = append(names, k)
			}
			slices.Sort(names)
			key = c.otherKey(names, childHint(hint, "other-key"), path)
		}
		x := kv(key, extraValue)
		tailFirst = fmt.Sprintf(`( %s ( "," %s %s )* )?`, x, ws, x)
		tailMore = fmt.Sprintf(`( "," %s %s )*`, ws, x)
	}
	// first[i] / more[i]: properties i.. when none came before / some did.
	first, more := tailFirst, tailMore
	for i := len(props) - 1; i >= 0; i-- {
		p := props[i]
		x := kv(gbnfLiteral(string(appendJSONString(nil, p.key))), p.value)
		f := x + " " + more
		m := fmt.Sprintf(`"," %s %s %s`, ws, x, more)
		if !p.required {
			f = fmt.Sprintf("%s | %s", f, orEmpty(first))
			m = fmt.Sprintf("%s | %s", m, orEmpty(more))
		}
		nf := c.fresh(childHint(hint, "p"+strconv.Itoa(i)))
		c.rule(nf, f, path)
		first = nf
		if i > 0 { // more[0] would follow nothing
			nm := c.fresh(childHint(hint, "q"+strconv.Itoa(i)))
			c.rule(nm, m, path)
			more = nm
		}
	}
	name := c.fresh(hint)
	c.rule(name, fmt.Sprintf(`"{" %s %s "}"`, ws, first), path)
	return name, nil
}

func orEmpty(e string) string {
	if e == "" {
		return `""`
	}
	return e
}

// otherKey is a JSON string key of raw characters that is none of names: a
// trie of the names, where leaving the trie (or ending on a node that is not
// a name) gives any other key.
func (c *schemaConv) otherKey(names []string, hint, path string) string {
	type trieNode struct {
		children map[rune]*trieNode
		order    []rune
		name     bool
	}
	root := &trieNode{children: map[rune]*trieNode{}}
	for _, n := range names {
		u := root
		ok := true
		for _, r := range n {
			if r == '"' || r == '\\' || r < 0x20 {
				ok = false // cannot be written without escapes: never produced
				break
			}
			v, found := u.children[r]
			if !found {
				v = &trieNode{children: map[rune]*trieNode{}}
				u.children[r] = v
				u.order = append(u.order, r)
			}
			u = v
		}
		if ok {
			u.name = true
		}
	}
	rest := c.need("key-rest")
	var build func(u *trieNode) string
	build = func(u *trieNode) string {
		var alts []string
		if !u.name {
			alts = append(alts, `"\""`)
		}
		class := `[^"\\\x00-\x1F`
		for _, r := range u.order {
			alts = append(alts, gbnfLiteral(string(r))+" "+build(u.children[r]))
			class += classChar(r)
		}
		alts = append(alts, class+"] "+rest)
		name := c.fresh(hint)
		c.rule(name, strings.Join(alts, " | "), path)
		return name
	}
	return `"\"" ` + build(root)
}

func (c *schemaConv) arrayValue(s *jsonValue, path, hint string) (string, error) {
	lo, err := count(s, path, "minItems")
	if err != nil {
		return "", err
	}
	hi, err := count(s, path, "maxItems")
	if err != nil {
		return "", err
	}
	lo = max(lo, 0)
	var prefix []string
	if p, ok := s.get("prefixItems"); ok {
		if p.kind != 'a' {
			return "", &SchemaError{Path: path + "/prefixItems", Keyword: "prefixItems", Msg: "must be an array of schemas"}
		}
		for i, it := range p.items {
			v, err := c.gen(it, path+"/prefixItems/"+strconv.Itoa(i), childHint(hint, "item"+strconv.Itoa(i)))
			if err != nil {
				return "", err
			}
			prefix = append(prefix, v)
		}
	}
	item := ""
	it, hasItems := s.get("items")
	if !hasItems {
		item = c.need("any-value")
	} else {
		switch {
		case it.kind == 'b' && !it.b:
			if hi < 0 || hi > len(prefix) {
				hi = len(prefix)
			}
		case it.kind == 'a':
			return "", &SchemaError{Path: path + "/items", Keyword: "items", Msg: "an array of schemas is the old tuple form; use prefixItems"}
		default:
			if item, err = c.gen(it, path+"/items", childHint(hint, "item")); err != nil {
				return "", err
			}
		}
	}
	if hi >= 0 && lo > hi {
		return "", &SchemaError{Path: path + "/minItems", Keyword: "minItems", Msg: "no array length satisfies minItems, maxItems and items"}
	}
	ws := c.need("ws")
	elem := func(i int) string {
		if i < len(prefix) {
			return prefix[i]
		}
		return item
	}
	// rest(i): the elements from index i on, each after a comma.
	var rest func(i int) string
	rest = func(i int) string {
		if hi >= 0 && i >= hi {
			return ""
		}
		if i >= len(prefix) {
			more := -1
			if hi >= 0 {
				more = hi - i
			}
			return fmt.Sprintf(`( "," %s %s %s )%s`, ws, item, ws, repSuffix(max(lo-i, 0), more))
		}
		x := fmt.Sprintf(`"," %s %s %s %s`, ws, elem(i), ws, rest(i+1))
		if i >= lo {
			x = "( " + x + " )?"
		}
		return x
	}
	var body string
	if hi == 0 {
		body = fmt.Sprintf(`"[" %s "]"`, ws)
	} else {
		x := fmt.Sprintf(`%s %s %s`, elem(0), ws, rest(1))
		if lo == 0 {
			x = "( " + x + " )?"
		}
		body = fmt.Sprintf(`"[" %s %s "]"`, ws, x)
	}
	name := c.fresh(hint)
	c.rule(name, body, path)
	return name, nil
}
