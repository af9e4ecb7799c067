"""SASL/OAUTHBEARER as Kafka configures it, with real clients: one broker with two
SASL_PLAINTEXT listeners, UNSECURED with Kafka's default unsecured-JWS validator (for tests,
as on Kafka) and SECURED with
listener.name.secured.oauthbearer.sasl.server.callback.handler.class=OAuthBearerValidatorCallbackHandler,
a JWKS file (sasl.oauthbearer.jwks.endpoint.url=file://...), an expected audience and issuer.

librdkafka (confluent-kafka) produces and consumes with its built-in unsecured tokens
(enable.sasl.oauthbearer.unsecure.jwt) and, on SECURED, with ES256 tokens signed by the
JWKS's key (PyJWT) from an oauth_cb; kafka-python with a token provider; Kafka's Java
console producer and consumer with OAuthBearerLoginModule's unsecured login. An expired
token, a token of the wrong audience and an unsigned token on SECURED fail with Kafka's
answer (invalid_token).

Runs its own broker (STRAND_BIN, default target/release/strand); the Java part needs the
jars of interop/kafka/fetch.sh.
"""
import base64
import json
import os
import subprocess
import sys
import tempfile
import time

import jwt
from cryptography.hazmat.primitives.asymmetric import ec

from broker_process import broker_from, free_port, one_node_properties
from dataset import check, fail, ok
from librdkafka_round_trip import authentication_error, produce_and_consume

HERE = os.path.dirname(os.path.abspath(__file__))
KAFKA_CLI = os.path.join(HERE, "../kafka/kafka-cli.sh")
AUDIENCE = "strand"
ISSUER = "https://issuer.example"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def b64(number):
    return base64.urlsafe_b64encode(number.to_bytes(32, "big")).rstrip(b"=").decode()


def make_jwks(d):
    """An EC P-256 key and the JWKS file of its public half."""
    key = ec.generate_private_key(ec.SECP256R1())
    numbers = key.public_key().public_numbers()
    path = os.path.join(d, "jwks.json")
    with open(path, "w") as f:
        json.dump({"keys": [{"kty": "EC", "crv": "P-256", "kid": "strand-test", "use": "sig", "alg": "ES256",
                             "x": b64(numbers.x), "y": b64(numbers.y)}]}, f)
    return key, path


def signed_token(key, subject, lifetime=300, audience=AUDIENCE):
    now = int(time.time())
    return jwt.encode({"sub": subject, "iat": now, "exp": now + lifetime, "aud": audience, "iss": ISSUER},
                      key, algorithm="ES256", headers={"kid": "strand-test"})


def refused(name, bootstrap, token):
    text = authentication_error(bootstrap, {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER",
                                            "oauth_cb": lambda _: (token, time.time() + 300)})
    check("invalid_token" in text, f"{name}: refused with Kafka's answer ({text[:200]})")


def kafka_python(bootstrap, key):
    from kafka import KafkaConsumer, KafkaProducer
    try:
        from kafka.net.sasl.oauth import AbstractTokenProvider  # kafka-python 3
    except ImportError:
        from kafka.sasl.oauth import AbstractTokenProvider  # kafka-python 2

    class Provider(AbstractTokenProvider):
        def token(self):
            return signed_token(key, "carol")

    settings = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER",
                "sasl_oauth_token_provider": Provider()}
    producer = KafkaProducer(bootstrap_servers=bootstrap, **settings)
    for i in range(5):
        producer.send("oauth-kpy", value=f"kpy-{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer("oauth-kpy", bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             group_id="g-oauth-kpy", consumer_timeout_ms=15000, **settings)
    got = [m.value for m in consumer]
    consumer.close()
    check(len(got) == 5, f"kafka-python with signed tokens on SECURED: 5 records produced and consumed ({len(got)})")


def java_tools(bootstrap, d):
    path = os.path.join(d, "java-oauth.properties")
    with open(path, "w") as f:
        f.write("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
                f'sasl.jaas.config={LOGIN_MODULE} required unsecuredLoginStringClaim_sub="dave";\n')

    def tool(*args, stdin=None):
        result = subprocess.run([KAFKA_CLI, *args], input=stdin, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            fail(f"{args[0]}: " + "\n".join(l for l in result.stderr.splitlines() if "Exception" in l)[:2000])
        return result.stdout

    tool("kafka-console-producer", "--bootstrap-server", bootstrap, "--command-config", path,
         "--topic", "oauth-java", stdin="".join(f"java-{i}\n" for i in range(5)))
    consumed = tool("kafka-console-consumer", "--bootstrap-server", bootstrap, "--command-config", path,
                    "--topic", "oauth-java", "--from-beginning", "--max-messages", "5", "--timeout-ms", "30000")
    check(sorted(consumed.split()) == [f"java-{i}" for i in range(5)],
          f"Java console producer and consumer with unsecured OAUTHBEARER ({consumed.split()})")


def main():
    with tempfile.TemporaryDirectory() as d:
        key, jwks = make_jwks(d)
        ports = {"PLAINTEXT": free_port(), "UNSECURED": free_port(), "SECURED": free_port()}
        properties = one_node_properties(d, ports, [
            "sasl.enabled.mechanisms=OAUTHBEARER",
            f"listener.name.unsecured.oauthbearer.sasl.jaas.config={LOGIN_MODULE} required;",
            f"listener.name.secured.oauthbearer.sasl.jaas.config={LOGIN_MODULE} required;",
            "listener.name.secured.oauthbearer.sasl.server.callback.handler.class="
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
            f"listener.name.secured.oauthbearer.sasl.oauthbearer.jwks.endpoint.url=file://{jwks}",
            f"sasl.oauthbearer.expected.audience={AUDIENCE}",
            f"sasl.oauthbearer.expected.issuer={ISSUER}",
        ], protocols={"UNSECURED": "SASL_PLAINTEXT", "SECURED": "SASL_PLAINTEXT"})
        with broker_from(properties, d):
            unsecured = f"127.0.0.1:{ports['UNSECURED']}"
            secured = f"127.0.0.1:{ports['SECURED']}"
            produce_and_consume("librdkafka, unsecured JWT on UNSECURED", unsecured,
                       {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER",
                        "enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": "principal=alice"},
                       "oauth-unsecured", 10)
            produce_and_consume("librdkafka, signed ES256 tokens on SECURED", secured,
                       {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER",
                        "oauth_cb": lambda _: (signed_token(key, "bob"), time.time() + 300)},
                       "oauth-secured", 10)
            refused("SECURED, an expired token", secured, signed_token(key, "bob", lifetime=-120))
            refused("SECURED, another audience", secured, signed_token(key, "bob", audience="elsewhere"))
            unsigned = jwt.encode({"sub": "bob", "exp": int(time.time()) + 300, "aud": AUDIENCE, "iss": ISSUER},
                                  None, algorithm="none")
            refused("SECURED, an unsigned token", secured, unsigned)
            kafka_python(secured, key)
            if "--no-java" not in sys.argv:
                java_tools(unsecured, d)
            ok("OAUTHBEARER on both listeners")
    print("PASS oauthbearer")


if __name__ == "__main__":
    sys.exit(main())
