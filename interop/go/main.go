// Command interop drives a Strand broker with franz-go (kgo + kadm) and checks
// that it behaves as Apache Kafka would for topic admin, produce (every codec
// franz-go supports), fetch, timestamp lookups, offset listing and two error
// cases.
//
// It prints one "ok: ..." line per passed check and exits non-zero with a
// "FAIL: ..." line on the first failed one. Every step runs under a deadline,
// and a watchdog kills the process if the whole run overstays, so it never
// hangs.
//
// Environment:
//
//	STRAND_BOOTSTRAP  broker address (default 127.0.0.1:9092)
//	STRAND_KEEP_TOPIC if non-empty, a failed run leaves its topic in place
//	STRAND_SECURITY_PROTOCOL and the rest of security.go: TLS and SASL
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	numPartitions   = 3
	recordsPerCodec = 50
	baseTimeMs      = int64(1_700_000_000_000)
	codecSpanMs     = int64(1_000_000) // each codec's timestamps start this far after the previous codec's
	recordStepMs    = int64(10)

	stepTimeout    = 20 * time.Second
	overallTimeout = 3 * time.Minute
)

type codec struct {
	name  string
	codec kgo.CompressionCodec
	typ   uint8 // the compression bits Kafka puts in a batch's attributes
}

var codecs = []codec{
	{"none", kgo.NoCompression(), uint8(kgo.CodecNone)},
	{"gzip", kgo.GzipCompression(), uint8(kgo.CodecGzip)},
	{"snappy", kgo.SnappyCompression(), uint8(kgo.CodecSnappy)},
	{"lz4", kgo.Lz4Compression(), uint8(kgo.CodecLz4)},
	{"zstd", kgo.ZstdCompression(), uint8(kgo.CodecZstd)},
}

// sent is one record as produced, with where the broker said it landed.
type sent struct {
	codec     string
	codecTyp  uint8
	key       []byte
	value     []byte
	headers   []kgo.RecordHeader
	ts        int64 // milliseconds
	partition int32
	offset    int64 // from the produce acknowledgement
}

var (
	bootstrap string
	topic     string
	adm       *kadm.Client
	admCl     *kgo.Client
	failMu    sync.Mutex
)

func ok(format string, args ...any) { fmt.Printf("ok: "+format+"\n", args...) }

// fail prints the failure, deletes the test topic (best effort, bounded), and
// exits 1.
func fail(format string, args ...any) {
	failMu.Lock()
	fmt.Fprintf(os.Stderr, "FAIL: "+format+"\n", args...)
	if topic != "" && adm != nil && os.Getenv("STRAND_KEEP_TOPIC") == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _ = adm.DeleteTopics(ctx, topic)
		cancel()
	}
	os.Exit(1)
}

func check(cond bool, format string, args ...any) {
	if !cond {
		fail(format, args...)
	}
}

func stepCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), stepTimeout)
}

// baseOpts are the options every client uses: no idempotence (Strand has no
// InitProducerId yet) and bounded dials, retries and requests.
func baseOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(bootstrap),
		kgo.ClientID("strand-interop-franz-go"),
		kgo.DisableIdempotentWrite(),
		kgo.DialTimeout(5 * time.Second),
		kgo.RequestTimeoutOverhead(10 * time.Second),
		kgo.RetryTimeout(15 * time.Second),
		kgo.RequestRetries(3),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}
	opts = append(opts, securityOpts()...)
	return append(opts, extra...)
}

func newClient(what string, extra ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(baseOpts(extra...)...)
	if err != nil {
		fail("%s: creating client: %v", what, err)
	}
	return cl
}

func main() {
	bootstrap = os.Getenv("STRAND_BOOTSTRAP")
	if bootstrap == "" {
		bootstrap = "127.0.0.1:9092"
	}
	// Watchdog: the step deadlines should always fire first; this is the
	// backstop against anything that ignores its context.
	time.AfterFunc(overallTimeout, func() {
		fmt.Fprintf(os.Stderr, "FAIL: watchdog: run exceeded %v\n", overallTimeout)
		os.Exit(2)
	})
	if expect := os.Getenv("STRAND_ACL_EXPECT"); expect != "" {
		aclChecks(expect)
		return
	}
	start := time.Now()
	fmt.Printf("franz-go interop against %s\n", bootstrap)

	admCl = newClient("admin")
	defer admCl.Close()
	adm = kadm.NewClient(admCl)
	adm.SetTimeoutMillis(15_000)

	topic = fmt.Sprintf("franz-%d", time.Now().UnixNano())

	createTopic()
	produced := produceAll()
	consumeAll(produced)
	consumeFromTimestamp(produced)
	listOffsets(produced)
	messageTooLarge(produced)
	createExisting()
	deleteTopic()

	fmt.Printf("all checks passed in %v\n", time.Since(start).Round(time.Millisecond))
}

// 1. CreateTopics, then Metadata shows it with 3 partitions and a topic id.
func createTopic() {
	ctx, cancel := stepCtx()
	defer cancel()
	resps, err := adm.CreateTopics(ctx, numPartitions, 1, nil, topic)
	check(err == nil, "CreateTopics %s: request failed: %v", topic, err)
	r, found := resps[topic]
	check(found, "CreateTopics %s: topic missing from response %+v", topic, resps)
	check(r.Err == nil, "CreateTopics %s: error %v (%s)", topic, r.Err, r.ErrMessage)
	check(r.NumPartitions == numPartitions, "CreateTopics %s: response NumPartitions = %d, want %d", topic, r.NumPartitions, numPartitions)
	check(r.ID != kadm.TopicID{}, "CreateTopics %s: response topic id is all zero", topic)
	ok("CreateTopics %s: created, %d partitions, id %s", topic, r.NumPartitions, r.ID)

	md, err := adm.Metadata(ctx, topic)
	check(err == nil, "Metadata %s: request failed: %v", topic, err)
	td, found := md.Topics[topic]
	check(found, "Metadata %s: topic not in response (topics: %v)", topic, md.Topics.Names())
	check(td.Err == nil, "Metadata %s: topic error %v", topic, td.Err)
	check(len(td.Partitions) == numPartitions, "Metadata %s: %d partitions, want %d", topic, len(td.Partitions), numPartitions)
	check(td.ID != kadm.TopicID{}, "Metadata %s: topic id is all zero", topic)
	check(td.ID == r.ID, "Metadata %s: topic id %s differs from CreateTopics' %s", topic, td.ID, r.ID)
	for p := int32(0); p < numPartitions; p++ {
		pd, found := td.Partitions[p]
		check(found, "Metadata %s: partition %d missing", topic, p)
		check(pd.Err == nil, "Metadata %s: partition %d error %v", topic, p, pd.Err)
		check(pd.Leader >= 0, "Metadata %s: partition %d has no leader (%d)", topic, p, pd.Leader)
	}
	ok("Metadata %s: %d partitions with leaders, id %s matches", topic, len(td.Partitions), td.ID)
}

func makeRecord(c codec, ci, i int) *sent {
	ts := baseTimeMs + int64(ci)*codecSpanMs + int64(i)*recordStepMs
	// Compressible values of varying length, so batches do get compressed
	// (franz-go sends a batch uncompressed when compressing does not help).
	unit := fmt.Sprintf("value-%s-%d|", c.name, i)
	value := []byte(strings.Repeat(unit, 8+i%13*5))
	return &sent{
		codec:    c.name,
		codecTyp: c.typ,
		key:      []byte(fmt.Sprintf("key-%s-%d", c.name, i)),
		value:    value,
		headers: []kgo.RecordHeader{
			{Key: "codec", Value: []byte(c.name)},
			{Key: "seq", Value: []byte{byte(ci), byte(i), 0x00, 0xff}},
		},
		ts:        ts,
		partition: int32(i % numPartitions),
		offset:    -1,
	}
}

// 2. 50 keyed records per codec, with headers and explicit timestamps, to
// explicit partitions, acks=all.
func produceAll() []*sent {
	var all []*sent
	for ci, c := range codecs {
		cl := newClient("producer "+c.name,
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(c.codec),
			// No RecordDeliveryTimeout: franz-go measures it from each
			// record's Timestamp, and ours are explicit and years old.
			// The produce context's deadline bounds delivery instead.
			kgo.ProduceRequestTimeout(10*time.Second),
			kgo.ProducerLinger(5*time.Millisecond),
		)
		ctx, cancel := stepCtx()
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			errs  []string
			batch []*sent
		)
		for i := 0; i < recordsPerCodec; i++ {
			s := makeRecord(c, ci, i)
			batch = append(batch, s)
			r := &kgo.Record{
				Topic:     topic,
				Partition: s.partition,
				Key:       s.key,
				Value:     s.value,
				Headers:   s.headers,
				Timestamp: time.UnixMilli(s.ts),
			}
			wg.Add(1)
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, fmt.Sprintf("%s: %v", r.Key, err))
					return
				}
				s.offset = r.Offset
				if r.Partition != s.partition {
					errs = append(errs, fmt.Sprintf("%s: acked on partition %d, sent to %d", r.Key, r.Partition, s.partition))
				}
			})
		}
		wg.Wait()
		cancel()
		cl.Close()
		check(len(errs) == 0, "Produce codec %s: %d of %d records failed, first: %s", c.name, len(errs), recordsPerCodec, first(errs))
		ok("Produce codec %s: %d records acked (acks=all)", c.name, recordsPerCodec)
		all = append(all, batch...)
	}

	// The acknowledged offsets, per partition in produce order, must be
	// exactly 0..n-1.
	for p := int32(0); p < numPartitions; p++ {
		want := int64(0)
		for _, s := range all {
			if s.partition != p {
				continue
			}
			check(s.offset == want, "Produce: partition %d record %s acked at offset %d, want %d (offsets in produce order must be 0..n-1)", p, s.key, s.offset, want)
			want++
		}
		ok("Produce: partition %d acked offsets are 0..%d in produce order", p, want-1)
	}
	return all
}

func first(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return ss[0]
}

func perPartition(all []*sent) map[int32][]*sent {
	m := make(map[int32][]*sent)
	for _, s := range all {
		m[s.partition] = append(m[s.partition], s)
	}
	return m
}

func consumer(what string, offsets map[int32]kgo.Offset) *kgo.Client {
	return newClient(what,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
}

// poll fetches until want records arrived (or the deadline passes), failing on
// any fetch error. With want < 0 it polls once for up to d and returns
// whatever came.
func poll(cl *kgo.Client, what string, want int, d time.Duration) []*kgo.Record {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var recs []*kgo.Record
	for {
		fs := cl.PollFetches(ctx)
		for _, fe := range fs.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
				continue
			}
			fail("%s: fetch error on %s[%d]: %v", what, fe.Topic, fe.Partition, fe.Err)
		}
		recs = append(recs, fs.Records()...)
		if want < 0 || len(recs) >= want || ctx.Err() != nil {
			return recs
		}
	}
}

// 3. Everything from the start of all partitions, checked field by field.
func consumeAll(all []*sent) {
	offs := map[int32]kgo.Offset{}
	for p := int32(0); p < numPartitions; p++ {
		offs[p] = kgo.NewOffset().AtStart()
	}
	cl := consumer("consume from start", offs)
	defer cl.Close()

	recs := poll(cl, "consume from start", len(all), stepTimeout)
	check(len(recs) >= len(all), "Fetch from start: got %d records before the deadline, want %d", len(recs), len(all))
	// Anything more within a short while would be records that were never
	// produced.
	extra := poll(cl, "consume from start (extra)", -1, 1500*time.Millisecond)
	recs = append(recs, extra...)
	check(len(recs) == len(all), "Fetch from start: got %d records, want exactly %d", len(recs), len(all))
	ok("Fetch from start: exactly %d records", len(recs))

	got := map[int32][]*kgo.Record{}
	for _, r := range recs {
		check(r.Topic == topic, "Fetch: record from unexpected topic %q", r.Topic)
		got[r.Partition] = append(got[r.Partition], r)
	}
	compressedSeen := map[string]int{}
	for p, want := range perPartition(all) {
		g := got[p]
		check(len(g) == len(want), "Fetch: partition %d has %d records, want %d", p, len(g), len(want))
		for i, s := range want {
			r := g[i]
			where := fmt.Sprintf("Fetch: partition %d position %d (produced %s)", p, i, s.key)
			check(r.Offset == int64(i), "%s: offset %d, want %d (contiguous from 0)", where, r.Offset, i)
			check(r.Offset == s.offset, "%s: offset %d differs from produce ack offset %d", where, r.Offset, s.offset)
			check(bytes.Equal(r.Key, s.key), "%s: key %q, want %q (records out of produce order?)", where, r.Key, s.key)
			check(bytes.Equal(r.Value, s.value), "%s: value (%d bytes) %.40q..., want (%d bytes) %.40q...", where, len(r.Value), r.Value, len(s.value), s.value)
			check(len(r.Headers) == len(s.headers), "%s: %d headers, want %d: %v", where, len(r.Headers), len(s.headers), r.Headers)
			for h := range s.headers {
				check(r.Headers[h].Key == s.headers[h].Key && bytes.Equal(r.Headers[h].Value, s.headers[h].Value),
					"%s: header %d = %q:%q, want %q:%q", where, h, r.Headers[h].Key, r.Headers[h].Value, s.headers[h].Key, s.headers[h].Value)
			}
			check(r.Timestamp.UnixMilli() == s.ts, "%s: timestamp %d, want %d", where, r.Timestamp.UnixMilli(), s.ts)
			check(r.Attrs.TimestampType() == 0, "%s: timestamp type %d, want 0 (CreateTime)", where, r.Attrs.TimestampType())
			ct := r.Attrs.CompressionType()
			check(ct == s.codecTyp || ct == uint8(kgo.CodecNone),
				"%s: batch compression %d, produced with %s (%d); the broker should keep the producer's codec", where, ct, s.codec, s.codecTyp)
			if ct == s.codecTyp && ct != uint8(kgo.CodecNone) {
				compressedSeen[s.codec]++
			}
		}
		ok("Fetch: partition %d: %d records, offsets 0..%d contiguous, produce order, keys/values/2 headers/timestamps match", p, len(g), len(g)-1)
	}
	for _, c := range codecs[1:] {
		check(compressedSeen[c.name] > 0, "Fetch: no record produced with %s came back in a %s batch", c.name, c.name)
	}
	ok("Fetch: compressed batches came back with the producer's codec (gzip %d, snappy %d, lz4 %d, zstd %d records)",
		compressedSeen["gzip"], compressedSeen["snappy"], compressedSeen["lz4"], compressedSeen["zstd"])
}

// 4. Consume from a timestamp in the middle: the first record of each
// partition is the first one there with timestamp >= ts.
func consumeFromTimestamp(all []*sent) {
	// Mid-way through the third codec, and between two records' timestamps.
	ts := baseTimeMs + 2*codecSpanMs + 25*recordStepMs + 5
	expect := map[int32]*sent{}
	for p, ss := range perPartition(all) {
		for _, s := range ss {
			if s.ts >= ts {
				expect[p] = s
				break
			}
		}
		check(expect[p] != nil, "internal: partition %d has no record at or after %d", p, ts)
	}

	// ListOffsets by timestamp directly (what the consumer does under the hood).
	ctx, cancel := stepCtx()
	lo, err := adm.ListOffsetsAfterMilli(ctx, ts, topic)
	cancel()
	check(err == nil, "ListOffsets(timestamp %d): %v", ts, err)
	check(lo.Error() == nil, "ListOffsets(timestamp %d): partition error: %v", ts, lo.Error())
	for p, s := range expect {
		l, found := lo.Lookup(topic, p)
		check(found, "ListOffsets(timestamp %d): partition %d missing", ts, p)
		check(l.Offset == s.offset, "ListOffsets(timestamp %d): partition %d offset %d, want %d (first record with timestamp >= ts, %s)", ts, p, l.Offset, s.offset, s.key)
		check(l.Timestamp == s.ts, "ListOffsets(timestamp %d): partition %d timestamp %d, want %d (that record's timestamp)", ts, p, l.Timestamp, s.ts)
	}
	ok("ListOffsets(timestamp %d): per partition offset+timestamp of the first record at or after it", ts)

	offs := map[int32]kgo.Offset{}
	for p := int32(0); p < numPartitions; p++ {
		offs[p] = kgo.NewOffset().AfterMilli(ts)
	}
	cl := consumer("consume from timestamp", offs)
	defer cl.Close()
	firstSeen := map[int32]*kgo.Record{}
	deadline := time.Now().Add(stepTimeout)
	for len(firstSeen) < numPartitions && time.Now().Before(deadline) {
		for _, r := range poll(cl, "consume from timestamp", -1, time.Until(deadline)) {
			if firstSeen[r.Partition] == nil {
				firstSeen[r.Partition] = r
			}
		}
	}
	for p, s := range expect {
		r := firstSeen[p]
		check(r != nil, "Fetch after timestamp %d: nothing from partition %d before the deadline", ts, p)
		check(r.Offset == s.offset && bytes.Equal(r.Key, s.key) && r.Timestamp.UnixMilli() == s.ts,
			"Fetch after timestamp %d: partition %d first record offset %d key %q ts %d, want offset %d key %q ts %d",
			ts, p, r.Offset, r.Key, r.Timestamp.UnixMilli(), s.offset, s.key, s.ts)
		ok("Fetch after timestamp %d: partition %d starts at offset %d (%s, ts %d)", ts, p, r.Offset, r.Key, s.ts)
	}
}

// 5. ListStartOffsets / ListEndOffsets.
func listOffsets(all []*sent) {
	counts := map[int32]int64{}
	for p, ss := range perPartition(all) {
		counts[p] = int64(len(ss))
	}
	checkStartEnd(counts, "")
}

func checkStartEnd(counts map[int32]int64, suffix string) {
	ctx, cancel := stepCtx()
	defer cancel()
	start, err := adm.ListStartOffsets(ctx, topic)
	check(err == nil, "ListStartOffsets: %v", err)
	check(start.Error() == nil, "ListStartOffsets: partition error %v", start.Error())
	end, err := adm.ListEndOffsets(ctx, topic)
	check(err == nil, "ListEndOffsets: %v", err)
	check(end.Error() == nil, "ListEndOffsets: partition error %v", end.Error())
	for p := int32(0); p < numPartitions; p++ {
		s, found := start.Lookup(topic, p)
		check(found, "ListStartOffsets: partition %d missing", p)
		check(s.Offset == 0, "ListStartOffsets: partition %d = %d, want 0", p, s.Offset)
		e, found := end.Lookup(topic, p)
		check(found, "ListEndOffsets: partition %d missing", p)
		check(e.Offset == counts[p], "ListEndOffsets: partition %d = %d, want %d", p, e.Offset, counts[p])
	}
	ok("ListStartOffsets all 0, ListEndOffsets = %d/%d/%d%s", counts[0], counts[1], counts[2], suffix)
}

// 6. A record over the broker's max message size (1 MiB + 12 bytes) is
// rejected by the broker with MESSAGE_TOO_LARGE, and nothing is appended.
// produceWrites records the size of every Produce request the client writes,
// so the too-large check can tell the broker's rejection from the client's.
type produceWrites struct {
	mu    sync.Mutex
	sizes []int
}

func (h *produceWrites) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if key == 0 && err == nil { // Produce
		h.mu.Lock()
		h.sizes = append(h.sizes, n)
		h.mu.Unlock()
	}
}

func (h *produceWrites) largest() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := 0
	for _, n := range h.sizes {
		m = max(m, n)
	}
	return m
}

func messageTooLarge(all []*sent) {
	writes := &produceWrites{}
	cl := newClient("producer (too large)",
		kgo.WithHooks(writes),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(8<<20),
		kgo.BrokerMaxWriteBytes(16<<20),
		kgo.ProduceRequestTimeout(10*time.Second),
	)
	defer cl.Close()
	ctx, cancel := stepCtx()
	defer cancel()
	value := bytes.Repeat([]byte{'x'}, 2<<20)
	r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Key: []byte("too-large"), Value: value}).First()
	check(err != nil, "Produce 2 MiB record: succeeded at partition %d offset %d, want MESSAGE_TOO_LARGE", r.Partition, r.Offset)
	check(errors.Is(err, kerr.MessageTooLarge), "Produce 2 MiB record: error %v, want %v", err, kerr.MessageTooLarge)
	check(writes.largest() > len(value), "Produce 2 MiB record: failed with %v but no Produce request that large was sent (largest %d bytes): rejected client-side, not by the broker", err, writes.largest())
	ok("Produce 2 MiB record: sent a %d-byte Produce request, broker rejected it with %v", writes.largest(), err)

	counts := map[int32]int64{}
	for p, ss := range perPartition(all) {
		counts[p] = int64(len(ss))
	}
	checkStartEnd(counts, " (unchanged after the rejected produce)")
}

// 7. CreateTopics for an existing topic: TOPIC_ALREADY_EXISTS.
func createExisting() {
	ctx, cancel := stepCtx()
	defer cancel()
	resps, err := adm.CreateTopics(ctx, numPartitions, 1, nil, topic)
	check(err == nil, "CreateTopics (existing) %s: request failed: %v", topic, err)
	r, found := resps[topic]
	check(found, "CreateTopics (existing) %s: topic missing from response", topic)
	check(errors.Is(r.Err, kerr.TopicAlreadyExists), "CreateTopics (existing) %s: error %v (%s), want %v", topic, r.Err, r.ErrMessage, kerr.TopicAlreadyExists)
	ok("CreateTopics (existing) %s: %v", topic, r.Err)
}

// 8. DeleteTopics, after which Metadata no longer lists the topic.
func deleteTopic() {
	ctx, cancel := stepCtx()
	defer cancel()
	resps, err := adm.DeleteTopics(ctx, topic)
	check(err == nil, "DeleteTopics %s: request failed: %v", topic, err)
	r, found := resps[topic]
	check(found, "DeleteTopics %s: topic missing from response", topic)
	check(r.Err == nil, "DeleteTopics %s: error %v (%s)", topic, r.Err, r.ErrMessage)
	ok("DeleteTopics %s", topic)

	// A direct Metadata request: kadm.Metadata would answer from the
	// client's metadata cache (MetadataMinAge) and could still show the
	// topic. AllowAutoTopicCreation is false, so this cannot bring it back.
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, admCl)
	check(err == nil, "Metadata after delete: request failed: %v", err)
	check(len(resp.Topics) == 1, "Metadata after delete: %d topics in response, want 1", len(resp.Topics))
	mt := resp.Topics[0]
	terr := kerr.ErrorForCode(mt.ErrorCode)
	check(errors.Is(terr, kerr.UnknownTopicOrPartition), "Metadata after delete: topic %s error %v with %d partitions, want %v", topic, terr, len(mt.Partitions), kerr.UnknownTopicOrPartition)
	ok("Metadata after delete: %s is gone (%v)", topic, terr)
	topic = "" // nothing left for fail() to clean up
}
