package webhook

import "strings"

// expand is Kubernetes' $(VAR) expansion of an environment variable's
// value, as the kubelet applies it (k8s.io/kubernetes
// third_party/forked/golang/expansion, written again here rather than
// imported): $(NAME) is replaced by lookup(NAME) when lookup knows NAME
// and kept as written when it does not; $$ is a literal $; a $ before
// anything else, or a $( never closed, stays as it is.
func expand(input string, lookup func(string) (string, bool)) string {
	if !strings.Contains(input, "$") {
		return input
	}
	var b strings.Builder
	checkpoint := 0
	for cursor := 0; cursor < len(input); cursor++ {
		if input[cursor] != '$' || cursor+1 >= len(input) {
			continue
		}
		b.WriteString(input[checkpoint:cursor])
		read, isVar, advance := readVariableName(input[cursor+1:])
		if isVar {
			if v, ok := lookup(read); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + read + ")")
			}
		} else {
			b.WriteString(read)
		}
		cursor += advance
		checkpoint = cursor + 1
	}
	return b.String() + input[checkpoint:]
}

// readVariableName reads what follows a $: a name in parentheses (isVar),
// else the text it stands for; advance is how many bytes it took.
func readVariableName(input string) (read string, isVar bool, advance int) {
	switch input[0] {
	case '$': // $$: an escaped $
		return "$", false, 1
	case '(':
		if end := strings.IndexByte(input[1:], ')'); end >= 0 {
			return input[1 : end+1], true, end + 2
		}
		return "$(", false, 1 // never closed: kept
	default:
		return "$" + input[:1], false, 1
	}
}
