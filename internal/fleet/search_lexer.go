package fleet

import (
	"slices"
	"strings"
)

// The characters of the lexicon: blanks, identifiers, label keys (identifier
// characters, '.', '/' and '-'), and comparison operators.
const (
	searchSpace      = " \t\r\n"
	searchIdentChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
	searchKeyChars   = searchIdentChars + "./-"
	searchOpChars    = "=!<>"
)

type searchTokenKind int

const (
	tokNone searchTokenKind = iota
	tokError
	tokEOF
	tokWord // a keyword or a field, possibly with a label key
	tokString
	tokNumber
	tokOp
	tokLParen
	tokRParen
	tokComma
)

// searchToken is a token as written (text), the unescaped value of a string,
// a word's identifier and label key, or the error of a tokError.
type searchToken struct {
	kind        searchTokenKind
	text, value string
	ident, key  string
	pos         int
	err         error
}

// describe renders t for a message: by its kind, never its text, unless it
// is a keyword or punctuation. A message reaches the caller and the log, and
// what a caller searched for may be a secret.
func (t searchToken) describe() string {
	switch t.kind {
	case tokEOF:
		return "end of input"
	case tokString:
		return "a string"
	case tokNumber:
		return "a number"
	case tokWord:
		if slices.Contains(searchKeywords, strings.ToLower(t.text)) {
			return "'" + strings.ToLower(t.text) + "'"
		}
		return "a name"
	case tokError:
		return "an invalid token"
	}
	text := t.text
	if r := []rune(text); len(r) > 3 {
		text = string(r[:3]) + "..."
	}
	return "'" + text + "'"
}

// searchKeywords are the words of the query language.
var searchKeywords = []string{"and", "or", "not", "in", "like", "ilike", "is", "null", "true", "false"}

// searchLexer reads the tokens of src one at a time.
type searchLexer struct {
	src []rune
	i   int
}

// span advances over the characters in set and returns how many it passed.
func (l *searchLexer) span(set string) int {
	start := l.i
	for l.i < len(l.src) && strings.ContainsRune(set, l.src[l.i]) {
		l.i++
	}
	return l.i - start
}

func (l *searchLexer) next() searchToken {
	l.span(searchSpace)
	start := l.i
	tok := searchToken{kind: tokEOF, pos: start + 1}
	if l.i == len(l.src) {
		return tok
	}
	switch r := l.src[l.i]; {
	case r == '\'':
		return l.lexString()
	case strings.ContainsRune("(),", r):
		tok.kind = map[rune]searchTokenKind{'(': tokLParen, ')': tokRParen, ',': tokComma}[r]
		l.i++
	case r == '-' || r >= '0' && r <= '9':
		l.i++
		l.span(searchIdentChars + ".")
		tok.kind = tokNumber
		if !isSearchNumber(string(l.src[start:l.i])) {
			return errorToken(tok.pos, "invalid number")
		}
	case strings.ContainsRune(searchIdentChars, r):
		return l.lexWord()
	case strings.ContainsRune(searchOpChars, r):
		l.span(searchOpChars)
		tok.kind = tokOp
		if !isSearchOp(string(l.src[start:l.i])) {
			return errorToken(tok.pos, "unknown operator '%s'", string(l.src[start:l.i]))
		}
	default:
		return errorToken(tok.pos, "unexpected character %q", r)
	}
	tok.text = string(l.src[start:l.i])
	return tok
}

func errorToken(pos int, format string, args ...any) searchToken {
	return searchToken{kind: tokError, pos: pos, err: SearchErrorf(pos, format, args...)}
}

// lexString reads a single-quoted string, in which two quotes stand for one.
func (l *searchLexer) lexString() searchToken {
	start := l.i
	var b strings.Builder
	for l.i++; l.i < len(l.src); l.i++ {
		switch r := l.src[l.i]; {
		case r == 0:
			return errorToken(l.i+1, "a string may not contain NUL")
		case r != '\'':
			b.WriteRune(r)
		case l.i+1 < len(l.src) && l.src[l.i+1] == '\'':
			b.WriteRune(r)
			l.i++
		default:
			l.i++
			return searchToken{kind: tokString, text: string(l.src[start:l.i]), value: b.String(), pos: start + 1}
		}
	}
	return errorToken(start+1, "unterminated string")
}

// lexWord reads an identifier or keyword, and a label key after a '.'.
func (l *searchLexer) lexWord() searchToken {
	start := l.i
	l.span(searchIdentChars)
	tok := searchToken{kind: tokWord, ident: string(l.src[start:l.i]), pos: start + 1}
	if l.i < len(l.src) && l.src[l.i] == '.' {
		l.i++
		if l.span(searchKeyChars) == 0 {
			return errorToken(l.i+1, "expected a label key after '%s.'", tok.ident)
		}
		tok.key = string(l.src[start+len(tok.ident)+1 : l.i])
	}
	tok.text = string(l.src[start:l.i])
	return tok
}

// isSearchOp reports whether s is a comparison operator.
func isSearchOp(s string) bool { return strings.Contains(" = != <> < <= > >= ", " "+s+" ") }

// isSearchNumber reports whether s is '-'?[0-9]+('.'[0-9]+)?.
func isSearchNumber(s string) bool {
	whole, frac, dotted := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	return isDigits(whole) && (!dotted || isDigits(frac))
}

func isDigits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

// isSearchIdentifier reports whether s matches [a-z_][a-z0-9_]*.
func isSearchIdentifier(s string) bool {
	return s != "" && !isDigits(s[:1]) && strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789_") == ""
}
