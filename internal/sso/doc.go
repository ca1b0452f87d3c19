// Package sso signs console users in with the company's OpenID Connect
// provider (SPEC K16): the authorization code flow with PKCE, a state and
// a nonce that the caller keeps server-side and uses once, and an ID token
// verified against the provider's keys (issuer, audience, expiry,
// signature). Roles come from the provider's groups through a [RoleMap].
//
// It also verifies the logout tokens of OpenID Connect Back-Channel Logout
// 1.0 ([Client.VerifyLogoutToken]) with the same keys, and refuses plain
// http to a provider or callback that is not on loopback ([CheckURL]).
//
// The package speaks to the provider only; creating the console user,
// the session and the audit entries is the web layer's.
//
// Discovery is lazy: a [Client] is built without the network, and asks the
// provider's discovery document at the first sign-in (and again after a
// failure), so that the console starts, and local sign-in works, while the
// provider is down.
package sso
