// Command sarama drives a Strand broker (or any Kafka broker) with IBM/sarama and checks
// that it behaves as Apache Kafka does. Sarama picks every request version from
// config.Version (clamped to what the broker advertises in ApiVersions), so the same
// checks run once per -version (interop/sarama/run.sh runs the newest version Sarama
// knows and 2.1.0):
//
//   - ClusterAdmin: CreateTopic (3 and 6 partitions), ErrTopicAlreadyExists, DescribeTopics,
//     DescribeCluster, ListTopics, DescribeConfig / AlterConfig (AlterConfig replaces the
//     topic's whole config set), CreatePartitions (ErrInvalidPartitions for fewer),
//     DeleteRecords, DeleteTopic;
//   - SyncProducer: keys, headers (binary, empty, a repeated key), explicit timestamps,
//     every codec (none, gzip, snappy, lz4, zstd), acks all and 1, the idempotent producer;
//     acknowledged offsets exact;
//   - raw Fetch: every compressed batch comes back with the producer's codec, idempotent
//     batches carry a producer id;
//   - Consumer: partition consumers from the oldest offset and from a given offset, every
//     field checked; GetOffset by timestamp, oldest and newest;
//   - ConsumerGroup: two members split 6 partitions 3/3, every record exactly once,
//     offsets committed, Close (LeaveGroup) hands the partitions over, a restarted member
//     resumes at the commit; ListConsumerGroups, DescribeConsumerGroups,
//     ListConsumerGroupOffsets, DeleteConsumerGroup;
//   - transactions: commit visible and abort invisible under ReadCommitted, both under
//     ReadUncommitted, markers take offsets, AddOffsetsToTxn moves the group's offsets only
//     on commit;
//   - errors: records over the topic's and the broker's max.message.bytes fail with
//     ErrMessageSizeTooLarge from the broker (the Produce request was sent) and append
//     nothing.
//
// It prints one "ok: ..." line per passed check and exits 1 after "FAIL: ..." on the first
// failure. Every wait has a deadline, and a watchdog ends the run if it overstays.
//
//	STRAND_BOOTSTRAP  broker address (default 127.0.0.1:9092)
//	STRAND_SECURITY_PROTOCOL and the rest of security.go: TLS and SASL PLAIN
//	STRAND_SARAMA_LOG if non-empty, Sarama's own log goes to stderr
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
)

const (
	stepTimeout    = 30 * time.Second
	overallTimeout = 6 * time.Minute
	perCodec       = 50
	codecSpanMs    = int64(100_000)
	stepMs         = int64(10)
	groupParts     = 6
)

var (
	bootstrap string
	version   sarama.KafkaVersion
	run       string
	adm       sarama.ClusterAdmin
	client    sarama.Client
	nodeID    int32
	topics    struct{ main, conf, group, txn string }
	baseTs    int64
	maxWrite  atomic.Int64 // the largest single write to a broker connection (one request)
	// All bytes written to broker connections: under TLS a request leaves in records of
	// at most 16 KiB, so only the total tells that a large one was sent.
	totalWrite atomic.Int64
)

type failure struct{ msg string }

func fail(format string, args ...any) { panic(failure{fmt.Sprintf(format, args...)}) }

func check(cond bool, format string, args ...any) {
	if !cond {
		fail(format, args...)
	}
}

func ok(format string, args ...any) { fmt.Printf("ok: "+format+"\n", args...) }

func checkOk(cond bool, format string, args ...any) {
	check(cond, format, args...)
	ok(format, args...)
}

// within runs f under a deadline: Sarama's calls have timeouts of their own, this is the
// backstop that names the step that hung.
func within[T any](what string, f func() (T, error)) T {
	type res struct {
		v   T
		err error
	}
	ch := make(chan res, 1)
	go func() {
		v, err := f()
		ch <- res{v, err}
	}()
	select {
	case r := <-ch:
		check(r.err == nil, "%s: %v", what, r.err)
		return r.v
	case <-time.After(stepTimeout):
		fail("%s: no answer within %v", what, stepTimeout)
	}
	panic("unreachable")
}

// withinErr is within for calls whose error is the result.
func withinErr(what string, f func() error) error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	select {
	case err := <-ch:
		return err
	case <-time.After(stepTimeout):
		fail("%s: no answer within %v", what, stepTimeout)
	}
	panic("unreachable")
}

func waitFor(what string, d time.Duration, cond func() bool) {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			fail("%s: not reached within %v", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// countingDialer records the size of every write to a broker: Sarama writes each request
// with one Write, so the largest tells whether a too-large record was sent at all.
type countingDialer struct{ d net.Dialer }

type countingConn struct{ net.Conn }

func (c countingConn) Write(b []byte) (int, error) {
	totalWrite.Add(int64(len(b)))
	for {
		cur := maxWrite.Load()
		if int64(len(b)) <= cur || maxWrite.CompareAndSwap(cur, int64(len(b))) {
			break
		}
	}
	return c.Conn.Write(b)
}

func (cd *countingDialer) Dial(network, addr string) (net.Conn, error) {
	c, err := cd.d.Dial(network, addr)
	if err != nil {
		return nil, err
	}
	return countingConn{c}, nil
}

func newConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = version
	c.ClientID = "strand-interop-sarama"
	c.Net.DialTimeout = 5 * time.Second
	c.Net.ReadTimeout = 20 * time.Second
	c.Net.WriteTimeout = 10 * time.Second
	c.Net.Proxy.Enable = true
	c.Net.Proxy.Dialer = &countingDialer{net.Dialer{Timeout: 5 * time.Second}}
	c.Metadata.AllowAutoTopicCreation = false
	c.Metadata.Retry.Max = 5
	c.Metadata.Retry.Backoff = 200 * time.Millisecond
	c.Admin.Timeout = 15 * time.Second
	c.Admin.Retry.Max = 5
	c.Producer.Return.Successes = true
	c.Producer.Timeout = 10 * time.Second
	c.Producer.Retry.Max = 3
	c.Producer.Retry.Backoff = 200 * time.Millisecond
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Consumer.Return.Errors = true
	c.Consumer.MaxWaitTime = 250 * time.Millisecond
	if err := applySecurity(c); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		os.Exit(2)
	}
	return c
}

func main() {
	ver := flag.String("version", "max", `Sarama config.Version: "max" (sarama.MaxVersion) or a Kafka version such as 2.1.0`)
	flag.Parse()
	bootstrap = os.Getenv("STRAND_BOOTSTRAP")
	if bootstrap == "" {
		bootstrap = "127.0.0.1:9092"
	}
	if *ver == "max" {
		version = sarama.MaxVersion
	} else {
		v, err := sarama.ParseKafkaVersion(*ver)
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: -version %q: %v\n", *ver, err)
			os.Exit(2)
		}
		version = v
	}
	if os.Getenv("STRAND_SARAMA_LOG") != "" {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags|log.Lmicroseconds)
	}
	time.AfterFunc(overallTimeout, func() {
		fmt.Fprintf(os.Stderr, "FAIL: watchdog: run exceeded %v (Sarama %s)\n", overallTimeout, version)
		os.Exit(2)
	})
	start := time.Now()
	vtag := strings.ReplaceAll(version.String(), ".", "")
	run = fmt.Sprintf("%s-%d", vtag, time.Now().UnixNano())
	topics.main = "sarama-" + run
	topics.conf = "sarama-conf-" + run
	topics.group = "sarama-group-" + run
	topics.txn = "sarama-txn-" + run
	baseTs = time.Now().Add(-time.Hour).UnixMilli() / 1000 * 1000
	fmt.Printf("Sarama (config.Version %s) interop against %s\n", version, bootstrap)

	status := 0
	func() {
		defer func() {
			if r := recover(); r != nil {
				f, isFailure := r.(failure)
				if !isFailure {
					panic(r)
				}
				fmt.Fprintf(os.Stderr, "FAIL: [Sarama %s] %s\n", version, f.msg)
				status = 1
			}
		}()
		var err error
		client, err = sarama.NewClient([]string{bootstrap}, newConfig())
		check(err == nil, "NewClient: %v", err)
		adm, err = sarama.NewClusterAdminFromClient(client)
		check(err == nil, "NewClusterAdminFromClient: %v", err)
		createTopics()
		all := produceAll()
		fetchCodecs(all)
		consumeAll(all)
		offsets(all)
		configsAndErrors()
		groups()
		transactions()
		cleanup()
	}()
	if adm != nil {
		_ = adm.Close() // closes client too
	}
	if status == 0 {
		fmt.Printf("sarama %s: all checks passed in %v\n", version, time.Since(start).Round(time.Millisecond))
	} else {
		fmt.Printf("sarama %s: FAILED after %v\n", version, time.Since(start).Round(time.Millisecond))
	}
	os.Exit(status)
}

// --- 1. topics, metadata, cluster

func createTopics() {
	for _, t := range []struct {
		name string
		n    int32
	}{{topics.main, 3}, {topics.conf, 3}, {topics.group, groupParts}, {topics.txn, 2}} {
		err := withinErr("CreateTopic", func() error {
			return adm.CreateTopic(t.name, &sarama.TopicDetail{NumPartitions: t.n, ReplicationFactor: 1}, false)
		})
		checkOk(err == nil, "CreateTopic %s (%d partitions): %v", t.name, t.n, err)
	}
	// Kafka answers CreateTopics before its own Metadata and ListOffsets see every new
	// partition: wait for them (Strand has them at once).
	for _, t := range []string{topics.main, topics.conf, topics.group, topics.txn} {
		waitReady(t)
	}
	err := withinErr("CreateTopic (repeat)", func() error {
		return adm.CreateTopic(topics.main, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false)
	})
	checkOk(errors.Is(err, sarama.ErrTopicAlreadyExists), "CreateTopic (repeat) %s: %v (want ErrTopicAlreadyExists)", topics.main, err)

	type cl struct {
		brokers    []*sarama.Broker
		controller int32
	}
	c := within("DescribeCluster", func() (cl, error) {
		b, ctl, err := adm.DescribeCluster()
		return cl{b, ctl}, err
	})
	check(len(c.brokers) == 1, "DescribeCluster: %d brokers, want 1", len(c.brokers))
	b := c.brokers[0]
	check(b.Addr() == bootstrap, "DescribeCluster: broker at %s, want %s (the bootstrap address)", b.Addr(), bootstrap)
	check(c.controller == b.ID(), "DescribeCluster: controller %d, want %d", c.controller, b.ID())
	nodeID = b.ID()
	ok("DescribeCluster: one broker, node %d at %s, controller %d", nodeID, b.Addr(), c.controller)

	md := within("DescribeTopics", func() ([]*sarama.TopicMetadata, error) {
		return adm.DescribeTopics([]string{topics.main, topics.group})
	})
	check(len(md) == 2, "DescribeTopics: %d topics, want 2", len(md))
	for _, t := range md {
		want := 3
		if t.Name == topics.group {
			want = groupParts
		}
		check(t.Err == sarama.ErrNoError, "DescribeTopics %s: %v", t.Name, t.Err)
		check(len(t.Partitions) == want, "DescribeTopics %s: %d partitions, want %d", t.Name, len(t.Partitions), want)
		if version.IsAtLeast(sarama.V2_8_0_0) {
			check(t.Uuid != sarama.Uuid{}, "DescribeTopics %s: topic id is all zero (Metadata v10+)", t.Name)
		}
		seen := map[int32]bool{}
		for _, p := range t.Partitions {
			seen[p.ID] = true
			check(p.Err == sarama.ErrNoError, "DescribeTopics %s[%d]: %v", t.Name, p.ID, p.Err)
			check(p.Leader == nodeID, "DescribeTopics %s[%d]: leader %d, want %d", t.Name, p.ID, p.Leader, nodeID)
			check(len(p.Replicas) == 1 && p.Replicas[0] == nodeID && len(p.Isr) == 1 && p.Isr[0] == nodeID,
				"DescribeTopics %s[%d]: replicas %v isr %v", t.Name, p.ID, p.Replicas, p.Isr)
		}
		for i := 0; i < want; i++ {
			check(seen[int32(i)], "DescribeTopics %s: partition %d missing", t.Name, i)
		}
		ok("DescribeTopics %s: %d partitions, leader/replicas/isr node %d, no errors", t.Name, want, nodeID)
	}
	listed := within("ListTopics", func() (map[string]sarama.TopicDetail, error) { return adm.ListTopics() })
	for _, t := range []string{topics.main, topics.conf, topics.group, topics.txn} {
		check(listed[t].NumPartitions > 0, "ListTopics: %s missing or without partitions: %+v", t, listed[t])
	}
	checkOk(listed[topics.group].NumPartitions == groupParts && listed[topics.group].ReplicationFactor == 1,
		"ListTopics: lists the 4 topics (%s: %d partitions, RF %d)", topics.group, listed[topics.group].NumPartitions, listed[topics.group].ReplicationFactor)
}

// waitReady waits until Metadata lists the topic with a leader for every partition and
// ListOffsets answers for each.
func waitReady(topic string) {
	waitFor(topic+": Metadata and ListOffsets answer for every partition", stepTimeout, func() bool {
		md, err := adm.DescribeTopics([]string{topic})
		if err != nil || len(md) != 1 || md[0].Err != sarama.ErrNoError || len(md[0].Partitions) == 0 {
			return false
		}
		if client.RefreshMetadata(topic) != nil {
			return false
		}
		for _, p := range md[0].Partitions {
			if p.Err != sarama.ErrNoError || p.Leader < 0 {
				return false
			}
			if _, err := client.GetOffset(topic, p.ID, sarama.OffsetNewest); err != nil {
				return false
			}
		}
		return true
	})
}

// --- 2. produce

type codec struct {
	name string
	c    sarama.CompressionCodec
	acks sarama.RequiredAcks
}

var codecs = []codec{
	{"none", sarama.CompressionNone, sarama.WaitForAll},
	{"gzip", sarama.CompressionGZIP, sarama.WaitForLocal},
	{"snappy", sarama.CompressionSnappy, sarama.WaitForAll},
	{"lz4", sarama.CompressionLZ4, sarama.WaitForLocal},
	{"zstd", sarama.CompressionZSTD, sarama.WaitForAll},
}

type sent struct {
	codec      sarama.CompressionCodec
	key, value []byte
	headers    []sarama.RecordHeader
	ts         int64
	partition  int32
	offset     int64
	idempotent bool
}

func makeRecord(name string, c sarama.CompressionCodec, ci, i int) *sent {
	unit := fmt.Sprintf("value-%s-%d|", name, i)
	return &sent{
		codec: c,
		key:   []byte(fmt.Sprintf("key-%s-%d", name, i)),
		value: []byte(strings.Repeat(unit, 8+i%13*5)),
		headers: []sarama.RecordHeader{
			{Key: []byte("codec"), Value: []byte(name)},
			{Key: []byte("seq"), Value: []byte{byte(ci), byte(i), 0x00, 0xff}},
			{Key: []byte("dup"), Value: []byte(fmt.Sprintf("first-%d", i))},
			{Key: []byte("empty"), Value: []byte{}},
			{Key: []byte("dup"), Value: []byte(fmt.Sprintf("second-%d", i))},
		},
		ts:        baseTs + int64(ci)*codecSpanMs + int64(i)*stepMs,
		partition: int32(i % 3),
		offset:    -1,
	}
}

func syncProducer(what string, cfg *sarama.Config) sarama.SyncProducer {
	return within(what, func() (sarama.SyncProducer, error) { return sarama.NewSyncProducer([]string{bootstrap}, cfg) })
}

// sendAll sends the records with one SendMessages call and fills in their offsets.
func sendAll(p sarama.SyncProducer, topic string, recs []*sent, what string) {
	msgs := make([]*sarama.ProducerMessage, len(recs))
	for i, r := range recs {
		msgs[i] = &sarama.ProducerMessage{
			Topic:     topic,
			Partition: r.partition,
			Key:       sarama.ByteEncoder(r.key),
			Value:     sarama.ByteEncoder(r.value),
			Headers:   r.headers,
			Timestamp: time.UnixMilli(r.ts),
		}
	}
	err := withinErr(what, func() error { return p.SendMessages(msgs) })
	if err != nil {
		var pe sarama.ProducerErrors
		if errors.As(err, &pe) && len(pe) > 0 {
			fail("%s: %d of %d records failed, first: %v", what, len(pe), len(msgs), pe[0].Err)
		}
		fail("%s: %v", what, err)
	}
	for i, m := range msgs {
		check(m.Partition == recs[i].partition, "%s: %s acknowledged on partition %d, sent to %d", what, recs[i].key, m.Partition, recs[i].partition)
		recs[i].offset = m.Offset
	}
}

func produceAll() []*sent {
	var all []*sent
	next := map[int32]int64{}
	place := func(recs []*sent, what string) {
		for _, r := range recs {
			check(r.offset == next[r.partition], "%s: %s acknowledged at %s[%d]@%d, want offset %d (offsets 0..n-1 in produce order)", what, r.key, topics.main, r.partition, r.offset, next[r.partition])
			next[r.partition]++
		}
		all = append(all, recs...)
	}
	for ci, c := range codecs {
		cfg := newConfig()
		cfg.Producer.RequiredAcks = c.acks
		cfg.Producer.Compression = c.c
		p := syncProducer("NewSyncProducer "+c.name, cfg)
		var recs []*sent
		for i := 0; i < perCodec; i++ {
			recs = append(recs, makeRecord(c.name, c.c, ci, i))
		}
		what := fmt.Sprintf("produce %s (acks %d)", c.name, c.acks)
		sendAll(p, topics.main, recs, what)
		place(recs, what)
		check(p.Close() == nil, "%s: close", what)
		ok("%s: %d records with keys, 5 headers and explicit timestamps acknowledged at the expected offsets", what, perCodec)
	}

	// The idempotent producer: InitProducerId, sequence numbers, acks all, one request in flight.
	for k, c := range []codec{codecs[4], codecs[0]} {
		cfg := newConfig()
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Compression = c.c
		p := syncProducer("NewSyncProducer idempotent", cfg)
		for round := 0; round < 2; round++ {
			var recs []*sent
			for i := 0; i < 20; i++ {
				r := makeRecord(fmt.Sprintf("idem-%s-%d", c.name, round), c.c, 5+k, round*20+i)
				r.idempotent = true
				recs = append(recs, r)
			}
			what := fmt.Sprintf("idempotent produce %s round %d (acks all)", c.name, round)
			sendAll(p, topics.main, recs, what)
			place(recs, what)
			ok("%s: 20 records acknowledged at the expected offsets", what)
		}
		check(p.Close() == nil, "idempotent producer close")
	}
	return all
}

func perPartition(all []*sent) map[int32][]*sent {
	m := map[int32][]*sent{}
	for _, s := range all {
		m[s.partition] = append(m[s.partition], s)
	}
	for _, ss := range m {
		sort.Slice(ss, func(i, j int) bool { return ss[i].offset < ss[j].offset })
	}
	return m
}

// --- 3. raw Fetch: batch codecs and producer ids

func fetchCodecs(all []*sent) {
	leader := within("Leader", func() (*sarama.Broker, error) { return client.Leader(topics.main, 0) })
	byOffset := map[int32]map[int64]*sent{}
	for _, s := range all {
		if byOffset[s.partition] == nil {
			byOffset[s.partition] = map[int64]*sent{}
		}
		byOffset[s.partition][s.offset] = s
	}
	compressed := map[sarama.CompressionCodec]int{}
	for p := int32(0); p < 3; p++ {
		var off int64
		want := int64(len(byOffset[p]))
		deadline := time.Now().Add(stepTimeout)
		for off < want {
			check(time.Now().Before(deadline), "raw Fetch %s[%d]: stuck at offset %d of %d", topics.main, p, off, want)
			req := &sarama.FetchRequest{MaxWaitTime: 100, MinBytes: 1, MaxBytes: 4 << 20, Isolation: sarama.ReadUncommitted}
			req.Version = 4 // record batches; every Kafka 4 broker serves v4
			req.AddBlock(topics.main, p, off, 4<<20, -1)
			resp := within("raw Fetch", func() (*sarama.FetchResponse, error) { return leader.Fetch(req) })
			blk := resp.GetBlock(topics.main, p)
			check(blk != nil && blk.Err == sarama.ErrNoError, "raw Fetch %s[%d]@%d: %+v", topics.main, p, off, blk)
			check(blk.HighWaterMarkOffset == want, "raw Fetch %s[%d]: high watermark %d, want %d", topics.main, p, blk.HighWaterMarkOffset, want)
			for _, rs := range blk.RecordsSet {
				rb := rs.RecordBatch
				check(rb != nil, "raw Fetch %s[%d]@%d: not a record batch (magic 2)", topics.main, p, off)
				for _, rec := range rb.Records {
					o := rb.FirstOffset + rec.OffsetDelta
					if o < off {
						continue
					}
					s := byOffset[p][o]
					check(s != nil, "raw Fetch %s[%d]: record at offset %d was never produced", topics.main, p, o)
					check(rb.Codec == s.codec, "raw Fetch %s[%d]@%d (%s): batch codec %s, produced with %s (the broker must keep the producer's batches)", topics.main, p, o, s.key, rb.Codec, s.codec)
					if s.idempotent {
						check(rb.ProducerID >= 0 && rb.FirstSequence >= 0, "raw Fetch %s[%d]@%d: idempotent batch has producer id %d sequence %d", topics.main, p, o, rb.ProducerID, rb.FirstSequence)
					} else {
						check(rb.ProducerID == -1, "raw Fetch %s[%d]@%d: non-idempotent batch has producer id %d", topics.main, p, o, rb.ProducerID)
					}
					check(!rb.IsTransactional && !rb.Control && !rb.LogAppendTime, "raw Fetch %s[%d]@%d: batch flags transactional %v control %v log-append-time %v", topics.main, p, o, rb.IsTransactional, rb.Control, rb.LogAppendTime)
					if rb.Codec != sarama.CompressionNone && o == off {
						compressed[rb.Codec]++
					}
					check(o == off, "raw Fetch %s[%d]: offset %d after %d (a gap)", topics.main, p, o, off-1)
					off++
				}
			}
		}
	}
	for _, c := range codecs[1:] {
		check(compressed[c.c] > 0, "raw Fetch: no record came back in a %s batch", c.name)
	}
	ok("raw Fetch v4: every record in a batch with the producer's codec (records in gzip %d, snappy %d, lz4 %d, zstd %d batches), producer ids on the idempotent batches only",
		compressed[sarama.CompressionGZIP], compressed[sarama.CompressionSnappy], compressed[sarama.CompressionLZ4], compressed[sarama.CompressionZSTD])
}

// --- 4. partition consumers

func readPartition(cons sarama.Consumer, topic string, p int32, from int64, n int, what string) []*sarama.ConsumerMessage {
	pc := within(what+": ConsumePartition", func() (sarama.PartitionConsumer, error) { return cons.ConsumePartition(topic, p, from) })
	defer pc.AsyncClose()
	var got []*sarama.ConsumerMessage
	deadline := time.After(stepTimeout)
	for len(got) < n {
		select {
		case m := <-pc.Messages():
			got = append(got, m)
		case e := <-pc.Errors():
			fail("%s: consumer error: %v", what, e)
		case <-deadline:
			fail("%s: %d of %d records within %v", what, len(got), n, stepTimeout)
		}
	}
	// Anything more within a short while would be records that were never produced.
	extra := time.After(1500 * time.Millisecond)
	for {
		select {
		case m := <-pc.Messages():
			fail("%s: unexpected record at offset %d after the %d expected", what, m.Offset, n)
		case e := <-pc.Errors():
			fail("%s: consumer error: %v", what, e)
		case <-extra:
			return got
		}
	}
}

func checkRecord(where string, m *sarama.ConsumerMessage, s *sent) {
	check(m.Offset == s.offset, "%s: offset %d, want %d", where, m.Offset, s.offset)
	check(bytes.Equal(m.Key, s.key), "%s: key %q, want %q (out of produce order?)", where, m.Key, s.key)
	check(bytes.Equal(m.Value, s.value), "%s: value (%d bytes) %.40q, want (%d bytes) %.40q", where, len(m.Value), m.Value, len(s.value), s.value)
	check(len(m.Headers) == len(s.headers), "%s: %d headers, want %d", where, len(m.Headers), len(s.headers))
	for i, h := range s.headers {
		g := m.Headers[i]
		check(bytes.Equal(g.Key, h.Key) && bytes.Equal(g.Value, h.Value) && (g.Value != nil) == (h.Value != nil),
			"%s: header %d = %q:%q, want %q:%q (in order)", where, i, g.Key, g.Value, h.Key, h.Value)
	}
	check(m.Timestamp.UnixMilli() == s.ts, "%s: timestamp %d, want %d", where, m.Timestamp.UnixMilli(), s.ts)
}

func consumeAll(all []*sent) {
	cons := within("NewConsumer", func() (sarama.Consumer, error) { return sarama.NewConsumerFromClient(client) })
	pp := perPartition(all)
	for p := int32(0); p < 3; p++ {
		want := pp[p]
		got := readPartition(cons, topics.main, p, sarama.OffsetOldest, len(want), fmt.Sprintf("consume %s[%d] from oldest", topics.main, p))
		for i, s := range want {
			check(s.offset == int64(i), "internal: %s at %d", s.key, s.offset)
			checkRecord(fmt.Sprintf("consume %s[%d] position %d (produced %s)", topics.main, p, i, s.key), got[i], s)
		}
		ok("consume %s[%d] from oldest: %d records, offsets 0..%d in produce order; keys, values, 5 headers (binary, empty, repeated, in order), timestamps match", topics.main, p, len(got), len(got)-1)
	}
	// From a given offset.
	from := int64(37)
	want := pp[1][from:]
	got := readPartition(cons, topics.main, 1, from, len(want), fmt.Sprintf("consume %s[1] from offset %d", topics.main, from))
	for i, s := range want {
		checkRecord(fmt.Sprintf("consume %s[1] from %d, position %d", topics.main, from, i), got[i], s)
	}
	ok("consume %s[1] from offset %d: exactly the %d records from there on", topics.main, from, len(want))
	check(cons.Close() == nil, "consumer close")
}

// --- 5. offsets

func getOffset(topic string, p int32, t int64) int64 {
	return within("GetOffset", func() (int64, error) { return client.GetOffset(topic, p, t) })
}

func offsets(all []*sent) {
	pp := perPartition(all)
	for p := int32(0); p < 3; p++ {
		o, n := getOffset(topics.main, p, sarama.OffsetOldest), getOffset(topics.main, p, sarama.OffsetNewest)
		check(o == 0 && n == int64(len(pp[p])), "GetOffset %s[%d]: oldest %d newest %d, want 0 and %d", topics.main, p, o, n, len(pp[p]))
	}
	ok("GetOffset oldest 0, newest %d/%d/%d", len(pp[0]), len(pp[1]), len(pp[2]))
	ts := baseTs + 2*codecSpanMs + 25*stepMs + 5 // mid-way through snappy, between two records
	for p := int32(0); p < 3; p++ {
		var first *sent
		for _, s := range pp[p] {
			if s.ts >= ts {
				first = s
				break
			}
		}
		got := getOffset(topics.main, p, ts)
		check(got == first.offset, "GetOffset(%s[%d], time %d): %d, want %d (first record with timestamp >= it, %s)", topics.main, p, ts, got, first.offset, first.key)
		late := getOffset(topics.main, p, time.Now().Add(time.Hour).UnixMilli())
		check(late == -1, "GetOffset(%s[%d], a time after every record): %d, want -1", topics.main, p, late)
	}
	ok("GetOffset by timestamp: the first record at or after it in each partition; -1 after the last")
}

// --- 6. configs, partitions, too-large records

func describeConf(what string) map[string]sarama.ConfigEntry {
	es := within(what, func() ([]sarama.ConfigEntry, error) {
		return adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topics.conf, ConfigNames: []string{"retention.ms", "max.message.bytes", "cleanup.policy"}})
	})
	m := map[string]sarama.ConfigEntry{}
	for _, e := range es {
		m[e.Name] = e
	}
	check(len(es) == 3 && len(m) == 3, "%s: %d entries %v, want exactly retention.ms, max.message.bytes, cleanup.policy", what, len(es), es)
	return m
}

// describeConfAfter describes the topic until retention.ms shows the value just set: Kafka
// answers AlterConfigs before its broker's DescribeConfigs sees the change.
func describeConfAfter(what, retention string) map[string]sarama.ConfigEntry {
	var m map[string]sarama.ConfigEntry
	waitFor(what+": retention.ms = "+retention, 15*time.Second, func() bool {
		m = describeConf(what)
		return m["retention.ms"].Value == retention
	})
	return m
}

func checkEntry(what string, m map[string]sarama.ConfigEntry, name, value string, src sarama.ConfigSource) {
	e, found := m[name]
	check(found, "%s: %s missing", what, name)
	check(e.Value == value, "%s: %s = %q, want %q", what, name, e.Value, value)
	check(e.Source == src, "%s: %s source %v, want %v", what, name, e.Source, src)
	check(e.Default == (src == sarama.SourceDefault), "%s: %s default %v", what, name, e.Default)
	check(!e.ReadOnly && !e.Sensitive, "%s: %s read-only %v sensitive %v", what, name, e.ReadOnly, e.Sensitive)
}

func strp(s string) *string { return &s }

func produceBig(p sarama.SyncProducer, size int) (int64, error) {
	m := &sarama.ProducerMessage{Topic: topics.conf, Partition: 0, Key: sarama.StringEncoder("big"), Value: sarama.ByteEncoder(bytes.Repeat([]byte{'x'}, size))}
	err := withinErr("produce big", func() error { _, _, err := p.SendMessage(m); return err })
	return m.Offset, err
}

func tooLarge(p sarama.SyncProducer, size int, what string) {
	maxWrite.Store(0)
	totalWrite.Store(0)
	off, err := produceBig(p, size)
	check(err != nil, "%s: accepted at offset %d, want ErrMessageSizeTooLarge", what, off)
	check(errors.Is(err, sarama.ErrMessageSizeTooLarge), "%s: %v, want ErrMessageSizeTooLarge", what, err)
	sent := maxWrite.Load()
	if strings.Contains(strings.ToUpper(os.Getenv("STRAND_SECURITY_PROTOCOL")), "SSL") {
		sent = totalWrite.Load()
	}
	check(sent > int64(size), "%s: failed with %v but no request that large was written (%d bytes): rejected by Sarama, not by the broker", what, err, sent)
	ok("%s: a %d-byte Produce request was sent; the broker answered %v", what, sent, err)
}

func configsAndErrors() {
	what := "DescribeConfig (new topic)"
	m := describeConf(what)
	checkEntry(what, m, "retention.ms", "604800000", sarama.SourceDefault)
	checkEntry(what, m, "max.message.bytes", "1048588", sarama.SourceDefault)
	checkEntry(what, m, "cleanup.policy", "delete", sarama.SourceDefault)
	ok("%s %s: retention.ms 604800000, max.message.bytes 1048588, cleanup.policy delete, all defaults", what, topics.conf)

	err := withinErr("AlterConfig #1", func() error {
		return adm.AlterConfig(sarama.TopicResource, topics.conf, map[string]*string{"retention.ms": strp("86400000"), "max.message.bytes": strp("200000")}, false)
	})
	check(err == nil, "AlterConfig #1: %v", err)
	what = "DescribeConfig after AlterConfig #1"
	m = describeConfAfter(what, "86400000")
	checkEntry(what, m, "retention.ms", "86400000", sarama.SourceTopic)
	checkEntry(what, m, "max.message.bytes", "200000", sarama.SourceTopic)
	checkEntry(what, m, "cleanup.policy", "delete", sarama.SourceDefault)
	ok("AlterConfig retention.ms=86400000 max.message.bytes=200000: DescribeConfig shows both as topic configs")

	cfg := newConfig()
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.MaxMessageBytes = 16 << 20 // so Sarama itself lets the records through
	cfg.Producer.Retry.Max = 1
	p := syncProducer("NewSyncProducer (big)", cfg)
	defer p.Close()
	tooLarge(p, 300_000, "produce a 300000-byte record (topic max.message.bytes 200000)")
	checkOk(getOffset(topics.conf, 0, sarama.OffsetNewest) == 0, "%s[0] still empty after the rejected record", topics.conf)
	off, err := produceBig(p, 150_000)
	checkOk(err == nil && off == 0, "produce a 150000-byte record: accepted at offset %d (%v)", off, err)

	err = withinErr("AlterConfig #2", func() error {
		return adm.AlterConfig(sarama.TopicResource, topics.conf, map[string]*string{"retention.ms": strp("172800000")}, false)
	})
	check(err == nil, "AlterConfig #2: %v", err)
	what = "DescribeConfig after AlterConfig #2"
	m = describeConfAfter(what, "172800000")
	checkEntry(what, m, "retention.ms", "172800000", sarama.SourceTopic)
	checkEntry(what, m, "max.message.bytes", "1048588", sarama.SourceDefault)
	ok("AlterConfig retention.ms=172800000 alone: max.message.bytes back to its default 1048588 (AlterConfigs replaces the set)")
	off, err = produceBig(p, 300_000)
	checkOk(err == nil && off == 1, "produce a 300000-byte record (default max.message.bytes): accepted at offset %d (%v)", off, err)
	tooLarge(p, 2<<20, "produce a 2 MiB record (broker default max.message.bytes 1048588)")
	checkOk(getOffset(topics.conf, 0, sarama.OffsetNewest) == 2, "%s[0] newest offset 2 after the rejected 2 MiB record", topics.conf)

	err = withinErr("CreatePartitions", func() error { return adm.CreatePartitions(topics.conf, 5, nil, false) })
	check(err == nil, "CreatePartitions %s to 5: %v", topics.conf, err)
	waitFor("DescribeTopics shows 5 partitions", stepTimeout, func() bool {
		md, err := adm.DescribeTopics([]string{topics.conf})
		return err == nil && len(md) == 1 && len(md[0].Partitions) == 5
	})
	waitReady(topics.conf)
	for p := int32(3); p < 5; p++ {
		check(getOffset(topics.conf, p, sarama.OffsetNewest) == 0, "CreatePartitions: new partition %d not empty", p)
	}
	ok("CreatePartitions %s to 5: DescribeTopics shows 5 partitions; the new ones are empty", topics.conf)
	err = withinErr("CreatePartitions (fewer)", func() error { return adm.CreatePartitions(topics.conf, 4, nil, false) })
	checkOk(errors.Is(err, sarama.ErrInvalidPartitions), "CreatePartitions %s to 4 (from 5): %v (want ErrInvalidPartitions)", topics.conf, err)
}

// --- 7. consumer groups

type gsent struct {
	partition int32
	offset    int64
}

type member struct {
	name     string
	cg       sarama.ConsumerGroup
	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	records  []gsent
	assigned []int32
	memberID string
	errs     []string
}

func (m *member) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.assigned = append([]int32(nil), s.Claims()[topics.group]...)
	m.memberID = s.MemberID()
	return nil
}

func (m *member) Cleanup(sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.assigned = nil
	return nil
}

func (m *member) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		m.mu.Lock()
		m.records = append(m.records, gsent{msg.Partition, msg.Offset})
		m.mu.Unlock()
		s.MarkMessage(msg, "")
	}
	return nil
}

func startMember(name, group string) *member {
	cfg := newConfig()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Timeout = 20 * time.Second
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	cfg.ClientID = "strand-interop-sarama-" + name
	cg := within("NewConsumerGroup "+name, func() (sarama.ConsumerGroup, error) {
		return sarama.NewConsumerGroup([]string{bootstrap}, group, cfg)
	})
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{name: name, cg: cg, cancel: cancel, done: make(chan struct{})}
	go func() {
		for e := range cg.Errors() {
			m.mu.Lock()
			m.errs = append(m.errs, e.Error())
			m.mu.Unlock()
		}
	}()
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topics.group}, m); err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				m.mu.Lock()
				m.errs = append(m.errs, "Consume: "+err.Error())
				m.mu.Unlock()
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	return m
}

func (m *member) stop() {
	m.cancel()
	select {
	case <-m.done:
	case <-time.After(stepTimeout):
		fail("%s: Consume loop did not stop", m.name)
	}
	err := withinErr(m.name+" Close", func() error { return m.cg.Close() })
	checkOk(err == nil, "%s: closed (commits, LeaveGroup): %v", m.name, err)
}

func (m *member) snapshot() ([]int32, []gsent, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int32(nil), m.assigned...), append([]gsent(nil), m.records...), append([]string(nil), m.errs...)
}

func checkNoErrors(ms []*member, what string) {
	for _, m := range ms {
		_, _, errs := m.snapshot()
		check(len(errs) == 0, "%s: %s: errors %v", what, m.name, errs)
	}
}

func waitSplit(ms []*member, sizes []int, what string) [][]int32 {
	var got [][]int32
	waitFor(what, 60*time.Second, func() bool {
		checkNoErrors(ms, what)
		got = nil
		seen := map[int32]bool{}
		for i, m := range ms {
			a, _, _ := m.snapshot()
			if len(a) != sizes[i] {
				return false
			}
			for _, p := range a {
				seen[p] = true
			}
			got = append(got, a)
		}
		return len(seen) == groupParts
	})
	return got
}

func produceGroup(p sarama.SyncProducer, start, n int) []gsent {
	var recs []*sent
	for i := start; i < start+n; i++ {
		recs = append(recs, &sent{key: []byte(fmt.Sprintf("g-%d", i)), value: []byte(fmt.Sprintf("gv-%d", i)), ts: time.Now().UnixMilli(), partition: int32(i % groupParts)})
	}
	sendAll(p, topics.group, recs, fmt.Sprintf("produce %d records to %s", n, topics.group))
	out := make([]gsent, len(recs))
	for i, r := range recs {
		out[i] = gsent{r.partition, r.offset}
	}
	return out
}

func waitConsumed(ms []*member, want []gsent, what string) {
	waitFor(what, 60*time.Second, func() bool {
		checkNoErrors(ms, what)
		seen := map[gsent]bool{}
		for _, m := range ms {
			_, rs, _ := m.snapshot()
			for _, r := range rs {
				seen[r] = true
			}
		}
		for _, w := range want {
			if !seen[w] {
				return false
			}
		}
		return true
	})
}

func checkExactlyOnce(ms []*member, want []gsent, what string) {
	count := map[gsent]int{}
	var names []string
	for _, m := range ms {
		_, rs, _ := m.snapshot()
		for _, r := range rs {
			count[r]++
		}
		names = append(names, m.name)
	}
	expected := map[gsent]bool{}
	for _, w := range want {
		expected[w] = true
	}
	var dup, missing, unexpected []gsent
	for r, n := range count {
		if n > 1 {
			dup = append(dup, r)
		}
		if !expected[r] {
			unexpected = append(unexpected, r)
		}
	}
	for w := range expected {
		if count[w] == 0 {
			missing = append(missing, w)
		}
	}
	checkOk(len(dup) == 0 && len(missing) == 0 && len(unexpected) == 0,
		"%s: %d records consumed exactly once across %s (%d duplicated %v, %d missing %v, %d unexpected %v)",
		what, len(expected), strings.Join(names, ", "), len(dup), first5(dup), len(missing), first5(missing), len(unexpected), first5(unexpected))
}

func first5(s []gsent) []gsent {
	if len(s) > 5 {
		return s[:5]
	}
	return s
}

func endOffsets(recs []gsent) []int64 {
	ends := make([]int64, groupParts)
	for _, r := range recs {
		ends[r.partition] = max(ends[r.partition], r.offset+1)
	}
	return ends
}

func committed(group, topic string, n int) []int64 {
	parts := make([]int32, n)
	for i := range parts {
		parts[i] = int32(i)
	}
	resp := within("ListConsumerGroupOffsets", func() (*sarama.OffsetFetchResponse, error) {
		return adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: parts})
	})
	check(resp.Err == sarama.ErrNoError, "ListConsumerGroupOffsets %s: %v", group, resp.Err)
	out := make([]int64, n)
	for i := range parts {
		b := resp.GetBlock(topic, int32(i))
		check(b != nil, "ListConsumerGroupOffsets %s: %s[%d] missing", group, topic, i)
		check(b.Err == sarama.ErrNoError, "ListConsumerGroupOffsets %s: %s[%d]: %v", group, topic, i, b.Err)
		out[i] = b.Offset
	}
	return out
}

func waitCommitted(group string, want []int64, what string) {
	var last []int64
	deadline := time.Now().Add(15 * time.Second)
	for {
		last = committed(group, topics.group, groupParts)
		if fmt.Sprint(last) == fmt.Sprint(want) {
			ok("%s: ListConsumerGroupOffsets = %v", what, last)
			return
		}
		check(time.Now().Before(deadline), "%s: ListConsumerGroupOffsets %v, want %v", what, last, want)
		time.Sleep(200 * time.Millisecond)
	}
}

func describeGroup(group string) *sarama.GroupDescription {
	ds := within("DescribeConsumerGroups", func() ([]*sarama.GroupDescription, error) { return adm.DescribeConsumerGroups([]string{group}) })
	check(len(ds) == 1 && ds[0].GroupId == group, "DescribeConsumerGroups: %+v", ds)
	return ds[0]
}

func groups() {
	group := "sarama-g-" + run
	pcfg := newConfig()
	pcfg.Producer.RequiredAcks = sarama.WaitForAll
	p := syncProducer("NewSyncProducer (groups)", pcfg)
	defer p.Close()
	produced := produceGroup(p, 0, 300)
	ok("produced 300 records to %s (6 partitions) before the group formed", topics.group)

	a := startMember("sa", group)
	waitSplit([]*member{a}, []int{6}, "sa alone holds 6 partitions")
	ok("sa joined alone: all 6 partitions")
	b := startMember("sb", group)
	split := waitSplit([]*member{a, b}, []int{3, 3}, "sa and sb split 3/3")
	ok("sa and sb split the partitions 3/3: %v / %v", split[0], split[1])
	second := produceGroup(p, 300, 300)
	produced = append(produced, second...)
	waitConsumed([]*member{a, b}, produced, "600 records consumed")
	time.Sleep(time.Second)
	checkExactlyOnce([]*member{a, b}, produced, "600 records (300 produced before the group formed)")
	owner := map[int32]*member{}
	for i, s := range split {
		for _, pt := range s {
			owner[pt] = []*member{a, b}[i]
		}
	}
	wrong := 0
	for _, r := range second {
		_, rs, _ := owner[r.partition].snapshot()
		found := false
		for _, x := range rs {
			found = found || x == r
		}
		if !found {
			wrong++
		}
	}
	checkOk(wrong == 0, "each of the 300 records produced after the split was consumed by its partition's owner (%d not)", wrong)
	waitCommitted(group, endOffsets(produced), "committed offsets = end offsets")

	d := describeGroup(group)
	check(d.Err == sarama.ErrNoError && d.State == "Stable" && d.ProtocolType == "consumer" && d.Protocol == "range",
		"DescribeConsumerGroups (2 members): err %v state %q protocol type %q protocol %q", d.Err, d.State, d.ProtocolType, d.Protocol)
	check(len(d.Members) == 2, "DescribeConsumerGroups: %d members, want 2", len(d.Members))
	a.mu.Lock()
	aid := a.memberID
	a.mu.Unlock()
	b.mu.Lock()
	bid := b.memberID
	b.mu.Unlock()
	check(d.Members[aid] != nil && d.Members[bid] != nil, "DescribeConsumerGroups: member ids %v, want %s and %s", keys(d.Members), aid, bid)
	union := map[int32]bool{}
	for id, md := range d.Members {
		as, err := md.GetMemberAssignment()
		check(err == nil, "DescribeConsumerGroups: member %s assignment: %v", id, err)
		check(len(as.Topics[topics.group]) == 3, "DescribeConsumerGroups: member %s assigned %v", id, as.Topics)
		for _, pt := range as.Topics[topics.group] {
			union[pt] = true
		}
		check(strings.HasPrefix(md.ClientId, "strand-interop-sarama-") && md.ClientHost != "", "DescribeConsumerGroups: member %s client id %q host %q", id, md.ClientId, md.ClientHost)
	}
	check(len(union) == 6, "DescribeConsumerGroups: assignments cover %d partitions", len(union))
	ok("DescribeConsumerGroups %s: Stable, consumer/range, 2 members with their ids, client ids and 3 partitions each", group)
	lg := within("ListConsumerGroups", func() (map[string]string, error) { return adm.ListConsumerGroups() })
	checkOk(lg[group] == "consumer", "ListConsumerGroups: %s with protocol type %q", group, lg[group])

	b.stop()
	waitSplit([]*member{a}, []int{6}, "after sb left")
	ok("sb closed (LeaveGroup): sa holds all 6 partitions")
	third := produceGroup(p, 600, 60)
	produced = append(produced, third...)
	waitConsumed([]*member{a, b}, produced, "records after sb left")
	time.Sleep(time.Second)
	checkExactlyOnce([]*member{a, b}, produced, "660 records after sb left")
	a.stop()
	ends := endOffsets(produced)
	waitCommitted(group, ends, "after sa closed, committed offsets = end offsets")
	d = describeGroup(group)
	checkOk(d.State == "Empty" && len(d.Members) == 0 && d.ProtocolType == "consumer", "DescribeConsumerGroups after every member left: %q, %d members, %q", d.State, len(d.Members), d.ProtocolType)

	fourth := produceGroup(p, 660, 60)
	c := startMember("sa-restarted", group)
	waitConsumed([]*member{c}, fourth, "restarted member")
	time.Sleep(1500 * time.Millisecond)
	checkExactlyOnce([]*member{c}, fourth, "restarted member reads only the 60 records after the commit")
	firsts := make([]int64, groupParts)
	for i := range firsts {
		firsts[i] = -1
	}
	_, rs, _ := c.snapshot()
	for _, r := range rs {
		if firsts[r.partition] < 0 {
			firsts[r.partition] = r.offset
		}
	}
	checkOk(fmt.Sprint(firsts) == fmt.Sprint(ends), "restarted member started each partition at its committed offset %v (%v)", ends, firsts)
	c.stop()
	produced = append(produced, fourth...)
	waitCommitted(group, endOffsets(produced), "after the restarted member closed, committed offsets = end offsets")

	err := withinErr("DeleteConsumerGroup", func() error { return adm.DeleteConsumerGroup(group) })
	checkOk(err == nil, "DeleteConsumerGroup %s: %v", group, err)
	lg = within("ListConsumerGroups", func() (map[string]string, error) { return adm.ListConsumerGroups() })
	_, listed := lg[group]
	checkOk(!listed, "ListConsumerGroups: %s no longer listed", group)
	d = describeGroup(group)
	checkOk(d.State == "Dead" && len(d.Members) == 0, "DescribeConsumerGroups of the deleted group: %q, %d members", d.State, len(d.Members))
	got := committed(group, topics.group, groupParts)
	checkOk(fmt.Sprint(got) == fmt.Sprint([]int64{-1, -1, -1, -1, -1, -1}), "ListConsumerGroupOffsets of the deleted group: %v (no offsets)", got)
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// --- 8. transactions

func transactions() {
	txGroup := "sarama-txgroup-" + run
	cfg := newConfig()
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Transaction.ID = "sarama-tx-" + run
	cfg.Producer.Transaction.Timeout = 30 * time.Second
	tp := syncProducer("NewSyncProducer (transactional)", cfg)
	defer tp.Close()
	check(tp.IsTransactional(), "transactional producer: IsTransactional false")

	mk := func(tag string, n int) []*sent {
		var out []*sent
		for pt := int32(0); pt < 2; pt++ {
			for i := 0; i < n; i++ {
				out = append(out, &sent{
					key:       []byte(fmt.Sprintf("%s-%d-%d", tag, pt, i)),
					value:     []byte(fmt.Sprintf("%s value %d", tag, i)),
					headers:   []sarama.RecordHeader{{Key: []byte("txn"), Value: []byte(tag)}},
					ts:        time.Now().UnixMilli(),
					partition: pt,
				})
			}
		}
		return out
	}
	txn := func(tag string, n int, groupOffset int64, commit bool) []*sent {
		what := "transaction " + tag
		check(tp.BeginTxn() == nil, "%s: BeginTxn", what)
		rs := mk(tag, n)
		sendAll(tp, topics.txn, rs, what+": send")
		err := withinErr(what+": AddOffsetsToTxn", func() error {
			return tp.AddOffsetsToTxn(map[string][]*sarama.PartitionOffsetMetadata{topics.main: {{Partition: 0, Offset: groupOffset}}}, txGroup)
		})
		check(err == nil, "%s: AddOffsetsToTxn: %v", what, err)
		if commit {
			err = withinErr(what+": CommitTxn", tp.CommitTxn)
		} else {
			err = withinErr(what+": AbortTxn", tp.AbortTxn)
		}
		check(err == nil, "%s: end: %v", what, err)
		ok("%s: %d records sent, offsets added for %s, %s", what, len(rs), txGroup, map[bool]string{true: "committed", false: "aborted"}[commit])
		return rs
	}
	c1 := txn("c1", 5, 7, true)
	ab := txn("a", 4, 9, false)
	c2 := txn("c2", 3, 11, true)
	for _, x := range []struct {
		rs    []*sent
		first int64
	}{{c1, 0}, {ab, 6}, {c2, 11}} {
		for pt := int32(0); pt < 2; pt++ {
			var got []int64
			for _, r := range x.rs {
				if r.partition == pt {
					got = append(got, r.offset)
				}
			}
			for i, o := range got {
				check(o == x.first+int64(i), "transactional produce %s[%d]: offsets %v, want from %d (after the previous transaction's marker)", x.rs[0].key, pt, got, x.first)
			}
		}
	}
	ok("transactional produce: acknowledged offsets leave one offset for each transaction marker (0..4, 6..9, 11..13)")
	// Kafka answers EndTxn before it writes the markers, so the last one lands a moment later.
	for pt := int32(0); pt < 2; pt++ {
		var newest int64
		deadline := time.Now().Add(15 * time.Second)
		for newest = getOffset(topics.txn, pt, sarama.OffsetNewest); newest < 15 && time.Now().Before(deadline); newest = getOffset(topics.txn, pt, sarama.OffsetNewest) {
			time.Sleep(50 * time.Millisecond)
		}
		check(newest == 15, "GetOffset %s[%d] newest %d, want 15", topics.txn, pt, newest)
	}
	ok("GetOffset %s newest 15 in each partition (5 + 4 + 3 records and 3 markers)", topics.txn)

	read := func(iso sarama.IsolationLevel, want []*sent, what string) {
		ccfg := newConfig()
		ccfg.Consumer.IsolationLevel = iso
		cons := within("NewConsumer", func() (sarama.Consumer, error) { return sarama.NewConsumer([]string{bootstrap}, ccfg) })
		defer cons.Close()
		for pt := int32(0); pt < 2; pt++ {
			var w []*sent
			for _, r := range want {
				if r.partition == pt {
					w = append(w, r)
				}
			}
			got := readPartition(cons, topics.txn, pt, sarama.OffsetOldest, len(w), fmt.Sprintf("%s %s[%d]", what, topics.txn, pt))
			for i, s := range w {
				checkRecord(fmt.Sprintf("%s %s[%d] position %d", what, topics.txn, pt, i), got[i], s)
			}
		}
	}
	committedOnly := append(append([]*sent{}, c1...), c2...)
	read(sarama.ReadCommitted, committedOnly, "ReadCommitted")
	ok("ReadCommitted: exactly the %d committed records (offsets 0..4 and 11..13), the aborted ones invisible", len(committedOnly))
	everything := append(append(append([]*sent{}, c1...), ab...), c2...)
	read(sarama.ReadUncommitted, everything, "ReadUncommitted")
	ok("ReadUncommitted: all %d records, aborted ones included, no control records", len(everything))

	resp := within("ListConsumerGroupOffsets txgroup", func() (*sarama.OffsetFetchResponse, error) {
		return adm.ListConsumerGroupOffsets(txGroup, map[string][]int32{topics.main: {0}})
	})
	blk := resp.GetBlock(topics.main, 0)
	check(blk != nil && blk.Err == sarama.ErrNoError, "ListConsumerGroupOffsets %s: %s[0]: %+v", txGroup, topics.main, blk)
	checkOk(blk.Offset == 11, "AddOffsetsToTxn: %s has %s[0] at %d, want 11 (the last committed transaction's, not the aborted one's 9)", txGroup, topics.main, blk.Offset)
}

// --- 9. DeleteRecords, DeleteTopic

func cleanup() {
	err := withinErr("DeleteRecords", func() error { return adm.DeleteRecords(topics.main, map[int32]int64{0: 10}) })
	check(err == nil, "DeleteRecords %s[0] before 10: %v", topics.main, err)
	o0, o1 := getOffset(topics.main, 0, sarama.OffsetOldest), getOffset(topics.main, 1, sarama.OffsetOldest)
	checkOk(o0 == 10 && o1 == 0, "DeleteRecords %s[0] before 10: oldest offsets %d/%d", topics.main, o0, o1)
	cons := within("NewConsumer", func() (sarama.Consumer, error) { return sarama.NewConsumerFromClient(client) })
	n := getOffset(topics.main, 0, sarama.OffsetNewest)
	got := readPartition(cons, topics.main, 0, sarama.OffsetOldest, int(n-10), "consume after DeleteRecords")
	checkOk(got[0].Offset == 10, "consume %s[0] from oldest after DeleteRecords starts at %d", topics.main, got[0].Offset)
	_ = cons.Close()

	names := []string{topics.main, topics.conf, topics.group, topics.txn}
	for _, t := range names {
		err := withinErr("DeleteTopic", func() error { return adm.DeleteTopic(t) })
		check(err == nil, "DeleteTopic %s: %v", t, err)
	}
	waitFor("deleted topics gone from ListTopics", stepTimeout, func() bool {
		l, err := adm.ListTopics()
		if err != nil {
			return false
		}
		for _, t := range names {
			if _, found := l[t]; found {
				return false
			}
		}
		return true
	})
	ok("DeleteTopic: %d topics deleted, ListTopics no longer lists them", len(names))
	err = withinErr("DeleteTopic (again)", func() error { return adm.DeleteTopic(topics.main) })
	checkOk(errors.Is(err, sarama.ErrUnknownTopicOrPartition), "DeleteTopic %s again: %v (want ErrUnknownTopicOrPartition)", topics.main, err)
}
