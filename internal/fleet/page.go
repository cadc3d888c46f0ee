package fleet

// MaxPage is the highest page a list may ask for, as the specifications state
// it: with the largest page size, the offset it makes stays far below what an
// int or PostgreSQL's OFFSET can hold.
const MaxPage = 1_000_000
