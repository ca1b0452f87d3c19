package devidp

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// backChannelLogoutEvent is the events claim member of a logout token.
const backChannelLogoutEvent = "http://schemas.openid.net/event/backchannel-logout"

// LogoutTokenOptions change the logout token LogoutToken makes, so that a
// test can forge one.
type LogoutTokenOptions struct {
	// Edit changes the claims before they are signed (delete "sub", add
	// "nonce", set "aud", "iat" …).
	Edit func(claims map[string]any)
	// UnknownKey signs with a fresh key the provider does not publish.
	UnknownKey bool
}

// SetBackChannelLogoutURI registers uri as the client's back-channel
// logout URI (for a client whose address is known only after the
// provider started).
func (p *Provider) SetBackChannelLogoutURI(uri string) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.backChannelURI = uri
}

// LogoutToken returns a logout token for the user named username, signed
// with the provider's key: iss the issuer, aud the client, iat now, exp
// in two minutes, a fresh jti, the user's subject as sub, the
// back-channel logout event, and no sid or nonce; o can change any of it.
func (p *Provider) LogoutToken(username string, o LogoutTokenOptions) (string, error) {
	p.st.mu.Lock()
	subject := ""
	for _, u := range p.st.users {
		if u.Username == username {
			subject = u.Subject
		}
	}
	p.st.mu.Unlock()
	if subject == "" {
		return "", fmt.Errorf("devidp: no user %q", username)
	}
	now := time.Now()
	claims := map[string]any{"iss": p.issuer, "sub": subject, "aud": p.st.cfg.ClientID, "iat": now.Unix(),
		"exp": now.Add(2 * time.Minute).Unix(), "jti": randomID(), "events": map[string]any{backChannelLogoutEvent: map[string]any{}}}
	if o.Edit != nil {
		o.Edit(claims)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	key := p.st.key
	if o.UnknownKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return "", err
		}
		key = signingKey{id: key.id, key: k} // the published key's ID, another key
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key.key},
		(&jose.SignerOptions{}).WithType("logout+jwt").WithHeader("kid", key.id))
	if err != nil {
		return "", err
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// PostLogoutToken POSTs token to the client's back-channel logout URI as
// the specification has it (a form with logout_token), and returns the
// client's status and body.
func (p *Provider) PostLogoutToken(ctx context.Context, token string) (int, []byte, error) {
	p.st.mu.Lock()
	uri := p.st.backChannelURI
	p.st.mu.Unlock()
	if uri == "" {
		return 0, nil, errors.New("devidp: the client registered no back-channel logout URI")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, uri, strings.NewReader(url.Values{"logout_token": {token}}.Encode()))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("devidp: back-channel logout: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, body, err
}

// BackChannelLogout tells the client that the user named username signed
// out at the provider (or was removed): it signs a logout token for them
// and POSTs it to the client's back-channel logout URI, returning the
// client's status.
func (p *Provider) BackChannelLogout(ctx context.Context, username string) (int, error) {
	token, err := p.LogoutToken(username, LogoutTokenOptions{})
	if err != nil {
		return 0, err
	}
	status, _, err := p.PostLogoutToken(ctx, token)
	return status, err
}
