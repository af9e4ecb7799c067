// Command groups checks consumer groups (classic protocol) with franz-go against
// a broker: two kgo.ConsumerGroup clients split a 6-partition topic and consume
// every record exactly once, committing after every poll (BlockRebalanceOnPoll,
// autocommit off, commit in OnPartitionsRevoked); when one leaves, the other
// takes over its partitions; a consumer restarted in the same group resumes
// from the committed offsets and reads only the records produced after them.
//
// Run it through interop/go/groups.sh, which starts a broker of its own. It
// prints one "ok: ..." line per passed check and exits non-zero after a
// "FAIL: ..." line on the first failed one. Every step has a deadline, and a
// watchdog ends the process if the whole run overstays.
//
// Environment: STRAND_BOOTSTRAP (default 127.0.0.1:9092).
package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	partitions     = 6
	stepTimeout    = 60 * time.Second
	overallTimeout = 4 * time.Minute
	sessionTimeout = 6 * time.Second
)

var (
	bootstrap = envOr("STRAND_BOOTSTRAP", "127.0.0.1:9092")
	topic     = fmt.Sprintf("franz-groups-%d", time.Now().UnixNano())
	group     = topic + "-group"
)

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func ok(format string, args ...any) { fmt.Printf("ok: "+format+"\n", args...) }

func fail(format string, args ...any) {
	fmt.Printf("FAIL: "+format+"\n", args...)
	os.Exit(1)
}

func check(cond bool, format string, args ...any) {
	if !cond {
		fail(format, args...)
	}
	ok(format, args...)
}

// at is where a produced record landed.
type at struct {
	partition int32
	offset    int64
}

// consumer is one group member: a kgo client and the loop that polls it.
type consumer struct {
	name   string
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	assigned map[int32]bool
	records  []at
	errs     []string
}

func startConsumer(name string) *consumer {
	c := &consumer{name: name, assigned: map[int32]bool{}, done: make(chan struct{})}
	update := func(parts map[string][]int32, add bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, p := range parts[topic] {
			if add {
				c.assigned[p] = true
			} else {
				delete(c.assigned, p)
			}
		}
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(bootstrap),
		kgo.ClientID(name),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(sessionTimeout),
		kgo.HeartbeatInterval(time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
			update(parts, true)
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, parts map[string][]int32) {
			cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			if err := cl.CommitUncommittedOffsets(cctx); err != nil {
				c.addErr("commit on revoke: %v", err)
			}
			update(parts, false)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
			update(parts, false)
		}),
	)
	if err != nil {
		fail("%s: new client: %v", name, err)
	}
	c.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.loop(ctx)
	return c
}

func (c *consumer) addErr(format string, args ...any) {
	c.mu.Lock()
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
	c.mu.Unlock()
}

func (c *consumer) loop(ctx context.Context) {
	defer close(c.done)
	for {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fetches := c.cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil || fetches.IsClientClosed() {
			c.cl.AllowRebalance()
			return
		}
		fetches.EachError(func(t string, p int32, err error) {
			if err != context.DeadlineExceeded && err != context.Canceled {
				c.addErr("fetch %s/%d: %v", t, p, err)
			}
		})
		var got []at
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, at{r.Partition, r.Offset}) })
		if len(got) > 0 {
			c.mu.Lock()
			c.records = append(c.records, got...)
			c.mu.Unlock()
			cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			if err := c.cl.CommitUncommittedOffsets(cctx); err != nil && ctx.Err() == nil {
				c.addErr("commit: %v", err)
			}
			cancel()
		}
		c.cl.AllowRebalance()
	}
}

// close stops polling, then closes the client, which leaves the group.
func (c *consumer) close() {
	c.cancel()
	select {
	case <-c.done:
	case <-time.After(stepTimeout):
		fail("%s: poll loop did not stop", c.name)
	}
	closed := make(chan struct{})
	go func() { c.cl.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(stepTimeout):
		fail("%s: Close did not return", c.name)
	}
}

func (c *consumer) assignment() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int32
	for p := range c.assigned {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// waitSplit waits until the consumers hold disjoint assignments of the given
// sizes that cover every partition.
func waitSplit(what string, cs []*consumer, sizes []int) [][]int32 {
	deadline := time.Now().Add(stepTimeout)
	for {
		var got [][]int32
		union := map[int32]bool{}
		match := true
		for i, c := range cs {
			c.mu.Lock()
			errs := append([]string(nil), c.errs...)
			c.mu.Unlock()
			if len(errs) > 0 {
				fail("%s: %s: %v", what, c.name, errs)
			}
			a := c.assignment()
			got = append(got, a)
			if len(a) != sizes[i] {
				match = false
			}
			for _, p := range a {
				union[p] = true
			}
		}
		if match && len(union) == partitions {
			return got
		}
		if time.Now().After(deadline) {
			fail("%s: no split %v within %s: %v", what, sizes, stepTimeout, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func consumedCounts(cs []*consumer) map[at]int {
	counts := map[at]int{}
	for _, c := range cs {
		c.mu.Lock()
		for _, r := range c.records {
			counts[r]++
		}
		c.mu.Unlock()
	}
	return counts
}

func waitConsumed(what string, cs []*consumer, want map[int]at) {
	deadline := time.Now().Add(stepTimeout)
	for {
		counts := consumedCounts(cs)
		missing := 0
		for _, a := range want {
			if counts[a] == 0 {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			fail("%s: %d of %d records not consumed within %s", what, missing, len(want), stepTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func checkExactlyOnce(what string, cs []*consumer, want map[int]at) {
	counts := consumedCounts(cs)
	wanted := map[at]bool{}
	for _, a := range want {
		wanted[a] = true
	}
	var dups, missing, extra int
	for a, n := range counts {
		if n > 1 {
			dups++
		}
		if !wanted[a] {
			extra++
		}
	}
	for a := range wanted {
		if counts[a] == 0 {
			missing++
		}
	}
	var names []string
	for _, c := range cs {
		names = append(names, c.name)
	}
	check(dups == 0 && missing == 0 && extra == 0,
		"%s: %d records consumed exactly once across %s (%d duplicated, %d missing, %d unexpected)",
		what, len(want), strings.Join(names, ", "), dups, missing, extra)
}

func produce(cl *kgo.Client, from, count int) map[int]at {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	out := map[int]at{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	for i := from; i < from+count; i++ {
		wg.Add(1)
		i := i
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte("k-" + strconv.Itoa(i)), Value: []byte("v-" + strconv.Itoa(i))},
			func(r *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					out[i] = at{r.Partition, r.Offset}
				}
			})
	}
	wg.Wait()
	if firstErr != nil {
		fail("produce %d..%d: %v", from, from+count-1, firstErr)
	}
	return out
}

func merge(ms ...map[int]at) map[int]at {
	out := map[int]at{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func endOffsets(m map[int]at) map[int32]int64 {
	out := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		out[p] = 0
	}
	for _, a := range m {
		if a.offset+1 > out[a.partition] {
			out[a.partition] = a.offset + 1
		}
	}
	return out
}

func committed(adm *kadm.Client) map[int32]int64 {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	resp, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		fail("FetchOffsets: %v", err)
	}
	out := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		if o, ok := resp.Lookup(topic, p); ok && o.Err == nil {
			out[p] = o.At
		} else {
			out[p] = -1
		}
	}
	return out
}

func main() {
	start := time.Now()
	go func() {
		time.Sleep(overallTimeout)
		fmt.Printf("FAIL: watchdog: run exceeded %s\n", overallTimeout)
		os.Exit(2)
	}()

	producer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		fail("producer: %v", err)
	}
	defer producer.Close()
	adm := kadm.NewClient(producer)
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	cancel()
	check(err == nil && resp.Err == nil, "created %s with %d partitions", topic, partitions)

	first := produce(producer, 0, 300)
	c1 := startConsumer("franz-1")
	c2 := startConsumer("franz-2")
	split := waitSplit("two members", []*consumer{c1, c2}, []int{3, 3})
	ok("two kgo group consumers split the partitions 3/3: %v / %v", split[0], split[1])
	second := produce(producer, 300, 300)
	all := merge(first, second)
	waitConsumed("600 records", []*consumer{c1, c2}, all)
	time.Sleep(time.Second)
	checkExactlyOnce("600 records (300 produced before the group formed)", []*consumer{c1, c2}, all)
	owner := map[int32]*consumer{}
	for _, p := range split[0] {
		owner[p] = c1
	}
	for _, p := range split[1] {
		owner[p] = c2
	}
	wrong := 0
	for i := 300; i < 600; i++ {
		a := second[i]
		c := owner[a.partition]
		c.mu.Lock()
		found := false
		for _, r := range c.records {
			if r == a {
				found = true
			}
		}
		c.mu.Unlock()
		if !found {
			wrong++
		}
	}
	check(wrong == 0, "each of the 300 records produced after the split was consumed by its partition's owner (%d not)", wrong)
	ends := endOffsets(all)
	got := committed(adm)
	check(fmt.Sprint(got) == fmt.Sprint(ends), "committed offsets = end offsets: %v", got)

	// One member leaves: the other takes over all partitions.
	c2.close()
	waitSplit("after franz-2 left", []*consumer{c1}, []int{6})
	ok("franz-2 closed (LeaveGroup): franz-1 holds all 6 partitions")
	third := produce(producer, 600, 60)
	all = merge(all, third)
	waitConsumed("after leave", []*consumer{c1, c2}, all)
	time.Sleep(time.Second)
	checkExactlyOnce("660 records after franz-2 left", []*consumer{c1, c2}, all)

	// A restarted consumer resumes from the commit.
	c1.close()
	ends = endOffsets(all)
	got = committed(adm)
	check(fmt.Sprint(got) == fmt.Sprint(ends), "after franz-1 closed, committed offsets = end offsets: %v", got)
	fourth := produce(producer, 660, 60)
	c3 := startConsumer("franz-1-restarted")
	waitSplit("restarted consumer", []*consumer{c3}, []int{6})
	waitConsumed("restarted consumer", []*consumer{c3}, fourth)
	time.Sleep(1500 * time.Millisecond)
	checkExactlyOnce("restarted consumer reads only the 60 records after the commit", []*consumer{c3}, fourth)
	c3.mu.Lock()
	firstOffset := map[int32]int64{}
	for _, r := range c3.records {
		if _, seen := firstOffset[r.partition]; !seen {
			firstOffset[r.partition] = r.offset
		}
	}
	c3.mu.Unlock()
	resumed := true
	for p, o := range firstOffset {
		if o != ends[p] {
			resumed = false
		}
	}
	check(resumed, "restarted consumer started each partition at its committed offset %v", ends)
	c3.close()
	got = committed(adm)
	check(fmt.Sprint(got) == fmt.Sprint(endOffsets(merge(all, fourth))), "final committed offsets = end offsets: %v", got)

	ctx, cancel = context.WithTimeout(context.Background(), stepTimeout)
	dg, err := adm.DeleteGroup(ctx, group)
	cancel()
	check(err == nil && dg.Err == nil, "deleted group %s (empty)", group)
	ctx, cancel = context.WithTimeout(context.Background(), stepTimeout)
	_, _ = adm.DeleteTopics(ctx, topic)
	cancel()
	fmt.Printf("franz-go groups: all checks passed in %.1fs\n", time.Since(start).Seconds())
}
