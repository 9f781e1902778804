package chat

import "strings"

// lstripBlocks applies Jinja2's lstrip_blocks to a template source: the
// spaces and tabs that stand between the start of a line and a block or
// comment tag ("{%", "{#", unless written "{%+" / "{#+") are removed. gonja's
// own option also strips them after another tag on the same line, which
// Jinja2 does not (`{{ x }} {% if y %}` keeps its space), so the template is
// rewritten here and gonja's option stays off.
func lstripBlocks(src string) string {
	var b strings.Builder
	b.Grow(len(src))
	atLineStart, wsStart := true, 0
	for i := 0; i < len(src); {
		if src[i] == '{' && i+1 < len(src) && (src[i+1] == '{' || src[i+1] == '%' || src[i+1] == '#') {
			kind := src[i+1]
			if kind != '{' && atLineStart && (i+2 >= len(src) || src[i+2] != '+') {
				s := b.String()[:wsStart]
				b.Reset()
				b.WriteString(s)
			}
			end := tagEnd(src, i)
			b.WriteString(src[i:end])
			i = end
			atLineStart = false
			continue
		}
		c := src[i]
		b.WriteByte(c)
		switch c {
		case '\n':
			atLineStart, wsStart = true, b.Len()
		case ' ', '\t':
		default:
			atLineStart = false
		}
		i++
	}
	return b.String()
}

// tagEnd is the index just past the tag that starts at src[i] ("{{", "{%" or
// "{#"), skipping string literals inside expressions; len(src) if unclosed.
func tagEnd(src string, i int) int {
	kind := src[i+1]
	closer := map[byte]string{'{': "}}", '%': "%}", '#': "#}"}[kind]
	j := i + 2
	if kind == '#' {
		if k := strings.Index(src[j:], closer); k >= 0 {
			return j + k + 2
		}
		return len(src)
	}
	for j < len(src) {
		switch c := src[j]; {
		case c == '\'' || c == '"':
			j++
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			j++
		case strings.HasPrefix(src[j:], closer):
			return j + 2
		default:
			j++
		}
	}
	return len(src)
}
