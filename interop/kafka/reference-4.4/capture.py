#!/usr/bin/env python3
"""Captures reference protocol data from a Kafka-compatible broker (made for Apache Kafka 4.4.0).

Everything is sent as raw bytes over a plain TCP socket: requests are encoded and responses
decoded by a small generic codec driven by Kafka's own message schemas
(common/message/*.json, read straight out of a kafka-clients jar), so every field of every
version -- tagged fields included -- is visible exactly as it was on the wire.
No Kafka client library is needed; Python 3.8+ standard library only.

Usage:
  capture.py --bootstrap 127.0.0.1:29092 [--controller 127.0.0.1:30092] [--out DIR]
             [--clients-jar kafka-clients-4.4.0.jar] [--only api_versions,topic_configs,...]
  capture.py --schemas-only --clients-jar NEW.jar --old-clients-jar OLD.jar [--out DIR]
  capture.py --only dynamic_configs --kafka-libs ~/.cache/strand/kafka-4.4.0/libs

Sections (--only takes a comma list of these):
  api_versions       api_versions.json          ApiVersions v3/v4/v5 (+ v0 and an unsupported version)
  topic_configs      topic_configs.json         DescribeConfigs v4 of a default and an overridden topic
  topic_validation   topic_config_validation.json  CreateTopics(validate_only) / IncrementalAlterConfigs errors
  broker_configs     broker_configs.json        DescribeConfigs BROKER "<id>" and "", IncrementalAlterConfigs tries
  group_configs      group_configs.json         DescribeConfigs / IncrementalAlterConfigs on GROUP resources
  admin_apis         describe_log_dirs.json, alter_replica_log_dirs.json, unregister_broker.json,
                     describe_topic_partitions.json, describe_quorum.json, raft_voters.json,
                     elect_leaders.json, list_partition_reassignments.json,
                     alter_partition_reassignments.json, update_features.json,
                     kafka44_versions.json, streams_groups.json
                     (each of these names alone works too: --only streams_groups)
  dynamic_configs    dynamic_broker_configs.json (no broker: runs DumpDynamicConfigs.java on --kafka-libs)
  schemas            schemas.txt, schema_changes.json (needs --clients-jar; --old-clients-jar to compare)

As a module (interop/python/reference_compare.py imports it): collect_api_versions,
collect_topic_configs, collect_topic_validation, collect_broker_configs, collect_group_configs
and the ADMIN_APIS list (collect_describe_log_dirs, ...) return the same objects the sections
write, without writing anything; ensure_topics / ensure_group_coordinator do the setup.

Conventions of the JSON output:
  * Field names are Kafka's schema field names in snake_case (ThrottleTimeMs -> throttle_time_ms).
  * Tagged fields appear only when the broker actually sent them (absent = default on the wire);
    unknown tags are kept under "_unknown_tagged_fields" as hex.
  * Keys ending in "_name" next to error_code / config_source / config_type / resource_type /
    source are added by this script for readability; they are not on the wire.
  * uuid values are shown like Kafka's Uuid.toString() (URL-safe base64, no padding);
    bytes/records as hex.
"""

import argparse
import base64
import glob
import json
import os
import re
import socket
import struct
import sys
import time
import uuid as uuidlib
import zipfile

# Error codes of org.apache.kafka.common.protocol.Errors in kafka-clients 4.4.0.
ERRORS = {
    -1: 'UNKNOWN_SERVER_ERROR', 0: 'NONE', 1: 'OFFSET_OUT_OF_RANGE', 2: 'CORRUPT_MESSAGE',
    3: 'UNKNOWN_TOPIC_OR_PARTITION', 4: 'INVALID_FETCH_SIZE', 5: 'LEADER_NOT_AVAILABLE',
    6: 'NOT_LEADER_OR_FOLLOWER', 7: 'REQUEST_TIMED_OUT', 8: 'BROKER_NOT_AVAILABLE',
    9: 'REPLICA_NOT_AVAILABLE', 10: 'MESSAGE_TOO_LARGE', 11: 'STALE_CONTROLLER_EPOCH',
    12: 'OFFSET_METADATA_TOO_LARGE', 13: 'NETWORK_EXCEPTION', 14: 'COORDINATOR_LOAD_IN_PROGRESS',
    15: 'COORDINATOR_NOT_AVAILABLE', 16: 'NOT_COORDINATOR', 17: 'INVALID_TOPIC_EXCEPTION',
    18: 'RECORD_LIST_TOO_LARGE', 19: 'NOT_ENOUGH_REPLICAS', 20: 'NOT_ENOUGH_REPLICAS_AFTER_APPEND',
    21: 'INVALID_REQUIRED_ACKS', 22: 'ILLEGAL_GENERATION', 23: 'INCONSISTENT_GROUP_PROTOCOL',
    24: 'INVALID_GROUP_ID', 25: 'UNKNOWN_MEMBER_ID', 26: 'INVALID_SESSION_TIMEOUT',
    27: 'REBALANCE_IN_PROGRESS', 28: 'INVALID_COMMIT_OFFSET_SIZE', 29: 'TOPIC_AUTHORIZATION_FAILED',
    30: 'GROUP_AUTHORIZATION_FAILED', 31: 'CLUSTER_AUTHORIZATION_FAILED', 32: 'INVALID_TIMESTAMP',
    33: 'UNSUPPORTED_SASL_MECHANISM', 34: 'ILLEGAL_SASL_STATE', 35: 'UNSUPPORTED_VERSION',
    36: 'TOPIC_ALREADY_EXISTS', 37: 'INVALID_PARTITIONS', 38: 'INVALID_REPLICATION_FACTOR',
    39: 'INVALID_REPLICA_ASSIGNMENT', 40: 'INVALID_CONFIG', 41: 'NOT_CONTROLLER',
    42: 'INVALID_REQUEST', 43: 'UNSUPPORTED_FOR_MESSAGE_FORMAT', 44: 'POLICY_VIOLATION',
    45: 'OUT_OF_ORDER_SEQUENCE_NUMBER', 46: 'DUPLICATE_SEQUENCE_NUMBER', 47: 'INVALID_PRODUCER_EPOCH',
    48: 'INVALID_TXN_STATE', 49: 'INVALID_PRODUCER_ID_MAPPING', 50: 'INVALID_TRANSACTION_TIMEOUT',
    51: 'CONCURRENT_TRANSACTIONS', 52: 'TRANSACTION_COORDINATOR_FENCED',
    53: 'TRANSACTIONAL_ID_AUTHORIZATION_FAILED', 54: 'SECURITY_DISABLED',
    55: 'OPERATION_NOT_ATTEMPTED', 56: 'KAFKA_STORAGE_ERROR', 57: 'LOG_DIR_NOT_FOUND',
    58: 'SASL_AUTHENTICATION_FAILED', 59: 'UNKNOWN_PRODUCER_ID', 60: 'REASSIGNMENT_IN_PROGRESS',
    61: 'DELEGATION_TOKEN_AUTH_DISABLED', 62: 'DELEGATION_TOKEN_NOT_FOUND',
    63: 'DELEGATION_TOKEN_OWNER_MISMATCH', 64: 'DELEGATION_TOKEN_REQUEST_NOT_ALLOWED',
    65: 'DELEGATION_TOKEN_AUTHORIZATION_FAILED', 66: 'DELEGATION_TOKEN_EXPIRED',
    67: 'INVALID_PRINCIPAL_TYPE', 68: 'NON_EMPTY_GROUP', 69: 'GROUP_ID_NOT_FOUND',
    70: 'FETCH_SESSION_ID_NOT_FOUND', 71: 'INVALID_FETCH_SESSION_EPOCH', 72: 'LISTENER_NOT_FOUND',
    73: 'TOPIC_DELETION_DISABLED', 74: 'FENCED_LEADER_EPOCH', 75: 'UNKNOWN_LEADER_EPOCH',
    76: 'UNSUPPORTED_COMPRESSION_TYPE', 77: 'STALE_BROKER_EPOCH', 78: 'OFFSET_NOT_AVAILABLE',
    79: 'MEMBER_ID_REQUIRED', 80: 'PREFERRED_LEADER_NOT_AVAILABLE', 81: 'GROUP_MAX_SIZE_REACHED',
    82: 'FENCED_INSTANCE_ID', 83: 'ELIGIBLE_LEADERS_NOT_AVAILABLE', 84: 'ELECTION_NOT_NEEDED',
    85: 'NO_REASSIGNMENT_IN_PROGRESS', 86: 'GROUP_SUBSCRIBED_TO_TOPIC', 87: 'INVALID_RECORD',
    88: 'UNSTABLE_OFFSET_COMMIT', 89: 'THROTTLING_QUOTA_EXCEEDED', 90: 'PRODUCER_FENCED',
    91: 'RESOURCE_NOT_FOUND', 92: 'DUPLICATE_RESOURCE', 93: 'UNACCEPTABLE_CREDENTIAL',
    94: 'INCONSISTENT_VOTER_SET', 95: 'INVALID_UPDATE_VERSION', 96: 'FEATURE_UPDATE_FAILED',
    97: 'PRINCIPAL_DESERIALIZATION_FAILURE', 98: 'SNAPSHOT_NOT_FOUND', 99: 'POSITION_OUT_OF_RANGE',
    100: 'UNKNOWN_TOPIC_ID', 101: 'DUPLICATE_BROKER_REGISTRATION', 102: 'BROKER_ID_NOT_REGISTERED',
    103: 'INCONSISTENT_TOPIC_ID', 104: 'INCONSISTENT_CLUSTER_ID', 105: 'TRANSACTIONAL_ID_NOT_FOUND',
    106: 'FETCH_SESSION_TOPIC_ID_ERROR', 107: 'INELIGIBLE_REPLICA', 108: 'NEW_LEADER_ELECTED',
    109: 'OFFSET_MOVED_TO_TIERED_STORAGE', 110: 'FENCED_MEMBER_EPOCH',
    111: 'UNRELEASED_INSTANCE_ID', 112: 'UNSUPPORTED_ASSIGNOR', 113: 'STALE_MEMBER_EPOCH',
    114: 'MISMATCHED_ENDPOINT_TYPE', 115: 'UNSUPPORTED_ENDPOINT_TYPE', 116: 'UNKNOWN_CONTROLLER_ID',
    117: 'UNKNOWN_SUBSCRIPTION_ID', 118: 'TELEMETRY_TOO_LARGE', 119: 'INVALID_REGISTRATION',
    120: 'TRANSACTION_ABORTABLE', 121: 'INVALID_RECORD_STATE', 122: 'SHARE_SESSION_NOT_FOUND',
    123: 'INVALID_SHARE_SESSION_EPOCH', 124: 'FENCED_STATE_EPOCH', 125: 'INVALID_VOTER_KEY',
    126: 'DUPLICATE_VOTER', 127: 'VOTER_NOT_FOUND', 128: 'INVALID_REGULAR_EXPRESSION',
    129: 'REBOOTSTRAP_REQUIRED', 130: 'STREAMS_INVALID_TOPOLOGY', 131: 'STREAMS_INVALID_TOPOLOGY_EPOCH',
    132: 'STREAMS_TOPOLOGY_FENCED', 133: 'SHARE_SESSION_LIMIT_REACHED', 134: 'INVALID_TOPIC_NAME',
    135: 'INVALID_CLUSTER_ID', 136: 'INVALID_NODE_ID',
}
# DescribeConfigsResponse.ConfigSource / ConfigType and ConfigResource.Type (kafka-clients 4.4.0).
CONFIG_SOURCES = {0: 'UNKNOWN', 1: 'TOPIC_CONFIG', 2: 'DYNAMIC_BROKER_CONFIG',
                  3: 'DYNAMIC_DEFAULT_BROKER_CONFIG', 4: 'STATIC_BROKER_CONFIG', 5: 'DEFAULT_CONFIG',
                  6: 'DYNAMIC_BROKER_LOGGER_CONFIG', 7: 'CLIENT_METRICS_CONFIG', 8: 'GROUP_CONFIG'}
CONFIG_TYPES = {0: 'UNKNOWN', 1: 'BOOLEAN', 2: 'STRING', 3: 'INT', 4: 'SHORT', 5: 'LONG',
                6: 'DOUBLE', 7: 'LIST', 8: 'CLASS', 9: 'PASSWORD'}
RESOURCE_TYPES = {0: 'UNKNOWN', 2: 'TOPIC', 4: 'BROKER', 8: 'BROKER_LOGGER', 16: 'CLIENT_METRICS',
                  32: 'GROUP'}
TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

# Names of the objects this script creates (all prefixed, so they are easy to spot/clean up).
T_DEFAULT = 'strand-ref-default'
T_OVERRIDES = 'strand-ref-overrides'
T_PARTS = 'strand-ref-parts'
T_VALIDATE = 'strand-ref-validate'
T_MISSING = 'strand-ref-no-such-topic'
G_EXISTING = 'strand-ref-group'
G_MISSING = 'strand-ref-no-such-group'
OVERRIDES = {'cleanup.policy': 'compact', 'retention.ms': '1000', 'min.insync.replicas': '1'}


# ----------------------------------------------------------------------------------------------
# Schemas
# ----------------------------------------------------------------------------------------------

def strip_json_comments(text):
    """Removes // comments (outside strings) from Kafka's JSON-with-comments schema files."""
    out, i, n, in_str = [], 0, len(text), False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == '\\':
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif c == '/' and i + 1 < n and text[i + 1] == '/':
            while i < n and text[i] != '\n':
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return ''.join(out)


def header_comments(text):
    """The // comment paragraphs of a schema file before its "fields", minus the license."""
    body = text.split('"fields"', 1)[0]
    paras, cur = [], []
    for line in body.splitlines():
        s = line.strip()
        if not s.startswith('//'):
            if cur:
                paras.append(' '.join(cur))
                cur = []
            continue
        s = s[2:].strip()
        if not s:
            if cur:
                paras.append(' '.join(cur))
                cur = []
        else:
            cur.append(s)
    if cur:
        paras.append(' '.join(cur))
    return [p for p in paras if 'Licensed to the Apache Software Foundation' not in p
            and 'www.apache.org/licenses' not in p and 'WITHOUT WARRANTIES' not in p
            and not p.startswith('the License.')]


def flatten_fields(fields, prefix='', common=None):
    """{path: attributes} of every field of a raw schema dict (for diffs)."""
    out = {}
    for f in fields or []:
        path = prefix + f['name']
        out[path] = {k: f.get(k) for k in ('type', 'versions', 'nullableVersions', 'taggedVersions',
                                           'tag', 'default', 'ignorable') if k in f}
        base = f['type'][2:] if f['type'].startswith('[]') else f['type']
        if 'fields' in f:
            out.update(flatten_fields(f['fields'], path + '.', common))
        elif common and base in common:
            out.update(flatten_fields(common[base], path + '.', None))
    return out


def field_diff(old_raw, new_raw):
    oc = {c['name']: c['fields'] for c in old_raw.get('commonStructs', [])}
    nc = {c['name']: c['fields'] for c in new_raw.get('commonStructs', [])}
    of = flatten_fields(old_raw.get('fields'), '', oc)
    nf = flatten_fields(new_raw.get('fields'), '', nc)
    res = {}
    added = {k: v for k, v in nf.items() if k not in of}
    removed = {k: v for k, v in of.items() if k not in nf}
    changed = {k: {'old': of[k], 'new': nf[k]} for k in nf if k in of and of[k] != nf[k]}
    if added: res['fields_added'] = added
    if removed: res['fields_removed'] = removed
    if changed: res['fields_changed'] = changed
    for k in ('validVersions', 'flexibleVersions', 'latestVersionUnstable', 'listeners'):
        if old_raw.get(k) != new_raw.get(k):
            res.setdefault('top_level_changed', {})[k] = {'old': old_raw.get(k), 'new': new_raw.get(k)}
    return res


def read_schema_files(path):
    """{file name: text} of common/message/*.json from a jar or a directory."""
    files = {}
    if os.path.isdir(path):
        for p in glob.glob(os.path.join(path, '**', '*.json'), recursive=True):
            with open(p, encoding='utf-8') as f:
                files[os.path.basename(p)] = f.read()
    else:
        with zipfile.ZipFile(path) as z:
            for name in z.namelist():
                if name.startswith('common/message/') and name.endswith('.json'):
                    files[os.path.basename(name)] = z.read(name).decode('utf-8')
    if not files:
        raise SystemExit(f'no common/message/*.json schema files in {path}')
    return files


def parse_range(s):
    """'0+' -> (0, None), '3-5' -> (3, 5), '7' -> (7, 7), 'none'/None -> None."""
    if s is None:
        return None
    s = str(s).strip()
    if s == 'none' or s == '':
        return None
    if s.endswith('+'):
        return (int(s[:-1]), None)
    if '-' in s:
        a, b = s.split('-')
        return (int(a), int(b))
    return (int(s), int(s))


def in_range(r, v):
    return r is not None and v >= r[0] and (r[1] is None or v <= r[1])


def snake(name):
    s = re.sub(r'(?<=[a-z0-9])([A-Z])', r'_\1', name)
    s = re.sub(r'(?<=[A-Z])([A-Z][a-z])', r'_\1', s)
    return s.lower()


PRIMITIVES = {'bool', 'int8', 'int16', 'uint16', 'int32', 'uint32', 'int64', 'float64', 'string',
              'bytes', 'uuid', 'records'}


class Field:
    def __init__(self, d, structs):
        self.name = d['name']
        self.key = snake(d['name'])
        self.type = d['type']
        self.versions = parse_range(d.get('versions'))
        self.nullable = parse_range(d.get('nullableVersions'))
        self.tagged = parse_range(d.get('taggedVersions'))
        self.tag = d.get('tag')
        self.default = d.get('default')
        base = self.type[2:] if self.type.startswith('[]') else self.type
        self.base = base
        self.fields = None
        if base not in PRIMITIVES:
            if 'fields' in d:
                self.fields = [Field(x, structs) for x in d['fields']]
                structs.setdefault(base, self.fields)
            else:
                self.fields = base  # resolved later (commonStructs may come after use)

    def resolve(self, structs):
        if isinstance(self.fields, str):
            self.fields = structs[self.fields]
        if isinstance(self.fields, list):
            for f in self.fields:
                f.resolve(structs)


class Message:
    def __init__(self, text):
        d = json.loads(strip_json_comments(text))
        self.raw = d
        self.name = d['name']
        self.api_key = d.get('apiKey')
        self.type = d.get('type')
        self.valid = parse_range(d.get('validVersions'))
        self.flexible = parse_range(d.get('flexibleVersions'))
        self.comments = header_comments(text)
        structs = {}
        for cs in d.get('commonStructs', []):
            structs[cs['name']] = [Field(x, structs) for x in cs['fields']]
        self.fields = [Field(x, structs) for x in d.get('fields', [])]
        for f in self.fields:
            f.resolve(structs)
        for fl in structs.values():
            for f in fl:
                f.resolve(structs)

    def is_flexible(self, v):
        return in_range(self.flexible, v)


class Schemas:
    def __init__(self, path):
        self.path = path
        self.texts = read_schema_files(path)
        self.requests, self.responses = {}, {}
        for fname, text in self.texts.items():
            try:
                m = Message(text)
            except Exception as e:  # pragma: no cover - a schema this codec cannot read
                print(f'warning: cannot parse {fname}: {e}', file=sys.stderr)
                continue
            if m.type == 'request':
                self.requests[m.api_key] = m
            elif m.type == 'response':
                self.responses[m.api_key] = m
        self.by_name = {m.name[:-len('Request')]: k for k, m in self.requests.items()}

    def api_name(self, key):
        m = self.requests.get(key)
        return m.name[:-len('Request')] if m else f'Unknown{key}'


# ----------------------------------------------------------------------------------------------
# Codec
# ----------------------------------------------------------------------------------------------

class Writer:
    def __init__(self):
        self.b = bytearray()

    def i8(self, v): self.b += struct.pack('>b', v)
    def i16(self, v): self.b += struct.pack('>h', v)
    def u16(self, v): self.b += struct.pack('>H', v)
    def i32(self, v): self.b += struct.pack('>i', v)
    def u32(self, v): self.b += struct.pack('>I', v)
    def i64(self, v): self.b += struct.pack('>q', v)
    def f64(self, v): self.b += struct.pack('>d', v)
    def raw(self, v): self.b += v

    def uvarint(self, v):
        while True:
            if v < 0x80:
                self.b.append(v)
                return
            self.b.append((v & 0x7f) | 0x80)
            v >>= 7


class Reader:
    def __init__(self, data):
        self.d, self.p = bytes(data), 0

    def take(self, n):
        if self.p + n > len(self.d):
            raise ValueError(f'short read: need {n} at {self.p}, have {len(self.d) - self.p}')
        v = self.d[self.p:self.p + n]
        self.p += n
        return v

    def unpack(self, fmt, n): return struct.unpack(fmt, self.take(n))[0]
    def i8(self): return self.unpack('>b', 1)
    def i16(self): return self.unpack('>h', 2)
    def u16(self): return self.unpack('>H', 2)
    def i32(self): return self.unpack('>i', 4)
    def u32(self): return self.unpack('>I', 4)
    def i64(self): return self.unpack('>q', 8)
    def f64(self): return self.unpack('>d', 8)

    def uvarint(self):
        shift = res = 0
        while True:
            b = self.take(1)[0]
            res |= (b & 0x7f) << shift
            if not b & 0x80:
                return res
            shift += 7

    def remaining(self): return len(self.d) - self.p


def uuid_to_str(b):
    return base64.urlsafe_b64encode(b).decode().rstrip('=')


def str_to_uuid(s):
    if isinstance(s, (bytes, bytearray)):
        return bytes(s)
    if s is None or s == '':
        return b'\0' * 16
    if len(s) == 36 and s.count('-') == 4:
        return uuidlib.UUID(s).bytes
    return base64.urlsafe_b64decode(s + '=' * (-len(s) % 4))


def default_value(f):
    d = f.default
    if f.type.startswith('[]'):
        return None if d == 'null' else []
    t = f.type
    if t in ('int8', 'int16', 'uint16', 'int32', 'uint32', 'int64'):
        return int(str(d), 0) if d not in (None, '') else 0
    if t == 'float64':
        return float(d) if d not in (None, '') else 0.0
    if t == 'bool':
        return str(d).lower() == 'true'
    if t == 'string':
        return None if d == 'null' else (d if d is not None else '')
    if t == 'uuid':
        return b'\0' * 16
    if t in ('bytes', 'records'):
        return None if d == 'null' else b''
    return None if d == 'null' else {}


def enc_value(w, f, typ, val, v, flex, nullable):
    if typ.startswith('[]'):
        if val is None:
            if not nullable:
                raise ValueError(f'{f.name}: null array in non-nullable version {v}')
            w.uvarint(0) if flex else w.i32(-1)
            return
        w.uvarint(len(val) + 1) if flex else w.i32(len(val))
        for x in val:
            enc_value(w, f, typ[2:], x, v, flex, False)
        return
    if typ == 'bool': w.i8(1 if val else 0)
    elif typ == 'int8': w.i8(val)
    elif typ == 'int16': w.i16(val)
    elif typ == 'uint16': w.u16(val)
    elif typ == 'int32': w.i32(val)
    elif typ == 'uint32': w.u32(val)
    elif typ == 'int64': w.i64(val)
    elif typ == 'float64': w.f64(val)
    elif typ == 'uuid': w.raw(str_to_uuid(val))
    elif typ == 'string':
        if val is None:
            if not nullable:
                raise ValueError(f'{f.name}: null string in non-nullable version {v}')
            w.uvarint(0) if flex else w.i16(-1)
        else:
            b = val.encode('utf-8')
            w.uvarint(len(b) + 1) if flex else w.i16(len(b))
            w.raw(b)
    elif typ in ('bytes', 'records'):
        if val is None:
            w.uvarint(0) if flex else w.i32(-1)
        else:
            b = bytes.fromhex(val) if isinstance(val, str) else bytes(val)
            w.uvarint(len(b) + 1) if flex else w.i32(len(b))
            w.raw(b)
    else:  # struct
        if nullable:
            if val is None:
                w.i8(-1)
                return
            w.i8(1)
        enc_struct(w, f.fields, val or {}, v, flex)


def enc_struct(w, fields, data, v, flex):
    tagged = []
    for f in fields:
        if not in_range(f.versions, v):
            continue
        if flex and in_range(f.tagged, v):
            if f.key in data:
                tagged.append(f)
            continue
        val = data[f.key] if f.key in data else default_value(f)
        enc_value(w, f, f.type, val, v, flex, in_range(f.nullable, v))
    if flex:
        tagged.sort(key=lambda f: f.tag)
        w.uvarint(len(tagged))
        for f in tagged:
            sub = Writer()
            enc_value(sub, f, f.type, data[f.key], v, flex, in_range(f.nullable, v))
            w.uvarint(f.tag)
            w.uvarint(len(sub.b))
            w.raw(sub.b)


def dec_value(r, f, typ, v, flex, nullable):
    if typ.startswith('[]'):
        if flex:
            n = r.uvarint() - 1
        else:
            n = r.i32()
        if n < 0:
            return None
        return [dec_value(r, f, typ[2:], v, flex, False) for _ in range(n)]
    if typ == 'bool': return r.i8() != 0
    if typ == 'int8': return r.i8()
    if typ == 'int16': return r.i16()
    if typ == 'uint16': return r.u16()
    if typ == 'int32': return r.i32()
    if typ == 'uint32': return r.u32()
    if typ == 'int64': return r.i64()
    if typ == 'float64': return r.f64()
    if typ == 'uuid': return uuid_to_str(r.take(16))
    if typ == 'string':
        n = r.uvarint() - 1 if flex else r.i16()
        return None if n < 0 else r.take(n).decode('utf-8')
    if typ in ('bytes', 'records'):
        n = r.uvarint() - 1 if flex else r.i32()
        return None if n < 0 else r.take(n).hex()
    if nullable:
        if r.i8() < 0:
            return None
    return dec_struct(r, f.fields, v, flex)


def dec_struct(r, fields, v, flex):
    out = {}
    for f in fields:
        if not in_range(f.versions, v):
            continue
        if flex and in_range(f.tagged, v):
            continue
        out[f.key] = dec_value(r, f, f.type, v, flex, in_range(f.nullable, v))
    if flex:
        n = r.uvarint()
        by_tag = {f.tag: f for f in fields if in_range(f.versions, v) and in_range(f.tagged, v)}
        for _ in range(n):
            tag = r.uvarint()
            size = r.uvarint()
            data = r.take(size)
            f = by_tag.get(tag)
            if f is None:
                out.setdefault('_unknown_tagged_fields', {})[str(tag)] = data.hex()
            else:
                sub = Reader(data)
                out[f.key] = dec_value(sub, f, f.type, v, flex, in_range(f.nullable, v))
    return out


def annotate(o):
    """Adds *_name siblings for error codes and config enums (not on the wire)."""
    if isinstance(o, list):
        return [annotate(x) for x in o]
    if not isinstance(o, dict):
        return o
    out = {}
    for k, val in o.items():
        out[k] = annotate(val)
        if isinstance(val, int) and not isinstance(val, bool):
            if k.endswith('error_code'):
                out[k[:-len('error_code')] + 'error_name'] = ERRORS.get(val, f'UNKNOWN({val})')
            elif k == 'config_source' or k == 'source':
                out[k + '_name'] = CONFIG_SOURCES.get(val, f'UNKNOWN({val})')
            elif k == 'config_type':
                out[k + '_name'] = CONFIG_TYPES.get(val, f'UNKNOWN({val})')
            elif k == 'resource_type':
                out[k + '_name'] = RESOURCE_TYPES.get(val, f'UNKNOWN({val})')
    return out


# ----------------------------------------------------------------------------------------------
# Connection
# ----------------------------------------------------------------------------------------------

class Conn:
    def __init__(self, addr, schemas, client_id='strand-capture', timeout=60):
        host, port = addr.rsplit(':', 1)
        self.addr = addr
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.schemas = schemas
        self.client_id = client_id
        self.corr = 0
        self.versions = {}  # api key -> (min, max) advertised by this listener

    def close(self):
        self.sock.close()

    def reconnect(self):
        """A fresh socket to the same address (after the broker closed the last one), with the
        ApiVersions handshake redone if this connection had made one."""
        try:
            self.sock.close()
        except OSError:
            pass
        host, port = self.addr.rsplit(':', 1)
        self.sock = socket.create_connection((host, int(port)), timeout=self.sock.gettimeout())
        if self.versions:
            self.versions = {}
            self.handshake()

    def send_raw(self, payload):
        self.sock.sendall(struct.pack('>i', len(payload)) + payload)
        n = struct.unpack('>i', self._recv(4))[0]
        return self._recv(n)

    def _recv(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f'{self.addr}: connection closed by broker')
            buf += chunk
        return bytes(buf)

    def encode(self, api_key, version, body):
        req = self.schemas.requests[api_key]
        flex = req.is_flexible(version)
        self.corr += 1
        w = Writer()
        w.i16(api_key)
        w.i16(version)
        w.i32(self.corr)
        cid = self.client_id.encode()
        w.i16(len(cid))  # client_id is a non-compact nullable string in every header version
        w.raw(cid)
        if flex:
            w.uvarint(0)  # request header v2: empty tagged fields
        enc_struct(w, req.fields, body, version, flex)
        return bytes(w.b)

    def decode_response(self, api_key, version, data):
        resp = self.schemas.responses[api_key]
        flex = resp.is_flexible(version)
        r = Reader(data)
        header = {'correlation_id': r.i32()}
        if flex and api_key != 18:  # ApiVersions responses always use response header v0
            n = r.uvarint()
            for _ in range(n):
                tag = r.uvarint()
                header.setdefault('_unknown_tagged_fields', {})[str(tag)] = r.take(r.uvarint()).hex()
        body = dec_struct(r, resp.fields, version, flex)
        if r.remaining():
            body['_trailing_bytes'] = r.d[r.p:].hex()
        return header, body

    def call(self, api, version, body, keep_hex=False):
        api_key = api if isinstance(api, int) else self.schemas.by_name[api]
        if version is None:
            version = self.pick(api_key)
        payload = self.encode(api_key, version, body)
        data = self.send_raw(payload)
        header, resp = self.decode_response(api_key, version, data)
        if header['correlation_id'] != self.corr:
            raise ValueError(f'correlation id {header["correlation_id"]} != {self.corr}')
        out = {'api_key': api_key, 'api_name': self.schemas.api_name(api_key), 'api_version': version,
               'request': body, 'response': annotate(resp)}
        if keep_hex:
            out['request_hex'] = payload.hex()
            out['response_hex'] = data.hex()
        return out

    def pick(self, api_key, want=None):
        lo, hi = self.versions.get(api_key, (None, None))
        smax = self.schemas.requests[api_key].valid[1]
        if hi is None:
            return want if want is not None else smax
        if want is not None and lo <= want <= hi:
            return want
        return min(hi, smax if smax is not None else hi)

    def handshake(self):
        out = self.call(18, 3, {'client_software_name': 'strand-capture', 'client_software_version': '1'})
        for k in out['response']['api_keys']:
            self.versions[k['api_key']] = (k['min_version'], k['max_version'])
        return out


def dump(path, obj):
    with open(path, 'w', encoding='utf-8') as f:
        json.dump(obj, f, indent=2, sort_keys=True, ensure_ascii=False)
        f.write('\n')
    print(f'wrote {path}', file=sys.stderr)


# ----------------------------------------------------------------------------------------------
# Sections
# ----------------------------------------------------------------------------------------------

def hand_encoded_api_versions_v3(corr, client_id, sw_name, sw_version):
    """ApiVersions v3 request, hand-encoded (request header v2 + flexible body)."""
    b = bytearray()
    b += struct.pack('>hhi', 18, 3, corr)                       # api_key, api_version, correlation_id
    cid = client_id.encode()
    b += struct.pack('>h', len(cid)) + cid                      # client_id: int16-length string
    b += b'\x00'                                                # header tagged fields: none
    for s in (sw_name, sw_version):                             # compact strings: uvarint(len+1)
        e = s.encode()
        assert len(e) + 1 < 0x80
        b += bytes([len(e) + 1]) + e
    b += b'\x00'                                                # body tagged fields: none
    return bytes(b)


def api_versions_on(addr, schemas):
    c = Conn(addr, schemas)
    res = {}
    # v3, hand-encoded, checked against the generic encoder.
    c.corr += 1
    payload = hand_encoded_api_versions_v3(c.corr, c.client_id, 'strand-capture', '1')
    data = c.send_raw(payload)
    c.corr -= 1
    generic = c.encode(18, 3, {'client_software_name': 'strand-capture', 'client_software_version': '1'})
    assert generic == payload, (generic.hex(), payload.hex())
    header, body = c.decode_response(18, 3, data)
    res['v3'] = {'api_version': 3, 'request': {'client_software_name': 'strand-capture',
                                               'client_software_version': '1'},
                 'request_hex': payload.hex(), 'response_header': header,
                 'response': annotate(body), 'response_hex': data.hex()}
    c.close()
    reqs = [
        ('v0', 0, {}),
        ('v4', 4, {'client_software_name': 'strand-capture', 'client_software_version': '1'}),
        ('v5', 5, {'client_software_name': 'strand-capture', 'client_software_version': '1',
                   'cluster_id': None, 'node_id': -1}),
        ('v5_wrong_cluster_id', 5, {'client_software_name': 'strand-capture',
                                    'client_software_version': '1',
                                    'cluster_id': 'AAAAAAAAAAAAAAAAAAAAAA', 'node_id': 1}),
        ('v5_wrong_node_id', 5, {'client_software_name': 'strand-capture',
                                 'client_software_version': '1', 'cluster_id': None, 'node_id': 99}),
    ]
    for label, v, body in reqs:
        if v > schemas.requests[18].valid[1]:
            continue
        c = Conn(addr, schemas)
        try:
            payload = c.encode(18, v, body)
            data = c.send_raw(payload)
            out = {'api_key': 18, 'api_name': 'ApiVersions', 'api_version': v, 'request': body}
            try:
                header, resp = c.decode_response(18, v, data)
            except Exception as e:
                # A broker that does not support version v answers with a v0 response (KIP-511).
                header, resp = c.decode_response(18, 0, data)
                out['decoded_as_version'] = 0
                out['decode_error_as_requested_version'] = repr(e)
            out['response'] = annotate(resp)
            out['request_hex'] = payload.hex()
            out['response_hex'] = data.hex()
            out['response_header'] = {'correlation_id': header['correlation_id']}
            res[label] = out
        except Exception as e:
            res[label] = {'api_version': v, 'request': body, 'exception': repr(e)}
        c.close()
    # An unsupported version: the broker answers with a v0 response (KIP-511).
    c = Conn(addr, schemas)
    c.corr += 1
    w = Writer()
    w.i16(18); w.i16(127); w.i32(c.corr)
    cid = c.client_id.encode(); w.i16(len(cid)); w.raw(cid); w.uvarint(0)
    for s in ('strand-capture', '1'):
        e = s.encode(); w.uvarint(len(e) + 1); w.raw(e)
    w.uvarint(0)
    try:
        data = c.send_raw(bytes(w.b))
        header, body = c.decode_response(18, 0, data)
        res['unsupported_version_127'] = {
            'api_version': 127, 'request_hex': bytes(w.b).hex(), 'response_hex': data.hex(),
            'note': 'request sent as v127 (flexible encoding); response decoded as v0',
            'response_header': header, 'response': annotate(body)}
    except Exception as e:
        res['unsupported_version_127'] = {'exception': repr(e)}
    c.close()
    return res


def summarize_api_versions(schemas, resp):
    keys = [{'api_key': k['api_key'], 'name': schemas.api_name(k['api_key']),
             'min_version': k['min_version'], 'max_version': k['max_version']}
            for k in resp['api_keys']]
    out = {'error_code': resp['error_code'], 'api_keys': keys,
           'supported_features': resp.get('supported_features'),
           'finalized_features': resp.get('finalized_features'),
           'finalized_features_epoch': resp.get('finalized_features_epoch'),
           'zk_migration_ready': resp.get('zk_migration_ready'),
           'throttle_time_ms': resp.get('throttle_time_ms'),
           'tagged_fields_present': sorted(k for k in resp if k in (
               'supported_features', 'finalized_features', 'finalized_features_epoch',
               'zk_migration_ready'))}
    return out


def _full_response(cases, *labels):
    """The response of the first of labels that was answered (and decoded as asked)."""
    for label in labels:
        x = cases.get(label) or {}
        if 'response' in x and 'decoded_as_version' not in x:
            return x['response']
    return None


def collect_api_versions(schemas, bootstrap, controller=None):
    """api_versions.json: ApiVersions exchanges on the broker (and the controller) listener."""
    res = {'bootstrap': bootstrap, 'broker_listener': api_versions_on(bootstrap, schemas)}
    bl = res['broker_listener']
    v4 = _full_response(bl, 'v4', 'v3')
    if v4 is not None:
        res['summary_v4'] = summarize_api_versions(schemas, v4)
    if _full_response(bl, 'v3') is not None:
        res['summary_v3'] = summarize_api_versions(schemas, bl['v3']['response'])
    if controller:
        try:
            cl = api_versions_on(controller, schemas)
            res['controller_listener'] = cl
            cv4 = _full_response(cl, 'v4', 'v3')
            if cv4 is not None:
                res['controller_summary_v4'] = summarize_api_versions(schemas, cv4)
        except Exception as e:
            res['controller_listener'] = {'address': controller, 'exception': repr(e)}
    return res


def section_api_versions(args, schemas):
    res = collect_api_versions(schemas, args.bootstrap, args.controller)
    dump(os.path.join(args.out, 'api_versions.json'), res)
    return res


def create_topic(c, name, partitions=-1, rf=-1, configs=None, validate_only=False, version=None):
    body = {'topics': [{'name': name, 'num_partitions': partitions, 'replication_factor': rf,
                        'assignments': [],
                        'configs': [{'name': k, 'value': v} for k, v in (configs or {}).items()]}],
            'timeout_ms': 30000, 'validate_only': validate_only}
    return c.call('CreateTopics', version, body)


def ensure_topics(c):
    out = {}
    for name, parts, cfg in ((T_DEFAULT, -1, None), (T_OVERRIDES, -1, OVERRIDES), (T_PARTS, 3, None)):
        r = create_topic(c, name, parts, -1, cfg)
        out[name] = r
        err = r['response']['topics'][0]['error_code']
        if err not in (0, 36):
            print(f'warning: CreateTopics {name}: {r["response"]["topics"][0]}', file=sys.stderr)
        elif err == 36:
            print(f'note: topic {name} already exists (made earlier in this run, or by an earlier run)',
                  file=sys.stderr)
    time.sleep(2)  # let leadership settle
    return out


def describe_configs(c, rtype, rname, keys=None, version=4):
    body = {'resources': [{'resource_type': rtype, 'resource_name': rname, 'configuration_keys': keys}],
            'include_synonyms': True, 'include_documentation': True}
    return c.call('DescribeConfigs', c.pick(32, version), body)


def configs_by_name(describe_out):
    res = describe_out['response']['results'][0]
    return {'error_code': res['error_code'], 'error_name': res.get('error_name'),
            'error_message': res['error_message'],
            'resource_type': res['resource_type'], 'resource_name': res['resource_name'],
            'config_count': len(res['configs']),
            'wire_order': [x['name'] for x in res['configs']],
            'configs': {x['name']: x for x in res['configs']}}


def collect_topic_configs(c, created=None):
    """topic_configs.json. created: ensure_topics' answer if the topics were made already."""
    if created is None:
        created = ensure_topics(c)
    out = {'create_topics': {k: v for k, v in created.items() if k != T_PARTS},
           'overrides': OVERRIDES}
    for name in (T_DEFAULT, T_OVERRIDES):
        d = describe_configs(c, TOPIC, name)
        out[name] = {'describe_configs_request': {'api_version': d['api_version'], **d['request']},
                     'throttle_time_ms': d['response']['throttle_time_ms'],
                     **configs_by_name(d)}
    # A nonexistent topic and a key subset, for the error / filtering shapes.
    out['nonexistent_topic'] = describe_configs(c, TOPIC, T_MISSING)
    out['key_subset'] = describe_configs(c, TOPIC, T_DEFAULT, ['retention.ms', 'no.such.config'])
    return out


def section_topic_configs(args, schemas, c):
    out = collect_topic_configs(c)
    dump(os.path.join(args.out, 'topic_configs.json'), out)
    return out


def invalid_candidates(entry):
    t = entry.get('config_type')
    if t in (3, 4, 5):  # INT SHORT LONG
        return ['abc', '-5', '99999999999999999999', '1.5', '']
    if t == 6:  # DOUBLE
        return ['abc', '-5', '2.5', '']
    if t == 1:
        return ['abc', 'yes', '']
    if t == 7:
        return ['bogus', '', 'bogus,other']
    if t == 8:
        return ['no.such.Class']
    return ['bogus', '', '-5']


def collect_topic_validation(c, topic_cfg=None, setup=True):
    """topic_config_validation.json. The configs tried are those of topic_cfg[T_DEFAULT]
    (topic_configs' answer; pass a reference's to try the same names on another broker), or
    else the ones this broker describes for T_DEFAULT."""
    if setup:
        ensure_topics(c)
    if topic_cfg is None:
        topic_cfg = {T_DEFAULT: configs_by_name(describe_configs(c, TOPIC, T_DEFAULT))}
    cfgs = topic_cfg[T_DEFAULT]['configs']
    create_results = {}
    for name in sorted(cfgs):
        entry = cfgs[name]
        rows = []
        for val in invalid_candidates(entry):
            r = create_topic(c, T_VALIDATE, 1, 1, {name: val}, validate_only=True)
            t = r['response']['topics'][0]
            rows.append({'value': val, 'error_code': t['error_code'], 'error_name': t['error_name'],
                         'error_message': t['error_message']})
        create_results[name] = {'config_type': entry.get('config_type'),
                                'config_type_name': entry.get('config_type_name'),
                                'default': entry.get('value'), 'attempts': rows}
    extra = {}
    for label, cfg in (('unknown_config_name', {'no.such.config': '1'}),
                       ('null_value', {'retention.ms': None}),
                       ('broker_only_config_name', {'log.retention.ms': '1000'}),
                       ('empty_config_name', {'': 'x'}),
                       ('valid_overrides', OVERRIDES),
                       ('duplicate_config_names', None)):
        if cfg is None:
            body = {'topics': [{'name': T_VALIDATE, 'num_partitions': 1, 'replication_factor': 1,
                                'assignments': [],
                                'configs': [{'name': 'retention.ms', 'value': '1000'},
                                            {'name': 'retention.ms', 'value': '2000'}]}],
                    'timeout_ms': 30000, 'validate_only': True}
            r = c.call('CreateTopics', None, body)
        else:
            r = create_topic(c, T_VALIDATE, 1, 1, cfg, validate_only=True)
        extra[label] = {'configs': cfg if cfg is not None else [['retention.ms', '1000'],
                                                                ['retention.ms', '2000']],
                        'response_topic': r['response']['topics'][0]}
    # CreateTopics (validate_only) shape errors unrelated to configs.
    for label, args_ in (('num_partitions_zero', (T_VALIDATE, 0, 1)),
                         ('replication_factor_too_big', (T_VALIDATE, 1, 3)),
                         ('invalid_topic_name', ('bad/name', 1, 1)),
                         ('existing_topic', (T_DEFAULT, 1, 1))):
        r = create_topic(c, *args_, validate_only=True)
        extra[label] = {'topic': args_[0], 'num_partitions': args_[1], 'replication_factor': args_[2],
                        'response_topic': r['response']['topics'][0]}
    create_example = create_topic(c, T_VALIDATE, 1, 1, {'retention.ms': 'abc'}, validate_only=True)

    # IncrementalAlterConfigs on an existing topic: the first invalid candidate of each config.
    def iac(rtype, rname, configs, validate_only):
        body = {'resources': [{'resource_type': rtype, 'resource_name': rname,
                               'configs': [{'name': n, 'config_operation': op, 'value': v}
                                           for n, op, v in configs]}],
                'validate_only': validate_only}
        return c.call('IncrementalAlterConfigs', None, body)

    iac_results = {}
    for name in sorted(cfgs):
        val = invalid_candidates(cfgs[name])[0]
        r = iac(TOPIC, T_DEFAULT, [(name, SET, val)], True)
        res = r['response']['responses'][0]
        iac_results[name] = {'value': val, 'error_code': res['error_code'],
                             'error_name': res['error_name'], 'error_message': res['error_message']}
    iac_cases = {}
    cases = [
        ('set_retention_ms_abc_validate_only', TOPIC, T_DEFAULT, [('retention.ms', SET, 'abc')], True),
        ('set_retention_ms_abc', TOPIC, T_DEFAULT, [('retention.ms', SET, 'abc')], False),
        ('set_cleanup_policy_bogus', TOPIC, T_DEFAULT, [('cleanup.policy', SET, 'bogus')], False),
        ('set_min_insync_replicas_minus5', TOPIC, T_DEFAULT, [('min.insync.replicas', SET, '-5')], False),
        ('set_unknown_config', TOPIC, T_DEFAULT, [('no.such.config', SET, '1')], False),
        ('set_null_value', TOPIC, T_DEFAULT, [('retention.ms', SET, None)], True),
        ('delete_unknown_config', TOPIC, T_DEFAULT, [('no.such.config', DELETE, None)], True),
        ('append_to_non_list', TOPIC, T_DEFAULT, [('retention.ms', APPEND, '5')], True),
        ('subtract_from_non_list', TOPIC, T_DEFAULT, [('retention.ms', SUBTRACT, '5')], True),
        ('append_to_list_valid', TOPIC, T_DEFAULT, [('cleanup.policy', APPEND, 'compact')], True),
        ('append_to_list_invalid', TOPIC, T_DEFAULT, [('cleanup.policy', APPEND, 'bogus')], True),
        ('invalid_operation_9', TOPIC, T_DEFAULT, [('retention.ms', 9, '1000')], True),
        ('duplicate_config_in_resource', TOPIC, T_DEFAULT,
         [('retention.ms', SET, '1000'), ('retention.ms', SET, '2000')], True),
        ('valid_set_validate_only', TOPIC, T_DEFAULT, [('retention.ms', SET, '1000')], True),
        ('nonexistent_topic', TOPIC, T_MISSING, [('retention.ms', SET, '1000')], True),
        ('empty_topic_name', TOPIC, '', [('retention.ms', SET, '1000')], True),
        ('mixed_valid_and_invalid', TOPIC, T_DEFAULT,
         [('retention.ms', SET, '1000'), ('segment.bytes', SET, 'abc')], True),
    ]
    for label, rtype, rname, configs, vo in cases:
        try:
            r = iac(rtype, rname, configs, vo)
            iac_cases[label] = {'resource_type': rtype, 'resource_name': rname, 'validate_only': vo,
                                'configs': [{'name': n, 'config_operation': op, 'value': v}
                                            for n, op, v in configs],
                                'api_version': r['api_version'], 'response': r['response']}
        except Exception as e:
            iac_cases[label] = {'resource_name': rname, 'configs': configs, 'exception': repr(e)}
    return {'create_topics_validate_only': create_results,
            'create_topics_other_cases': extra,
            'create_topics_example_full_exchange': create_example,
            'incremental_alter_configs_first_invalid_value_validate_only': iac_results,
            'incremental_alter_configs_cases': iac_cases}


def section_topic_validation(args, schemas, c, topic_cfg=None):
    # Run as part of a full capture (topic_cfg given), the topics exist already; alone, make them.
    out = collect_topic_validation(c, topic_cfg, setup=topic_cfg is None)
    dump(os.path.join(args.out, 'topic_config_validation.json'), out)
    return out


def broker_id(c):
    r = c.call('Metadata', None, {'topics': [], 'allow_auto_topic_creation': False})
    return r['response']['brokers'][0]['node_id'], r


def collect_broker_configs(c):
    """broker_configs.json."""
    bid, _ = broker_id(c)
    out = {'broker_id': bid}
    for label, name in (('broker', str(bid)), ('cluster_default', '')):
        d = describe_configs(c, BROKER, name)
        out[label] = {'describe_configs_request': {'api_version': d['api_version'], **d['request']},
                      **configs_by_name(d)}
    out['nonexistent_broker'] = describe_configs(c, BROKER, '999')
    out['broker_logger_subset'] = describe_configs(c, BROKER_LOGGER, str(bid), ['root', 'kafka'])

    tries = [('log.cleaner.threads', '2'), ('num.io.threads', '8'), ('message.max.bytes', '1048600'),
             ('log.retention.ms', '604800000'), ('log.segment.bytes', '1073741824'),
             ('auto.create.topics.enable', 'true'), ('log.dirs', '/tmp/strand-ref-nowhere'),
             ('broker.id', str(bid)), ('leader.replication.throttled.rate', '1000'),
             ('num.network.threads', '3'), ('max.connections', '1000'), ('node.id', str(bid)),
             ('process.roles', 'broker'), ('num.partitions', '2'), ('log.cleaner.threads', 'abc'),
             ('message.max.bytes', '-5'), ('no.such.broker.config', '1'),
             ('follower.replication.throttled.rate', '1000'),
             ('leader.replication.throttled.replicas', '*'), ('compression.type', 'bogus'),
             ('cordoned.log.dirs', ''), ('listener.name.plaintext.max.connections', '1000'),
             ('ssl.keystore.type', 'PKCS12'), ('max.connection.creation.rate', '1000'),
             ('background.threads', '10'), ('log.retention.bytes', 'abc')]

    def iac(name, configs, vo):
        body = {'resources': [{'resource_type': BROKER, 'resource_name': name,
                               'configs': [{'name': n, 'config_operation': op, 'value': v}
                                           for n, op, v in configs]}],
                'validate_only': vo}
        r = c.call('IncrementalAlterConfigs', None, body)
        res = r['response']['responses'][0]
        return {'error_code': res['error_code'], 'error_name': res['error_name'],
                'error_message': res['error_message']}

    alter = {}
    for label, rname in (('broker', str(bid)), ('cluster_default', '')):
        rows = []
        for key, val in tries:
            row = {'name': key, 'value': val, 'validate_only': iac(rname, [(key, SET, val)], True)}
            if row['validate_only']['error_code'] == 0:
                row['applied'] = iac(rname, [(key, SET, val)], False)
                if row['applied']['error_code'] == 0:
                    time.sleep(0.3)
                    d = configs_by_name(describe_configs(c, BROKER, rname, [key]))
                    row['described_after_set'] = d['configs'].get(key)
                    row['delete_restore'] = iac(rname, [(key, DELETE, None)], False)
            rows.append(row)
        alter[label] = rows
    alter['nonexistent_broker_999'] = iac('999', [('log.cleaner.threads', SET, '2')], True)
    alter['legacy_alter_configs_v1_static'] = c.call('AlterConfigs', None, {
        'resources': [{'resource_type': BROKER, 'resource_name': str(bid),
                       'configs': [{'name': 'log.dirs', 'value': '/tmp/x'}]}],
        'validate_only': True})['response']
    out['incremental_alter_configs'] = alter
    return out


def section_broker_configs(args, schemas, c):
    out = collect_broker_configs(c)
    dump(os.path.join(args.out, 'broker_configs.json'), out)
    return out


def ensure_group_coordinator(c):
    """FindCoordinator for G_EXISTING until it answers NONE (the first lookup makes Kafka create
    __consumer_offsets). Returns the last answer."""
    for _ in range(30):
        coord = c.call('FindCoordinator', None, {'key_type': 0, 'coordinator_keys': [G_EXISTING],
                                                 'key': G_EXISTING})
        if coord['response']['coordinators'][0]['error_code'] == 0:
            break
        time.sleep(1)
    return coord


def collect_group_configs(c, setup=True):
    """group_configs.json."""
    if setup:
        ensure_topics(c)
    # Make a KIP-848 consumer group exist: join with ConsumerGroupHeartbeat, then leave.
    coord = ensure_group_coordinator(c)  # the first lookup creates __consumer_offsets
    member = str(uuidlib.uuid4())
    hb = {'group_id': G_EXISTING, 'member_id': member, 'member_epoch': 0, 'instance_id': None,
          'rack_id': None, 'rebalance_timeout_ms': 30000, 'subscribed_topic_names': [T_DEFAULT],
          'server_assignor': None, 'topic_partitions': []}
    for _ in range(30):
        join = c.call('ConsumerGroupHeartbeat', None, hb)
        if join['response']['error_code'] == 0:
            break
        time.sleep(1)
    epoch = join['response'].get('member_epoch', 0)
    time.sleep(1)
    leave = c.call('ConsumerGroupHeartbeat', None, {
        'group_id': G_EXISTING, 'member_id': member, 'member_epoch': -1, 'instance_id': None,
        'rack_id': None, 'rebalance_timeout_ms': -1, 'subscribed_topic_names': None,
        'server_assignor': None, 'topic_partitions': None})
    groups = c.call('ListGroups', None, {'states_filter': [], 'types_filter': []})
    out = {'setup': {'find_coordinator': coord, 'heartbeat_join': join, 'heartbeat_leave': leave,
                     'member_epoch_after_join': epoch, 'list_groups_after_leave': groups}}
    out['existing_group'] = configs_by_name(describe_configs(c, GROUP, G_EXISTING))
    out['nonexistent_group'] = configs_by_name(describe_configs(c, GROUP, G_MISSING))
    out['existing_group_full_exchange'] = describe_configs(c, GROUP, G_EXISTING,
                                                           ['consumer.session.timeout.ms'])

    def iac(rname, configs, vo):
        body = {'resources': [{'resource_type': GROUP, 'resource_name': rname,
                               'configs': [{'name': n, 'config_operation': op, 'value': v}
                                           for n, op, v in configs]}],
                'validate_only': vo}
        r = c.call('IncrementalAlterConfigs', None, body)
        return r['response']['responses'][0]

    cases = [
        ('set_session_timeout_valid_validate_only', G_EXISTING, [('consumer.session.timeout.ms', SET, '50000')], True),
        ('set_session_timeout_valid', G_EXISTING, [('consumer.session.timeout.ms', SET, '50000')], False),
        ('set_heartbeat_interval_valid', G_EXISTING, [('consumer.heartbeat.interval.ms', SET, '6000')], False),
        ('set_session_timeout_abc', G_EXISTING, [('consumer.session.timeout.ms', SET, 'abc')], False),
        ('set_session_timeout_below_broker_min', G_EXISTING, [('consumer.session.timeout.ms', SET, '1000')], False),
        ('set_session_timeout_above_broker_max', G_EXISTING, [('consumer.session.timeout.ms', SET, '600000')], False),
        ('set_session_timeout_negative', G_EXISTING, [('consumer.session.timeout.ms', SET, '-5')], False),
        ('set_heartbeat_interval_abc', G_EXISTING, [('consumer.heartbeat.interval.ms', SET, 'abc')], False),
        ('set_heartbeat_interval_below_broker_min', G_EXISTING, [('consumer.heartbeat.interval.ms', SET, '100')], False),
        ('set_heartbeat_interval_above_broker_max', G_EXISTING, [('consumer.heartbeat.interval.ms', SET, '100000')], False),
        ('set_both_at_range_edges_validate_only', G_EXISTING,
         [('consumer.session.timeout.ms', SET, '60000'), ('consumer.heartbeat.interval.ms', SET, '15000')], True),
        ('set_share_and_streams_configs_validate_only', G_EXISTING,
         [('share.session.timeout.ms', SET, '50000'), ('streams.num.standby.replicas', SET, '1')], True),
        ('set_share_auto_offset_reset_bogus', G_EXISTING, [('share.auto.offset.reset', SET, 'bogus')], True),
        ('set_unknown_group_config', G_EXISTING, [('no.such.config', SET, '1')], False),
        ('set_topic_config_on_group', G_EXISTING, [('retention.ms', SET, '1000')], False),
        ('set_on_nonexistent_group_validate_only', G_MISSING, [('consumer.session.timeout.ms', SET, '50000')], True),
        ('set_on_empty_group_name', '', [('consumer.session.timeout.ms', SET, '50000')], True),
        ('append_to_non_list_group_config', G_EXISTING, [('consumer.session.timeout.ms', APPEND, '1')], True),
    ]
    alter = {}
    for label, rname, configs, vo in cases:
        try:
            alter[label] = {'resource_name': rname, 'validate_only': vo,
                            'configs': [{'name': n, 'config_operation': op, 'value': v}
                                        for n, op, v in configs],
                            'response': iac(rname, configs, vo)}
        except Exception as e:
            alter[label] = {'resource_name': rname, 'exception': repr(e)}
    time.sleep(0.5)
    out['existing_group_after_set'] = configs_by_name(describe_configs(c, GROUP, G_EXISTING))
    out['incremental_alter_configs'] = alter
    alter['delete_restore'] = {'response': iac(G_EXISTING, [('consumer.session.timeout.ms', DELETE, None),
                                                            ('consumer.heartbeat.interval.ms', DELETE, None)],
                                                False)}
    return out


def section_group_configs(args, schemas, c):
    out = collect_group_configs(c)
    dump(os.path.join(args.out, 'group_configs.json'), out)
    return out


def run_cases(c, cases, keep_hex=True):
    res = []
    for label, api, version, body in cases:
        try:
            r = c.call(api, version, body, keep_hex=keep_hex)
            r['case'] = label
        except Exception as e:
            r = {'case': label, 'api': api, 'api_version': version, 'request': body,
                 'exception': repr(e)}
            try:  # the broker may have closed the connection: the next case gets a fresh one
                c.reconnect()
            except Exception:
                pass
        res.append(r)
    return res


def collect_describe_log_dirs(c):
    """describe_log_dirs.json."""
    ldv = c.pick(35)
    cases = [('all_dirs_v4', 'DescribeLogDirs', c.pick(35, 4), {'topics': None})]
    if ldv != 4:
        cases.append((f'all_dirs_v{ldv}', 'DescribeLogDirs', ldv, {'topics': None}))
    cases += [
        ('one_topic_partitions_0_1_7', 'DescribeLogDirs', c.pick(35, 4),
         {'topics': [{'topic': T_PARTS, 'partitions': [0, 1, 7]}]}),
        ('nonexistent_topic', 'DescribeLogDirs', c.pick(35, 4),
         {'topics': [{'topic': T_MISSING, 'partitions': [0]}]}),
        ('empty_topic_list', 'DescribeLogDirs', c.pick(35, 4), {'topics': []}),
    ]
    return {'cases': run_cases(c, cases)}


def collect_alter_replica_log_dirs(c):
    """alter_replica_log_dirs.json: Kafka's per-partition checks with one log directory,
    whose path DescribeLogDirs gives (moving a replica where it is already is a no-op)."""
    listed = c.call('DescribeLogDirs', c.pick(35, 4), {'topics': None})
    own = listed['response']['results'][0]['log_dir']
    nowhere = '/strand-ref-no-such-log-dir'
    long_topic = 'x' * 230

    def move(path, topic, partitions):
        return {'dirs': [{'path': path, 'topics': [{'name': topic, 'partitions': partitions}]}]}

    cases = []
    for v in (1, 2):
        cases += [
            (f'already_there_v{v}', 'AlterReplicaLogDirs', v, move(own, T_PARTS, [0, 1])),
            (f'unknown_dir_v{v}', 'AlterReplicaLogDirs', v, move(nowhere, T_PARTS, [0])),
            (f'unknown_topic_v{v}', 'AlterReplicaLogDirs', v, move(own, T_MISSING, [0])),
            (f'partition_out_of_range_v{v}', 'AlterReplicaLogDirs', v, move(own, T_PARTS, [7])),
            (f'topic_name_too_long_v{v}', 'AlterReplicaLogDirs', v, move(own, long_topic, [0])),
            (f'unknown_topic_unknown_dir_v{v}', 'AlterReplicaLogDirs', v, move(nowhere, T_MISSING, [0])),
            (f'empty_v{v}', 'AlterReplicaLogDirs', v, {'dirs': []}),
        ]
    return {'cases': run_cases(c, cases)}


def collect_unregister_broker(c):
    """unregister_broker.json: ids never registered. (Unregistering the node itself answers
    NONE with an empty message, but takes it out of Metadata until its next heartbeat,
    which would upset the sections after this one.)"""
    cases = [
        ('never_registered', 'UnregisterBroker', 0, {'broker_id': 99}),
        ('negative_id', 'UnregisterBroker', 0, {'broker_id': -1}),
    ]
    return {'cases': run_cases(c, cases)}


def collect_raft_voters(c):
    """raft_voters.json: AddRaftVoter, RemoveRaftVoter and UnregisterController on a quorum
    of static voters (controller.quorum.voters: kraft.version 0), through the broker. Only
    answers that change nothing: node 1 itself is never unregistered."""
    directory = 'AAAAAAAAAAAAAAAAAAAAAQ'
    listener = [{'name': 'CONTROLLER', 'host': '127.0.0.1', 'port': 30093}]
    cases = [
        ('add_v0', 'AddRaftVoter', 0, {'cluster_id': None, 'timeout_ms': 5000, 'voter_id': 2,
                                       'voter_directory_id': directory, 'listeners': listener}),
        ('add_v1', 'AddRaftVoter', 1, {'cluster_id': None, 'timeout_ms': 5000, 'voter_id': 2,
                                       'voter_directory_id': directory, 'listeners': listener,
                                       'ack_when_committed': True}),
        ('add_wrong_cluster', 'AddRaftVoter', 1, {'cluster_id': 'not-this-cluster', 'timeout_ms': 5000,
                                                  'voter_id': 2, 'voter_directory_id': directory,
                                                  'listeners': listener, 'ack_when_committed': True}),
        ('remove_self_static', 'RemoveRaftVoter', 0, {'cluster_id': None, 'voter_id': 1,
                                                      'voter_directory_id': 'AAAAAAAAAAAAAAAAAAAAAA'}),
        ('remove_wrong_cluster', 'RemoveRaftVoter', 0, {'cluster_id': 'not-this-cluster', 'voter_id': 1,
                                                        'voter_directory_id': 'AAAAAAAAAAAAAAAAAAAAAA'}),
        ('unregister_unknown', 'UnregisterController', 0, {'controller_id': 2}),
    ]
    return {'cases': run_cases(c, cases)}


def collect_describe_topic_partitions(c):
    """describe_topic_partitions.json."""
    dtp = 75
    cases = [
        ('one_topic_limit_1', dtp, 0, {'topics': [{'name': T_PARTS}], 'response_partition_limit': 1,
                                       'cursor': None}),
        ('one_topic_cursor_p1_limit_1', dtp, 0, {'topics': [{'name': T_PARTS}], 'response_partition_limit': 1,
                                                 'cursor': {'topic_name': T_PARTS, 'partition_index': 1}}),
        ('one_topic_cursor_p2_limit_1', dtp, 0, {'topics': [{'name': T_PARTS}], 'response_partition_limit': 1,
                                                 'cursor': {'topic_name': T_PARTS, 'partition_index': 2}}),
        ('one_topic_default_limit', dtp, 0, {'topics': [{'name': T_PARTS}], 'cursor': None}),
        ('nonexistent_topic', dtp, 0, {'topics': [{'name': T_MISSING}], 'response_partition_limit': 10,
                                       'cursor': None}),
        ('existing_and_nonexistent_limit_2', dtp, 0,
         {'topics': [{'name': T_DEFAULT}, {'name': T_MISSING}, {'name': T_PARTS}],
          'response_partition_limit': 2, 'cursor': None}),
        ('cursor_on_topic_not_in_list', dtp, 0, {'topics': [{'name': T_DEFAULT}], 'response_partition_limit': 1,
                                                 'cursor': {'topic_name': T_PARTS, 'partition_index': 0}}),
        ('cursor_partition_out_of_range', dtp, 0, {'topics': [{'name': T_PARTS}], 'response_partition_limit': 1,
                                                   'cursor': {'topic_name': T_PARTS, 'partition_index': 9}}),
        ('all_topics_empty_list_limit_2', dtp, 0, {'topics': [], 'response_partition_limit': 2,
                                                   'cursor': None}),
        ('limit_0', dtp, 0, {'topics': [{'name': T_PARTS}], 'response_partition_limit': 0, 'cursor': None}),
    ]
    return {'cases': run_cases(c, cases)}


def collect_describe_quorum(c, schemas, controller=None):
    """describe_quorum.json (controller: the KRaft controller listener, optional)."""
    q = {'topics': [{'topic_name': '__cluster_metadata', 'partitions': [{'partition_index': 0}]}]}
    cases = [('broker_listener_max', 'DescribeQuorum', None, q),
             ('broker_listener_v0', 'DescribeQuorum', 0, q),
             ('wrong_topic', 'DescribeQuorum', None,
              {'topics': [{'topic_name': T_DEFAULT, 'partitions': [{'partition_index': 0}]}]}),
             ('wrong_partition', 'DescribeQuorum', None,
              {'topics': [{'topic_name': '__cluster_metadata', 'partitions': [{'partition_index': 1}]}]})]
    quorum = {'broker_listener': run_cases(c, cases)}
    if controller:
        try:
            cc = Conn(controller, schemas)
            cc.handshake()
            quorum['controller_listener'] = run_cases(cc, [('controller_listener_max', 'DescribeQuorum', None, q)])
            cc.close()
        except Exception as e:
            quorum['controller_listener'] = {'exception': repr(e)}
    return quorum


def collect_elect_leaders(c):
    """elect_leaders.json."""
    cases = [
        ('preferred_already_leader', 'ElectLeaders', None,
         {'election_type': 0, 'topic_partitions': [{'topic': T_PARTS, 'partitions': [0, 1]}],
          'timeout_ms': 30000}),
        ('unclean_already_leader', 'ElectLeaders', None,
         {'election_type': 1, 'topic_partitions': [{'topic': T_PARTS, 'partitions': [0]}],
          'timeout_ms': 30000}),
        ('preferred_nonexistent_topic', 'ElectLeaders', None,
         {'election_type': 0, 'topic_partitions': [{'topic': T_MISSING, 'partitions': [0]}],
          'timeout_ms': 30000}),
        ('preferred_nonexistent_partition', 'ElectLeaders', None,
         {'election_type': 0, 'topic_partitions': [{'topic': T_PARTS, 'partitions': [9]}],
          'timeout_ms': 30000}),
        ('preferred_all_partitions_null', 'ElectLeaders', None,
         {'election_type': 0, 'topic_partitions': None, 'timeout_ms': 30000}),
        ('invalid_election_type_5', 'ElectLeaders', None,
         {'election_type': 5, 'topic_partitions': [{'topic': T_PARTS, 'partitions': [0]}],
          'timeout_ms': 30000}),
        ('preferred_v0', 'ElectLeaders', 0,
         {'topic_partitions': [{'topic': T_PARTS, 'partitions': [0]}], 'timeout_ms': 30000}),
    ]
    return {'cases': run_cases(c, cases)}


def collect_list_partition_reassignments(c):
    """list_partition_reassignments.json."""
    cases = [
        ('all_null', 'ListPartitionReassignments', None, {'timeout_ms': 30000, 'topics': None}),
        ('one_topic', 'ListPartitionReassignments', None,
         {'timeout_ms': 30000, 'topics': [{'name': T_PARTS, 'partition_indexes': [0, 1]}]}),
        ('nonexistent_topic', 'ListPartitionReassignments', None,
         {'timeout_ms': 30000, 'topics': [{'name': T_MISSING, 'partition_indexes': [0]}]}),
        ('empty_list', 'ListPartitionReassignments', None, {'timeout_ms': 30000, 'topics': []}),
    ]
    return {'cases': run_cases(c, cases)}


def collect_alter_partition_reassignments(c):
    """alter_partition_reassignments.json: every case leaves the cluster as it was (a
    partition "reassigned" to the replica it has, or a request refused)."""
    me, _ = broker_id(c)

    def one(topic, partition, replicas, version=None, allow=True):
        body = {'timeout_ms': 30000, 'topics': [{'name': topic, 'partitions': [
            {'partition_index': partition, 'replicas': replicas}]}]}
        if version is None or version >= 1:
            body['allow_replication_factor_change'] = allow
        return body
    cases = [
        ('same_replicas', 'AlterPartitionReassignments', None, one(T_PARTS, 0, [me])),
        ('same_replicas_v0', 'AlterPartitionReassignments', 0, one(T_PARTS, 0, [me], version=0)),
        ('nonexistent_topic', 'AlterPartitionReassignments', None, one(T_MISSING, 0, [me])),
        ('nonexistent_partition', 'AlterPartitionReassignments', None, one(T_PARTS, 9, [me])),
        ('empty_replicas', 'AlterPartitionReassignments', None, one(T_PARTS, 0, [])),
        ('unregistered_broker', 'AlterPartitionReassignments', None, one(T_PARTS, 0, [me, 999])),
        ('duplicate_broker', 'AlterPartitionReassignments', None, one(T_PARTS, 0, [me, me])),
        ('cancel_none_in_progress', 'AlterPartitionReassignments', None, one(T_PARTS, 1, None)),
        ('rf_change_refused', 'AlterPartitionReassignments', None, one(T_PARTS, 0, [me, 999], allow=False)),
        ('several_topics', 'AlterPartitionReassignments', None,
         {'timeout_ms': 30000, 'allow_replication_factor_change': True, 'topics': [
             {'name': T_PARTS, 'partitions': [{'partition_index': 1, 'replicas': [me]},
                                              {'partition_index': 7, 'replicas': [me]}]},
             {'name': T_MISSING, 'partitions': [{'partition_index': 0, 'replicas': None}]}]}),
    ]
    return {'cases': run_cases(c, cases)}


def collect_update_features(c):
    """update_features.json: UpdateFeatures cases that change nothing (validate_only, or
    refused), with the finalized features ApiVersions reports before them."""
    def update(updates, validate_only=True):
        return {'timeout_ms': 60000, 'validate_only': validate_only, 'feature_updates': [
            {'feature': f, 'max_version_level': level, 'upgrade_type': kind} for f, level, kind in updates]}
    cases = [
        ('api_versions_features', 'ApiVersions', 4,
         {'client_software_name': 'strand-capture', 'client_software_version': '1'}),
        ('upgrade_to_current_level', 'UpdateFeatures', None, update([('transaction.version', 2, 1)])),
        ('safe_downgrade_transaction_version', 'UpdateFeatures', None, update([('transaction.version', 1, 2)])),
        ('unsafe_downgrade_transaction_version', 'UpdateFeatures', None, update([('transaction.version', 0, 3)])),
        ('upgrade_beyond_supported', 'UpdateFeatures', None, update([('transaction.version', 9, 1)])),
        ('upgrade_type_downgrade_needed', 'UpdateFeatures', None, update([('group.version', 0, 1)])),
        ('safe_downgrade_group_version', 'UpdateFeatures', None, update([('group.version', 0, 2)])),
        ('unknown_feature', 'UpdateFeatures', None, update([('no.such.feature', 1, 1)])),
        ('metadata_version_beyond', 'UpdateFeatures', None, update([('metadata.version', 99, 1)])),
        ('invalid_upgrade_type', 'UpdateFeatures', None, update([('transaction.version', 2, 7)])),
        ('two_features', 'UpdateFeatures', None,
         update([('transaction.version', 2, 1), ('group.version', 1, 1)])),
        ('v1_results', 'UpdateFeatures', 1, update([('transaction.version', 1, 2), ('no.such.feature', 1, 1)])),
        ('v0_allow_downgrade', 'UpdateFeatures', 0,
         {'timeout_ms': 60000, 'feature_updates': [
             {'feature': 'transaction.version', 'max_version_level': 2, 'allow_downgrade': False}]}),
    ]
    return {'cases': run_cases(c, cases)}


G_V44 = 'strand-ref-v44-group'
TXN_V44 = 'strand-ref-v44-txn'
UNKNOWN_TOPIC_ID = 'c3RyYW5kLXVua25vd25pZA'  # a topic id no broker has (16 bytes: "strand-unknownid")


def collect_kafka44_versions(c):
    """kafka44_versions.json: the API versions Kafka 4.4 added over 4.1 (KIP-848 topic ids in
    OffsetCommit/OffsetFetch v10 and TxnOffsetCommit v6, ListOffsets v11's earliest pending
    upload, DeleteGroups v3's error messages, ApiVersions v5's cluster and node ids)."""
    ensure_group_coordinator(c)
    md = c.call('Metadata', 12, {'topics': [{'name': T_PARTS, 'topic_id': None}],
                                 'allow_auto_topic_creation': False,
                                 'include_topic_authorized_operations': False})
    topic_id = md['response']['topics'][0]['topic_id']
    cluster_id = md['response']['cluster_id']
    node_id = md['response']['brokers'][0]['node_id']
    zero = 'AAAAAAAAAAAAAAAAAAAAAA'

    def commit_topic(tid, partitions):
        return {'topic_id': tid, 'partitions': [
            {'partition_index': p, 'committed_offset': 5, 'committed_leader_epoch': -1,
             'committed_metadata': 'm'} for p in partitions]}

    def fetch_group(topics):
        return {'groups': [{'group_id': G_V44, 'member_id': None, 'member_epoch': -1,
                            'topics': topics}], 'require_stable': True}

    def list_offsets(ts):
        return {'replica_id': -1, 'isolation_level': 0, 'topics': [
            {'name': T_PARTS, 'partitions': [{'partition_index': 0, 'current_leader_epoch': -1,
                                              'timestamp': ts}]}], 'timeout_ms': 30000}

    def api_versions(cid, nid):
        return {'client_software_name': 'strand-capture', 'client_software_version': '1',
                'cluster_id': cid, 'node_id': nid}

    cases = [
        ('offset_commit_v10_known_unknown_and_zero_ids', 'OffsetCommit', 10,
         {'group_id': G_V44, 'generation_id_or_member_epoch': -1, 'member_id': '',
          'group_instance_id': None,
          'topics': [commit_topic(topic_id, [0, 1]), commit_topic(UNKNOWN_TOPIC_ID, [0]),
                     commit_topic(zero, [0])]}),
        ('offset_fetch_v10_by_id', 'OffsetFetch', 10,
         fetch_group([{'topic_id': topic_id, 'partition_indexes': [0, 1, 2]},
                      {'topic_id': UNKNOWN_TOPIC_ID, 'partition_indexes': [0]}])),
        ('offset_fetch_v10_all_topics', 'OffsetFetch', 10, fetch_group(None)),
        ('offset_fetch_v9_by_name', 'OffsetFetch', 9,
         fetch_group([{'name': T_PARTS, 'partition_indexes': [0, 1]}])),
    ]
    cases += [(f'list_offsets_v11_timestamp_{-ts}', 'ListOffsets', 11, list_offsets(ts))
              for ts in (-1, -2, -3, -4, -5, -6)]
    cases += [
        ('list_offsets_v10_earliest_pending_upload', 'ListOffsets', 10, list_offsets(-6)),
        ('list_offsets_v8_latest_tiered', 'ListOffsets', 8, list_offsets(-5)),
        ('list_offsets_v7_earliest_local', 'ListOffsets', 7, list_offsets(-4)),
        ('list_offsets_v6_max_timestamp', 'ListOffsets', 6, list_offsets(-3)),
        ('list_offsets_v11_timestamp_7', 'ListOffsets', 11, list_offsets(-7)),
        ('api_versions_v5_no_ids', 'ApiVersions', 5, api_versions(None, -1)),
        ('api_versions_v5_matching_ids', 'ApiVersions', 5, api_versions(cluster_id, node_id)),
        ('api_versions_v5_other_cluster', 'ApiVersions', 5, api_versions('c3RyYW5kLW90aGVyLWNsdXN0ZXI', node_id)),
        ('api_versions_v5_other_node', 'ApiVersions', 5, api_versions(cluster_id, node_id + 100)),
        ('api_versions_v5_cluster_id_only', 'ApiVersions', 5, api_versions(cluster_id, -1)),
        ('api_versions_v5_node_id_only', 'ApiVersions', 5, api_versions(None, node_id)),
        ('api_versions_v5_other_cluster_no_node', 'ApiVersions', 5, api_versions('c3RyYW5kLW90aGVyLWNsdXN0ZXI', -1)),
    ]
    results = run_cases(c, cases)
    # A transaction for TxnOffsetCommit v6: its producer id comes from InitProducerId.
    c.call('FindCoordinator', None, {'key_type': 1, 'coordinator_keys': [TXN_V44], 'key': TXN_V44})
    producer = None
    for _ in range(30):
        r = c.call('InitProducerId', 5, {'transactional_id': TXN_V44, 'transaction_timeout_ms': 60000,
                                         'producer_id': -1, 'producer_epoch': -1})['response']
        if r['error_code'] == 0:
            producer = (r['producer_id'], r['producer_epoch'])
            break
        time.sleep(1)
    if producer is not None:
        def txn_commit(version, group, generation, member, topics):
            body = {'transactional_id': TXN_V44, 'group_id': group, 'producer_id': producer[0],
                    'producer_epoch': producer[1], 'generation_id_or_member_epoch': generation,
                    'member_id': member, 'group_instance_id': None, 'topics': topics}
            if version < 6:
                body['topics'] = [dict(t, name=T_PARTS) for t in topics]
            return body
        txn_cases = [
            ('txn_offset_commit_v6_known_and_unknown_ids', 'TxnOffsetCommit', 6,
             txn_commit(6, G_V44, -1, '', [commit_topic(topic_id, [0]), commit_topic(UNKNOWN_TOPIC_ID, [0])])),
            ('txn_offset_commit_v6_generation_for_unknown_group', 'TxnOffsetCommit', 6,
             txn_commit(6, G_MISSING, 5, 'm', [commit_topic(topic_id, [0])])),
            ('txn_offset_commit_v5_generation_for_unknown_group', 'TxnOffsetCommit', 5,
             txn_commit(5, G_MISSING, 5, 'm', [commit_topic(topic_id, [0])])),
        ]
        results += run_cases(c, txn_cases)
        c.call('EndTxn', 5, {'transactional_id': TXN_V44, 'producer_id': producer[0],
                             'producer_epoch': producer[1], 'committed': False})
    else:
        print('warning: InitProducerId never succeeded: no TxnOffsetCommit cases', file=sys.stderr)
    results += run_cases(c, [
        ('delete_groups_v3_existing_and_missing', 'DeleteGroups', 3, {'groups_names': [G_V44, G_MISSING]}),
        ('delete_groups_v2_missing', 'DeleteGroups', 2, {'groups_names': [G_MISSING]}),
    ])
    for r in results:  # ApiVersions: the error is the point, the API list is another section's
        resp = r.get('response')
        if r.get('api_key') == 18 and isinstance(resp, dict):
            r['response'] = {'error_code': resp.get('error_code'),
                             'api_keys_listed': bool(resp.get('api_keys'))}
    return {'cases': results}


SG_PREFIX = 'strand-ref-streams-'
SG_APP = SG_PREFIX + 'app'                       # the group that joins successfully
SG_CONSUMER = SG_PREFIX + 'consumer-group'       # a KIP-848 consumer group
SG_MISSING = SG_PREFIX + 'no-such-group'
SG_INPUT = SG_PREFIX + 'input'                   # never created: MISSING_SOURCE_TOPICS
SG_OUTPUT = SG_PREFIX + 'output'
SG_PROCESS = '5f0c6e38-0c4b-4f3e-9d59-2d6a1c0f7a11'  # the "Streams instance" (ProcessId)
SG_MEMBER = 'strand-ref-streams-member-app'
SG_CONSUMER_MEMBER = 'strand-ref-streams-member-consumer'


def sg_topology(app, source_topics=None, regex=None, changelog_partitions=0):
    """A word-count-like topology as Kafka Streams 4.4 sends it (StreamsGroupHeartbeat
    Topology): subtopology 0 reads the input and writes the repartition topic, subtopology 1
    reads it and counts into a store with a changelog."""
    repartition = f'{app}-counts-store-repartition'
    changelog = f'{app}-counts-store-changelog'
    return {'epoch': 0, 'subtopologies': [
        {'subtopology_id': '0', 'source_topics': [SG_INPUT] if source_topics is None else source_topics,
         'source_topic_regex': regex or [], 'state_changelog_topics': [],
         'repartition_sink_topics': [repartition], 'repartition_source_topics': [],
         'copartition_groups': []},
        {'subtopology_id': '1', 'source_topics': [], 'source_topic_regex': [],
         'state_changelog_topics': [
             {'name': changelog, 'partitions': changelog_partitions, 'replication_factor': -1,
              'topic_configs': [{'key': 'cleanup.policy', 'value': 'compact'},
                                {'key': 'message.timestamp.type', 'value': 'CreateTime'}]}],
         'repartition_sink_topics': [],
         'repartition_source_topics': [
             {'name': repartition, 'partitions': 0, 'replication_factor': -1,
              'topic_configs': [{'key': 'cleanup.policy', 'value': 'delete'},
                                {'key': 'message.timestamp.type', 'value': 'CreateTime'},
                                {'key': 'retention.ms', 'value': '-1'},
                                {'key': 'segment.bytes', 'value': '52428800'}]}],
         'copartition_groups': []},
    ]}


def sg_heartbeat(group, member, epoch=0, **changes):
    """A StreamsGroupHeartbeat body: a full (re)join as the Streams client sends it at epoch 0,
    every "unchanged" field null otherwise; `changes` override fields."""
    if epoch == 0:
        body = {'group_id': group, 'member_id': member, 'member_epoch': 0,
                'endpoint_information_epoch': -1, 'instance_id': None, 'rack_id': None,
                'rebalance_timeout_ms': 300000, 'topology': sg_topology(group),
                'active_tasks': [], 'standby_tasks': [], 'warmup_tasks': [],
                'process_id': SG_PROCESS, 'user_endpoint': None, 'client_tags': [],
                'task_offsets': [], 'task_end_offsets': [], 'shutdown_application': False}
    else:
        body = {'group_id': group, 'member_id': member, 'member_epoch': epoch,
                'endpoint_information_epoch': -1, 'instance_id': None, 'rack_id': None,
                'rebalance_timeout_ms': -1, 'topology': None, 'active_tasks': None,
                'standby_tasks': None, 'warmup_tasks': None, 'process_id': None,
                'user_endpoint': None, 'client_tags': None, 'task_offsets': None,
                'task_end_offsets': None, 'shutdown_application': False}
    body.update(changes)
    return body


def sg_topology_description(app):
    def node(name, kind, successors, sources=(), sink=None, stores=()):
        return {'name': name, 'node_type': kind, 'source_topics': list(sources), 'sink_topic': sink,
                'stores': list(stores), 'successors': list(successors)}
    repartition = f'{app}-counts-store-repartition'
    return {'subtopologies': [
        {'subtopology_id': '0', 'nodes': [
            node('KSTREAM-SOURCE-0000000000', 1, ['KSTREAM-FLATMAPVALUES-0000000001'], sources=[SG_INPUT]),
            node('KSTREAM-FLATMAPVALUES-0000000001', 2, ['KSTREAM-KEY-SELECT-0000000002']),
            node('KSTREAM-KEY-SELECT-0000000002', 2, ['counts-store-repartition-filter']),
            node('counts-store-repartition-filter', 2, ['counts-store-repartition-sink']),
            node('counts-store-repartition-sink', 3, [], sink=repartition)]},
        {'subtopology_id': '1', 'nodes': [
            node('counts-store-repartition-source', 1, ['KSTREAM-AGGREGATE-0000000003'], sources=[repartition]),
            node('KSTREAM-AGGREGATE-0000000003', 2, ['KTABLE-TOSTREAM-0000000004'], stores=['counts-store']),
            node('KTABLE-TOSTREAM-0000000004', 2, ['KSTREAM-SINK-0000000005']),
            node('KSTREAM-SINK-0000000005', 3, [], sink=SG_OUTPUT)]},
    ], 'global_stores': []}


def ensure_groups_loaded(c, groups):
    """StreamsGroupDescribe of each group until its answer is not a coordinator error (the
    __consumer_offsets partition of a new broker may still be loading). Not recorded."""
    for g in groups:
        for _ in range(30):
            try:
                r = c.call('StreamsGroupDescribe', 0, {'group_ids': [g], 'include_authorized_operations': False})
            except Exception:
                c.reconnect()
                return
            if r['response']['groups'][0]['error_code'] not in (14, 15, 16):
                break
            time.sleep(1)


def collect_streams_groups(c):
    """streams_groups.json: KIP-1071 streams groups (StreamsGroupHeartbeat 88, StreamsGroupDescribe
    89, StreamsGroupTopologyDescriptionUpdate 93) and what the other group APIs say about a
    streams group. Refusals first, each with its own group id; then one member joins
    SG_APP with a topology whose source topic does not exist (statuses ASSIGNMENT_DELAYED and
    MISSING_SOURCE_TOPICS, no internal topic created, group NotReady), is described, listed,
    committed to, leaves, and the group is deleted. The broker is left as it was (the consumer
    group made for the "not a streams group" case is left and deleted too)."""
    g = lambda label: SG_PREFIX + label.replace('_', '-')
    m = lambda label: 'strand-ref-streams-member-' + label.replace('_', '-')
    ensure_group_coordinator(c)
    ensure_groups_loaded(c, [SG_APP, SG_CONSUMER, SG_MISSING, g('heartbeat_epoch_5_unknown_group')])
    results = []

    def run(cases):
        out = run_cases(c, cases)
        results.extend(out)
        return out

    def hb(label, version=1, epoch=0, group=None, member=None, **changes):
        return (label, 'StreamsGroupHeartbeat', version,
                sg_heartbeat(g(label) if group is None else group, m(label) if member is None else member,
                             epoch, **changes))

    tasks = lambda *pairs: [{'subtopology_id': s, 'partitions': list(p)} for s, p in pairs]
    run([
        hb('heartbeat_blank_member_id', member=''),
        hb('heartbeat_blank_group_id', group=''),
        hb('heartbeat_blank_instance_id', instance_id=''),
        hb('heartbeat_blank_rack_id', rack_id=''),
        hb('heartbeat_join_active_tasks_null', active_tasks=None),
        hb('heartbeat_join_standby_tasks_non_empty', standby_tasks=tasks(('0', [0]))),
        hb('heartbeat_join_without_topology', topology=None),
        hb('heartbeat_join_rebalance_timeout_unset', rebalance_timeout_ms=-1),
        hb('heartbeat_epoch_minus_2_without_instance_id', epoch=-2),
        hb('heartbeat_epoch_minus_3', epoch=-3),
        hb('heartbeat_epoch_3_task_lists_partially_null', epoch=3, active_tasks=[]),
        hb('heartbeat_epoch_3_with_topology', epoch=3, topology=sg_topology(g('heartbeat_epoch_3_with_topology')),
           active_tasks=[], standby_tasks=[], warmup_tasks=[]),
        hb('heartbeat_join_source_topic_regex',
           topology=sg_topology(g('heartbeat_join_source_topic_regex'), source_topics=[],
                                regex=[SG_PREFIX + 'input.*'])),
        hb('heartbeat_join_changelog_partitions_2',
           topology=sg_topology(g('heartbeat_join_changelog_partitions_2'), changelog_partitions=2)),
        hb('heartbeat_join_internal_source_topic',
           topology=sg_topology(g('heartbeat_join_internal_source_topic'), source_topics=['__consumer_offsets'])),
        hb('heartbeat_join_invalid_topic_name',
           topology=sg_topology(g('heartbeat_join_invalid_topic_name'), source_topics=['a b'])),
        hb('heartbeat_epoch_5_unknown_group', epoch=5, active_tasks=[], standby_tasks=[], warmup_tasks=[]),
    ])

    # A KIP-848 consumer group of its own, then a streams join to its id.
    consumer_join = {'group_id': SG_CONSUMER, 'member_id': SG_CONSUMER_MEMBER, 'member_epoch': 0,
                     'instance_id': None, 'rack_id': None, 'rebalance_timeout_ms': 30000,
                     'subscribed_topic_names': [T_DEFAULT], 'subscribed_topic_regex': None,
                     'server_assignor': None, 'topic_partitions': []}
    for _ in range(30):
        r = run_cases(c, [('setup_consumer_group_join', 'ConsumerGroupHeartbeat', 1, consumer_join)])[0]
        if r.get('response', {}).get('error_code') not in (14, 15, 16):
            break
        time.sleep(1)
    results.append(r)
    run([hb('heartbeat_join_consumer_group_id', group=SG_CONSUMER)])

    # The member that joins: v1, then its next heartbeat (v0) straight away, well inside
    # streams.initial.rebalance.delay.ms (3 s), so ASSIGNMENT_DELAYED is still reported.
    join = run([hb('heartbeat_join', group=SG_APP, member=SG_MEMBER)])[0]
    jr = join.get('response') or {}
    epoch = jr.get('member_epoch', 1)
    run([hb('heartbeat_second_v0', version=0, epoch=epoch, group=SG_APP, member=SG_MEMBER,
            endpoint_information_epoch=jr.get('endpoint_information_epoch', -1))])

    def describe(label, version, groups, include_topology=None):
        body = {'group_ids': groups, 'include_authorized_operations': False}
        if include_topology is not None:
            body['include_topology_description'] = include_topology
        return (label, 'StreamsGroupDescribe', version, body)

    def list_groups(label, states, types):
        return (label, 'ListGroups', 5, {'states_filter': states, 'types_filter': types})

    commit = {'group_id': SG_APP, 'generation_id_or_member_epoch': -1, 'member_id': '',
              'group_instance_id': None, 'topics': [
                  {'name': T_DEFAULT, 'partitions': [
                      {'partition_index': 0, 'committed_offset': 0, 'committed_leader_epoch': -1,
                       'committed_metadata': ''}]}]}
    run([
        describe('describe_v0', 0, [SG_APP, SG_MISSING, '']),
        describe('describe_v1_without_topology_description', 1, [SG_APP, SG_MISSING, '', SG_CONSUMER], False),
        describe('describe_v1_with_topology_description', 1, [SG_APP, SG_MISSING, ''], True),
        list_groups('list_groups_v5_type_streams', [], ['streams']),
        list_groups('list_groups_v5_state_NotReady', ['NotReady'], []),
        list_groups('list_groups_v5_state_not_ready', ['not_ready'], []),
        ('describe_groups_v5', 'DescribeGroups', 5, {'groups': [SG_APP], 'include_authorized_operations': False}),
        ('describe_groups_v6', 'DescribeGroups', 6, {'groups': [SG_APP], 'include_authorized_operations': False}),
        ('consumer_group_heartbeat_join_streams_group', 'ConsumerGroupHeartbeat', 1,
         dict(consumer_join, group_id=SG_APP, member_id=m('consumer_on_streams_group'))),
        ('offset_commit_v9_admin_reset_with_member', 'OffsetCommit', 9, commit),
        ('delete_groups_v2_non_empty', 'DeleteGroups', 2, {'groups_names': [SG_APP]}),
        ('topology_description_update_v0', 'StreamsGroupTopologyDescriptionUpdate', 0,
         {'group_id': SG_APP, 'member_id': SG_MEMBER, 'topology_epoch': 0,
          'topology_description': sg_topology_description(SG_APP)}),
        ('topology_description_update_v0_unknown_group', 'StreamsGroupTopologyDescriptionUpdate', 0,
         {'group_id': SG_MISSING, 'member_id': SG_MEMBER, 'topology_epoch': 0,
          'topology_description': sg_topology_description(SG_MISSING)}),
        hb('heartbeat_leave', epoch=-1, group=SG_APP, member=SG_MEMBER),
        describe('describe_v1_after_leave', 1, [SG_APP], False),
        list_groups('list_groups_v5_type_streams_after_leave', [], ['streams']),
        ('offset_commit_v9_admin_reset_empty_group', 'OffsetCommit', 9, commit),
        ('setup_consumer_group_leave', 'ConsumerGroupHeartbeat', 1,
         dict(consumer_join, member_epoch=-1, rebalance_timeout_ms=-1, subscribed_topic_names=None,
              topic_partitions=None)),
        ('delete_groups_v2', 'DeleteGroups', 2, {'groups_names': [SG_APP, SG_CONSUMER]}),
        describe('describe_v1_after_delete', 1, [SG_APP, SG_CONSUMER], False),
    ])
    return {'cases': results}


# The admin_apis section: output file name -> collect function (c, schemas, controller).
ADMIN_APIS = [
    ('describe_log_dirs', lambda c, schemas, controller: collect_describe_log_dirs(c)),
    ('alter_replica_log_dirs', lambda c, schemas, controller: collect_alter_replica_log_dirs(c)),
    ('unregister_broker', lambda c, schemas, controller: collect_unregister_broker(c)),
    ('raft_voters', lambda c, schemas, controller: collect_raft_voters(c)),
    ('describe_topic_partitions', lambda c, schemas, controller: collect_describe_topic_partitions(c)),
    ('describe_quorum', collect_describe_quorum),
    ('elect_leaders', lambda c, schemas, controller: collect_elect_leaders(c)),
    ('list_partition_reassignments', lambda c, schemas, controller: collect_list_partition_reassignments(c)),
    ('alter_partition_reassignments', lambda c, schemas, controller: collect_alter_partition_reassignments(c)),
    ('update_features', lambda c, schemas, controller: collect_update_features(c)),
    ('kafka44_versions', lambda c, schemas, controller: collect_kafka44_versions(c)),
    ('streams_groups', lambda c, schemas, controller: collect_streams_groups(c)),
]


def section_admin_apis(args, schemas, c, names=None):
    """All the ADMIN_APIS files, or only those in `names` (--only streams_groups, ...)."""
    ensure_topics(c)
    out = {}
    for name, fn in ADMIN_APIS:
        if names is not None and name not in names:
            continue
        out[name] = fn(c, schemas, args.controller)
        dump(os.path.join(args.out, name + '.json'), out[name])
    return out


def section_dynamic_configs(args):
    """dynamic_broker_configs.json from DumpDynamicConfigs.java run against the Kafka jars."""
    import subprocess
    here = os.path.dirname(os.path.abspath(__file__))
    libs = args.kafka_libs
    if not libs or not os.path.isdir(libs):
        print(f'skipping dynamic_configs: no Kafka libs dir ({libs})', file=sys.stderr)
        return
    java = os.environ.get('JAVA', 'java')
    raw = subprocess.run([java, '-cp', os.path.join(libs, '*'), os.path.join(here, 'DumpDynamicConfigs.java')],
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(raw)
    sets = d['sets']
    modes = d['dynamicConfigUpdateModes']
    groups = {}
    for set_name, names in sets.items():
        if set_name in ('DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS', 'DynamicBrokerConfig.PER_BROKER_CONFIGS',
                        'DynamicBrokerConfig.LISTENER_MECHANISM_CONFIGS') or names is None:
            continue
        for n in names:
            groups.setdefault(n, []).append(set_name)
    per_broker = set(sets['DynamicBrokerConfig.PER_BROKER_CONFIGS'] or [])
    configs = {}
    for n in sorted(sets['DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS']):
        mode = modes.get(n)
        configs[n] = {
            'update_mode': mode,
            'settable_per_broker': True,
            'settable_cluster_default': n not in per_broker,
            'reconfigurable_sets': sorted(groups.get(n, [])),
        }
    extra_modes = {k: v for k, v in modes.items() if k not in configs}
    out = {
        'kafka_libs': libs,
        'how': 'reflection on the Kafka jars by DumpDynamicConfigs.java (static sets of '
               'org.apache.kafka.server.config.DynamicBrokerConfig and the RECONFIGURABLE_CONFIGS of the '
               'classes it unions into ALL_DYNAMIC_CONFIGS), plus DynamicBrokerConfig.dynamicConfigUpdateModes()',
        'semantics': {
            'update_mode per-broker': 'in PER_BROKER_CONFIGS: may only be set on BROKER "<id>"; setting it on the '
                                      'cluster default BROKER "" is rejected',
            'update_mode cluster-wide': 'may be set on BROKER "" (cluster default) and also on BROKER "<id>"',
            'read-only': 'any broker config not listed here: IncrementalAlterConfigs answers INVALID_REQUEST '
                         '"Cannot update these configs dynamically: [name]"',
            'listener.name.<listener>.<config>': 'listener-prefixed forms of the security/listener configs are '
                                                 'dynamic too (LISTENER_CONFIG_REGEX listener\\.name\\.[^.]*\\.(.*))',
        },
        'count': len(configs),
        'configs': configs,
        'update_modes_for_names_not_in_ALL_DYNAMIC_CONFIGS': extra_modes,
        'sets': sets,
        'DynamicConfig.Broker.names': d.get('DynamicConfig.Broker.names'),
        'DynamicConfig.Broker.nonDynamicProps_count': len(d.get('DynamicConfig.Broker.nonDynamicProps') or []),
        'DynamicConfig.Broker.nonDynamicProps': d.get('DynamicConfig.Broker.nonDynamicProps'),
    }
    dump(os.path.join(args.out, 'dynamic_broker_configs.json'), out)


# ----------------------------------------------------------------------------------------------
# Schema comparison
# ----------------------------------------------------------------------------------------------

def fmt_range(r):
    if r is None:
        return 'none'
    if r[1] is None:
        return f'{r[0]}+'
    return f'{r[0]}' if r[0] == r[1] else f'{r[0]}-{r[1]}'


def version_notes(paras, lo_exclusive, hi):
    """Comment paragraphs mentioning a version number in (lo_exclusive, hi]."""
    keep = []
    for p in paras:
        nums = [int(n) for n in re.findall(r'\b[Vv]ersions?\s+(\d+)', p)]
        nums += [int(n) for n in re.findall(r'\b[Vv](\d+)\b', p)]
        if any(lo_exclusive < n <= hi for n in nums):
            keep.append(p)
    return keep


def section_schemas(args, api_versions=None):
    new = Schemas(args.clients_jar)
    old = Schemas(args.old_clients_jar) if args.old_clients_jar else None
    advertised = {}
    av_path = os.path.join(args.out, 'api_versions.json')
    if api_versions is None and os.path.exists(av_path):
        with open(av_path) as f:
            api_versions = json.load(f)
    if api_versions:
        for k in api_versions['summary_v4']['api_keys']:
            advertised[k['api_key']] = (k['min_version'], k['max_version'])
    lines = [f'# Request schemas (common/message/*Request.json) in {os.path.basename(new.path)}',
             '# columns: api_key name validVersions flexibleVersions listeners latestVersionUnstable'
             ' broker_advertised(api_versions.json)' +
             (f' | {os.path.basename(old.path)} validVersions' if old else '')]
    changes = []
    for key in sorted(new.requests):
        m = new.requests[key]
        raw = m.raw
        adv = advertised.get(key)
        row = (f'{key:>4} {m.name[:-7]:<36} {fmt_range(m.valid):<6} {fmt_range(m.flexible):<6} '
               f'{",".join(raw.get("listeners", [])):<26} {str(raw.get("latestVersionUnstable", False)).lower():<6} '
               f'{(str(adv[0]) + "-" + str(adv[1])) if adv else "-":<6}')
        if old:
            om = old.requests.get(key)
            row += f' | {fmt_range(om.valid) if om else "absent"}'
            if om is None or om.valid != m.valid or \
                    om.raw.get('latestVersionUnstable', False) != raw.get('latestVersionUnstable', False):
                oldmax = om.valid[1] if om else -1
                resp_new = new.responses.get(key)
                ch = {'api_key': key, 'name': m.name[:-7],
                      'old_valid_versions': fmt_range(om.valid) if om else None,
                      'new_valid_versions': fmt_range(m.valid),
                      'old_latest_version_unstable': om.raw.get('latestVersionUnstable', False) if om else None,
                      'new_latest_version_unstable': raw.get('latestVersionUnstable', False),
                      'broker_advertised_4_4': f'{adv[0]}-{adv[1]}' if adv else None,
                      'request_notes': version_notes(m.comments, oldmax, m.valid[1]),
                      'response_notes': version_notes(resp_new.comments, oldmax, m.valid[1]) if resp_new else []}
                if om and om.valid[0] != m.valid[0]:
                    ch['min_version_changed'] = f'{om.valid[0]} -> {m.valid[0]}'
                changes.append(ch)
        lines.append(row)
    if old:
        for key in sorted(set(old.requests) - set(new.requests)):
            lines.append(f'{key:>4} {old.requests[key].name[:-7]:<36} removed (was {fmt_range(old.requests[key].valid)})')
    with open(os.path.join(args.out, 'schemas.txt'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print(f'wrote {os.path.join(args.out, "schemas.txt")}', file=sys.stderr)
    if old:
        # Also every schema file whose versions changed but is not an API (records, headers).
        others = []
        for fname in sorted(set(new.texts) | set(old.texts)):
            if fname in new.texts and fname in old.texts and new.texts[fname] == old.texts[fname]:
                continue
            row = {'file': fname, 'status': 'added' if fname not in old.texts else
                   'removed' if fname not in new.texts else 'changed'}
            if row['status'] == 'changed':
                o = json.loads(strip_json_comments(old.texts[fname]))
                n = json.loads(strip_json_comments(new.texts[fname]))
                d = field_diff(o, n)
                row.update(d if d else {'note': 'comments/about text only'})
            others.append(row)
        dump(os.path.join(args.out, 'schema_changes.json'),
             {'new_jar': os.path.basename(new.path), 'old_jar': os.path.basename(old.path),
              'api_version_changes': changes, 'schema_files_differing': others})


# ----------------------------------------------------------------------------------------------

def default_jar(version):
    cands = glob.glob(os.path.expanduser(f'~/.cache/strand/kafka-{version}/libs/kafka-clients-{version}.jar'))
    cands += glob.glob(os.path.expanduser(f'~/.m2/repository/org/apache/kafka/kafka-clients/{version}/kafka-clients-{version}.jar'))
    return cands[0] if cands else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--bootstrap', default='127.0.0.1:29092', help='broker listener host:port')
    ap.add_argument('--controller', default=None, help='optional KRaft controller listener host:port')
    ap.add_argument('--out', default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument('--clients-jar', default=default_jar('4.4.0'),
                    help='kafka-clients jar (or a dir of *.json) with common/message schemas')
    ap.add_argument('--old-clients-jar', default=default_jar('4.1.1'),
                    help='older kafka-clients jar to compare schemas with (schemas section)')
    ap.add_argument('--kafka-libs', default=os.path.expanduser('~/.cache/strand/kafka-4.4.0/libs'),
                    help='Kafka libs dir for the dynamic_configs section (DumpDynamicConfigs.java)')
    ap.add_argument('--only', default='api_versions,topic_configs,topic_validation,broker_configs,'
                                      'group_configs,admin_apis,dynamic_configs,schemas')
    ap.add_argument('--schemas-only', action='store_true', help='only the schemas section (no broker)')
    args = ap.parse_args()
    if not args.clients_jar:
        raise SystemExit('--clients-jar is required (no kafka-clients-4.4.0.jar in ~/.cache/strand or ~/.m2)')
    os.makedirs(args.out, exist_ok=True)
    only = ['schemas'] if args.schemas_only else args.only.split(',')
    schemas = Schemas(args.clients_jar)
    state = {'conn': None, 'topic_cfg': None}

    def conn():
        if state['conn'] is None:
            state['conn'] = Conn(args.bootstrap, schemas)
            state['conn'].handshake()
        return state['conn']

    def topic_configs():
        state['topic_cfg'] = section_topic_configs(args, schemas, conn())

    sections = [
        ('api_versions', lambda: section_api_versions(args, schemas)),
        ('topic_configs', topic_configs),
        ('topic_validation', lambda: section_topic_validation(args, schemas, conn(), state['topic_cfg'])),
        ('broker_configs', lambda: section_broker_configs(args, schemas, conn())),
        ('group_configs', lambda: section_group_configs(args, schemas, conn())),
        ('admin_apis', lambda: section_admin_apis(args, schemas, conn())),
    ]
    # One admin API file alone: --only streams_groups (any ADMIN_APIS name); admin_apis has them all.
    single = [n for n, _ in ADMIN_APIS if n in only and 'admin_apis' not in only]
    if single:
        sections.append(('admin_apis:' + ','.join(single),
                         lambda: section_admin_apis(args, schemas, conn(), single)))
    sections += [
        ('dynamic_configs', lambda: section_dynamic_configs(args)),
        ('schemas', lambda: section_schemas(args)),
    ]
    failed = []
    for name, fn in sections:
        if name not in only and not name.startswith('admin_apis:'):
            continue
        try:
            fn()
        except Exception:  # keep going: one section failing (e.g. on a partial broker) is no reason to stop
            import traceback
            traceback.print_exc()
            print(f'section {name} FAILED', file=sys.stderr)
            failed.append(name)
            if state['conn'] is not None:
                state['conn'].close()
                state['conn'] = None
    if state['conn'] is not None:
        state['conn'].close()
    if failed:
        raise SystemExit(f'failed sections: {",".join(failed)}')


if __name__ == '__main__':
    main()
