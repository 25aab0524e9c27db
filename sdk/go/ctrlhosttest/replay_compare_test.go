package ctrlhosttest

import "testing"

// A controller that copies a Secret's value from a replayed call (which carries the digest)
// answers with the digest: kept, so it matches the recorded answer.
func TestReplayDoesNotDigestADigestAgain(t *testing.T) {
	once := secretDigest("swordfish")
	if again := secretDigest(once); again != once {
		t.Errorf("secretDigest(%q) = %q, want it kept", once, again)
	}
	if got := secretDigest("sha256:short"); got == "sha256:short" {
		t.Errorf("secretDigest(%q) kept a value that is not a digest", got)
	}
}
