"""Ed25519 policy signatures: the learner signs every bundle, an actor verifies before parsing.

    signer = Signer.load_or_create(Path("learner.key"))  # 0600 PEM, made when missing
    signer.write_public(Path("learner.pub"))              # what every board is given
    sig = signer.sign(message)                            # 64 bytes
    verifier = Verifier.from_file(Path("learner.pub"))
    verifier.check(signer.key_id, message, sig)           # CodecError unless genuine

Keys are PEM files (PKCS#8 for the private key, SubjectPublicKeyInfo for the public one), the
formats OpenSSL and every Ed25519 library read. A key id (the first 8 bytes of the SHA-256
of the raw 32-byte public key) travels beside each signature, so that an actor can tell a
policy signed by another learner ("unknown_key") from a tampered one ("bad_signature").
Uses ``cryptography`` (wheels for x86-64 and aarch64); no TensorFlow.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from edge_rl.wire.envelope import KEY_ID_BYTES, SIGNATURE_BYTES, CodecError

__all__ = ["KEY_ID_BYTES", "SIGNATURE_BYTES", "Signer", "Verifier", "key_id"]


def key_id(public: Ed25519PublicKey) -> bytes:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).digest()[:KEY_ID_BYTES]


def _public_pem(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


class Signer:
    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        self.public = private.public_key()
        self.key_id = key_id(self.public)

    @classmethod
    def generate(cls) -> Signer:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def load_or_create(cls, path: Path) -> Signer:
        """The key in ``path``; a new one written there (mode 0600) when there is none.
        A key file that others can read is refused: anyone who has it can sign policies."""
        if not path.exists():
            signer = cls.generate()
            signer.write_private(path)
            return signer
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise ValueError(
                f"signing key {path} is readable by others (mode {mode:o}): chmod 600 {path}"
            )
        try:
            private = serialization.load_pem_private_key(path.read_bytes(), password=None)
        except (ValueError, TypeError) as e:
            raise ValueError(f"signing key {path} is not a PEM private key: {e}") from None
        if not isinstance(private, Ed25519PrivateKey):
            raise ValueError(f"signing key {path} is not an Ed25519 key")
        return cls(private)

    def write_private(self, path: Path) -> None:
        pem = self._private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # never overwrite
        with os.fdopen(fd, "wb") as f:
            f.write(pem)

    def public_pem(self) -> bytes:
        return _public_pem(self.public)

    def write_public(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.public_pem())

    def verifier(self) -> Verifier:
        return Verifier(self.public)

    def sign(self, message: bytes) -> bytes:
        return self._private.sign(message)


class Verifier:
    def __init__(self, public: Ed25519PublicKey) -> None:
        self.public = public
        self.key_id = key_id(public)

    @classmethod
    def from_pem(cls, pem: bytes, where: str = "public key") -> Verifier:
        try:
            public = serialization.load_pem_public_key(pem)
        except (ValueError, TypeError) as e:
            raise ValueError(f"{where} is not a PEM public key: {e}") from None
        if not isinstance(public, Ed25519PublicKey):
            raise ValueError(f"{where} is not an Ed25519 public key")
        return cls(public)

    @classmethod
    def from_file(cls, path: Path) -> Verifier:
        try:
            pem = path.read_bytes()
        except OSError as e:
            raise ValueError(f"cannot read the policy public key {path}: {e}") from None
        return cls.from_pem(pem, where=str(path))

    def check(self, signer_id: bytes, message: bytes, signature: bytes) -> None:
        if signer_id != self.key_id:
            raise CodecError(
                "unknown_key",
                f"signed by key {signer_id.hex()}, this actor trusts {self.key_id.hex()}",
            )
        try:
            self.public.verify(signature, message)
        except InvalidSignature:
            raise CodecError("bad_signature", "the signature does not match the bundle") from None
