package api

import "context"

// AdminName is the principal name of the token in the state directory's
// api-token file: berth's own account.
const AdminName = "admin"

// Principal is who made an API request, as established by its bearer token.
//
// The model: the token in <state_dir>/api-token belongs to the admin, the
// account that runs berth (whoever can read berth's state directory owns
// berth anyway). Each file <state_dir>/api-tokens/NAME adds a submitter
// NAME with the file's content as its token. A submitter sees, cancels and
// reads the logs of its own jobs only, learns only the environment keys of
// its own jobs and may resume only those environments. The admin sees and
// may do everything.
type Principal struct {
	// Name is AdminName or the submitter's name.
	Name string
	// Admin is true for the admin token.
	Admin bool
}

// Owns reports whether p may see and act on something that owner created.
// Jobs from before tokens existed have no owner and belong to the admin.
func (p Principal) Owns(owner string) bool {
	return p.Admin || (owner != "" && owner == p.Name)
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p; the server's authentication
// middleware calls it for every authenticated request.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal of an authenticated request. A
// request that did not pass authentication (a handler mounted without it,
// as in unit tests) is the admin's: authentication is the server's job, not
// each handler's.
func PrincipalFrom(ctx context.Context) Principal {
	if p, ok := ctx.Value(principalKey{}).(Principal); ok {
		return p
	}
	return Principal{Name: AdminName, Admin: true}
}
