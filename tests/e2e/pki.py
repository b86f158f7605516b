"""The test cluster's keys and certificates, made with the openssl command.

One CA signs the API server's serving certificate (for 127.0.0.1 and the node's address); the
service-account key pair signs the tokens the API server issues. Clients authenticate with static
tokens (`--token-auth-file`), so no client certificates are needed: the administrator is in
``system:masters``, the kubelet is ``system:node:<node>`` in ``system:nodes`` (the Node authorizer
and NodeRestriction judge it as they would a real kubelet), and the plugin uses a token the API
server issues for the chart's ServiceAccount.
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path


def _openssl(*arguments: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *arguments], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(arguments)} failed: {done.stderr}")


@dataclass(frozen=True)
class Pki:
    """Paths of what :func:`make_pki` wrote, and the static tokens."""

    folder: Path
    admin_token: str
    kubelet_token: str

    @property
    def ca(self) -> Path:
        return self.folder / "ca.crt"

    @property
    def serving_cert(self) -> Path:
        return self.folder / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.folder / "apiserver.key"

    @property
    def service_account_key(self) -> Path:
        return self.folder / "sa.key"

    @property
    def service_account_public(self) -> Path:
        return self.folder / "sa.pub"

    @property
    def tokens(self) -> Path:
        return self.folder / "tokens.csv"


def make_pki(folder: Path, node: str, addresses: list[str]) -> Pki:
    """Keys, certificates and the token file of a new cluster in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    pki = Pki(folder, admin_token=secrets.token_hex(16), kubelet_token=secrets.token_hex(16))
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=e2e-ca",
             "-keyout", "ca.key", "-out", "ca.crt", cwd=folder)  # fmt: skip
    names = ["DNS:localhost", "DNS:kubernetes", "DNS:kubernetes.default", "DNS:kubernetes.default.svc"]
    names += [f"IP:{address}" for address in addresses]
    (folder / "apiserver.ext").write_text(f"subjectAltName={','.join(names)}\n", encoding="utf-8")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=kube-apiserver",
             "-keyout", "apiserver.key", "-out", "apiserver.csr", cwd=folder)  # fmt: skip
    _openssl("x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "2", "-extfile", "apiserver.ext", "-out", "apiserver.crt", cwd=folder)  # fmt: skip
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=folder)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=folder)
    pki.tokens.write_text(
        f'{pki.admin_token},e2e-admin,e2e-admin,"system:masters"\n'
        f'{pki.kubelet_token},system:node:{node},kubelet-{node},"system:nodes"\n',
        encoding="utf-8",
    )
    return pki


def kubeconfig(path: Path, server: str, ca: Path, token: str, user: str) -> Path:
    """A kubeconfig for ``user`` with a bearer token (what the components and the plugin read)."""
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: {server}
    certificate-authority: {ca}
users:
- name: {user}
  user:
    token: {token}
contexts:
- name: e2e
  context:
    cluster: e2e
    user: {user}
current-context: e2e
""",
        encoding="utf-8",
    )
    path.chmod(0o600)
    return path
