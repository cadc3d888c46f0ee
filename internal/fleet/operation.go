package fleet

import "context"

// The operation a piece of work belongs to: an API operation (its OpenAPI
// operationId), a reconciler (provisioning_mgr) or a command (migrate). The
// database adapter names it in every statement the work sends, so the
// database's own views say who is doing what. It is a name the code chose,
// never a caller's input.

type operationKey struct{}

// NewContextWithOperation returns a copy of ctx that carries the operation name.
func NewContextWithOperation(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, operationKey{}, name)
}

// OperationFromContext returns the operation ctx carries, or "" when none.
func OperationFromContext(ctx context.Context) string {
	name, _ := ctx.Value(operationKey{}).(string)
	return name
}
