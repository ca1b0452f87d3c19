//go:build oidcdemo

package consolecmd

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"

	"github.com/unstuckhq/unstuck"
	"github.com/unstuckhq/unstuck/internal/sso"
	"github.com/unstuckhq/unstuck/internal/sso/devidp"
	"github.com/unstuckhq/unstuck/internal/web"
)

// demoSSOUsers are the users of the demo's identity provider: one per role
// through the groups of oidc_roles.csv, and one in no mapped group.
var demoSSOUsers = []devidp.User{
	{Subject: "demo-sso-ada", Username: "ada", Password: "demo-sso", Name: "Ada Admin", Email: "ada@example.com", Groups: []string{"unstuck-admins", "engineering"}},
	{Subject: "demo-sso-otto", Username: "otto", Password: "demo-sso", Name: "Otto Oncall", Email: "otto@example.com", Groups: []string{"unstuck-oncall", "unstuck-support"}},
	{Subject: "demo-sso-sue", Username: "sue", Password: "demo-sso", Name: "Sue Support", Email: "sue@example.com", Groups: []string{"unstuck-support"}},
	{Subject: "demo-sso-aldo", Username: "aldo", Password: "demo-sso", Name: "Aldo Auditor", Email: "aldo@example.com", Groups: []string{"unstuck-auditors"}},
	{Subject: "demo-sso-mia", Username: "mia", Password: "demo-sso", Name: "Mia Marketing", Email: "mia@example.com", Groups: []string{"marketing"}},
}

// startDemoSSO starts the demo's identity provider on addr for the console
// at base, and returns it and the console's single sign-on over it. It is
// built with the oidcdemo tag only, so that the console's production
// binary does not carry an OpenID provider.
func startDemoSSO(addr, base string, log *slog.Logger) (*demoIdP, *web.SSO, error) {
	secret := make([]byte, 24)
	_, _ = rand.Read(secret)
	clientSecret := hex.EncodeToString(secret)
	idp, err := devidp.Start(addr, devidp.Config{ClientID: "unstuck-console", ClientSecret: clientSecret,
		RedirectURIs: []string{base + "/login/sso/callback"}, PostLogoutRedirectURIs: []string{base + "/login"},
		Users: demoSSOUsers, ShowUsers: true, Log: log})
	if err != nil {
		return nil, nil, err
	}
	client, err := sso.New(sso.Config{Issuer: idp.Issuer(), ClientID: "unstuck-console", ClientSecret: clientSecret,
		RedirectURL: base + "/login/sso/callback"})
	if err != nil {
		return nil, nil, errors.Join(err, idp.Close())
	}
	roles, err := sso.ParseRoleMap(strings.NewReader(unstuck.OIDCRoles))
	if err != nil {
		return nil, nil, errors.Join(err, idp.Close())
	}
	running := &demoIdP{issuer: idp.Issuer(), close: idp.Close}
	for _, u := range demoSSOUsers {
		running.users = append(running.users, demoIdPUser{username: u.Username, groups: u.Groups})
	}
	return running, &web.SSO{Client: client, Roles: roles, Label: "Sign in with the demo identity provider", PostLogoutURL: base + "/login"}, nil
}
