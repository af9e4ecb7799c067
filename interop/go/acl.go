package main

// ACL checks, when STRAND_ACL_EXPECT is set (the acls driver runs them): as a principal
// with ACLs ("allowed") the client produces to STRAND_ACL_TOPIC, reads it back, commits
// for STRAND_ACL_GROUP and initializes STRAND_ACL_TRANSACTIONAL_ID; as one without
// ("refused") each of those is refused with Kafka's code (the group by OffsetFetch: a
// commit to a topic it cannot see never leaves the client).

import (
	"errors"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func aclChecks(expect string) {
	topic := os.Getenv("STRAND_ACL_TOPIC")
	group := os.Getenv("STRAND_ACL_GROUP")
	txnID := os.Getenv("STRAND_ACL_TRANSACTIONAL_ID")
	allowed := expect == "allowed"
	cl := newClient("acl", kgo.RecordRetries(1), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {0: kgo.NewOffset().AtStart()},
	}))
	defer cl.Close()
	adm := kadm.NewClient(cl)

	ctx, cancel := stepCtx()
	defer cancel()
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("franz-" + expect)}).FirstErr()
	if allowed {
		check(err == nil, "Produce to %s: %v", topic, err)
		fetches := cl.PollFetches(ctx)
		check(fetches.Err() == nil && fetches.NumRecords() > 0, "Fetch %s: %v (%d records)", topic, fetches.Err(), fetches.NumRecords())
	} else {
		check(errors.Is(err, kerr.TopicAuthorizationFailed), "Produce to %s: %v, want %v", topic, err, kerr.TopicAuthorizationFailed)
	}
	ok("franz-go %s: Produce to %s", expect, topic)

	if allowed {
		offsets := kadm.Offsets{}
		offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1, LeaderEpoch: -1})
		committed, err := adm.CommitOffsets(ctx, group, offsets)
		if err == nil {
			err = committed.Error()
		}
		check(err == nil, "OffsetCommit for %s: %v", group, err)
		ok("franz-go %s: OffsetCommit for %s", expect, group)
	} else {
		// A commit would not leave the client: the topic is hidden from this principal,
		// as on Kafka. OffsetFetch of the group reaches the broker.
		fetched, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = fetched.Error()
		}
		check(errors.Is(err, kerr.GroupAuthorizationFailed), "OffsetFetch for %s: %v, want %v", group, err, kerr.GroupAuthorizationFailed)
		ok("franz-go %s: OffsetFetch for %s", expect, group)
	}

	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &txnID
	req.TransactionTimeoutMillis = 60_000
	req.ProducerID = -1
	req.ProducerEpoch = -1
	// FindCoordinator first, as clients do (it is refused as well without DESCRIBE).
	coordinator := kmsg.NewPtrFindCoordinatorRequest()
	coordinator.CoordinatorType = 1
	coordinator.CoordinatorKey = txnID
	coordinator.CoordinatorKeys = []string{txnID}
	found, err := coordinator.RequestWith(ctx, cl)
	check(err == nil, "FindCoordinator %s: %v", txnID, err)
	code := found.ErrorCode
	if len(found.Coordinators) > 0 {
		code = found.Coordinators[0].ErrorCode
	}
	if allowed {
		check(code == 0, "FindCoordinator %s: error %d", txnID, code)
		resp, err := req.RequestWith(ctx, cl)
		check(err == nil && resp.ErrorCode == 0, "InitProducerId %s: %v (error %d)", txnID, err, errorCode(resp))
	} else {
		check(code == kerr.TransactionalIDAuthorizationFailed.Code, "FindCoordinator %s: error %d, want %d", txnID, code, kerr.TransactionalIDAuthorizationFailed.Code)
	}
	ok("franz-go %s: transactional id %s", expect, txnID)
	fmt.Println("acl checks passed")
}

func errorCode(resp *kmsg.InitProducerIDResponse) int16 {
	if resp == nil {
		return -1
	}
	return resp.ErrorCode
}
