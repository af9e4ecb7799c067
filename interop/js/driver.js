// KafkaJS interop driver: drives a Strand broker (or any Kafka broker) with KafkaJS 2.x
// and checks that it behaves as Apache Kafka does:
//
//   - admin: createTopics (3 and 6 partitions), TOPIC_ALREADY_EXISTS on a repeat (KafkaJS
//     answers `false`), fetchTopicMetadata, describeCluster, listTopics, describeConfigs /
//     alterConfigs of a topic (AlterConfigs replaces the whole set: a config left out goes
//     back to its default), createPartitions (and INVALID_PARTITIONS for fewer),
//     fetchTopicOffsets, fetchTopicOffsetsByTimestamp, deleteTopicRecords, deleteTopics;
//   - producer: keys, headers (binary, empty and a repeated key), explicit timestamps,
//     every codec KafkaJS can use here (none, gzip built in, snappy through kafkajs-snappy),
//     acks -1 and 1, the idempotent producer; acknowledged offsets exact;
//   - consumer: everything read back field by field (offsets, order, keys, values,
//     headers, timestamps, CreateTime, producer ids), compressed batches come back with
//     the producer's codec;
//   - groups: two consumers split 6 partitions 3/3, every record exactly once, offsets
//     committed, LeaveGroup hands the partitions over, a restarted consumer resumes at the
//     commit; describeGroups, listGroups, fetchOffsets, resetOffsets, setOffsets,
//     deleteGroups;
//   - transactions: commit visible and abort invisible under read_committed (KafkaJS's
//     default), both visible under read_uncommitted, control records take offsets,
//     sendOffsets moves the group's offsets only on commit;
//   - errors: a record over the topic's max.message.bytes and one over the broker's
//     default fail with MESSAGE_TOO_LARGE from the broker, and append nothing.
//
// Prints "ok: ..." per passed check; on the first failure prints "FAIL: ..." and exits 1.
// Every wait has a deadline and a watchdog ends the run if it overstays.
//
//   STRAND_BOOTSTRAP   broker address (default 127.0.0.1:9092)
//   STRAND_KAFKAJS_LOG KafkaJS log level: nothing, error (default), warn, info, debug
//   STRAND_SECURITY_PROTOCOL and the rest of security.js: TLS and SASL
'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

const {
  Kafka,
  logLevel,
  CompressionTypes,
  CompressionCodecs,
  ConfigResourceTypes,
  AssignerProtocol,
} = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const { securityOptions } = require('./security')

const bootstrap = process.env.STRAND_BOOTSTRAP || '127.0.0.1:9092'
const STEP_MS = 30000
const OVERALL_MS = 8 * 60 * 1000
const RUN = `${Date.now()}-${process.pid}`

class Failure extends Error {}

function ok(msg) {
  console.log(`ok: ${msg}`)
}

function check(cond, msg) {
  if (!cond) throw new Failure(msg)
}

function checkOk(cond, msg) {
  check(cond, msg)
  ok(msg)
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

// Runs fn() under a deadline: rejects with a Failure naming `what` if it has not settled
// after ms.
async function within(ms, what, fn) {
  let timer
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Failure(`${what}: no answer within ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([fn(), deadline])
  } finally {
    clearTimeout(timer)
  }
}

// Polls cond() until it returns a truthy value or the deadline passes.
async function waitFor(what, cond, ms = STEP_MS, every = 100) {
  const until = Date.now() + ms
  for (;;) {
    const v = await cond()
    if (v) return v
    if (Date.now() > until) throw new Failure(`${what}: not reached within ${ms} ms`)
    await sleep(every)
  }
}

// The chain of a KafkaJS error: the error itself, then its `cause`s / `originalError`s.
function errorChain(e) {
  const out = []
  const seen = new Set()
  while (e && !seen.has(e)) {
    seen.add(e)
    out.push(e)
    e = e.cause || e.originalError || (e.errors && e.errors[0])
  }
  return out
}

function errorTypes(e) {
  return errorChain(e).map(x => x.type || x.name)
}

const hasType = (e, type) => errorChain(e).some(x => x.type === type)

// --- codecs: KafkaJS has gzip built in; snappy comes from kafkajs-snappy (pure JS,
// snappyjs). lz4 and zstd have no pure-JS KafkaJS codec (kafkajs-lz4 and @kafkajs/zstd
// build native addons), so they are not used. Each codec is wrapped so the driver can tell
// which codecs the fetched batches were compressed with.
CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
const codecUse = { gzip: { compress: 0, decompress: 0 }, snappy: { compress: 0, decompress: 0 } }
for (const [name, type] of [['gzip', CompressionTypes.GZIP], ['snappy', CompressionTypes.Snappy]]) {
  const make = CompressionCodecs[type]
  CompressionCodecs[type] = () => {
    const codec = make()
    return {
      async compress(encoder) {
        codecUse[name].compress++
        return codec.compress(encoder)
      },
      async decompress(buffer) {
        codecUse[name].decompress++
        return codec.decompress(buffer)
      },
    }
  }
}

const CODECS = [
  { name: 'none', type: CompressionTypes.None, acks: -1 },
  { name: 'gzip', type: CompressionTypes.GZIP, acks: 1 },
  { name: 'snappy', type: CompressionTypes.Snappy, acks: -1 },
]

// --- client setup

const levels = {
  nothing: logLevel.NOTHING,
  error: logLevel.ERROR,
  warn: logLevel.WARN,
  info: logLevel.INFO,
  debug: logLevel.DEBUG,
}
const kafka = new Kafka({
  clientId: 'strand-interop-kafkajs',
  brokers: [bootstrap],
  connectionTimeout: 5000,
  requestTimeout: 15000,
  retry: { retries: 5, initialRetryTime: 200, maxRetryTime: 3000 },
  logLevel: levels[(process.env.STRAND_KAFKAJS_LOG || 'error').toLowerCase()] ?? logLevel.ERROR,
  logCreator: () => ({ namespace, level, label, log }) => {
    const { message, ...extra } = log
    process.stderr.write(`kafkajs ${label} [${namespace}] ${message} ${JSON.stringify(extra)}\n`)
  },
  ...securityOptions(),
})

let admin
const toClose = new Set() // producers and consumers to disconnect at the end

const topics = {
  main: `kafkajs-${RUN}`,
  conf: `kafkajs-conf-${RUN}`,
  group: `kafkajs-group-${RUN}`,
  txn: `kafkajs-txn-${RUN}`,
}

async function producer(opts = {}) {
  const p = kafka.producer({ allowAutoTopicCreation: false, ...opts })
  await within(STEP_MS, 'producer connect', () => p.connect())
  toClose.add(p)
  return p
}

async function closeClient(c) {
  toClose.delete(c)
  await within(STEP_MS, 'disconnect', () => c.disconnect())
}

function bufEq(a, b) {
  if (a === null || b === null) return a === b
  return Buffer.compare(Buffer.from(a), Buffer.from(b)) === 0
}

function show(v) {
  if (v === null || v === undefined) return String(v)
  if (Array.isArray(v)) return `[${v.map(show).join(', ')}]`
  const s = Buffer.from(v).toString('latin1')
  return JSON.stringify(s.length > 40 ? `${s.slice(0, 40)}...(${s.length} bytes)` : s)
}

// --- 1. topics, metadata, cluster

async function waitReady(topic, n) {
  let last
  await waitFor(`${topic}: ListOffsets answers for all ${n} partitions`, async () => {
    try {
      const offs = await admin.fetchTopicOffsets(topic)
      return offs.length === n
    } catch (e) {
      last = e
      return false
    }
  }, STEP_MS, 100).catch(e => {
    throw new Failure(`${e.message} (last error ${last && errorTypes(last)})`)
  })
}

let nodeId

async function createTopics() {
  const spec = [
    { topic: topics.main, numPartitions: 3, replicationFactor: 1 },
    { topic: topics.conf, numPartitions: 3, replicationFactor: 1 },
    { topic: topics.group, numPartitions: 6, replicationFactor: 1 },
    { topic: topics.txn, numPartitions: 2, replicationFactor: 1 },
  ]
  const created = await within(STEP_MS, 'createTopics', () =>
    admin.createTopics({ topics: spec, waitForLeaders: true, timeout: 10000 })
  )
  checkOk(created === true, `createTopics: ${spec.map(t => `${t.topic} (${t.numPartitions})`).join(', ')} created`)
  // Kafka can list a new partition's leader in Metadata a moment before that leader
  // serves it (NOT_LEADER_OR_FOLLOWER), and KafkaJS retries a whole Produce request when
  // one partition fails, duplicating the others' records: wait until ListOffsets
  // answers for every partition before producing.
  for (const t of spec) await waitReady(t.topic, t.numPartitions)

  // KafkaJS answers false when every topic failed with TOPIC_ALREADY_EXISTS and throws on
  // any other error.
  let again
  try {
    again = await within(STEP_MS, 'createTopics (repeat)', () =>
      admin.createTopics({ topics: [spec[0]], waitForLeaders: true, timeout: 10000 })
    )
  } catch (e) {
    throw new Failure(`createTopics (repeat) ${topics.main}: threw ${errorTypes(e)} (${e.message}), want TOPIC_ALREADY_EXISTS (false)`)
  }
  checkOk(again === false, `createTopics (repeat) ${topics.main}: TOPIC_ALREADY_EXISTS (createTopics returned ${again})`)

  const cluster = await within(STEP_MS, 'describeCluster', () => admin.describeCluster())
  const [host, port] = bootstrap.split(':')
  check(cluster.brokers.length === 1, `describeCluster: ${cluster.brokers.length} brokers, want 1: ${JSON.stringify(cluster)}`)
  const b = cluster.brokers[0]
  check(b.host === host && b.port === Number(port), `describeCluster: broker ${b.host}:${b.port}, want ${bootstrap} (the address the client bootstrapped from)`)
  check(typeof cluster.clusterId === 'string' && cluster.clusterId.length > 0, `describeCluster: cluster id ${cluster.clusterId}`)
  check(cluster.controller === b.nodeId, `describeCluster: controller ${cluster.controller}, want node ${b.nodeId}`)
  nodeId = b.nodeId
  ok(`describeCluster: one broker, node ${nodeId} at ${b.host}:${b.port}, controller ${cluster.controller}, cluster id ${cluster.clusterId}`)

  const md = await within(STEP_MS, 'fetchTopicMetadata', () =>
    admin.fetchTopicMetadata({ topics: [topics.main, topics.group] })
  )
  for (const [name, n] of [[topics.main, 3], [topics.group, 6]]) {
    const t = md.topics.find(x => x.name === name)
    check(t, `fetchTopicMetadata: ${name} missing: ${JSON.stringify(md.topics.map(x => x.name))}`)
    check(t.partitions.length === n, `fetchTopicMetadata ${name}: ${t.partitions.length} partitions, want ${n}`)
    const ids = t.partitions.map(p => p.partitionId).sort((a, b) => a - b)
    check(ids.every((id, i) => id === i), `fetchTopicMetadata ${name}: partition ids ${ids}`)
    for (const p of t.partitions) {
      check(p.partitionErrorCode === 0, `fetchTopicMetadata ${name}[${p.partitionId}]: error code ${p.partitionErrorCode}`)
      check(p.leader === nodeId, `fetchTopicMetadata ${name}[${p.partitionId}]: leader ${p.leader}, want ${nodeId}`)
      check(JSON.stringify(p.replicas) === JSON.stringify([nodeId]), `fetchTopicMetadata ${name}[${p.partitionId}]: replicas ${p.replicas}`)
      check(JSON.stringify(p.isr) === JSON.stringify([nodeId]), `fetchTopicMetadata ${name}[${p.partitionId}]: isr ${p.isr}`)
    }
    ok(`fetchTopicMetadata ${name}: ${n} partitions, leader/replicas/isr = node ${nodeId}, no errors`)
  }

  const listed = await within(STEP_MS, 'listTopics', () => admin.listTopics())
  const missing = Object.values(topics).filter(t => !listed.includes(t))
  checkOk(missing.length === 0, `listTopics: lists all ${Object.keys(topics).length} created topics (missing: ${missing})`)
}

// --- 2. produce with every codec, acks -1 and 1, and the idempotent producer

const BASE_TS = Math.floor(Date.now() / 1000) * 1000 - 3600 * 1000 // an hour ago, whole seconds
const CODEC_SPAN_MS = 100000
const STEP_TS_MS = 10
const PER_CODEC = 50

function makeRecord(codec, ci, i) {
  const unit = `value-${codec}-${i}|`
  return {
    codec,
    key: Buffer.from(`key-${codec}-${i}`),
    value: Buffer.from(unit.repeat(8 + ((i % 13) * 5))),
    headers: {
      codec: Buffer.from(codec),
      seq: Buffer.from([ci, i, 0x00, 0xff]),
      dup: [Buffer.from(`first-${i}`), Buffer.from(`second-${i}`)],
      empty: Buffer.alloc(0),
    },
    timestamp: String(BASE_TS + ci * CODEC_SPAN_MS + i * STEP_TS_MS),
    partition: i % 3,
    offset: -1,
    idempotent: false,
  }
}

// Sends records (one send call) and fills in their offsets from the acknowledgements:
// KafkaJS puts each partition's records into one batch in send order, so a record's
// offset is its partition's baseOffset plus its index among that partition's records.
async function sendAndPlace(p, topic, recs, opts, what) {
  let res
  try {
    res = await within(STEP_MS, what, () =>
      p.send({
        topic,
        messages: recs.map(r => ({
          key: r.key,
          value: r.value,
          headers: r.headers,
          timestamp: r.timestamp,
          partition: r.partition,
        })),
        ...opts,
      })
    )
  } catch (e) {
    throw new Failure(`${what}: send failed: ${errorTypes(e)}: ${e.message}`)
  }
  const byPartition = new Map()
  for (const r of recs) {
    if (!byPartition.has(r.partition)) byPartition.set(r.partition, [])
    byPartition.get(r.partition).push(r)
  }
  check(res.length === byPartition.size, `${what}: ${res.length} partition acks, want ${byPartition.size}: ${JSON.stringify(res)}`)
  for (const a of res) {
    check(a.topicName === topic, `${what}: ack for topic ${a.topicName}`)
    check(a.errorCode === 0, `${what}: partition ${a.partition} ack error code ${a.errorCode}`)
    const list = byPartition.get(a.partition)
    check(list, `${what}: ack for partition ${a.partition} that got no records`)
    list.forEach((r, i) => {
      r.offset = Number(a.baseOffset) + i
    })
  }
  return res
}

async function produceAll() {
  const all = []
  const next = [0, 0, 0]
  const placeAndCheck = (recs, what) => {
    for (const r of recs) {
      check(r.offset === next[r.partition], `${what}: ${r.key} acknowledged at ${topics.main}[${r.partition}]@${r.offset}, want offset ${next[r.partition]} (offsets must be 0..n-1 in produce order)`)
      next[r.partition]++
    }
    all.push(...recs)
  }

  const p = await producer()
  for (const [ci, c] of CODECS.entries()) {
    const recs = []
    for (let i = 0; i < PER_CODEC; i++) recs.push(makeRecord(c.name, ci, i))
    const what = `produce ${c.name} (acks ${c.acks})`
    await sendAndPlace(p, topics.main, recs, { acks: c.acks, compression: c.type }, what)
    placeAndCheck(recs, what)
    ok(`${what}: ${PER_CODEC} records with keys, 4 headers and explicit timestamps acknowledged at the expected offsets`)
  }
  check(codecUse.gzip.compress > 0 && codecUse.snappy.compress > 0, `producer: the gzip/snappy codecs were not used (${JSON.stringify(codecUse)})`)
  await closeClient(p)

  // The idempotent producer (InitProducerId; acks must be -1), two sends, gzip then none.
  const ip = await producer({ idempotent: true, maxInFlightRequests: 1, retry: { retries: 5 } })
  for (const [k, c] of [[3, CODECS[1]], [4, CODECS[0]]]) {
    const recs = []
    for (let i = 0; i < 30; i++) recs.push({ ...makeRecord(`idem-${c.name}`, k, i), idempotent: true })
    const what = `idempotent produce ${c.name} (acks -1)`
    await sendAndPlace(ip, topics.main, recs, { acks: -1, compression: c.type }, what)
    placeAndCheck(recs, what)
    ok(`${what}: 30 records acknowledged at the expected offsets`)
  }
  await closeClient(ip)
  return all
}

// --- 3. read everything back

// A group consumer that records every message it gets: {partition, offset, key, ...}.
class Reader {
  constructor(name, groupId, topic, { fromBeginning = true, readUncommitted = false, extra = {} } = {}) {
    this.name = name
    this.groupId = groupId
    this.topic = topic
    this.fromBeginning = fromBeginning
    this.records = []
    this.assigned = null // partitions of the latest GROUP_JOIN
    this.joins = 0
    this.crashed = null
    this.consumer = kafka.consumer({
      groupId,
      readUncommitted,
      sessionTimeout: 10000,
      heartbeatInterval: 500,
      rebalanceTimeout: 20000,
      maxWaitTimeInMs: 500,
      allowAutoTopicCreation: false,
      retry: { retries: 5, initialRetryTime: 200, maxRetryTime: 3000 },
      ...extra,
    })
    const ev = this.consumer.events
    this.consumer.on(ev.GROUP_JOIN, e => {
      this.joins++
      this.assigned = new Set((e.payload.memberAssignment[topic] || []).map(Number))
      this.memberId = e.payload.memberId
    })
    // KafkaJS restarts a consumer after a retriable error (a fresh Kafka answers
    // GROUP_LOAD_IN_PROGRESS while it creates __consumer_offsets): only a crash it does
    // not restart from fails the run.
    this.restarts = 0
    this.consumer.on(ev.CRASH, e => {
      if (e.payload.restart) this.restarts++
      else this.crashed = e.payload.error
    })
  }

  async start() {
    await within(STEP_MS, `${this.name} connect`, () => this.consumer.connect())
    toClose.add(this.consumer)
    await within(STEP_MS, `${this.name} subscribe`, () =>
      this.consumer.subscribe({ topics: [this.topic], fromBeginning: this.fromBeginning })
    )
    await within(STEP_MS, `${this.name} run`, () =>
      this.consumer.run({
        eachMessage: async ({ topic, partition, message }) => {
          this.records.push({ topic, partition, ...message, offset: Number(message.offset) })
        },
      })
    )
    return this
  }

  failIfCrashed() {
    if (this.crashed) throw new Failure(`${this.name}: consumer crashed: ${errorTypes(this.crashed)}: ${this.crashed.message}`)
  }

  async waitCount(n, what) {
    await waitFor(`${what}: ${this.name} has ${n} records`, () => {
      this.failIfCrashed()
      return this.records.length >= n
    })
  }

  async stop() {
    await closeClient(this.consumer)
  }
}

// Reads `topic` from the start with a fresh group until `n` records came, then a while
// longer (anything more would be records that were never produced).
async function readAll(name, topic, n, opts = {}) {
  const r = await new Reader(name, `kafkajs-read-${name}-${RUN}`, topic, opts).start()
  await r.waitCount(n, name)
  await sleep(1500)
  r.failIfCrashed()
  await r.stop()
  return r.records
}

function checkHeaders(where, got, want) {
  const gk = Object.keys(got).sort()
  const wk = Object.keys(want).sort()
  check(JSON.stringify(gk) === JSON.stringify(wk), `${where}: header keys ${gk}, want ${wk}`)
  for (const k of wk) {
    const w = want[k]
    const g = got[k]
    if (Array.isArray(w)) {
      check(Array.isArray(g) && g.length === w.length && w.every((x, i) => bufEq(g[i], x)),
        `${where}: header ${k} = ${show(g)}, want ${show(w)} (repeated key, in order)`)
    } else {
      check(!Array.isArray(g) && bufEq(g, w), `${where}: header ${k} = ${show(g)}, want ${show(w)}`)
    }
  }
}

async function consumeAll(all) {
  const dec0 = { gzip: codecUse.gzip.decompress, snappy: codecUse.snappy.decompress }
  const got = await readAll('main', topics.main, all.length)
  checkOk(got.length === all.length, `consume ${topics.main} from the beginning: exactly ${all.length} records (got ${got.length})`)
  for (let p = 0; p < 3; p++) {
    const want = all.filter(r => r.partition === p).sort((a, b) => a.offset - b.offset)
    const g = got.filter(r => r.partition === p)
    check(g.length === want.length, `consume partition ${p}: ${g.length} records, want ${want.length}`)
    want.forEach((w, i) => {
      const r = g[i]
      const where = `consume ${topics.main}[${p}] position ${i} (produced ${w.key})`
      check(r.offset === i && r.offset === w.offset, `${where}: offset ${r.offset}, want ${w.offset}`)
      check(bufEq(r.key, w.key), `${where}: key ${show(r.key)}, want ${show(w.key)} (out of produce order?)`)
      check(bufEq(r.value, w.value), `${where}: value ${show(r.value)}, want ${show(w.value)}`)
      checkHeaders(where, r.headers, w.headers)
      check(r.timestamp === w.timestamp, `${where}: timestamp ${r.timestamp}, want ${w.timestamp}`)
      const bc = r.batchContext
      check(bc.timestampType === 0, `${where}: timestamp type ${bc.timestampType}, want 0 (CreateTime)`)
      check(!bc.inTransaction && !bc.isControlBatch, `${where}: batch marked transactional/control`)
      if (w.idempotent) {
        check(Number(bc.producerId) >= 0 && bc.producerEpoch >= 0 && bc.firstSequence >= 0,
          `${where}: idempotent record's batch has producer id ${bc.producerId} epoch ${bc.producerEpoch} sequence ${bc.firstSequence}`)
      } else {
        // (KafkaJS writes epoch 0 and base sequence 0, not -1, in batches without a producer id.)
        check(bc.producerId === '-1', `${where}: non-idempotent record's batch has producer id ${bc.producerId}, want -1`)
      }
    })
    ok(`consume ${topics.main}[${p}]: ${g.length} records, offsets 0..${g.length - 1} in produce order; keys, values, headers (binary, empty, repeated), timestamps (CreateTime) and producer ids match`)
  }
  const dg = codecUse.gzip.decompress - dec0.gzip
  const ds = codecUse.snappy.decompress - dec0.snappy
  checkOk(dg > 0 && ds > 0, `consume: fetched batches came back compressed with the producer's codecs (gzip ${dg} batches, snappy ${ds} batches decompressed)`)
}

// --- 4. offsets

async function offsets(all) {
  const counts = [0, 1, 2].map(p => all.filter(r => r.partition === p).length)
  const offs = await within(STEP_MS, 'fetchTopicOffsets', () => admin.fetchTopicOffsets(topics.main))
  check(offs.length === 3, `fetchTopicOffsets: ${offs.length} partitions`)
  for (const o of offs) {
    check(o.low === '0' && o.high === String(counts[o.partition]) && o.offset === o.high,
      `fetchTopicOffsets ${topics.main}[${o.partition}]: low ${o.low} high ${o.high}, want 0 and ${counts[o.partition]}`)
  }
  ok(`fetchTopicOffsets ${topics.main}: low 0, high ${counts.join('/')}`)

  // Mid-way through the snappy records, between two records' timestamps.
  const ts = BASE_TS + 2 * CODEC_SPAN_MS + 25 * STEP_TS_MS + 5
  const byTs = await within(STEP_MS, 'fetchTopicOffsetsByTimestamp', () =>
    admin.fetchTopicOffsetsByTimestamp(topics.main, ts)
  )
  for (let p = 0; p < 3; p++) {
    const first = all.filter(r => r.partition === p && Number(r.timestamp) >= ts).sort((a, b) => a.offset - b.offset)[0]
    const o = byTs.find(x => x.partition === p)
    check(o && o.offset === String(first.offset),
      `fetchTopicOffsetsByTimestamp(${ts}) ${topics.main}[${p}]: ${o && o.offset}, want ${first.offset} (first record with timestamp >= ${ts}, ${first.key})`)
  }
  ok(`fetchTopicOffsetsByTimestamp(${ts}): the first record at or after it in each partition`)

  const early = await within(STEP_MS, 'fetchTopicOffsetsByTimestamp (early)', () =>
    admin.fetchTopicOffsetsByTimestamp(topics.main, BASE_TS - 1000)
  )
  checkOk(early.every(o => o.offset === '0'), `fetchTopicOffsetsByTimestamp(before every record): 0 everywhere (${early.map(o => o.offset)})`)
  const late = await within(STEP_MS, 'fetchTopicOffsetsByTimestamp (late)', () =>
    admin.fetchTopicOffsetsByTimestamp(topics.main, Date.now() + 3600 * 1000)
  )
  checkOk(late.every(o => o.offset === String(counts[o.partition])),
    `fetchTopicOffsetsByTimestamp(after every record): none found (-1), KafkaJS answers the high watermarks ${late.map(o => o.offset)}`)
}

// --- 5. configs, partitions, too-large records

const TOPIC = ConfigResourceTypes.TOPIC
const CONFIG_NAMES = ['retention.ms', 'max.message.bytes', 'cleanup.policy']
const DEFAULT_CONFIG = 5 // DescribeConfigs v1+ config_source
const DYNAMIC_TOPIC_CONFIG = 1

async function describeTopicConfigs(what) {
  const d = await within(STEP_MS, what, () =>
    admin.describeConfigs({ resources: [{ type: TOPIC, name: topics.conf, configNames: CONFIG_NAMES }], includeSynonyms: false })
  )
  check(d.resources.length === 1, `${what}: ${d.resources.length} resources`)
  const r = d.resources[0]
  check(r.errorCode === 0, `${what}: error code ${r.errorCode} (${r.errorMessage})`)
  check(r.resourceName === topics.conf && r.resourceType === TOPIC, `${what}: resource ${r.resourceType}/${r.resourceName}`)
  const byName = {}
  for (const e of r.configEntries) byName[e.configName] = e
  check(JSON.stringify(Object.keys(byName).sort()) === JSON.stringify([...CONFIG_NAMES].sort()),
    `${what}: entries ${Object.keys(byName)}, want exactly ${CONFIG_NAMES}`)
  return byName
}

// Describes the topic until retention.ms shows the value just set: Kafka answers
// AlterConfigs before its broker's DescribeConfigs sees the change.
async function describeTopicConfigsAfter(what, retention) {
  let c
  await waitFor(`${what}: retention.ms = ${retention}`, async () => {
    c = await describeTopicConfigs(what)
    return c['retention.ms'].configValue === retention
  }, 15000, 100)
  return c
}

function checkEntry(what, byName, name, value, source) {
  const e = byName[name]
  check(e.configValue === value, `${what}: ${name} = ${e.configValue}, want ${value}`)
  check(e.configSource === source, `${what}: ${name} config source ${e.configSource}, want ${source}`)
  check(e.isDefault === (source === DEFAULT_CONFIG), `${what}: ${name} isDefault ${e.isDefault}`)
  check(e.readOnly === false, `${what}: ${name} readOnly ${e.readOnly}`)
}

async function produceTooLarge(p, size, what) {
  try {
    const res = await within(STEP_MS, what, () =>
      p.send({ topic: topics.conf, acks: -1, messages: [{ key: 'too-large', value: Buffer.alloc(size, 'x'), partition: 0 }] })
    )
    throw new Failure(`${what}: accepted (${JSON.stringify(res)}), want MESSAGE_TOO_LARGE`)
  } catch (e) {
    if (e instanceof Failure) throw e
    check(hasType(e, 'MESSAGE_TOO_LARGE'), `${what}: failed with ${errorTypes(e)} (${e.message}), want MESSAGE_TOO_LARGE`)
    ok(`${what}: rejected by the broker with MESSAGE_TOO_LARGE (${e.name}: ${e.message})`)
  }
}

async function produceOne(p, size, what) {
  try {
    const res = await within(STEP_MS, what, () =>
      p.send({ topic: topics.conf, acks: -1, messages: [{ key: 'big', value: Buffer.alloc(size, 'y'), partition: 0 }] })
    )
    return Number(res[0].baseOffset)
  } catch (e) {
    if (e instanceof Failure) throw e
    throw new Failure(`${what}: failed with ${errorTypes(e)} (${e.message})`)
  }
}

async function highOf(topic, partition) {
  const offs = await within(STEP_MS, 'fetchTopicOffsets', () => admin.fetchTopicOffsets(topic))
  return Number(offs.find(o => o.partition === partition).high)
}

async function configsAndErrors() {
  let c = await describeTopicConfigs('describeConfigs (new topic)')
  checkEntry('describeConfigs (new topic)', c, 'retention.ms', '604800000', DEFAULT_CONFIG)
  checkEntry('describeConfigs (new topic)', c, 'max.message.bytes', '1048588', DEFAULT_CONFIG)
  checkEntry('describeConfigs (new topic)', c, 'cleanup.policy', 'delete', DEFAULT_CONFIG)
  ok(`describeConfigs ${topics.conf}: retention.ms 604800000, max.message.bytes 1048588, cleanup.policy delete, all defaults`)

  const alter = async (entries, what) => {
    const res = await within(STEP_MS, what, () =>
      admin.alterConfigs({ resources: [{ type: TOPIC, name: topics.conf, configEntries: entries }] })
    )
    check(res.resources.length === 1 && res.resources[0].errorCode === 0,
      `${what}: ${JSON.stringify(res.resources)}`)
  }
  await alter([{ name: 'retention.ms', value: '86400000' }, { name: 'max.message.bytes', value: '200000' }], 'alterConfigs #1')
  c = await describeTopicConfigsAfter('describeConfigs after alterConfigs #1', '86400000')
  checkEntry('describeConfigs after alterConfigs #1', c, 'retention.ms', '86400000', DYNAMIC_TOPIC_CONFIG)
  checkEntry('describeConfigs after alterConfigs #1', c, 'max.message.bytes', '200000', DYNAMIC_TOPIC_CONFIG)
  checkEntry('describeConfigs after alterConfigs #1', c, 'cleanup.policy', 'delete', DEFAULT_CONFIG)
  ok('alterConfigs retention.ms=86400000 max.message.bytes=200000: describeConfigs shows both as topic configs')

  const p = await producer({ retry: { retries: 2, initialRetryTime: 200 } })
  await produceTooLarge(p, 300000, 'produce a 300000-byte record (topic max.message.bytes 200000)')
  checkOk((await highOf(topics.conf, 0)) === 0, `${topics.conf}[0] still empty after the rejected record`)
  const o150 = await produceOne(p, 150000, 'produce a 150000-byte record')
  checkOk(o150 === 0, `produce a 150000-byte record (under 200000): accepted at offset ${o150}`)

  // AlterConfigs (not incremental) replaces the topic's whole config set: max.message.bytes,
  // left out, goes back to the default.
  await alter([{ name: 'retention.ms', value: '172800000' }], 'alterConfigs #2')
  c = await describeTopicConfigsAfter('describeConfigs after alterConfigs #2', '172800000')
  checkEntry('describeConfigs after alterConfigs #2', c, 'retention.ms', '172800000', DYNAMIC_TOPIC_CONFIG)
  checkEntry('describeConfigs after alterConfigs #2', c, 'max.message.bytes', '1048588', DEFAULT_CONFIG)
  ok('alterConfigs retention.ms=172800000 alone: max.message.bytes is back to its default 1048588 (AlterConfigs replaces the set)')
  const o300 = await produceOne(p, 300000, 'produce a 300000-byte record after the reset')
  checkOk(o300 === 1, `produce a 300000-byte record (default max.message.bytes): accepted at offset ${o300}`)
  await produceTooLarge(p, 2 * 1024 * 1024, 'produce a 2 MiB record (broker default max.message.bytes 1048588)')
  checkOk((await highOf(topics.conf, 0)) === 2, `${topics.conf}[0] high watermark 2 after the rejected 2 MiB record`)
  await closeClient(p)

  await within(STEP_MS, 'createPartitions', () =>
    admin.createPartitions({ topicPartitions: [{ topic: topics.conf, count: 5 }], timeout: 10000 })
  )
  const md = await waitFor('fetchTopicMetadata shows 5 partitions', async () => {
    const m = await admin.fetchTopicMetadata({ topics: [topics.conf] })
    return m.topics[0].partitions.length === 5 ? m : null
  }, STEP_MS, 250)
  await waitReady(topics.conf, 5)
  const parts = md.topics[0].partitions
  check(parts.every(p => p.partitionErrorCode === 0 && p.leader === nodeId), `createPartitions: partitions ${JSON.stringify(parts)}`)
  const offs = await within(STEP_MS, 'fetchTopicOffsets', () => admin.fetchTopicOffsets(topics.conf))
  check(offs.length === 5 && offs.every(o => o.low === '0' && o.high === (o.partition === 0 ? '2' : '0')),
    `createPartitions: offsets ${JSON.stringify(offs)}`)
  ok(`createPartitions ${topics.conf} to 5: metadata shows 5 partitions with leaders; the new ones are empty`)
  try {
    await within(STEP_MS, 'createPartitions (fewer)', () =>
      admin.createPartitions({ topicPartitions: [{ topic: topics.conf, count: 4 }], timeout: 10000 })
    )
    throw new Failure('createPartitions to 4 (from 5): succeeded, want INVALID_PARTITIONS')
  } catch (e) {
    if (e instanceof Failure) throw e
    check(hasType(e, 'INVALID_PARTITIONS'), `createPartitions to 4 (from 5): ${errorTypes(e)} (${e.message}), want INVALID_PARTITIONS`)
    ok(`createPartitions to 4 (from 5): INVALID_PARTITIONS (${e.message})`)
  }
}

// --- 6. consumer groups

const GP = 6

function produceGroupRecords(p, start, count) {
  const recs = []
  for (let i = start; i < start + count; i++) {
    recs.push({ key: Buffer.from(`g-${i}`), value: Buffer.from(`gv-${i}`), headers: {}, timestamp: String(Date.now()), partition: i % GP, offset: -1 })
  }
  return sendAndPlace(p, topics.group, recs, { acks: -1 }, `produce ${count} records to ${topics.group}`).then(() => recs)
}

const addr = r => `${r.partition}@${r.offset}`

function checkExactlyOnce(readers, want, what) {
  const seen = new Map()
  for (const m of readers) {
    for (const r of m.records) seen.set(addr(r), (seen.get(addr(r)) || 0) + 1)
  }
  const expected = new Set(want.map(addr))
  const dup = [...seen].filter(([, n]) => n > 1).map(([a]) => a)
  const missing = [...expected].filter(a => !seen.has(a))
  const unexpected = [...seen.keys()].filter(a => !expected.has(a))
  checkOk(!dup.length && !missing.length && !unexpected.length,
    `${what}: ${expected.size} records consumed exactly once across ${readers.map(m => m.name).join(', ')} ` +
    `(${dup.length} duplicated ${dup.slice(0, 5)}, ${missing.length} missing ${missing.slice(0, 5)}, ${unexpected.length} unexpected ${unexpected.slice(0, 5)})`)
}

async function waitConsumed(readers, want, what) {
  const wantSet = want.map(addr)
  await waitFor(what, () => {
    readers.forEach(m => m.failIfCrashed())
    const seen = new Set(readers.flatMap(m => m.records.map(addr)))
    return wantSet.every(a => seen.has(a))
  }, 60000)
}

async function waitSplit(readers, sizes, what) {
  return waitFor(what, () => {
    readers.forEach(m => m.failIfCrashed())
    const got = readers.map(m => m.assigned || new Set())
    const union = new Set(got.flatMap(s => [...s]))
    return JSON.stringify(got.map(s => s.size)) === JSON.stringify(sizes) && union.size === GP ? got : null
  }, 60000)
}

function endOffsets(recs) {
  const ends = new Array(GP).fill(0)
  for (const r of recs) ends[r.partition] = Math.max(ends[r.partition], r.offset + 1)
  return ends
}

async function committed(groupId) {
  const res = await within(STEP_MS, 'fetchOffsets', () => admin.fetchOffsets({ groupId, topics: [topics.group] }))
  check(res.length === 1 && res[0].topic === topics.group, `fetchOffsets ${groupId}: ${JSON.stringify(res)}`)
  const out = new Array(GP).fill(null)
  for (const p of res[0].partitions) out[p.partition] = p.offset
  return out
}

async function waitCommitted(groupId, want, what) {
  const w = want.map(String)
  let last
  await waitFor(what, async () => {
    last = await committed(groupId)
    return JSON.stringify(last) === JSON.stringify(w)
  }, 15000, 200).catch(e => {
    throw new Failure(`${e.message}: fetchOffsets ${JSON.stringify(last)}, want ${JSON.stringify(w)}`)
  })
  ok(`${what}: fetchOffsets = ${JSON.stringify(w)}`)
}

async function describeGroup(groupId) {
  const d = await within(STEP_MS, 'describeGroups', () => admin.describeGroups([groupId]))
  check(d.groups.length === 1 && d.groups[0].groupId === groupId, `describeGroups: ${JSON.stringify(d)}`)
  return d.groups[0]
}

async function listGroupIds() {
  const l = await within(STEP_MS, 'listGroups', () => admin.listGroups())
  return l.groups
}

async function groups() {
  const group = `kafkajs-g-${RUN}`
  const p = await producer()
  let produced = await produceGroupRecords(p, 0, 300)
  ok(`produced 300 records to ${topics.group} (6 partitions) before the group formed`)

  const a = await new Reader('kjs-a', group, topics.group).start()
  await waitSplit([a], [6], 'kjs-a alone holds 6 partitions')
  ok('kjs-a joined alone: all 6 partitions')
  const b = await new Reader('kjs-b', group, topics.group).start()
  const split = await waitSplit([a, b], [3, 3], 'kjs-a and kjs-b split 3/3')
  ok(`kjs-a and kjs-b split the partitions 3/3: [${[...split[0]].sort()}] / [${[...split[1]].sort()}]`)
  const second = await produceGroupRecords(p, 300, 300)
  produced = produced.concat(second)
  await waitConsumed([a, b], produced, '600 records consumed')
  await sleep(1000)
  checkExactlyOnce([a, b], produced, '600 records (300 produced before the group formed)')
  const owner = new Map()
  split.forEach((s, i) => s.forEach(pt => owner.set(pt, [a, b][i])))
  const wrong = second.filter(r => !owner.get(r.partition).records.some(x => addr(x) === addr(r)))
  checkOk(wrong.length === 0, `each of the 300 records produced after the split was consumed by its partition's owner (${wrong.length} not)`)
  await waitCommitted(group, endOffsets(produced), 'committed offsets = end offsets')

  let d = await describeGroup(group)
  check(d.state === 'Stable' && d.protocolType === 'consumer' && d.protocol === 'RoundRobinAssigner' && d.errorCode === 0,
    `describeGroups (2 members): state ${d.state} protocolType ${d.protocolType} protocol ${d.protocol} error ${d.errorCode}`)
  check(d.members.length === 2, `describeGroups: ${d.members.length} members, want 2`)
  const ids = new Set(d.members.map(m => m.memberId))
  check(ids.has(a.memberId) && ids.has(b.memberId), `describeGroups: member ids ${[...ids]}, want ${a.memberId} and ${b.memberId}`)
  const described = d.members.map(m => {
    const ma = AssignerProtocol.MemberAssignment.decode(m.memberAssignment)
    return (ma.assignment[topics.group] || []).map(Number).sort()
  })
  check(described.every(x => x.length === 3) && new Set(described.flat()).size === 6,
    `describeGroups: member assignments ${JSON.stringify(described)}`)
  check(d.members.every(m => m.clientId === 'strand-interop-kafkajs' && m.clientHost.length > 0),
    `describeGroups: client ids/hosts ${JSON.stringify(d.members.map(m => [m.clientId, m.clientHost]))}`)
  ok(`describeGroups ${group}: Stable, consumer/RoundRobinAssigner, 2 members with their ids, client id and 3 partitions each`)
  const listed = await listGroupIds()
  const mine = listed.find(g => g.groupId === group)
  checkOk(mine && mine.protocolType === 'consumer', `listGroups: lists ${group} with protocol type consumer (${JSON.stringify(mine)})`)

  await b.stop()
  await waitSplit([a], [6], 'after kjs-b left')
  ok('kjs-b disconnected (LeaveGroup): kjs-a holds all 6 partitions')
  const third = await produceGroupRecords(p, 600, 60)
  produced = produced.concat(third)
  await waitConsumed([a, b], produced, 'records after kjs-b left')
  await sleep(1000)
  checkExactlyOnce([a, b], produced, '660 records after kjs-b left')

  await a.stop()
  const ends = endOffsets(produced)
  await waitCommitted(group, ends, 'after kjs-a stopped, committed offsets = end offsets')
  d = await describeGroup(group)
  checkOk(d.state === 'Empty' && d.members.length === 0 && d.protocolType === 'consumer',
    `describeGroups after every member left: Empty, no members (${d.state}, ${d.members.length}, ${d.protocolType})`)

  const fourth = await produceGroupRecords(p, 660, 60)
  const c = await new Reader('kjs-a-restarted', group, topics.group).start()
  await waitConsumed([c], fourth, 'restarted consumer')
  await sleep(1500)
  checkExactlyOnce([c], fourth, 'restarted consumer reads only the 60 records after the commit')
  const firsts = new Array(GP).fill(null)
  for (const r of c.records) if (firsts[r.partition] === null) firsts[r.partition] = r.offset
  checkOk(JSON.stringify(firsts) === JSON.stringify(ends), `restarted consumer started each partition at its committed offset ${JSON.stringify(ends)} (${JSON.stringify(firsts)})`)
  await c.stop()
  produced = produced.concat(fourth)
  const finalEnds = endOffsets(produced)
  await waitCommitted(group, finalEnds, 'after the restarted consumer stopped, committed offsets = end offsets')

  // resetOffsets (earliest) commits -2 (EARLIEST) for every partition, through a consumer
  // of its own that joins the (empty) group; fetchOffsets(resolveOffsets) turns it into
  // the log start offsets and commits those.
  await within(STEP_MS, 'resetOffsets', () => admin.resetOffsets({ groupId: group, topic: topics.group, earliest: true }))
  await waitCommitted(group, new Array(GP).fill(-2), 'resetOffsets(earliest)')
  const resolved = await within(STEP_MS, 'fetchOffsets(resolveOffsets)', () =>
    admin.fetchOffsets({ groupId: group, topics: [topics.group], resolveOffsets: true })
  )
  checkOk(resolved[0].partitions.every(x => x.offset === '0'), `fetchOffsets(resolveOffsets) after the reset: ${JSON.stringify(resolved[0].partitions.map(x => x.offset))}, want all 0`)
  await waitCommitted(group, new Array(GP).fill(0), 'fetchOffsets(resolveOffsets) committed the resolved offsets')

  const target = [...Array(GP).keys()].map(pt => pt * 10)
  await within(STEP_MS, 'setOffsets', () => admin.setOffsets({
    groupId: group,
    topic: topics.group,
    partitions: target.map((o, pt) => ({ partition: pt, offset: String(o) })),
  }))
  await waitCommitted(group, target, 'setOffsets')
  const want = produced.filter(r => r.offset >= target[r.partition])
  const e = await new Reader('kjs-after-setOffsets', group, topics.group).start()
  await waitConsumed([e], want, 'consumer after setOffsets')
  await sleep(1500)
  checkExactlyOnce([e], want, `consumer after setOffsets reads from ${JSON.stringify(target)}`)
  await e.stop()

  const del = await within(STEP_MS, 'deleteGroups', () => admin.deleteGroups([group]))
  checkOk(del.length === 1 && del[0].groupId === group && del[0].errorCode === 0, `deleteGroups ${group}: ${JSON.stringify(del)}`)
  const after = await listGroupIds()
  checkOk(!after.some(g => g.groupId === group), `listGroups: ${group} no longer listed`)
  d = await describeGroup(group)
  checkOk(d.state === 'Dead' && d.members.length === 0, `describeGroups of the deleted group: ${d.state}, ${d.members.length} members`)
  await closeClient(p)
}

// --- 7. transactions

async function transactions() {
  const txGroup = `kafkajs-txgroup-${RUN}`
  const tp = await producer({ transactionalId: `kafkajs-tx-${RUN}`, idempotent: true, maxInFlightRequests: 1, retry: { retries: 5 } })
  const recs = tag => {
    const n = { c1: 5, a: 4, c2: 3 }[tag]
    const out = []
    for (let pt = 0; pt < 2; pt++) {
      for (let i = 0; i < n; i++) out.push({ key: Buffer.from(`${tag}-${pt}-${i}`), value: Buffer.from(`${tag} value ${i}`), headers: { txn: Buffer.from(tag) }, timestamp: String(Date.now()), partition: pt, offset: -1, tag })
    }
    return out
  }
  const txn = async (tag, groupOffset, commit) => {
    const what = `transaction ${tag}`
    const t = await within(STEP_MS, `${what}: begin`, () => tp.transaction())
    const rs = recs(tag)
    await sendAndPlace(t, topics.txn, rs, { acks: -1 }, `${what}: send`)
    await within(STEP_MS, `${what}: sendOffsets`, () => t.sendOffsets({
      consumerGroupId: txGroup,
      topics: [{ topic: topics.main, partitions: [{ partition: 0, offset: String(groupOffset) }] }],
    }))
    await within(STEP_MS, `${what}: ${commit ? 'commit' : 'abort'}`, () => (commit ? t.commit() : t.abort()))
    ok(`${what}: ${rs.length} records sent, offsets sent for ${txGroup}, ${commit ? 'committed' : 'aborted'}`)
    return rs
  }
  const c1 = await txn('c1', 7, true)
  const ab = await txn('a', 9, false)
  const c2 = await txn('c2', 11, true)
  // Each transaction ends with a control record that takes an offset: c1 at 0..4 (marker
  // 5), a at 6..9 (marker 10), c2 at 11..13 (marker 14).
  for (const [rs, first] of [[c1, 0], [ab, 6], [c2, 11]]) {
    for (const pt of [0, 1]) {
      const got = rs.filter(r => r.partition === pt).map(r => r.offset)
      check(got[0] === first && got.every((o, i) => o === first + i),
        `transactional produce ${rs[0].tag}[${pt}]: offsets ${got}, want from ${first} (after the previous transaction's marker)`)
    }
  }
  ok('transactional produce: acknowledged offsets leave one offset for each transaction marker (0..4, 6..9, 11..13)')
  await closeClient(tp)

  // Kafka answers EndTxn before it writes the markers, so the last one lands a moment later.
  let offs
  await waitFor('transaction markers written', async () => {
    offs = await admin.fetchTopicOffsets(topics.txn)
    return offs.every(o => Number(o.high) >= 15)
  }, 15000, 50).catch(() => {})
  checkOk(offs.every(o => o.high === '15' && o.low === '0'), `fetchTopicOffsets ${topics.txn}: high watermark 15 in each partition (5 + 4 + 3 records and 3 transaction markers): ${offs.map(o => o.high)}`)

  const checkRead = (got, want, what) => {
    check(got.length === want.length, `${what}: ${got.length} records, want ${want.length}: ${got.map(r => `${r.partition}@${r.offset}:${r.key}`).slice(0, 30)}`)
    for (const pt of [0, 1]) {
      const g = got.filter(r => r.partition === pt)
      const w = want.filter(r => r.partition === pt)
      w.forEach((x, i) => {
        const r = g[i]
        check(r && r.offset === x.offset && bufEq(r.key, x.key) && bufEq(r.value, x.value) && bufEq(r.headers.txn, x.headers.txn),
          `${what}: ${topics.txn}[${pt}] position ${i}: ${r && `${r.offset} ${r.key}`}, want ${x.offset} ${x.key}`)
        check(r.batchContext.inTransaction && Number(r.batchContext.producerId) >= 0, `${what}: ${x.key} not in a transactional batch`)
      })
    }
  }
  const committedOnly = c1.concat(c2)
  const rc = await readAll('txn-read-committed', topics.txn, committedOnly.length)
  checkRead(rc, committedOnly, 'read_committed')
  ok(`read_committed: exactly the ${committedOnly.length} committed records (offsets 0..4 and 11..13), the aborted ones invisible`)
  const everything = c1.concat(ab, c2)
  const ru = await readAll('txn-read-uncommitted', topics.txn, everything.length, { readUncommitted: true })
  checkRead(ru, everything, 'read_uncommitted')
  ok(`read_uncommitted: all ${everything.length} records, aborted ones included, no control records`)

  const go = await within(STEP_MS, 'fetchOffsets txgroup', () => admin.fetchOffsets({ groupId: txGroup, topics: [topics.main] }))
  const p0 = go[0].partitions.find(x => x.partition === 0)
  checkOk(p0 && p0.offset === '11', `sendOffsets: ${txGroup} has ${topics.main}[0] at ${p0 && p0.offset}, want 11 (the last committed transaction's, not the aborted one's 9)`)
}

// --- 8. deleteTopicRecords, deleteTopics

async function cleanup() {
  await within(STEP_MS, 'deleteTopicRecords', () =>
    admin.deleteTopicRecords({ topic: topics.main, partitions: [{ partition: 0, offset: '10' }] })
  )
  const offs = await within(STEP_MS, 'fetchTopicOffsets', () => admin.fetchTopicOffsets(topics.main))
  const p0 = offs.find(o => o.partition === 0)
  const p1 = offs.find(o => o.partition === 1)
  checkOk(p0.low === '10' && p1.low === '0', `deleteTopicRecords ${topics.main}[0] before 10: log start offsets ${offs.map(o => o.low)}`)

  const names = Object.values(topics)
  await within(STEP_MS, 'deleteTopics', () => admin.deleteTopics({ topics: names, timeout: 10000 }))
  const left = await waitFor('deleted topics gone from listTopics', async () => {
    const l = await admin.listTopics()
    return names.every(t => !l.includes(t)) ? l : null
  }, STEP_MS, 250)
  checkOk(names.every(t => !left.includes(t)), `deleteTopics: ${names.length} topics deleted, listTopics no longer lists them`)
}

async function main() {
  const started = Date.now()
  const watchdog = setTimeout(() => {
    console.error(`FAIL: watchdog: run exceeded ${OVERALL_MS} ms`)
    process.exit(2)
  }, OVERALL_MS)
  console.log(`KafkaJS ${require('kafkajs/package.json').version} interop against ${bootstrap}`)
  let status = 0
  admin = kafka.admin({ retry: { retries: 5, initialRetryTime: 200, maxRetryTime: 3000 } })
  try {
    await within(STEP_MS, 'admin connect', () => admin.connect())
    await createTopics()
    const all = await produceAll()
    await consumeAll(all)
    await offsets(all)
    await configsAndErrors()
    await groups()
    await transactions()
    await cleanup()
  } catch (e) {
    status = 1
    if (e instanceof Failure) console.error(`FAIL: ${e.message}`)
    else console.error(`FAIL: unexpected error ${errorTypes(e)}: ${e.stack}`)
  }
  for (const c of [...toClose]) {
    await within(10000, 'disconnect', () => c.disconnect()).catch(() => {})
  }
  await within(10000, 'admin disconnect', () => admin.disconnect()).catch(() => {})
  clearTimeout(watchdog)
  const secs = ((Date.now() - started) / 1000).toFixed(1)
  console.log(status === 0 ? `kafkajs: all checks passed in ${secs}s` : `kafkajs: FAILED after ${secs}s`)
  process.exit(status)
}

main()
