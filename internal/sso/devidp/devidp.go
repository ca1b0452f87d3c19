// Package devidp is a small OpenID Connect provider for the console's
// tests and for "console demo --oidc-demo": the provider implementation of
// github.com/zitadel/oidc/v3 (its op package: discovery, keys, authorize,
// token and end-session endpoints) over an in-memory storage, with a
// password login page and a fixed list of users in groups. It is a real
// provider speaking the real protocol on a local port; it is not meant for
// production (users and keys live in memory, passwords in clear).
//
// Its knobs (SetGroups, SetIDTokenLifetime, SetAudience) change what it
// issues next, so tests can make it misbehave as a real provider might.
//
// It also plays the provider's side of OpenID Connect Back-Channel Logout
// 1.0, which the op package does not send: BackChannelLogout signs a
// logout token for a user with the provider's key and POSTs it to the
// client's registered URI; LogoutToken and PostLogoutToken let a test
// forge and send tokens of its own.
package devidp

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// User is a user of the provider.
type User struct {
	Subject  string
	Username string
	Password string
	Name     string
	Email    string
	// EmailUnverified issues the email with email_verified false: the
	// provider has not checked it (by default it has).
	EmailUnverified bool
	Groups          []string
}

// Config configures a [Provider].
type Config struct {
	// ClientID and ClientSecret are the one client's credentials.
	ClientID     string
	ClientSecret string
	// RedirectURIs and PostLogoutRedirectURIs are the client's registered
	// callbacks (exact match).
	RedirectURIs           []string
	PostLogoutRedirectURIs []string
	Users                  []User
	// GroupsClaim names the ID token claim of the groups; "groups" when
	// empty.
	GroupsClaim string
	// BackChannelLogoutURI is the client's registered back-channel logout
	// URI, where BackChannelLogout POSTs logout tokens; empty registers
	// none (SetBackChannelLogoutURI sets it later).
	BackChannelLogoutURI string
	// ShowUsers lists the users and their passwords on the login page (the
	// demo).
	ShowUsers bool
	// Log receives the provider's errors; nil discards them.
	Log *slog.Logger
}

// Provider is a running provider. Its methods are safe for concurrent use.
type Provider struct {
	issuer string
	srv    *http.Server
	ln     net.Listener
	st     *storage
	done   chan struct{}
}

// Start listens on addr (127.0.0.1:0 for any port) and serves the provider
// with issuer http://<the address> until Close.
func Start(addr string, cfg Config) (*Provider, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("devidp: listen: %w", err)
	}
	issuer := "http://" + ln.Addr().String()
	h, st, err := newHandler(issuer, cfg)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	p := &Provider{issuer: issuer, ln: ln, st: st, done: make(chan struct{}),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go func() { // ends when Close closes the server
		defer close(p.done)
		_ = p.srv.Serve(ln)
	}()
	return p, nil
}

// Issuer is the provider's issuer URL.
func (p *Provider) Issuer() string { return p.issuer }

// Close stops the provider: afterwards its port refuses connections.
func (p *Provider) Close() error {
	err := p.srv.Close()
	<-p.done
	return err
}

// SetGroups replaces the groups of the user named username, for the tokens
// issued next.
func (p *Provider) SetGroups(username string, groups []string) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	for i := range p.st.users {
		if p.st.users[i].Username == username {
			p.st.users[i].Groups = slices.Clone(groups)
		}
	}
}

// SetIDTokenLifetime sets the lifetime of the ID tokens issued next (1 h
// by default); a negative one issues tokens expired already.
func (p *Provider) SetIDTokenLifetime(d time.Duration) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.idTokenLifetime = d
}

// SetAudience makes the ID tokens issued next name aud as their audience
// (and authorized party) instead of the client, signed with the provider's
// key like any other; nil restores the client.
func (p *Provider) SetAudience(aud []string) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.audience = slices.Clone(aud)
}

// newHandler builds the provider's HTTP handler for issuer.
func newHandler(issuer string, cfg Config) (http.Handler, *storage, error) {
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	st := &storage{cfg: cfg, users: slices.Clone(cfg.Users), idTokenLifetime: time.Hour, backChannelURI: cfg.BackChannelLogoutURI,
		key: signingKey{id: randomID(), key: key}, requests: map[string]*authRequest{}, codes: map[string]string{},
		tokens: map[string]token{}}
	var crypto [32]byte
	_, _ = rand.Read(crypto[:])
	provider, err := op.NewProvider(&op.Config{CryptoKey: crypto, CodeMethodS256: true, AuthMethodPost: true,
		DefaultLogoutRedirectURI: "/signed-out", BackChannelLogoutSupported: true}, st, op.StaticIssuer(issuer), op.WithAllowInsecure(), op.WithLogger(log))
	if err != nil {
		return nil, nil, fmt.Errorf("devidp: %w", err)
	}
	mux := http.NewServeMux()
	interceptor := op.NewIssuerInterceptor(provider.IssuerFromRequest)
	callback := op.AuthCallbackURL(provider)
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		st.renderLogin(w, r.URL.Query().Get("authRequestID"), "")
	})
	mux.Handle("POST /login", interceptor.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PostFormValue("authRequestID")
		if err := st.checkLogin(id, r.PostFormValue("username"), r.PostFormValue("password")); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			st.renderLogin(w, id, err.Error())
			return
		}
		http.Redirect(w, r, callback(r.Context(), id), http.StatusFound)
	}))
	mux.HandleFunc("GET /signed-out", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!doctype html><html lang="en"><title>Signed out</title><main><h1>Signed out of the demo identity provider</h1></main></html>`))
	})
	mux.Handle("POST /oauth/token", st.rewriteAudience(provider))
	mux.Handle("/", provider)
	return mux, st, nil
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Demo identity provider — sign in</title>
<style>body{font-family:system-ui,sans-serif;max-width:30rem;margin:2rem auto;padding:0 1rem}label,input,button{display:block;margin:.3rem 0}table{border-collapse:collapse}td,th{padding:.2rem .6rem;border:1px solid #999;text-align:left}</style></head>
<body><main>
<h1>Demo identity provider</h1>
{{if .Error}}<p role="alert">{{.Error}}</p>{{end}}
<form method="post" action="/login">
<input type="hidden" name="authRequestID" value="{{.ID}}">
<label for="username">Username</label><input id="username" name="username" autocomplete="username" required autofocus>
<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>
{{if .Users}}<h2>Test users</h2><table><thead><tr><th scope="col">Username</th><th scope="col">Password</th><th scope="col">Groups</th></tr></thead><tbody>
{{range .Users}}<tr><td>{{.Username}}</td><td>{{.Password}}</td><td>{{range $i, $g := .Groups}}{{if $i}}, {{end}}{{$g}}{{end}}</td></tr>{{end}}
</tbody></table>{{end}}
</main></body></html>`))

func (s *storage) renderLogin(w http.ResponseWriter, id, msg string) {
	data := struct {
		ID, Error string
		Users     []User
	}{ID: id, Error: msg}
	if s.cfg.ShowUsers {
		s.mu.Lock()
		data.Users = slices.Clone(s.users)
		s.mu.Unlock()
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = loginPage.Execute(w, data)
}

// checkLogin signs the auth request id in as username.
func (s *storage) checkLogin(id, username, password string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	req, ok := s.requests[id]
	if !ok {
		return errors.New("this sign-in has expired: start again from the application")
	}
	for _, u := range s.users {
		if u.Username == username && u.Password == password {
			req.subject = u.Subject
			req.done = true
			req.authTime = time.Now()
			return nil
		}
	}
	return errors.New("wrong username or password")
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

// ---- keys

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.key }
func (k signingKey) ID() string                                  { return k.id }

type publicKey struct{ signingKey }

func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.key.PublicKey }

var _ op.SigningKey = signingKey{}
var _ op.Key = publicKey{}

// rewriteAudience re-signs the ID token of next's token responses with
// the audience SetAudience set, if any. (The op package always adds the
// client to the audience, as it should: this is the misbehaving provider
// a test needs.)
func (s *storage) rewriteAudience(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		aud := s.audience
		s.mu.Unlock()
		if aud == nil {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		var resp map[string]any
		if rec.Code == http.StatusOK && json.Unmarshal(body, &resp) == nil {
			if raw, ok := resp["id_token"].(string); ok {
				if signed, err := s.resign(raw, aud); err == nil {
					resp["id_token"] = signed
					body, _ = json.Marshal(resp)
				}
			}
		}
		maps.Copy(w.Header(), rec.Header())
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}

func (s *storage) resign(raw string, aud []string) (string, error) {
	jws, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return "", err
	}
	var claims map[string]any
	if err := json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &claims); err != nil {
		return "", err
	}
	claims["aud"] = aud
	claims["azp"] = aud[0]
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: s.key.key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", s.key.id))
	if err != nil {
		return "", err
	}
	out, err := signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return out.CompactSerialize()
}
