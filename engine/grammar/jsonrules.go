package grammar

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The rules every schema grammar shares: whitespace, strings, numbers, any
// JSON value, formats. Their texts are fixed, so across grammars they hash
// alike and their node tables are computed once per Vocab (share.go).

// need returns the name of one of the shared rules, writing it (and the
// shared rules it uses) the first time.
func (c *schemaConv) need(base string) string {
	if name, ok := c.shared[base]; ok {
		return name
	}
	name := c.fresh(base)
	c.shared[base] = name
	var body string
	digits := fmt.Sprintf(`( "0" | [1-9] [0-9]{0,%d} )`, maxIntDigits-1)
	frac := fmt.Sprintf(`( "." [0-9]{1,%d} )?`, maxIntDigits)
	exp := `( [eE] [-+]? [0-9]{1,2} )?`
	switch base {
	case "ws":
		body = fmt.Sprintf(`( [ \t] | "\n" [ \t]{0,%d} )?`, maxIndent)
	case "hex":
		body = `[0-9a-fA-F]`
	case "char":
		// One code point of a JSON string: raw, or escaped; a \u escape of a
		// surrogate only as a high-low pair, so minLength and maxLength,
		// which count code points, count each char once.
		h := c.need("hex")
		body = fmt.Sprintf(`[^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" ( [0-9a-cA-CeEfF] %[1]s{3} | [dD] [0-7] %[1]s{2} | [dD] [89abAB] %[1]s{2} "\\u" [dD] [c-fC-F] %[1]s{2} ) )`, h)
	case "string":
		body = `"\"" ` + c.need("char") + `* "\""`
	case "raw-char":
		body = `[^"\\\x00-\x1F]`
	case "key-rest":
		body = c.need("raw-char") + `* "\""`
	case "integer":
		body = `"-"? ` + digits
	case "number":
		body = `"-"? ` + digits + " " + frac + " " + exp
	case "number-nonneg":
		body = digits + " " + frac + " " + exp
	case "number-positive":
		body = fmt.Sprintf(`( [1-9] [0-9]{0,%d} %s | "0." "0"{0,%d} [1-9] [0-9]{0,%d} ) %s`, maxIntDigits-1, frac, maxIntDigits-1, maxIntDigits-1, exp)
	case "boolean":
		body = `"true" | "false"`
	case "any-value":
		body = strings.Join([]string{c.need("any-object"), c.need("any-array"), c.need("string"), c.need("number"), `"true"`, `"false"`, `"null"`}, " | ")
	case "any-object":
		ws, v, s := c.need("ws"), c.need("any-value"), c.need("string")
		kv := fmt.Sprintf(`%s %s ":" %s %s %s`, s, ws, ws, v, ws)
		body = fmt.Sprintf(`"{" %s ( %s ( "," %s %s )* )? "}"`, ws, kv, ws, kv)
	case "any-array":
		ws, v := c.need("ws"), c.need("any-value")
		body = fmt.Sprintf(`"[" %s ( %s %s ( "," %s %s %s )* )? "]"`, ws, v, ws, ws, v, ws)
	case "date":
		body = `"\"" ` + c.need("date-body") + ` "\""`
	case "date-body":
		// Days 29-31 only in months that always have them: Go's time.Parse,
		// which validators use, rejects February 29 of common years.
		body = `[0-9]{4} "-" ( ( "01" | "03" | "05" | "07" | "08" | "10" | "12" ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) | ( "04" | "06" | "09" | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | "02" "-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ) )`
	case "time":
		body = `"\"" ` + c.need("time-body") + ` "\""`
	case "time-body":
		// RFC 3339 full-time without leap seconds.
		body = `( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,9} )? ( [zZ] | [-+] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )`
	case "date-time":
		body = `"\"" ` + c.need("date-body") + ` [tT] ` + c.need("time-body") + ` "\""`
	case "uuid":
		h := c.need("hex")
		body = fmt.Sprintf(`"\"" %[1]s{8} "-" %[1]s{4} "-" %[1]s{4} "-" %[1]s{4} "-" %[1]s{12} "\""`, h)
	default:
		panic("grammar: unknown shared rule " + base)
	}
	c.rule(name, body, "")
	return name
}

// gbnfLiteral quotes bytes as a GBNF string literal.
func gbnfLiteral(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7F:
			fmt.Fprintf(&b, `\x%02X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// classChar writes r for use inside a GBNF character class.
func classChar(r rune) string {
	if r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
		return string(r)
	}
	if r <= 0xFFFF {
		return fmt.Sprintf(`\u%04X`, r)
	}
	return fmt.Sprintf(`\U%08X`, r)
}

func repSuffix(lo, hi int) string {
	switch {
	case lo == 0 && hi < 0:
		return "*"
	case lo == 1 && hi < 0:
		return "+"
	case lo == 0 && hi == 1:
		return "?"
	case lo == hi:
		return fmt.Sprintf("{%d}", lo)
	case hi < 0:
		return fmt.Sprintf("{%d,}", lo)
	}
	return fmt.Sprintf("{%d,%d}", lo, hi)
}
