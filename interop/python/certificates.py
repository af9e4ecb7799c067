"""Test certificates made with openssl: a CA, a broker certificate for localhost and
127.0.0.1, and a client certificate (CN=alice), as X.509 v3 (rustls, as browsers, refuses
v1). Keys are PKCS#8: unencrypted `<name>.plain.key`, and `<name>.key` encrypted with
`password` (the broker's with PBES2/AES-256, the client's with PKCS#12's 3DES, the one
Java 17's PEM stores can decrypt). `<name>-keystore.pem` is Kafka's PEM key store: the
encrypted key, then the certificate."""
import os
import subprocess


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(d, password):
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
             "-days", "2", "-subj", "/CN=Strand Test CA", cwd=d)
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    with open(os.path.join(d, "client.ext"), "w") as f:
        f.write("extendedKeyUsage=clientAuth\n")
    for name, subject in (("server", "/CN=localhost"), ("client", "/O=Strand/CN=alice")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.plain.key", "-out", f"{name}.csr",
                 "-subj", subject, cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext", cwd=d)
        cipher = ["-v2", "aes-256-cbc"] if name == "server" else ["-v1", "PBE-SHA1-3DES"]
        _openssl("pkcs8", "-topk8", *cipher, "-in", f"{name}.plain.key", "-out", f"{name}.key",
                 "-passout", f"pass:{password}", cwd=d)
        with open(os.path.join(d, f"{name}-keystore.pem"), "w") as out:
            out.write(open(os.path.join(d, f"{name}.key")).read())
            out.write(open(os.path.join(d, f"{name}.pem")).read())
        # The same store with the key in the clear (for brokers that cannot decrypt it).
        with open(os.path.join(d, f"{name}-plain-keystore.pem"), "w") as out:
            out.write(open(os.path.join(d, f"{name}.plain.key")).read())
            out.write(open(os.path.join(d, f"{name}.pem")).read())


def make_keytool_keystore(d, password):
    """`server.keystore.jks` as operators make it for Kafka: the broker's key and
    certificate imported with keytool, whose default store type since Java 9 is PKCS12
    whatever the file is called (Kafka's ssl.keystore.type=JKS reads it)."""
    _openssl("pkcs12", "-export", "-in", "server.pem", "-inkey", "server.plain.key", "-name", "broker",
             "-out", "server.p12", "-passout", f"pass:{password}", cwd=d)
    subprocess.run(["keytool", "-importkeystore", "-noprompt", "-srckeystore", "server.p12", "-srcstoretype", "PKCS12",
                    "-srcstorepass", password, "-destkeystore", "server.keystore.jks", "-deststorepass", password],
                   cwd=d, check=True, capture_output=True)


def make_client_certificate(d, name, subject):
    """Another client certificate signed by the CA of make_certificates: `<name>.pem` and
    its key in the clear, `<name>.plain.key`."""
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.plain.key", "-out", f"{name}.csr",
             "-subj", subject, cwd=d)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", f"{name}.pem", "-days", "2", "-extfile", "client.ext", cwd=d)


def make_authority(d, name):
    """Another CA, `<name>.pem` with its key `<name>.key` (a stranger to make_certificates')."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem",
             "-days", "2", "-subj", f"/CN={name}", cwd=d)


def make_node_certificate(d, name, subject, ca="ca"):
    """A cluster node's certificate for localhost and 127.0.0.1, signed by `ca` (make_certificates'
    by default), good as a server's and as a client's (nodes present it to each other): its
    key store in the clear, `<name>-keystore.pem`."""
    with open(os.path.join(d, "node.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.plain.key", "-out", f"{name}.csr",
             "-subj", subject, cwd=d)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
             "-out", f"{name}.pem", "-days", "2", "-extfile", "node.ext", cwd=d)
    with open(os.path.join(d, f"{name}-keystore.pem"), "w") as out:
        out.write(open(os.path.join(d, f"{name}.plain.key")).read())
        out.write(open(os.path.join(d, f"{name}.pem")).read())
