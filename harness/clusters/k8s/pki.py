"""The native cluster's own CA, certificates and kubeconfigs (with the `cryptography` package).

Everything lives in one directory; an existing, still-valid file is reused so that a second
`up` keeps the same identities (and kubeconfigs handed out earlier keep working).
"""
from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from harness.clusters.k8s.layout import APISERVER_PORT, CLUSTER_DOMAIN, Layout, node_ip, node_name
from harness.fsutil import atomic_write

VALID_DAYS = 365


@dataclass(frozen=True)
class CertPair:
    cert: Path
    key: Path


def _write_key(path: Path, key) -> None:
    atomic_write(path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()), mode=0o600)


def _load(pair: CertPair):
    cert = x509.load_pem_x509_certificate(pair.cert.read_bytes())
    key = serialization.load_pem_private_key(pair.key.read_bytes(), password=None)
    return cert, key


def _still_valid(pair: CertPair) -> bool:
    if not (pair.cert.exists() and pair.key.exists()):
        return False
    cert = x509.load_pem_x509_certificate(pair.cert.read_bytes())
    return cert.not_valid_after_utc > dt.datetime.now(dt.UTC) + dt.timedelta(days=1)


def ensure_ca(pki: Path, name: str = "ca", cn: str = "k8s-slurm-poc-ca") -> CertPair:
    pki.mkdir(parents=True, exist_ok=True)
    pair = CertPair(pki / f"{name}.crt", pki / f"{name}.key")
    if _still_valid(pair):
        return pair
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=VALID_DAYS * 5))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_key(pair.key, key)
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return pair


def ensure_cert(pki: Path, name: str, ca: CertPair, cn: str, orgs: tuple[str, ...] = (),
                dns: tuple[str, ...] = (), ips: tuple[str, ...] = (), server: bool = False,
                client: bool = True) -> CertPair:
    pair = CertPair(pki / f"{name}.crt", pki / f"{name}.key")
    if _still_valid(pair):
        return pair
    ca_cert, ca_key = _load(ca)
    key = ec.generate_private_key(ec.SECP256R1())
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    usages = (([ExtendedKeyUsageOID.SERVER_AUTH] if server else [])
              + ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else []))
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder().subject_name(x509.Name(attrs)).issuer_name(ca_cert.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, key_cert_sign=False,
                                     crl_sign=False, content_commitment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if dns or ips:
        names = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _write_key(pair.key, key)
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return pair


def ensure_service_account_keys(pki: Path) -> CertPair:
    """RSA key pair the apiserver signs service-account tokens with (`.crt` here is the public key)."""
    pair = CertPair(pki / "sa.pub", pki / "sa.key")
    if pair.cert.exists() and pair.key.exists():
        return pair
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(pair.key, key)
    pair.cert.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                        serialization.PublicFormat.SubjectPublicKeyInfo))
    return pair


def write_kubeconfig(path: Path, server: str, ca: CertPair, client: CertPair, user: str) -> Path:
    """A kubeconfig with the certificates embedded, so it can be copied elsewhere on its own."""
    b64 = lambda p: base64.b64encode(p.read_bytes()).decode()  # noqa: E731
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "poc-native", "cluster": {"server": server, "certificate-authority-data": b64(ca.cert)}}],
        "users": [{"name": user, "user": {"client-certificate-data": b64(client.cert),
                                          "client-key-data": b64(client.key)}}],
        "contexts": [{"name": "poc-native", "context": {"cluster": "poc-native", "user": user}}],
        "current-context": "poc-native",
    }
    atomic_write(path, yaml.safe_dump(doc, sort_keys=False), mode=0o600)
    return path


def ca_bundle_b64(ca: CertPair) -> str:
    return base64.b64encode(ca.cert.read_bytes()).decode()


def ensure_cluster_certs(L: Layout, n: int) -> dict[str, CertPair]:
    """Every certificate and kubeconfig of a cluster with n nodes, reusing what is still valid."""
    P = L.pki
    ca = ensure_ca(P)
    c = {"ca": ca}
    server = f"https://127.0.0.1:{APISERVER_PORT}"
    c["apiserver"] = ensure_cert(
        P, "apiserver", ca, "kube-apiserver", server=True, client=False,
        dns=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
             f"kubernetes.default.svc.{CLUSTER_DOMAIN}"),
        ips=("127.0.0.1", "10.96.0.1"))
    c["apiserver-kubelet-client"] = ensure_cert(P, "apiserver-kubelet-client", ca, "kube-apiserver-kubelet-client",
                                                orgs=("system:masters",))
    c["sa"] = ensure_service_account_keys(P)
    c["webhook"] = ensure_cert(P, "webhook", ca, "poc-webhooks", server=True, client=False,
                               dns=("localhost",), ips=("127.0.0.1",))
    # (name, CN, O). The host-run controllers (CoreDNS, JobSet, Kueue) get system:masters: they
    # run outside the cluster with a certificate, not as a service account with their RBAC.
    users = [
        ("admin", "poc-admin", ("system:masters",)),
        ("controller-manager", "system:kube-controller-manager", ()),
        ("scheduler", "system:kube-scheduler", ()),
        ("coredns", "poc:coredns", ("system:masters",)),
        ("jobset", "poc:jobset-controller", ("system:masters",)),
        ("kueue", "poc:kueue-controller", ("system:masters",)),
    ]
    for i in range(1, n + 1):
        users.append((f"kubelet-{node_name(i)}", f"system:node:{node_name(i)}", ("system:nodes",)))
        c[f"kubelet-server-{node_name(i)}"] = ensure_cert(
            P, f"kubelet-server-{node_name(i)}", ca, f"system:node:{node_name(i)}", server=True, client=False,
            dns=(node_name(i), "localhost"), ips=(node_ip(i), "127.0.0.1"))
    for name, cn, orgs in users:
        pair = ensure_cert(P, name, ca, cn, orgs=orgs)
        c[name] = pair
        write_kubeconfig(P / f"{name}.kubeconfig", server, ca, pair, cn)
    # controller-runtime reads tls.crt / tls.key from a directory
    wh = P / "webhook-certs"
    wh.mkdir(exist_ok=True)
    shutil.copyfile(c["webhook"].cert, wh / "tls.crt")
    shutil.copyfile(c["webhook"].key, wh / "tls.key")
    return c
