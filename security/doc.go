// Package security holds berth's attack suite: tests that run the attacks an
// untrusted CI job would try from inside real local-provider sandboxes, as
// root and unprivileged, and check that each one fails. The package has no
// code of its own; see security_test.go and the README's "Security model".
package security
