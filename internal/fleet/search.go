package fleet

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The limits of a search query: its length in bytes, its predicates, its
// nesting of '(' and 'not', the values of one 'in' list, and the characters of
// a label key (a 253-character DNS prefix, '/', a 63-character name). A query
// beyond one is rejected with the position where it crossed it, so no client
// can make the parser or the database do unbounded work.
const (
	MaxSearchLength     = 4096
	MaxSearchPredicates = 64
	MaxSearchDepth      = 16
	MaxSearchInValues   = 256
	MaxLabelKeyLength   = 317
)

// SearchOp is the operator of a SearchPredicate. "<>" parses as OpNe.
type SearchOp string

// The operators of the search language.
const (
	OpEq        SearchOp = "="
	OpNe        SearchOp = "!="
	OpLt        SearchOp = "<"
	OpLe        SearchOp = "<="
	OpGt        SearchOp = ">"
	OpGe        SearchOp = ">="
	OpIn        SearchOp = "in"
	OpNotIn     SearchOp = "not in"
	OpLike      SearchOp = "like"
	OpNotLike   SearchOp = "not like"
	OpILike     SearchOp = "ilike"
	OpNotILike  SearchOp = "not ilike"
	OpIsNull    SearchOp = "is null"
	OpIsNotNull SearchOp = "is not null"
)

// SearchValueKind is the lexical kind of a SearchValue.
type SearchValueKind int

// The kinds of values.
const (
	ValueString SearchValueKind = iota + 1
	ValueNumber
	ValueBool
)

// SearchValue is a literal of a query. Text is the unescaped content of a
// string, the digits of a number as written, or "true" or "false". Pos is the
// 1-based character offset of the literal in the query.
type SearchValue struct {
	Kind SearchValueKind
	Text string
	Pos  int
}

// String renders v as it would be written in a query.
// describe names the kind of value, for an error that must not repeat it.
func (k SearchValueKind) describe() string {
	switch k {
	case ValueString:
		return "a string"
	case ValueNumber:
		return "a number"
	default:
		return "true or false"
	}
}

// Describe names the kind of value, for an error that must not repeat it.
func (k SearchValueKind) Describe() string { return k.describe() }

func (v SearchValue) String() string {
	if v.Kind == ValueString {
		return "'" + strings.ReplaceAll(v.Text, "'", "''") + "'"
	}
	return v.Text
}

// SearchExpr is a node of a parsed query: SearchAnd, SearchOr, SearchNot or
// SearchPredicate. String renders the tree as an s-expression.
type SearchExpr interface {
	String() string
	searchExpr()
}

// SearchAnd matches when both sides match.
type SearchAnd struct{ Left, Right SearchExpr }

// SearchOr matches when either side matches.
type SearchOr struct{ Left, Right SearchExpr }

// SearchNot matches when X does not.
type SearchNot struct{ X SearchExpr }

// SearchPredicate compares one field with values. Key is the label key of a
// field written "labels.<key>", else empty. Values holds one value for the
// comparison operators, the list for 'in', and none for 'is null'. Pos is the
// 1-based character offset of the field in the query.
type SearchPredicate struct {
	Field  string
	Key    string
	Op     SearchOp
	Values []SearchValue
	Pos    int
}

func (SearchAnd) searchExpr()       {}
func (SearchOr) searchExpr()        {}
func (SearchNot) searchExpr()       {}
func (SearchPredicate) searchExpr() {}

// String renders e as "(and <left> <right>)".
func (e SearchAnd) String() string { return "(and " + e.Left.String() + " " + e.Right.String() + ")" }

// String renders e as "(or <left> <right>)".
func (e SearchOr) String() string { return "(or " + e.Left.String() + " " + e.Right.String() + ")" }

// String renders e as "(not <x>)".
func (e SearchNot) String() string { return "(not " + e.X.String() + ")" }

// String renders p as "(<op> <field> <values>...)", e.g. "(in region 'x' 'y')".
func (p SearchPredicate) String() string {
	parts := []string{string(p.Op), p.Field}
	if p.Key != "" {
		parts[1] += "." + p.Key
	}
	for _, v := range p.Values {
		parts = append(parts, v.String())
	}
	return "(" + strings.Join(parts, " ") + ")"
}

// SearchError is a query the service cannot use: Pos is the 1-based character
// offset where the problem is, Msg says what it is.
type SearchError struct {
	Pos int
	Msg string
}

// Error renders e as "position N: msg".
func (e *SearchError) Error() string { return fmt.Sprintf("position %d: %s", e.Pos, e.Msg) }

// SearchErrorf returns a CodeBadSearch *Error wrapping a *SearchError at pos,
// for the parser and for the adapters that translate a parsed query.
func SearchErrorf(pos int, format string, args ...any) *Error {
	return Errorf(CodeBadSearch, "%w", &SearchError{Pos: pos, Msg: fmt.Sprintf(format, args...)})
}

// ParseSearch parses a query of the search language, for instance
// "name = 'a' and (region in ('x', 'y') or labels.env != 'prod')". A blank
// query returns a nil expression: no filter. Errors: CodeBadSearch, wrapping a
// *SearchError that gives the position.
func ParseSearch(q string) (SearchExpr, error) {
	if len(q) > MaxSearchLength {
		return nil, SearchErrorf(utf8.RuneCountInString(q[:MaxSearchLength])+1,
			"the query is longer than %d bytes", MaxSearchLength)
	}
	for i, r := range q {
		if r == utf8.RuneError && !strings.HasPrefix(q[i:], "\uFFFD") {
			return nil, SearchErrorf(utf8.RuneCountInString(q[:i])+1, "invalid UTF-8")
		}
	}
	if strings.Trim(q, searchSpace) == "" {
		return nil, nil
	}
	p := &searchParser{lex: searchLexer{src: []rune(q)}}
	p.advance()
	expr, err := p.parseOr()
	switch {
	case err != nil:
		return nil, err
	case p.tok.kind == tokEOF:
		return expr, nil
	case p.tok.kind == tokRParen:
		return nil, p.errorf("unexpected ')'")
	}
	return nil, p.errorf("unexpected %s; expected 'and', 'or' or end of input", p.tok.describe())
}

// searchParser is a recursive-descent parser reading one token ahead. A
// lexical error is a token too, reported when the parser reaches it, so the
// first error in reading order is the one reported.
type searchParser struct {
	lex        searchLexer
	tok        searchToken // the current token
	prev       searchToken // the token before, to say "after X" in messages
	depth      int
	predicates int
}

func (p *searchParser) advance() { p.prev, p.tok = p.tok, p.lex.next() }

// errorf reports an error at the current token, or the token's own error.
func (p *searchParser) errorf(format string, args ...any) error {
	if p.tok.kind == tokError {
		return p.tok.err
	}
	return SearchErrorf(p.tok.pos, format, args...)
}

// expected reports that the current token is not what the grammar wants.
func (p *searchParser) expected(what string) error {
	if p.prev.kind == tokNone {
		return p.errorf("expected %s, found %s", what, p.tok.describe())
	}
	return p.errorf("expected %s after %s, found %s", what, p.prev.describe(), p.tok.describe())
}

// isKeyword reports whether the current token is one of kws, in any case.
func (p *searchParser) isKeyword(kws ...string) bool {
	for _, kw := range kws {
		if p.tok.kind == tokWord && p.tok.key == "" && strings.EqualFold(p.tok.text, kw) {
			return true
		}
	}
	return false
}

func (p *searchParser) parseOr() (SearchExpr, error) {
	return p.parseChain("or", p.parseAnd, func(l, r SearchExpr) SearchExpr { return SearchOr{l, r} })
}

func (p *searchParser) parseAnd() (SearchExpr, error) {
	return p.parseChain("and", p.parseUnary, func(l, r SearchExpr) SearchExpr { return SearchAnd{l, r} })
}

// parseChain parses operand (kw operand)*, joining left to right.
func (p *searchParser) parseChain(kw string, operand func() (SearchExpr, error), join func(l, r SearchExpr) SearchExpr) (SearchExpr, error) {
	left, err := operand()
	for err == nil && p.isKeyword(kw) {
		p.advance()
		var right SearchExpr
		if right, err = operand(); err == nil {
			left = join(left, right)
		}
	}
	return left, err
}

// parseUnary parses 'not' unary, '(' expr ')' or a predicate; 'not' and '('
// each nest one level deeper.
func (p *searchParser) parseUnary() (SearchExpr, error) {
	open := p.tok
	switch {
	case p.tok.kind == tokWord && !p.isKeyword("and", "or", "not", "in", "like", "ilike", "is", "null", "true", "false"):
		return p.parsePredicate()
	case p.tok.kind != tokLParen && !p.isKeyword("not"):
		return nil, p.expected("a field, '(' or 'not'")
	case p.depth == MaxSearchDepth:
		return nil, p.errorf("nesting deeper than %d levels", MaxSearchDepth)
	}
	p.depth++
	defer func() { p.depth-- }()
	p.advance()
	if open.kind != tokLParen {
		x, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		return SearchNot{X: x}, nil
	}
	x, err := p.parseOr()
	if err == nil && p.tok.kind != tokRParen {
		err = p.errorf("expected ')' to close the '(' at position %d, found %s", open.pos, p.tok.describe())
	}
	p.advance()
	return x, err
}

func (p *searchParser) parsePredicate() (SearchExpr, error) {
	field := p.tok
	switch {
	case !isSearchIdentifier(field.ident):
		return nil, p.errorf("invalid field name; a field name is lower-case letters, digits and '_'")
	case utf8.RuneCountInString(field.key) > MaxLabelKeyLength:
		return nil, SearchErrorf(field.pos+len(field.ident)+1, "label key longer than %d characters", MaxLabelKeyLength)
	case p.predicates == MaxSearchPredicates:
		return nil, p.errorf("more than %d predicates", MaxSearchPredicates)
	}
	p.predicates++
	p.advance()
	op, err := p.parseOperator()
	if err != nil {
		return nil, err
	}
	values, err := p.parseOperand(op)
	if err != nil {
		return nil, err
	}
	return SearchPredicate{Field: field.ident, Key: field.key, Op: op, Values: values, Pos: field.pos}, nil
}

// parseOperator parses a comparison, or a keyword operator of up to three words.
func (p *searchParser) parseOperator() (SearchOp, error) {
	if p.tok.kind == tokOp {
		op := SearchOp(p.tok.text)
		if op == "<>" {
			op = OpNe
		}
		p.advance()
		return op, nil
	}
	var op string
	for {
		word := strings.ToLower(p.tok.text)
		switch {
		case op == "" && p.isKeyword("not", "is"), op == "is" && p.isKeyword("not"):
			op = strings.TrimSpace(op + " " + word)
			p.advance()
			continue
		case (op == "" || op == "not") && p.isKeyword("in", "like", "ilike"),
			(op == "is" || op == "is not") && p.isKeyword("null"):
			p.advance()
			return SearchOp(strings.TrimSpace(op + " " + word)), nil
		}
		return "", p.expected(map[string]string{"": "an operator", "not": "'in', 'like' or 'ilike'",
			"is": "'null' or 'not null'", "is not": "'null'"}[op])
	}
}

// parseOperand parses what op takes: nothing, a list, a string or a value.
func (p *searchParser) parseOperand(op SearchOp) ([]SearchValue, error) {
	switch op {
	case OpIsNull, OpIsNotNull:
		return nil, nil
	case OpIn, OpNotIn:
		return p.parseList()
	case OpLike, OpNotLike, OpILike, OpNotILike:
		if p.tok.kind != tokString {
			return nil, p.expected("a string")
		}
	}
	v, err := p.parseValue()
	if err != nil {
		return nil, err
	}
	return []SearchValue{v}, nil
}

// parseList parses '(' value (',' value)* ')'.
func (p *searchParser) parseList() ([]SearchValue, error) {
	if p.tok.kind != tokLParen {
		return nil, p.expected("'('")
	}
	p.advance()
	if p.tok.kind == tokRParen {
		return nil, p.errorf("empty 'in' list; give at least one value")
	}
	var values []SearchValue
	for {
		if len(values) == MaxSearchInValues {
			return nil, p.errorf("more than %d values in an 'in' list", MaxSearchInValues)
		}
		v, err := p.parseValue()
		if err != nil {
			return nil, err
		}
		values = append(values, v)
		if p.tok.kind != tokComma && p.tok.kind != tokRParen {
			return nil, p.expected("',' or ')'")
		}
		if p.advance(); p.prev.kind == tokRParen {
			return values, nil
		}
	}
}

func (p *searchParser) parseValue() (SearchValue, error) {
	v := SearchValue{Text: p.tok.text, Pos: p.tok.pos}
	switch {
	case p.tok.kind == tokString:
		v.Kind, v.Text = ValueString, p.tok.value
	case p.tok.kind == tokNumber:
		v.Kind = ValueNumber
	case p.isKeyword("true", "false"):
		v.Kind, v.Text = ValueBool, strings.ToLower(p.tok.text)
	case p.isKeyword("null"):
		return v, p.errorf("expected a value after %s, found 'null'; write 'is null' to match a missing value", p.prev.describe())
	default:
		return v, p.expected("a value")
	}
	p.advance()
	return v, nil
}
