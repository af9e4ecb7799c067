#!/usr/bin/env python3
"""Compares a broker (Strand) with the Apache Kafka 4.4.0 reference answers.

interop/kafka/reference-4.4/ holds what a real Kafka 4.4.0 broker answered to a fixed set of
raw requests (capture.py made those files; see its README.md). This script sends the very same
requests to the broker at STRAND_BOOTSTRAP (or --bootstrap) by importing capture.py and calling
its collect_* functions, normalises both answers (below), compares them section by section and
prints one line per difference:

    <section> <path>: kafka=<value> strand=<value>

then one summary line per section, `<section>: N checked, M differ` (N counts compared leaf
values; a subtree present on one side only counts as one). Error codes and config enums are
shown with their names, e.g. INVALID_CONFIG(40); `<absent>` means the field or entry is not
there at all. Lines starting with `note:` are information, not differences.

Usage (Python 3.8+, standard library only; needs kafka-clients-4.4.0.jar for the schemas, from
interop/kafka/fetch.sh or ~/.m2):

    STRAND_BOOTSTRAP=127.0.0.1:9092 python3 interop/python/reference_compare.py
        [--sections a,b,...]      only these sections (default: all, in the order below)
        [--require a,b,...]       exit 0 only if these have no differences
                                  (default: topic_configs,topic_config_validation)
        [--strict-broker]         broker configs Kafka has but the broker lacks are differences
        [--controller HOST:PORT]  also compare the KRaft controller listener (api_versions,
                                  describe_quorum); without it those parts are skipped
        [--reference DIR] [--clients-jar JAR] [--save DIR (the broker's answers as JSON)]

Sections (file in the reference dir; the request made):
    api_versions                  api_versions.json: ApiVersions v0/v3/v4/v5, wrong cluster/node
                                  id, unsupported v127
    topic_configs                 topic_configs.json: CreateTopics + DescribeConfigs v4 of a default
                                  and an overridden topic, a missing topic, a key subset
    topic_config_validation       topic_config_validation.json: invalid values for every topic
                                  config *Kafka* has (the names and types come from the reference,
                                  so a broker that lacks a config is asked about it too)
    broker_configs                broker_configs.json: DescribeConfigs BROKER "<id>" and "",
                                  id 999, BROKER_LOGGER, IncrementalAlterConfigs tries
    group_configs                 group_configs.json: GROUP config describe/alter
    describe_log_dirs, describe_topic_partitions, describe_quorum, elect_leaders,
    list_partition_reassignments, alter_partition_reassignments, update_features,
    kafka44_versions, streams_groups
                                  the admin API files of the same names (kafka44_versions:
                                  the versions Kafka 4.4 added over 4.1; streams_groups:
                                  KIP-1071 StreamsGroupHeartbeat/Describe/TopologyDescription-
                                  Update refusals, one member's join, describe, leave, and what
                                  ListGroups, DescribeGroups, ConsumerGroupHeartbeat, OffsetCommit
                                  and DeleteGroups say about a streams group)
(aliases: topic_validation, admin_apis = the admin API sections, all)

Exit status: 0 if the sections named by --require have no differences, 1 otherwise, 2 on a
usage or connection error (an explicit --require naming a section --sections leaves out is a
usage error; the default one is cut down to the sections that run). A section whose API the broker does not serve (it is not in
its ApiVersions and every request fails: connection closed, UNSUPPORTED_VERSION; for
group_configs: every GROUP resource answered with the same error) is reported as one line
`<section>: not served (...)` and counts as one difference.

The broker should be fresh, like the one the reference was captured from: the three
strand-ref-* topics and the strand-ref-group group are created here. If the topics exist
already, the CreateTopics answers of topic_configs are not compared (a note says so); every
other request leaves the broker as it was (alterations are validate_only or undone), so a
re-run still compares the rest. Sections are always run in the order above, as in the capture
(group_configs creates __consumer_offsets, which the admin sections list; if group_configs is
not selected, a FindCoordinator is sent first so the topic exists all the same).

Normalisation (applied to both sides alike), field by field:
  * Not compared at all:
      - throttle_time_ms: the broker's quota state, not protocol behaviour.
      - documentation (DescribeConfigs include_documentation): prose, changes between releases.
      - finalized_features_epoch (ApiVersions): the metadata log offset of the last feature
        change, depends on the history of the cluster.
      - request echoes (request, request_hex, the configs/values tried, api_name, api_key) and
        response_hex/response_header: our own bytes, or the raw form of what is compared decoded.
      - the *_name keys capture.py adds next to codes (error_name, config_source_name, ...):
        derived from the code, which is compared (and printed with the name).
      - wire_order (DescribeConfigs): Kafka's order is HashMap iteration order; clients key
        configs by name. For the same reason every list of records is matched by its key
        (name, topic, partition, api_key, case, ...) and never by position, except lists
        without a unique key, which are compared position by position.
      - summary_v4/summary_v3 (api_versions): derived from the v4/v3 exchanges, which are compared.
      - config_count of BROKER resources: replaced by the broker rule below.
  * Compared after normalisation:
      - topic ids and other uuids (topic_id, replica_directory_id, directory_id, cluster_id):
        the all-zero uuid stays as it is (it means "none"), any other becomes <uuid>.
      - epochs (leader_epoch, member_epoch, any *_epoch, member_epoch_after_join): a value >= 0
        becomes <epoch>; negative sentinels (-1 = leave/unknown) are kept.
      - offsets (log_end_offset, high_watermark): >= 0 becomes <offset>, -1 is kept.
      - sizes (partition_size, total_bytes, usable_bytes): >= 0 becomes <size>, -1 is kept.
      - timestamps (*timestamp): >= 0 becomes <timestamp>, -1 is kept.
      - node ids: the broker's own id (from Metadata; 1 for the reference) becomes <self> in
        node_id, leader_id, replica_id, broker_id and in replica lists (replica_nodes, isr_nodes,
        offline_replicas, eligible_leader_replicas, last_known_elr), in the resource_name of
        BROKER/BROKER_LOGGER resources, in the values of broker.id/node.id, in "<id>@host:port"
        (controller.quorum.voters) and in "expected <id>" of broker-id error messages. Other ids
        (0, -1, 999) are kept.
      - ports: port fields become <port>, and host:port in any string (listeners, voters, error
        text) becomes host:<port>. Hosts are compared.
      - paths: log_dir and the value of log.dirs become <log dir> (the data directory).
      - the cluster id in an error message ("doesn't match the cluster id \"...\"") becomes
        <cluster id>.
      - member_id: <member id sent> when the broker echoed the id the request carried (KIP-848
        members choose their id), otherwise kept so a different id shows.
      - streams_groups: epochs are NOT normalised there but compared exactly (member, group,
        assignment, topology and endpoint-information epochs, and the KIP-848 member epoch of
        its consumer group): every group of the section is new and the requests follow a fixed
        sequence, so Kafka's epochs are the same on every run (checked over four runs against
        one broker; the one timer, streams.initial.rebalance.delay.ms = 3 s, does not fire
        between the join and the leave, which are milliseconds apart). Nothing else is added:
        member ids, process id, client id and group ids are fixed strings we send;
        client_host ("/127.0.0.1" in Kafka's answer) is compared as is, since the capture and
        the driver both connect over 127.0.0.1 (compare from another address and it
        differs). Described groups, ListGroups entries and DeleteGroups results are matched
        by group_id, so their order in the answer is not compared (Kafka's is not the request
        order: the "" entry first, then by coordinator shard); task and topic lists are
        compared in order.
      - synonyms: compared as one value, in order (their order is the precedence), each shown
        as name="value" SOURCE.
      - api_keys (ApiVersions): one entry per key, shown as "min-max"; in an exchange other than
        v4 a list equal to the same listener's v4 list is shown as <same as v4>. Features
        likewise as "min-max" by name.
      - everything else (error codes, error messages, values, sources, types, flags,
        authorized operations, api versions used) is compared exactly.
  * broker_configs, BROKER "<id>" and "" (cluster default): only the configs the broker lists
    are compared. For each of them, value, config_source, read_only, config_type, is_sensitive
    and synonyms must equal Kafka's config of the same name; a name Kafka 4.4 does not have is
    a difference. Configs Kafka lists that the broker lacks are one note with their count, not
    a difference, unless --strict-broker (then one difference each). Kafka's values are those
    of interop/kafka/run-kafka.sh's server.properties where the source is STATIC_BROKER_CONFIG.
"""

import argparse
import copy
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REF_DIR = os.path.normpath(os.path.join(HERE, '..', 'kafka', 'reference-4.4'))
sys.path.insert(0, REF_DIR)
import capture as cap  # noqa: E402  (interop/kafka/reference-4.4/capture.py)

ADMIN = ['describe_log_dirs', 'alter_replica_log_dirs', 'unregister_broker', 'raft_voters', 'describe_topic_partitions', 'describe_quorum', 'elect_leaders',
         'list_partition_reassignments', 'alter_partition_reassignments', 'update_features',
         'kafka44_versions', 'streams_groups']
SECTIONS = ['api_versions', 'topic_configs', 'topic_config_validation', 'broker_configs',
            'group_configs'] + ADMIN
ALIASES = {'topic_validation': ['topic_config_validation'], 'admin_apis': ADMIN, 'all': SECTIONS}
DEFAULT_REQUIRE = 'topic_configs,topic_config_validation'
# The APIs each section is about (for "not served").
SECTION_APIS = {
    'api_versions': [18], 'topic_configs': [19, 32], 'topic_config_validation': [19, 44],
    'broker_configs': [32, 44], 'group_configs': [32, 44], 'describe_log_dirs': [35], 'alter_replica_log_dirs': [34], 'unregister_broker': [64], 'raft_voters': [80, 81, 94],
    'describe_topic_partitions': [75], 'describe_quorum': [55], 'elect_leaders': [43],
    'list_partition_reassignments': [46], 'alter_partition_reassignments': [45],
    'update_features': [57],
    'kafka44_versions': [2, 8, 9, 18, 28, 42],
    'streams_groups': [88, 89, 93],
}
STATIC_SOURCE = 4


class Sym(str):
    """A normalised or synthesised value: printed as is, without quotes."""


class _Absent:
    def __repr__(self):
        return '<absent>'


ABSENT = _Absent()
ZERO_UUID = 'AAAAAAAAAAAAAAAAAAAAAA'

DROP_KEYS = {'throttle_time_ms', 'documentation', 'finalized_features_epoch', 'request',
             'request_hex', 'response_hex', 'response_header', 'note', 'describe_configs_request',
             'wire_order', 'decode_error_as_requested_version', 'bootstrap', 'summary_v4',
             'summary_v3', 'controller_summary_v4', 'overrides'}
UUID_KEYS = {'topic_id', 'replica_directory_id', 'directory_id', 'cluster_id'}
OFFSET_KEYS = {'log_end_offset', 'high_watermark'}
SIZE_KEYS = {'partition_size', 'total_bytes', 'usable_bytes'}
NODE_KEYS = {'node_id', 'leader_id', 'replica_id', 'broker_id'}
NODE_LIST_KEYS = {'replica_nodes', 'isr_nodes', 'offline_replicas', 'eligible_leader_replicas',
                  'last_known_elr'}
ID_KEYS = ['case', 'name', 'api_key', 'topic', 'topic_name', 'partition_index', 'partition_id',
           'log_dir', 'group_id', 'key', 'replica_id', 'node_id', 'resource_name', 'value']
# "... doesn't match the cluster id \"<22 base64 characters>\"" (INCONSISTENT_CLUSTER_ID).
CLUSTER_ID_IN_TEXT = re.compile(r'(cluster id )"[A-Za-z0-9_-]{22}"')
PORT_RE = re.compile(r'((?:\d{1,3}\.){3}\d{1,3}|localhost|\[[0-9A-Fa-f:.]+\]):\d{1,5}\b')


# ----------------------------------------------------------------------------------------------
# Normalisation
# ----------------------------------------------------------------------------------------------

def norm_str(s, ctx):
    s = PORT_RE.sub(r'\1:<port>', s)
    s = CLUSTER_ID_IN_TEXT.sub(r'\1"<cluster id>"', s)
    self_id = ctx['self_id']
    if self_id is not None:
        s = re.sub(r'(?<![\w.-])%d@(?=\S*:<port>)' % self_id, '<self>@', s)
        if 'broker id' in s.lower():
            s = re.sub(r'\bexpected %d\b' % self_id, 'expected <self>', s)
    return s


def norm_int(k, v, ctx):
    if k is None:
        return v
    if k.endswith('epoch') or k == 'member_epoch_after_join':
        if ctx.get('exact_epochs'):
            return v
        return Sym('<epoch>') if v >= 0 else v
    if k in OFFSET_KEYS:
        return Sym('<offset>') if v >= 0 else v
    if k in SIZE_KEYS:
        return Sym('<size>') if v >= 0 else v
    if k.endswith('timestamp'):
        return Sym('<timestamp>') if v >= 0 else v
    if k == 'port':
        return Sym('<port>')
    if k in NODE_KEYS and v == ctx['self_id']:
        return Sym('<self>')
    return v


def config_value(name, value, ctx):
    """Normalises the value of config `name` (an entry or a synonym)."""
    if not isinstance(value, str):
        return value
    if name in ('broker.id', 'node.id') and ctx['self_id'] is not None and value == str(ctx['self_id']):
        return Sym('<self>')
    if name == 'log.dirs' and value:
        return Sym('<log dir>')
    return value


def synonyms_sym(syns, ctx):
    if not isinstance(syns, list):
        return syns
    parts = []
    for s in syns:
        if not isinstance(s, dict):
            parts.append(render(s))
            continue
        v = config_value(s.get('name'), s.get('value'), ctx)
        v = norm_str(v, ctx) if isinstance(v, str) and not isinstance(v, Sym) else v
        src = s.get('source')
        parts.append(f'{s.get("name")}={render(v)} {cap.CONFIG_SOURCES.get(src, src)}')
    return Sym('[' + '; '.join(parts) + ']')


def is_annotation(k, d):
    """A *_name key capture.py added next to a code (not on the wire)."""
    if not k.endswith('_name') or not isinstance(d.get(k), str):
        return False
    if k.endswith('error_name'):
        return (k[:-len('error_name')] + 'error_code') in d
    return k[:-len('_name')] in d


def norm(v, ctx, key=None):
    if isinstance(v, dict):
        req = v.get('request')
        if isinstance(req, dict) and 'member_id' in req:
            ctx = dict(ctx, sent_member_id=req['member_id'])
        input_echo = 'response' in v or 'response_topic' in v
        out = {}
        for k, x in v.items():
            if k in DROP_KEYS or is_annotation(k, v):
                continue
            if k == 'api_key' and ('api_name' in v or 'response' in v):
                continue
            if k == 'api' and 'exception' in v:
                continue
            if k == 'configs' and input_echo:
                continue  # the configs we sent
            if k == 'synonyms':
                out[k] = synonyms_sym(x, ctx)
                continue
            if k == 'member_id' and ctx.get('sent_member_id') is not None and x == ctx['sent_member_id']:
                out[k] = Sym('<member id sent>')
                continue
            if k in UUID_KEYS and isinstance(x, str):
                out[k] = x if x == ZERO_UUID else Sym('<uuid>')
                continue
            if k == 'log_dir' and isinstance(x, str) and x:
                out[k] = Sym('<log dir>')
                continue
            if k in NODE_LIST_KEYS and isinstance(x, list):
                out[k] = [Sym('<self>') if y == ctx['self_id'] else y for y in x]
                continue
            out[k] = norm(x, ctx, k)
            if k in ('configs', 'described_after_set', 'existing_group_after_set') and isinstance(out[k], dict):
                for name, entry in out[k].items():
                    if isinstance(entry, dict) and entry.get('name') == name:
                        del entry['name']  # the key says it already
            if k == 'described_after_set' and isinstance(out[k], dict):
                out[k].pop('name', None)
        # A config entry: values that name this deployment.
        if 'config_source' in v and 'name' in v and 'value' in out:
            out['value'] = config_value(v['name'], out['value'], ctx)
        if v.get('resource_type') in (cap.BROKER, cap.BROKER_LOGGER) and ctx['self_id'] is not None \
                and v.get('resource_name') == str(ctx['self_id']):
            out['resource_name'] = Sym('<self>')
        return out
    if isinstance(v, list):
        if v and all(isinstance(x, dict) and 'case' in x for x in v):
            return {x['case']: norm({k: y for k, y in x.items() if k != 'case'}, ctx) for x in v}
        return [norm(x, ctx, key) for x in v]
    if isinstance(v, bool) or v is None or isinstance(v, float):
        return v
    if isinstance(v, int):
        return norm_int(key, v, ctx)
    if isinstance(v, str) and not isinstance(v, Sym):
        return norm_str(v, ctx)
    return v


# Section-specific shaping, on the raw capture (before norm).

def range_sym(lo, hi):
    return Sym(f'{lo}-{hi}')


def shape_api_versions(d, schemas, with_controller):
    d = json.loads(json.dumps(d))
    if not with_controller:
        d.pop('controller_listener', None)
    for lname in ('broker_listener', 'controller_listener'):
        cases = d.get(lname)
        if not isinstance(cases, dict):
            continue
        base = cap._full_response(cases, 'v4')
        base_keys = base.get('api_keys') if base else None
        for label, x in cases.items():
            resp = x.get('response') if isinstance(x, dict) else None
            if not isinstance(resp, dict):
                continue
            keys = resp.get('api_keys')
            if isinstance(keys, list):
                if label != 'v4' and base_keys is not None and keys == base_keys:
                    resp['api_keys'] = Sym('<same as v4>')
                else:
                    resp['api_keys'] = {f'{k["api_key"]} {schemas.api_name(k["api_key"])}':
                                        range_sym(k['min_version'], k['max_version']) for k in keys}
            for fk, lo, hi in (('supported_features', 'min_version', 'max_version'),
                               ('finalized_features', 'min_version_level', 'max_version_level')):
                if isinstance(resp.get(fk), list):
                    resp[fk] = {f['name']: range_sym(f[lo], f[hi]) for f in resp[fk]}
    return d


def shape_topic_validation(d):
    d = json.loads(json.dumps(d))
    for entry in (d.get('create_topics_validate_only') or {}).values():
        for k in ('config_type', 'config_type_name', 'default'):
            entry.pop(k, None)  # taken from the reference: the same on both sides
    for entry in (d.get('create_topics_other_cases') or {}).values():
        for k in ('topic', 'num_partitions', 'replication_factor'):
            entry.pop(k, None)  # what we sent
    return d


def try_value(name, value, ctx):
    """The value of an IncrementalAlterConfigs try, with our own node id as <self>."""
    if name in ('broker.id', 'node.id') and ctx['self_id'] is not None and value == str(ctx['self_id']):
        return '<self>'
    return value


def shape_broker_configs(d, ctx):
    d = json.loads(json.dumps(d))
    for label in ('broker', 'cluster_default'):
        if isinstance(d.get(label), dict):
            d[label].pop('config_count', None)
    alter = d.get('incremental_alter_configs') or {}
    for label in ('broker', 'cluster_default'):
        rows = alter.get(label)
        if isinstance(rows, list):
            alter[label] = {f'{r["name"]}={try_value(r["name"], r["value"], ctx)}':
                            {k: v for k, v in r.items() if k not in ('name', 'value')} for r in rows}
    return d


def shape_group_configs(d):
    return json.loads(json.dumps(d))


# ----------------------------------------------------------------------------------------------
# Diff
# ----------------------------------------------------------------------------------------------

SIMPLE_KEY = re.compile(r'^[A-Za-z0-9_-]+$')
BRACKET_OK = re.compile(r'^[A-Za-z0-9_.<>@:/ -]+$')


def enum_name(key, v):
    if key is None:
        return None
    if key.endswith('error_code'):
        return cap.ERRORS.get(v, f'UNKNOWN_ERROR_{v}')
    if key in ('config_source', 'source'):
        return cap.CONFIG_SOURCES.get(v)
    if key == 'config_type':
        return cap.CONFIG_TYPES.get(v)
    if key == 'resource_type':
        return cap.RESOURCE_TYPES.get(v)
    return None


def render(v, key=None, limit=None):
    if v is ABSENT:
        return '<absent>'
    if isinstance(v, Sym):
        s = str(v)
    elif v is None:
        s = 'null'
    elif isinstance(v, bool):
        s = 'true' if v else 'false'
    elif isinstance(v, int):
        name = enum_name(key, v)
        s = f'{name}({v})' if name else str(v)
    elif isinstance(v, float):
        s = repr(v)
    elif isinstance(v, str):
        s = json.dumps(v, ensure_ascii=False)
    elif isinstance(v, list):
        s = '[' + ', '.join(render(x, key) for x in v) + ']'
    elif isinstance(v, dict):
        order = {f: i for i, f in enumerate(CONFIG_FIELDS)}
        items = sorted(v.items(), key=lambda kv: (order.get(kv[0], len(order)), str(kv[0])))
        s = '{' + ', '.join(f'{k}={render(x, k)}' for k, x in items) + '}'
    else:
        s = repr(v)
    if limit and len(s) > limit:
        s = s[:limit] + f'... ({len(s) - limit} more chars; --save DIR has it all)'
    return s


def path_key(k):
    k = str(k)
    return ('.' + k) if SIMPLE_KEY.match(k) else ('[' + k + ']' if BRACKET_OK.match(k) else '[' + json.dumps(k) + ']')


def join(path, k, bracket=False):
    p = keyed_path('', k) if bracket else path_key(k)
    if not path:
        return p[1:] if p.startswith('.') else p
    return path + p


def item_key(x, k):
    v = x.get(k)
    return str(v) if isinstance(v, (str, int)) and not isinstance(v, bool) else None


def identity(a, b):
    items = [x for x in a + b]
    if not items or not all(isinstance(x, dict) for x in items):
        return None
    for k in ID_KEYS:
        if all(k in x and item_key(x, k) is not None for x in items):
            ka = [item_key(x, k) for x in a]
            kb = [item_key(x, k) for x in b]
            if len(set(ka)) == len(ka) and len(set(kb)) == len(kb):
                return k
    return None


def keyed_path(path, k):
    k = str(k)
    return path + ('[' + k + ']' if k and BRACKET_OK.match(k) else '[' + json.dumps(k) + ']')


def same(a, b):
    """Leaf equality: absent only equals absent, bools only bools, a Sym equals the same text."""
    if a is ABSENT or b is ABSENT:
        return a is b
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, str) and isinstance(b, str):
        return str(a) == str(b)
    if type(a) is not type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
        return False
    return a == b


class Report:
    def __init__(self, section, out=sys.stdout):
        self.section = section
        self.checked = 0
        self.lines = []
        self.notes = []
        self.not_served = None
        self.out = out

    # Differences known and accepted for now (--allow regexes): printed, not counted.
    allowed = []

    def differ(self, path, a, b, key=None, extra=''):
        line = (f'{self.section} {path}: kafka={render(a, key, 400)} strand={render(b, key, 400)}{extra}')
        if any(re.search(pattern, line) for pattern in Report.allowed):
            print(f'allowed: {line}', file=self.out)
            return
        self.lines.append(line)
        print(line, file=self.out)

    def note(self, text):
        line = f'note: {self.section} {text}'
        self.notes.append(line)
        print(line, file=self.out)

    def diff(self, a, b, path='', key=None):
        if isinstance(a, dict) and isinstance(b, dict):
            keys = list(a) + [k for k in b if k not in a]
            # Keys that are names (configs, api keys, tries) rather than fields: all in brackets.
            bracket = any(not SIMPLE_KEY.match(str(k)) for k in keys)
            for k in keys:
                self.diff(a.get(k, ABSENT), b.get(k, ABSENT), join(path, k, bracket), k)
            return
        if isinstance(a, list) and isinstance(b, list) and any(isinstance(x, dict) for x in a + b):
            k = identity(a, b)
            if k is not None:
                da = {item_key(x, k): x for x in a}
                db = {item_key(x, k): x for x in b}
                for ident in list(da) + [i for i in db if i not in da]:
                    xa, xb = da.get(ident, ABSENT), db.get(ident, ABSENT)
                    if isinstance(xa, dict):
                        xa = {kk: vv for kk, vv in xa.items() if kk != k}
                    if isinstance(xb, dict):
                        xb = {kk: vv for kk, vv in xb.items() if kk != k}
                    self.diff(xa, xb, keyed_path(path, ident), key)
                return
            for i in range(max(len(a), len(b))):
                self.diff(a[i] if i < len(a) else ABSENT, b[i] if i < len(b) else ABSENT,
                          keyed_path(path, i), key)
            return
        self.checked += 1
        if not same(a, b):
            self.differ(path or '(whole)', a, b, key)

    @property
    def differing(self):
        return len(self.lines) + (1 if self.not_served else 0)


# ----------------------------------------------------------------------------------------------
# Section comparisons
# ----------------------------------------------------------------------------------------------

CONFIG_FIELDS = ['value', 'config_source', 'read_only', 'config_type', 'is_sensitive', 'synonyms']


def compare_broker_resource(rep, label, ka, sa, strict):
    """The broker rule: only the configs the broker lists are compared."""
    kc = ka.get('configs') if isinstance(ka, dict) else None
    sc = sa.get('configs') if isinstance(sa, dict) else None
    rest_k = {k: v for k, v in (ka or {}).items() if k != 'configs'} if isinstance(ka, dict) else ka
    rest_s = {k: v for k, v in (sa or {}).items() if k != 'configs'} if isinstance(sa, dict) else sa
    rep.diff(rest_k, rest_s, label)
    if not isinstance(kc, dict) or not isinstance(sc, dict):
        rep.diff(kc if kc is not None else ABSENT, sc if sc is not None else ABSENT, label + '.configs')
        return
    for name in sorted(sc):
        path = keyed_path(label + '.configs', name)
        if name not in kc:
            rep.checked += 1
            rep.differ(path, ABSENT, {f: sc[name].get(f, ABSENT) for f in CONFIG_FIELDS},
                       extra='  (Kafka 4.4 does not list this name for ' +
                             ('BROKER "<id>")' if label == 'broker' else 'the cluster default, BROKER "")'))
            continue
        static = kc[name].get('config_source') == STATIC_SOURCE
        for f in CONFIG_FIELDS:
            a, b = kc[name].get(f, ABSENT), sc[name].get(f, ABSENT)
            rep.checked += 1
            if not same(a, b):
                rep.differ(path + '.' + f, a, b, f,
                           extra='  (Kafka: set in run-kafka.sh server.properties)' if static else '')
    only_kafka = sorted(n for n in kc if n not in sc)
    if strict:
        for name in only_kafka:
            rep.checked += 1
            rep.differ(keyed_path(label + '.configs', name), {f: kc[name].get(f, ABSENT) for f in CONFIG_FIELDS},
                       ABSENT)
    elif only_kafka:
        rep.note(f'{label}.configs: {len(only_kafka)} of Kafka\'s {len(kc)} configs are not listed by the '
                 f'broker (not differences; --strict-broker lists them)')


def iter_exchanges(o):
    if isinstance(o, dict):
        if 'api_version' in o and ('response' in o or 'exception' in o):
            yield o
            return
        for v in o.values():
            yield from iter_exchanges(v)
    elif isinstance(o, list):
        for v in o:
            yield from iter_exchanges(v)


def top_error(x):
    r = x.get('response')
    return r.get('error_code') if isinstance(r, dict) else None


def not_served_reason(section, live, advertised, schemas):
    apis = SECTION_APIS.get(section, [])
    missing = [a for a in apis if a not in advertised]
    ex = list(iter_exchanges(live))
    failed = [x for x in ex if 'exception' in x or top_error(x) == 35]
    what = ', '.join(f'{schemas.api_name(a)}({a})' for a in missing)
    if ex and len(failed) == len(ex):
        kinds = []
        for x in failed:
            k = x.get('exception') or 'UNSUPPORTED_VERSION(35)'
            k = PORT_RE.sub(r'\1:<port>', k)
            if k not in kinds:
                kinds.append(k)
        head = f'{what} not in ApiVersions; ' if missing else ''
        return f'{head}all {len(ex)} requests failed: {"; ".join(kinds)}'
    if section == 'group_configs':
        results = []
        for label in ('existing_group', 'nonexistent_group', 'existing_group_after_set'):
            g = live.get(label)
            if isinstance(g, dict):
                results.append((g.get('error_code'), g.get('error_message')))
        for x in (live.get('incremental_alter_configs') or {}).values():
            r = x.get('response') if isinstance(x, dict) else None
            if isinstance(r, dict):
                results.append((r.get('error_code'), r.get('error_message')))
        if results and len(set(results)) == 1 and results[0][0] not in (0, None):
            code, msg = results[0]
            return (f'every GROUP DescribeConfigs/IncrementalAlterConfigs result ({len(results)}) is '
                    f'{cap.ERRORS.get(code, code)}({code}) {json.dumps(msg)}')
    return None


# ----------------------------------------------------------------------------------------------
# Running
# ----------------------------------------------------------------------------------------------

def parse_sections(text):
    out = []
    for s in (x.strip() for x in text.split(',')):
        if not s:
            continue
        names = ALIASES.get(s, [s])
        for n in names:
            if n not in SECTIONS:
                raise SystemExit(f'unknown section {s!r}; sections: {", ".join(SECTIONS)} '
                                 f'(aliases: {", ".join(ALIASES)})')
            if n not in out:
                out.append(n)
    return out


def drop_api_keys(section_data):
    """update_features without the ApiVersions answer's api_keys."""
    out = copy.deepcopy(section_data)
    for case in out.get('cases', []):
        resp = case.get('response')
        if case.get('api_key') == 18 and isinstance(resp, dict):
            resp.pop('api_keys', None)
    return out


def load_ref(ref_dir, section):
    path = os.path.join(ref_dir, section + '.json')
    with open(path, encoding='utf-8') as f:
        return json.load(f)


class Live:
    def __init__(self, bootstrap, schemas):
        self.bootstrap = bootstrap
        self.schemas = schemas
        self.c = None

    def conn(self):
        if self.c is None:
            self.c = cap.Conn(self.bootstrap, self.schemas)
            self.c.handshake()
        return self.c

    def reset(self):
        if self.c is not None:
            try:
                self.c.close()
            except OSError:
                pass
        self.c = None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--bootstrap', default=os.environ.get('STRAND_BOOTSTRAP'),
                    help='broker host:port (default: $STRAND_BOOTSTRAP)')
    ap.add_argument('--controller', default=os.environ.get('STRAND_CONTROLLER'),
                    help='KRaft controller listener host:port, compared too if given (default: $STRAND_CONTROLLER)')
    ap.add_argument('--reference', default=REF_DIR, help='reference JSON dir (default: %(default)s)')
    ap.add_argument('--clients-jar', default=cap.default_jar('4.4.0'),
                    help='kafka-clients jar with the message schemas (default: %(default)s)')
    ap.add_argument('--sections', default=','.join(SECTIONS))
    ap.add_argument('--require', default=None,
                    help=f'sections that must have no differences for exit 0 (default: {DEFAULT_REQUIRE}, '
                         'those of them that run)')
    ap.add_argument('--strict-broker', action='store_true',
                    help='broker configs Kafka lists and the broker does not are differences')
    ap.add_argument('--save', default=None, help='write the broker\'s answers (capture.py JSON) to this dir')
    ap.add_argument('--allow', action='append', default=[],
                    help='a regex: differences matching it are printed as allowed, not counted '
                         '(a known gap, named where the driver is run)')
    args = ap.parse_args()
    Report.allowed = args.allow

    if not args.bootstrap:
        print('reference_compare.py: set STRAND_BOOTSTRAP or pass --bootstrap HOST:PORT', file=sys.stderr)
        return 2
    if not args.clients_jar or not os.path.exists(args.clients_jar):
        print('reference_compare.py: no kafka-clients-4.4.0.jar (run interop/kafka/fetch.sh or pass --clients-jar)',
              file=sys.stderr)
        return 2
    try:
        sections = parse_sections(args.sections)
        require = parse_sections(DEFAULT_REQUIRE if args.require is None else args.require)
    except SystemExit as e:
        print(f'reference_compare.py: {e}', file=sys.stderr)
        return 2
    if args.require is None:
        require = [s for s in require if s in sections]
    else:
        not_run = [s for s in require if s not in sections]
        if not_run:
            print(f'reference_compare.py: --require names sections that --sections does not run: '
                  f'{",".join(not_run)}', file=sys.stderr)
            return 2

    schemas = cap.Schemas(args.clients_jar)
    live = Live(args.bootstrap, schemas)
    try:
        c = live.conn()
        self_id, _ = cap.broker_id(c)
    except Exception as e:
        print(f'reference_compare.py: cannot talk to {args.bootstrap}: {e!r}', file=sys.stderr)
        return 2
    advertised = dict(c.versions)
    try:
        ref_self = load_ref(args.reference, 'broker_configs').get('broker_id', 1)
    except OSError:
        ref_self = 1
    kctx = {'self_id': ref_self}
    sctx = {'self_id': self_id}
    print(f'note: comparing {args.bootstrap} (node {self_id}) with {args.reference} (Kafka 4.4.0, node {ref_self})')

    needs_topics = any(s != 'api_versions' for s in sections)
    created = None
    preexisting = []
    if needs_topics:
        try:
            created = cap.ensure_topics(c)
            preexisting = [n for n, r in created.items()
                           if r['response']['topics'][0]['error_code'] == 36]
        except Exception as e:  # the sections that need them will say so
            print(f'note: creating the strand-ref-* topics failed: {PORT_RE.sub(r"<host:port>", repr(e))}')
            live.reset()
            created = None
    ref_topic_cfg = load_ref(args.reference, 'topic_configs')
    with_controller = bool(args.controller)

    def capture(section):
        c = live.conn()
        if section == 'api_versions':
            return cap.collect_api_versions(schemas, args.bootstrap, args.controller)
        if section == 'topic_configs':
            return cap.collect_topic_configs(c, created)
        if section == 'topic_config_validation':
            return cap.collect_topic_validation(c, {cap.T_DEFAULT: ref_topic_cfg[cap.T_DEFAULT]}, setup=False)
        if section == 'broker_configs':
            return cap.collect_broker_configs(c)
        if section == 'group_configs':
            return cap.collect_group_configs(c, setup=False)
        fn = dict(cap.ADMIN_APIS)[section]
        return fn(c, schemas, args.controller)

    reports = []
    coordinator_done = 'group_configs' in sections
    for section in sections:
        rep = Report(section)
        reports.append(rep)
        if section in ADMIN and not coordinator_done:
            coordinator_done = True
            try:
                cap.ensure_group_coordinator(live.conn())
            except Exception as e:
                print(f'note: FindCoordinator (to create __consumer_offsets first) failed: {e!r}')
                live.reset()
        try:
            got = capture(section)
        except Exception as e:
            live.reset()
            rep.not_served = 'capture failed: ' + PORT_RE.sub(r'\1:<port>', repr(e))
            print(f'{section}: not served ({rep.not_served})')
            continue
        if args.save:
            os.makedirs(args.save, exist_ok=True)
            cap.dump(os.path.join(args.save, section + '.json'), got)
        ref = load_ref(args.reference, section)
        reason = not_served_reason(section, got, advertised, schemas)
        if reason and not_served_reason(section, ref, {a: 1 for a in SECTION_APIS[section]}, schemas) is None:
            rep.not_served = reason
            print(f'{section}: not served ({reason})')
            continue
        if section == 'api_versions':
            ref = shape_api_versions(ref, schemas, with_controller)
            got = shape_api_versions(got, schemas, with_controller)
            if not with_controller:
                rep.note('controller_listener: not compared (no --controller)')
        elif section == 'topic_config_validation':
            ref, got = shape_topic_validation(ref), shape_topic_validation(got)
        elif section == 'broker_configs':
            ref, got = shape_broker_configs(ref, kctx), shape_broker_configs(got, sctx)
        elif section == 'update_features':
            # The API list is the api_versions section's; here only the features count.
            ref, got = drop_api_keys(ref), drop_api_keys(got)
            rep.note('api_versions_features.api_keys: not compared (the api_versions section has them)')
        elif section == 'describe_quorum' and not with_controller:
            ref = dict(ref)
            ref.pop('controller_listener', None)
            got = dict(got)
            got.pop('controller_listener', None)
            rep.note('controller_listener: not compared (no --controller)')
        if section == 'streams_groups':  # fresh groups, fixed sequence: Kafka's epochs are exact
            k, s = norm(ref, dict(kctx, exact_epochs=True)), norm(got, dict(sctx, exact_epochs=True))
        else:
            k, s = norm(ref, kctx), norm(got, sctx)
        if section == 'topic_configs' and preexisting:
            k.pop('create_topics', None)
            s.pop('create_topics', None)
            rep.note(f'create_topics: not compared: {", ".join(preexisting)} existed before this run '
                     '(compare against a fresh broker)')
        if section == 'broker_configs':
            for label in ('broker', 'cluster_default'):
                compare_broker_resource(rep, label, k.pop(label, ABSENT), s.pop(label, ABSENT),
                                        args.strict_broker)
        rep.diff(k, s)

    print()
    failed = []
    for rep in reports:
        if rep.not_served:
            print(f'{rep.section}: {rep.checked} checked, {rep.differing} differ (not served)')
        else:
            print(f'{rep.section}: {rep.checked} checked, {rep.differing} differ')
        if rep.section in require and rep.differing:
            failed.append(rep.section)
    live.reset()
    if failed:
        print(f'FAIL: required sections with differences: {",".join(failed)}')
        return 1
    print(f'OK: no differences in the required sections ({",".join(require) or "none"})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
