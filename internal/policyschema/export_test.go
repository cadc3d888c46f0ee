package policyschema

// EmbeddedCRD is the embedded Policy CRD, for the test that keeps it in step
// with the shared copy.
var EmbeddedCRD = crdYAML
