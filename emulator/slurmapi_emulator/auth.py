"""Bearer tokens, and a local stand-in of Google's OAuth2 token endpoint.

The emulator accepts static tokens (for quick tests) and access tokens it issued itself from a
service-account JWT, so that an unmodified google-auth / Airflow Google connection can talk to it:
`--write-credentials` writes a service-account key file whose `token_uri` points here. Tokens and
keys are never logged.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
import os
import secrets
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

log = logging.getLogger("slurmapi_emulator.auth")

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
CLOCK_SKEW = 300  # seconds of tolerance on iat/exp, as Google allows


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class InsecureFileError(ValueError):
    """A key or token file another local user could read, change or has planted."""


def check_private_file(path: Path, what: str) -> None:
    """Refuse a file not owned by us or open to group/others: its key or tokens would not be ours alone."""
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        raise InsecureFileError(f"{what} {path} is a symbolic link; give the path of a regular file you own")
    if info.st_uid != os.geteuid():
        raise InsecureFileError(
            f"{what} {path} belongs to uid {info.st_uid}, not to you (uid {os.geteuid()}): another user may "
            "know or change its secrets; delete it or give a path of your own"
        )
    if info.st_mode & 0o077:
        raise InsecureFileError(
            f"{what} {path} has mode {stat.S_IMODE(info.st_mode):04o}: group or other users can read or change "
            f"it; run `chmod 600 {path}` (or delete it to get a new one)"
        )


def write_private_file(path: Path, text: str) -> None:
    """Write a file only we can read (mode 0600), atomically, without following a planted temp name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class TokenError(Exception):
    """An OAuth2 error answer: `error` code and human description."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error
        self.description = description


@dataclass
class ServiceAccount:
    """The emulator's own service account: an RSA key and the identity written to the key file."""

    private_key: rsa.RSAPrivateKey
    private_key_id: str
    client_email: str
    client_id: str

    @classmethod
    def load_or_create(cls, path: Path, project: str) -> ServiceAccount:
        """Reuse the key of an existing key file (so clients keep working across restarts) or make one.

        A reused file must be ours alone: a key planted or readable by another user would let them
        mint tokens for this emulator, which runs the scripts it is sent.
        """
        if path.exists() or path.is_symlink():
            check_private_file(path, "credentials file")
            data = json.loads(path.read_text())
            key = serialization.load_pem_private_key(data["private_key"].encode(), password=None)
            if not isinstance(key, rsa.RSAPrivateKey):
                raise ValueError(f"{path}: private_key is not an RSA key")
            return cls(key, data["private_key_id"], data["client_email"], str(data.get("client_id", "")))
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        client_id = str(100000000000000000000 + secrets.randbelow(10**20))
        return cls(key, secrets.token_hex(20), f"slurmapi-emulator@{project}.iam.gserviceaccount.com", client_id)

    def write(self, path: Path, project: str, token_uri: str) -> None:
        """Write a service-account key JSON that google-auth accepts unchanged (mode 0600)."""
        pem = self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
        data = {
            "type": "service_account",
            "project_id": project,
            "private_key_id": self.private_key_id,
            "private_key": pem,
            "client_email": self.client_email,
            "client_id": self.client_id,
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": token_uri,
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "client_x509_cert_url": "",
            "universe_domain": "googleapis.com",
        }
        write_private_file(path, json.dumps(data, indent=2))

    def verify_jwt(self, assertion: str) -> dict[str, Any]:
        """Check an RS256 JWT signed with this account's key; returns its claims."""
        try:
            header_b64, payload_b64, sig_b64 = assertion.split(".")
            header = json.loads(_b64url_decode(header_b64))
            claims = json.loads(_b64url_decode(payload_b64))
            signature = _b64url_decode(sig_b64)
        except (ValueError, binascii.Error) as exc:
            raise TokenError("invalid_grant", "Invalid JWT: not a JWS compact serialization.") from exc
        if not isinstance(header, dict) or not isinstance(claims, dict) or header.get("alg") != "RS256":
            raise TokenError("invalid_grant", "Invalid JWT: expected an RS256 signed token.")
        try:
            self.private_key.public_key().verify(
                signature, f"{header_b64}.{payload_b64}".encode(), padding.PKCS1v15(), hashes.SHA256()
            )
        except InvalidSignature as exc:
            raise TokenError("invalid_grant", "Invalid JWT Signature.") from exc
        now = time.time()
        if claims.get("iss") != self.client_email:
            raise TokenError("invalid_grant", "Invalid JWT: unknown issuer.")
        exp, iat = claims.get("exp"), claims.get("iat")
        if not isinstance(exp, (int, float)) or exp < now - CLOCK_SKEW:
            raise TokenError(
                "invalid_grant", "Invalid JWT: Token must be a short-lived token and in a reasonable timeframe."
            )
        if isinstance(iat, (int, float)) and iat > now + CLOCK_SKEW:
            raise TokenError("invalid_grant", "Invalid JWT: iat is in the future.")
        return claims


class TokenAuthority:
    """Decides whether a bearer token is valid right now, and issues new ones."""

    def __init__(
        self, *, static_tokens: list[str], token_file: str | None, lifetime: int, account: ServiceAccount | None
    ) -> None:
        self.static_tokens = set(static_tokens)
        self.token_file = Path(token_file) if token_file else None
        if self.token_file is not None and self.token_file.exists():
            check_private_file(self.token_file, "token file")
        self.lifetime = lifetime
        self.account = account
        self._issued: dict[str, float] = {}
        self._file_tokens: set[str] = set()
        self._file_version: tuple[int, int] | None = None

    @property
    def configured(self) -> bool:
        """False if no way to obtain a valid token was configured (every call would get 401)."""
        return bool(self.static_tokens or self.token_file or self.account)

    def _tokens_from_file(self) -> set[str]:
        if self.token_file is None:
            return set()
        try:
            info = self.token_file.stat()
        except OSError:
            return set()
        version = (info.st_mtime_ns, info.st_ctime_ns)  # ctime: a chmod counts as a change too
        if version != self._file_version:
            self._file_version = version
            try:
                check_private_file(self.token_file, "token file")
                lines = self.token_file.read_text().splitlines()
            except InsecureFileError as exc:
                log.warning("ignoring its tokens: %s", exc)
                lines = []
            except OSError:
                lines = []
            self._file_tokens = {line.strip() for line in lines if line.strip() and not line.startswith("#")}
        return self._file_tokens

    def check(self, token: str | None) -> bool:
        """True if the token is a static token or an issued, unexpired access token."""
        if not token:
            return False
        if token in self.static_tokens or token in self._tokens_from_file():
            return True
        expiry = self._issued.get(token)
        if expiry is None:
            return False
        if expiry < time.time():
            del self._issued[token]
            return False
        return True

    def expire_all(self) -> None:
        """Forget every issued token (the `expire-token` fault): clients must fetch a new one."""
        self._issued.clear()

    def issue(self, form: dict[str, str]) -> dict[str, Any]:
        """The token endpoint: exchange a service-account JWT for an access token."""
        if form.get("grant_type") != JWT_BEARER:
            raise TokenError("unsupported_grant_type", f"Unsupported grant_type; use {JWT_BEARER}.")
        if self.account is None:
            raise TokenError(
                "invalid_grant", "This emulator has no service account (start it with --write-credentials FILE)."
            )
        self.account.verify_jwt(form.get("assertion", ""))
        now = time.time()
        for token, expiry in list(self._issued.items()):  # keep the table small
            if expiry < now:
                del self._issued[token]
        token = "ya29.emulator-" + secrets.token_urlsafe(32)
        self._issued[token] = now + self.lifetime
        return {"access_token": token, "expires_in": self.lifetime, "token_type": "Bearer"}
