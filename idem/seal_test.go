package idem

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

func TestSealRoundTripAndBinding(t *testing.T) {
	t.Parallel()
	s, err := newSealer(bytes.Repeat([]byte("k"), 32), nil)
	require.NoError(t, err)
	id := idemdriver.Ident{Scope: "s", Operation: "run", KeyDigest: Digest("s", "run", "k")}

	for _, size := range []int{0, 1, 1 << 20} {
		plain := bytes.Repeat([]byte{0xab}, size)
		env, err := s.seal(id, "fp", plain)
		require.NoError(t, err)
		got, err := s.open(id, "fp", env)
		require.NoError(t, err, "size %d", size)
		require.Equal(t, len(plain), len(got))
		require.True(t, bytes.Equal(plain, got))
	}

	env, err := s.seal(id, "fp", []byte(`{"v":1}`))
	require.NoError(t, err)
	other := id
	other.KeyDigest = Digest("s", "run", "other")
	_, err = s.open(other, "fp", env)
	require.ErrorIs(t, err, errEnvelope, "H14: a blob moved to another record")
	_, err = s.open(idemdriver.Ident{Scope: "t", Operation: "run", KeyDigest: id.KeyDigest}, "fp", env)
	require.ErrorIs(t, err, errEnvelope, "H14: another scope")
	_, err = s.open(id, "fp2", env)
	require.ErrorIs(t, err, errEnvelope, "another fingerprint")
	for i := range env {
		for bit := range 8 {
			flipped := append([]byte(nil), env...)
			flipped[i] ^= 1 << bit
			_, err := s.open(id, "fp", flipped)
			require.Error(t, err, "H14: bit %d of byte %d flipped", bit, i)
		}
	}
	for n := range env {
		_, err := s.open(id, "fp", env[:n])
		require.Error(t, err, "truncated to %d bytes", n)
	}
	_, err = s.open(id, "fp", append([]byte("UP\x01"), `{"v":1}`...))
	require.ErrorIs(t, err, errEnvelope, "H14: plaintext planted while sealing is on")
}

func TestSealNoncesDoNotRepeat(t *testing.T) {
	t.Parallel()
	s, err := newSealer(bytes.Repeat([]byte("k"), 32), nil)
	require.NoError(t, err)
	id := idemdriver.Ident{Scope: "s", Operation: "run", KeyDigest: Digest("s", "run", "k")}
	seen := map[string]bool{}
	for range 10000 {
		env, err := s.seal(id, "", nil)
		require.NoError(t, err)
		nonce := string(env[headerSize+keyIDSize : headerSize+keyIDSize+nonceSize])
		require.False(t, seen[nonce])
		seen[nonce] = true
	}
}

func TestSealRotation(t *testing.T) {
	t.Parallel()
	oldS := bytes.Repeat([]byte("o"), 32)
	newS := bytes.Repeat([]byte("n"), 32)
	id := idemdriver.Ident{Scope: "s", Operation: "run", KeyDigest: Digest("s", "run", "k")}
	before, err := newSealer(oldS, nil)
	require.NoError(t, err)
	env, err := before.seal(id, "", []byte("x"))
	require.NoError(t, err)

	rotated, err := newSealer(newS, [][]byte{oldS})
	require.NoError(t, err)
	got, err := rotated.open(id, "", env)
	require.NoError(t, err)
	require.Equal(t, []byte("x"), got)
	fresh, err := rotated.seal(id, "", []byte("y"))
	require.NoError(t, err)
	require.Equal(t, rotated.current.id[:], fresh[headerSize:headerSize+keyIDSize], "new writes use the current secret")
	require.NotEqual(t, before.current.id, rotated.current.id)

	newOnly, err := newSealer(newS, nil)
	require.NoError(t, err)
	_, err = newOnly.open(id, "", env)
	require.ErrorIs(t, err, errEnvelope)

	_, err = newSealer(newS, [][]byte{newS})
	require.Error(t, err, "a repeated secret is refused")
	_, err = newSealer([]byte("short"), nil)
	require.Error(t, err)
	_, err = newSealer(newS, [][]byte{[]byte("short")})
	require.Error(t, err)
}

func TestPlainEnvelopes(t *testing.T) {
	t.Parallel()
	plain := &sealer{plain: true}
	id := idemdriver.Ident{Scope: "s", Operation: "run", KeyDigest: Digest("s", "run", "k")}
	env, err := plain.seal(id, "", []byte("x"))
	require.NoError(t, err)
	got, err := plain.open(id, "", env)
	require.NoError(t, err)
	require.Equal(t, []byte("x"), got)

	sealed, err := newSealer(bytes.Repeat([]byte("k"), 32), nil)
	require.NoError(t, err)
	blob, err := sealed.seal(id, "", []byte("x"))
	require.NoError(t, err)
	_, err = plain.open(id, "", blob)
	require.ErrorIs(t, err, errEnvelope, "a sealed blob cannot be opened without the secret")
}

func FuzzOpenEnvelope(f *testing.F) {
	s, err := newSealer(bytes.Repeat([]byte("k"), 32), nil)
	if err != nil {
		f.Fatal(err)
	}
	id := idemdriver.Ident{Scope: "s", Operation: "run", KeyDigest: Digest("s", "run", "k")}
	env, err := s.seal(id, "", []byte(`{"a":1}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(env)
	f.Add([]byte("UP\x01{}"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, blob []byte) {
		got, err := s.open(id, "", blob)
		if err == nil && !bytes.Equal(got, []byte(`{"a":1}`)) {
			t.Fatalf("forged envelope opened: %q", got)
		}
	})
}

func TestStoredResponseBinaryRoundTrip(t *testing.T) {
	t.Parallel()
	in := StoredResponse{Status: 201, Header: map[string][]string{"Content-Type": {"application/json"}, "Link": {"<a>", "<b>"}}, Body: []byte(`{"id":1}`)}
	b, err := in.MarshalBinary()
	require.NoError(t, err)
	var out StoredResponse
	require.NoError(t, out.UnmarshalBinary(b))
	require.Equal(t, in, out)
	empty := StoredResponse{Status: 204}
	b, err = empty.MarshalBinary()
	require.NoError(t, err)
	require.NoError(t, out.UnmarshalBinary(b))
	require.Equal(t, 204, out.Status)
	require.Empty(t, out.Body)
	for n := range len(b) {
		require.Error(t, (&StoredResponse{}).UnmarshalBinary(b[:n]), "truncated to %d", n)
	}
	require.Error(t, (&StoredResponse{}).UnmarshalBinary([]byte(`{"status":200}`)))
	_, err = StoredResponse{Status: 42}.MarshalBinary()
	require.Error(t, err)
}

func FuzzStoredResponse(f *testing.F) {
	b, _ := StoredResponse{Status: 200, Header: map[string][]string{"A": {"b"}}, Body: []byte("x")}.MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var r StoredResponse
		if r.UnmarshalBinary(data) != nil {
			return
		}
		again, err := r.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded response does not encode: %v", err)
		}
		var r2 StoredResponse
		if err := r2.UnmarshalBinary(again); err != nil || r2.Status != r.Status || string(r2.Body) != string(r.Body) {
			t.Fatalf("round trip changed the response")
		}
	})
}
