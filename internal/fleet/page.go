package fleet

// MaxPage is the highest page a list may ask for, as the specifications state
// it: with the largest page size, the offset it makes stays far below what an
// int or PostgreSQL's OFFSET can hold.
const MaxPage = 1_000_000

// MaxPageSize is the largest page a list answers, the maximum of every `size`
// parameter of the specifications (a test in internal/rest holds them
// equal). A deployment may lower it with --max-page-size, never raise it.
const MaxPageSize = 500
