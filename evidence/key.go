package evidence

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// GenerateKeyFiles writes a new Ed25519 key pair: the private key to path
// (PEM "PRIVATE KEY", PKCS #8, file mode 0600, created: an existing file
// is never overwritten) and the public key to path+".pub" (PEM "PUBLIC
// KEY", PKIX, mode 0644). Both are the forms `openssl pkey` reads. It
// returns the public key.
func GenerateKeyFiles(path string) (ed25519.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	if err := writeNew(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := writeNew(path+".pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		_ = os.Remove(path)
		return nil, err
	}
	return pub, nil
}

// writeNew creates path (failing when it exists) with data and mode, synced.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("evidence: %s exists; give a new file name (a key file is never overwritten)", path)
		}
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadPrivateKey reads an Ed25519 private key written by GenerateKeyFiles
// (or `openssl genpkey -algorithm ed25519`). Errors name the file, never
// its content.
func ReadPrivateKey(path string) (ed25519.PrivateKey, error) {
	der, err := readPEM(path, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("evidence: %s does not hold a PKCS #8 private key", path)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("evidence: %s holds a %T, not an Ed25519 private key", path, k)
	}
	return priv, nil
}

// ReadPublicKey reads an Ed25519 public key written by GenerateKeyFiles
// (or `openssl pkey -pubout`).
func ReadPublicKey(path string) (ed25519.PublicKey, error) {
	der, err := readPEM(path, "PUBLIC KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("evidence: %s does not hold a PKIX public key", path)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("evidence: %s holds a %T, not an Ed25519 public key", path, k)
	}
	return pub, nil
}

func readPEM(path, typ string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("evidence: reading the key file: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != typ {
		return nil, fmt.Errorf("evidence: %s is not a PEM %q file (give the %s file `scribe checkpoint keygen` wrote)", path, typ, map[bool]string{true: "private key", false: ".pub"}[typ == "PRIVATE KEY"])
	}
	return blk.Bytes, nil
}
