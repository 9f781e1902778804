package update

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// TrustedKey is a public key that may sign bundles, with where it came from.
type TrustedKey struct {
	Key    ed25519.PublicKey
	Source string // the file it was read from
}

// KeyID is a short fingerprint of a public key: the first 8 bytes of its
// SHA-256, in hex.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// GenerateKeyFiles writes a new key pair: base+".key" (PKCS#8 PEM, mode
// 0600) and base+".pub" (PKIX PEM). It never overwrites a file.
func GenerateKeyFiles(base string) (ed25519.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	keyPath, pubPath := base+".key", base+".pub"
	for _, p := range []string{keyPath, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			return nil, fmt.Errorf("%s exists: refusing to overwrite a key", p)
		}
	}
	if err := writeNew(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600); err != nil {
		return nil, err
	}
	if err := writeNew(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		os.Remove(keyPath)
		return nil, err
	}
	return pub, nil
}

func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

// LoadPrivateKey reads a signing key: PEM "PRIVATE KEY" (PKCS#8, as
// GenerateKeyFiles and `openssl genpkey -algorithm ed25519` write it), or
// base64 of the 32-byte seed or the 64-byte private key.
func LoadPrivateKey(path string) (ed25519.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if blk, _ := pem.Decode(data); blk != nil {
		if blk.Type != "PRIVATE KEY" {
			return nil, fmt.Errorf("%s: PEM block %q, want \"PRIVATE KEY\" (PKCS#8 ed25519)", path, blk.Type)
		}
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		priv, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("%s: a %T key, want ed25519", path, k)
		}
		return priv, nil
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("%s: neither PEM nor base64: %w", path, err)
	}
	switch len(raw) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(raw), nil
	case ed25519.PrivateKeySize:
		priv := ed25519.PrivateKey(raw)
		if !priv.Public().(ed25519.PublicKey).Equal(ed25519.NewKeyFromSeed(priv.Seed()).Public()) {
			return nil, fmt.Errorf("%s: the private key's public half does not match its seed", path)
		}
		return priv, nil
	}
	return nil, fmt.Errorf("%s: base64 key of %d bytes, want %d (seed) or %d", path, len(raw), ed25519.SeedSize, ed25519.PrivateKeySize)
}

// LoadPublicKey reads a public key: PEM "PUBLIC KEY" (PKIX) or base64 of
// the 32 raw bytes.
func LoadPublicKey(path string) (TrustedKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return TrustedKey{}, err
	}
	if blk, _ := pem.Decode(data); blk != nil {
		if blk.Type != "PUBLIC KEY" {
			return TrustedKey{}, fmt.Errorf("%s: PEM block %q, want \"PUBLIC KEY\"", path, blk.Type)
		}
		k, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if err != nil {
			return TrustedKey{}, fmt.Errorf("%s: %w", path, err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return TrustedKey{}, fmt.Errorf("%s: a %T key, want ed25519", path, k)
		}
		return TrustedKey{Key: pub, Source: path}, nil
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil {
		return TrustedKey{}, fmt.Errorf("%s: neither PEM nor base64: %w", path, err)
	}
	if len(raw) != ed25519.PublicKeySize {
		return TrustedKey{}, fmt.Errorf("%s: base64 key of %d bytes, want %d", path, len(raw), ed25519.PublicKeySize)
	}
	return TrustedKey{Key: ed25519.PublicKey(raw), Source: path}, nil
}

// LoadTrustedDir reads every *.pub file in dir, in name order. A missing
// folder holds no keys; an unreadable or malformed key is an error.
func LoadTrustedDir(dir string) ([]TrustedKey, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("trusted keys: %w", err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".pub") && !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var keys []TrustedKey
	for _, n := range names {
		k, err := LoadPublicKey(filepath.Join(dir, n))
		if err != nil {
			return nil, fmt.Errorf("trusted keys: %w", err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}
