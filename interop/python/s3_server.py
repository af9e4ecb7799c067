"""moto's S3 server (PyPI `moto[server]`) on a free loopback port, for the tiered storage
tests: it speaks the S3 REST API with SigV4, multipart uploads and ListObjectsV2, and
starts in a second from pip (SeaweedFS or MinIO would need a Go build of minutes)."""
import os
import socket
import subprocess
import sys
import time

import boto3

ACCESS_KEY, SECRET_KEY, REGION = "strand", "strand-secret", "us-east-1"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_seaweed_port():
    """A free port p with p + 10000 free too (SeaweedFS serves gRPC there)."""
    import random
    while True:
        port = random.randint(20000, 45000)
        try:
            for candidate in (port, port + 10000):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", candidate))
            return port
        except OSError:
            continue


class S3Server:
    """moto's server; or, with `weed` (the path of a SeaweedFS binary), SeaweedFS's S3
    gateway, whose ranged GETs cost what they return (moto reads the whole object for
    each range): for benchmarks."""

    def __init__(self, d, bucket, weed=None):
        self.bucket = bucket
        # SeaweedFS serves its S3 gateway's gRPC at the port + 10000 too.
        port = free_seaweed_port() if weed else free_port()
        self.endpoint = f"http://127.0.0.1:{port}"
        self.log = open(os.path.join(d, "s3-server.log"), "w")
        if weed:
            data = os.path.join(d, "seaweedfs")
            os.makedirs(data, exist_ok=True)
            command = [weed, "server", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                       f"-master.port={free_seaweed_port()}", f"-volume.port={free_seaweed_port()}",
                       f"-filer.port={free_seaweed_port()}", "-s3", f"-s3.port={port}",
                       "-master.volumeSizeLimitMB=1024"]
        else:
            command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline or self.process.poll() is not None:
                    raise RuntimeError(f"the S3 server did not start: {' '.join(command)}")
                time.sleep(0.2)
        self.client = boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION,
                                   aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)
        while True:  # SeaweedFS answers on its port before its filer is ready
            try:
                self.client.create_bucket(Bucket=bucket)
                break
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)

    def environment(self):
        """The AWS environment a broker reads the store's credentials and endpoint from."""
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                "AWS_REGION": REGION, "AWS_ENDPOINT_URL": self.endpoint}

    def keys(self, prefix="", suffix=""):
        keys = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            keys.extend(o["Key"] for o in page.get("Contents", []) if o["Key"].endswith(suffix))
        return keys

    def copies_are_whole(self, prefix=""):
        """(True, "") when every metadata object names a copy whose log and indexes are all
        in the bucket, else (False, which)."""
        keys = set(self.keys(prefix))
        for key in keys:
            if key.endswith(".json"):
                stem = key[: -len(".json")]
                for suffix in (".log", ".index", ".timeindex"):
                    if stem + suffix not in keys:
                        return False, f"{key} without its {suffix}"
        return True, ""

    def close(self):
        try:
            os.kill(self.process.pid, 18)  # SIGCONT, in case a test left it stopped
        except ProcessLookupError:
            pass
        self.process.terminate()
        self.process.wait(30)
