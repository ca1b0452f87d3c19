package consolecmd

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/unstuckhq/unstuck/internal/sso"
	"github.com/unstuckhq/unstuck/internal/web"
)

// ssoFlags are serve's single sign-on settings (SPEC K16). The client
// secret is not among them: it comes from UNSTUCK_OIDC_CLIENT_SECRET or the
// file UNSTUCK_OIDC_CLIENT_SECRET_FILE names, never from a flag.
type ssoFlags struct {
	issuer, clientID, redirectURL, groupsClaim, roles, scopes, label *string
	reauth                                                           *time.Duration
	noLocal, backChannel                                             *bool
	// reauthEnv is UNSTUCK_OIDC_REAUTH when it is not a duration.
	reauthEnv string
}

// maxReauthWithoutBackChannel is the longest --oidc-reauth without
// back-channel logout: the provider then has no way to end a session
// here, and a user it removed keeps their access until the session is
// sent through it again.
const maxReauthWithoutBackChannel = time.Hour

func defineSSOFlags(fs *flag.FlagSet, getenv func(string) string) ssoFlags {
	var reauth time.Duration // 0: the default, which depends on back-channel logout
	reauthEnv := ""
	if v := getenv("UNSTUCK_OIDC_REAUTH"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			reauthEnv = v
		}
		reauth = d
	}
	return ssoFlags{
		issuer:      fs.String("oidc-issuer", getenv("UNSTUCK_OIDC_ISSUER"), "OpenID provider's issuer `URL`; turns single sign-on on (env UNSTUCK_OIDC_ISSUER)"),
		clientID:    fs.String("oidc-client-id", getenv("UNSTUCK_OIDC_CLIENT_ID"), "the console's client `ID` at the provider (env UNSTUCK_OIDC_CLIENT_ID); the secret comes from UNSTUCK_OIDC_CLIENT_SECRET or UNSTUCK_OIDC_CLIENT_SECRET_FILE, never a flag"),
		redirectURL: fs.String("oidc-redirect-url", getenv("UNSTUCK_OIDC_REDIRECT_URL"), "the console's callback `URL` registered at the provider, https://HOST/login/sso/callback (env UNSTUCK_OIDC_REDIRECT_URL)"),
		groupsClaim: fs.String("oidc-groups-claim", envOr(getenv, "UNSTUCK_OIDC_GROUPS_CLAIM", sso.DefaultGroupsClaim), "ID token `claim` that carries the user's groups (env UNSTUCK_OIDC_GROUPS_CLAIM)"),
		roles:       fs.String("oidc-roles", envOr(getenv, "UNSTUCK_OIDC_ROLES", "oidc_roles.csv"), "`file` mapping the provider's groups to roles, lines group,role (env UNSTUCK_OIDC_ROLES)"),
		scopes:      fs.String("oidc-scopes", envOr(getenv, "UNSTUCK_OIDC_SCOPES", "profile,email"), "comma-separated `scopes` asked beside openid (add groups where the provider wants it) (env UNSTUCK_OIDC_SCOPES)"),
		label:       fs.String("oidc-label", getenv("UNSTUCK_OIDC_LABEL"), "`text` of the sign-in button (env UNSTUCK_OIDC_LABEL)"),
		reauth: fs.Duration("oidc-reauth", reauth, "send a single sign-on session through the provider again after this long, to read its groups again: default "+
			shortDur(web.DefaultSSOReauth)+", at most "+shortDur(maxReauthWithoutBackChannel)+"; with --oidc-backchannel-logout default "+
			shortDur(web.DefaultSSOReauthBackChannel)+", no maximum (env UNSTUCK_OIDC_REAUTH)"),
		backChannel: fs.Bool("oidc-backchannel-logout", getenv("UNSTUCK_OIDC_BACKCHANNEL_LOGOUT") == "true",
			"serve OpenID Connect Back-Channel Logout at "+web.BackChannelLogoutPath+" (register https://HOST"+web.BackChannelLogoutPath+
				" at the provider): the provider ends a user's console sessions at once (env UNSTUCK_OIDC_BACKCHANNEL_LOGOUT=true)"),
		noLocal:   fs.Bool("no-local-sign-in", getenv("UNSTUCK_NO_LOCAL_SIGN_IN") == "true", "turn the local accounts' sign-in off: single sign-on only (env UNSTUCK_NO_LOCAL_SIGN_IN=true)"),
		reauthEnv: reauthEnv,
	}
}

// shortDur writes d as a flag takes it, without zero minutes or seconds
// (1h, 15m).
func shortDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// errSecretFlag refuses a client secret given as a flag: flags show in ps
// and in shell histories.
var errSecretFlag = errors.New("the OpenID client secret is never a flag: set UNSTUCK_OIDC_CLIENT_SECRET, or UNSTUCK_OIDC_CLIENT_SECRET_FILE to a file that holds it")

// refuseSecretFlag returns errSecretFlag when args try to pass the client
// secret as a flag.
func refuseSecretFlag(args []string) error {
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && strings.Contains(name, "secret") {
			return errSecretFlag
		}
	}
	return nil
}

// build returns the single sign-on of the flags, nil when no issuer is
// set. readFile reads the roles and the secret file.
func (f ssoFlags) build(getenv func(string) string, readFile func(string) ([]byte, error)) (*web.SSO, error) {
	if *f.issuer == "" {
		for name, v := range map[string]string{"--oidc-client-id": *f.clientID, "--oidc-redirect-url": *f.redirectURL} {
			if v != "" {
				return nil, fmt.Errorf("%s is set but --oidc-issuer is not", name)
			}
		}
		if *f.backChannel {
			return nil, errors.New("--oidc-backchannel-logout is set but --oidc-issuer is not")
		}
		return nil, nil
	}
	for _, u := range []struct{ flag, v string }{{"--oidc-issuer", *f.issuer}, {"--oidc-redirect-url", *f.redirectURL}} {
		if err := sso.CheckURL(u.v); err != nil {
			return nil, fmt.Errorf("%s %w", u.flag, err)
		}
	}
	switch {
	case f.reauthEnv != "":
		return nil, fmt.Errorf("UNSTUCK_OIDC_REAUTH %q is not a duration: write it as 15m, 1h or 90s", f.reauthEnv)
	case *f.reauth < 0:
		return nil, errors.New("--oidc-reauth must be positive (or 0 for the default)")
	case *f.reauth > maxReauthWithoutBackChannel && !*f.backChannel:
		return nil, fmt.Errorf("--oidc-reauth %s is longer than %s without back-channel logout: a user the provider removed would keep their access that long; set --oidc-reauth %[2]s or less, or turn on --oidc-backchannel-logout and register %[3]s at the provider",
			shortDur(*f.reauth), shortDur(maxReauthWithoutBackChannel), backChannelURL(*f.redirectURL))
	}
	secret := getenv("UNSTUCK_OIDC_CLIENT_SECRET")
	if file := getenv("UNSTUCK_OIDC_CLIENT_SECRET_FILE"); file != "" {
		if secret != "" {
			return nil, errors.New("set UNSTUCK_OIDC_CLIENT_SECRET or UNSTUCK_OIDC_CLIENT_SECRET_FILE, not both")
		}
		b, err := readFile(file)
		if err != nil {
			return nil, fmt.Errorf("UNSTUCK_OIDC_CLIENT_SECRET_FILE: %w", err)
		}
		secret = strings.TrimSpace(string(b))
	}
	if secret == "" {
		return nil, errors.New("single sign-on needs the client secret: set UNSTUCK_OIDC_CLIENT_SECRET or UNSTUCK_OIDC_CLIENT_SECRET_FILE")
	}
	var scopes []string
	for _, s := range strings.Split(*f.scopes, ",") {
		if s = strings.TrimSpace(s); s != "" && s != "openid" {
			scopes = append(scopes, s)
		}
	}
	client, err := sso.New(sso.Config{Issuer: *f.issuer, ClientID: *f.clientID, ClientSecret: secret, RedirectURL: *f.redirectURL,
		Scopes: scopes, GroupsClaim: *f.groupsClaim})
	if err != nil {
		return nil, err
	}
	text, err := readFile(*f.roles)
	if err != nil {
		return nil, fmt.Errorf("--oidc-roles: %w", err)
	}
	roles, err := sso.ParseRoleMap(strings.NewReader(string(text)))
	if err != nil {
		return nil, fmt.Errorf("--oidc-roles %s: %w", *f.roles, err)
	}
	if roles.Len() == 0 {
		return nil, fmt.Errorf("--oidc-roles %s maps no group: nobody could sign in", *f.roles)
	}
	return &web.SSO{Client: client, Roles: roles, Label: *f.label, ReauthAfter: *f.reauth, PostLogoutURL: postLogoutURL(*f.redirectURL),
		BackChannelLogout: *f.backChannel}, nil
}

// postLogoutURL is the console's sign-in page on the callback's origin:
// where the provider's end-session endpoint sends the browser back.
func postLogoutURL(redirect string) string { return onOrigin(redirect, "/login") }

// backChannelURL is the console's back-channel logout endpoint on the
// callback's origin: the URI to register at the provider.
func backChannelURL(redirect string) string { return onOrigin(redirect, web.BackChannelLogoutPath) }

func onOrigin(redirect, path string) string {
	u, err := url.Parse(redirect)
	if err != nil {
		return ""
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: path}).String()
}

// demoIdP is the running identity provider of "console demo --oidc-demo":
// its issuer, its test users and how to stop it.
type demoIdP struct {
	issuer string
	users  []demoIdPUser
	close  func() error
}

// demoIdPUser is a test user of the demo's identity provider, as the demo
// prints it.
type demoIdPUser struct {
	username string
	groups   []string
}
