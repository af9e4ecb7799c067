//! The group coordinator against a real Broker (no sockets): offsets and group metadata
//! persisted to __consumer_offsets and reloaded, offsets of empty groups expiring.

use std::time::Duration;

use bytes::Bytes;
use strand_broker::group::classic::JoinRequest;
use strand_broker::group::coordinator::SyncRequest;
use strand_broker::{Broker, BrokerConfig};

#[path = "../../log/tests/common/small_disk.rs"]
mod small_disk;

fn config(dir: &std::path::Path, retention_minutes: i64) -> BrokerConfig {
    BrokerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.to_path_buf(),
        group_initial_rebalance_delay_ms: 0,
        offsets_retention_minutes: retention_minutes,
        ..BrokerConfig::default()
    }
}

fn join(member_id: &str) -> JoinRequest {
    JoinRequest {
        member_id: member_id.to_string(),
        group_instance_id: None,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"sub"))],
        require_known_member_id: false,
    }
}

#[tokio::test]
async fn offsets_and_group_metadata_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let broker = Broker::open(config(dir.path(), 60)).unwrap();
        broker
            .create_topic("t", 2, 1, Vec::new(), Default::default(), false)
            .await
            .unwrap();
        let joined = broker.groups.join(&broker, "g", join("")).await;
        assert_eq!((joined.error_code, joined.generation_id), (0, 1));
        let member = joined.member_id.clone();
        let sync = SyncRequest {
            member_id: &member,
            group_instance_id: None,
            generation_id: 1,
            protocol_type: None,
            protocol_name: None,
            assignments: vec![(member.clone(), Bytes::from_static(b"all"))],
        };
        assert_eq!(broker.groups.sync(&broker, "g", sync).await.error_code, 0);
        let offsets = vec![
            ("t".to_string(), 0, 42, 0, Some("meta".to_string())),
            ("t".to_string(), 1, 7, 0, None),
        ];
        assert_eq!(
            broker
                .groups
                .commit(&broker, 9, "g", 1, &member, None, &offsets)
                .await,
            vec![0, 0]
        );
        // A stale generation is fenced.
        assert_eq!(
            broker
                .groups
                .commit(&broker, 9, "g", 0, &member, None, &offsets)
                .await,
            vec![22, 22]
        );
        broker.shutdown().unwrap();
    }
    let broker = Broker::open(config(dir.path(), 60)).unwrap();
    let fetched = broker
        .groups
        .fetch_offsets(&broker, "g", None)
        .await
        .unwrap();
    let offsets: Vec<(String, i32, i64, String)> = fetched
        .into_iter()
        .map(|(t, p, o)| (t, p, o.as_ref().unwrap().offset, o.unwrap().metadata))
        .collect();
    assert_eq!(
        offsets,
        vec![
            ("t".to_string(), 0, 42, "meta".to_string()),
            ("t".to_string(), 1, 7, String::new())
        ]
    );
    let described = broker.groups.describe(&broker, "g").await.unwrap().unwrap();
    assert_eq!(
        (described.state_name, described.members.len()),
        ("Stable", 1),
        "the group came back with its member"
    );
    assert_eq!(
        described.members[0].5.as_ref(),
        b"all",
        "and its assignment"
    );
}

#[tokio::test]
async fn offsets_of_empty_groups_expire_and_stay_gone() {
    let dir = tempfile::tempdir().unwrap();
    {
        let broker = Broker::open(config(dir.path(), 0)).unwrap();
        broker
            .create_topic("t", 1, 1, Vec::new(), Default::default(), false)
            .await
            .unwrap();
        // A simple consumer: no generation, no member; the group stays empty.
        let offsets = vec![("t".to_string(), 0, 5, -1, None)];
        assert_eq!(
            broker
                .groups
                .commit(&broker, 9, "simple", -1, "", None, &offsets)
                .await,
            vec![0]
        );
        assert!(broker
            .groups
            .fetch_offsets(&broker, "simple", None)
            .await
            .unwrap()[0]
            .2
            .is_some());
        tokio::time::sleep(Duration::from_millis(5)).await;
        broker.groups.expire_offsets().await;
        assert!(broker
            .groups
            .fetch_offsets(&broker, "simple", None)
            .await
            .unwrap()
            .is_empty());
        assert!(
            broker
                .groups
                .describe(&broker, "simple")
                .await
                .unwrap()
                .is_none(),
            "the group went with its offsets"
        );
        broker.shutdown().unwrap();
    }
    let broker = Broker::open(config(dir.path(), 60)).unwrap();
    assert!(
        broker
            .groups
            .fetch_offsets(&broker, "simple", None)
            .await
            .unwrap()
            .is_empty(),
        "tombstones were written"
    );
}

#[tokio::test]
async fn commits_for_unknown_topics_and_oversized_metadata_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(config(dir.path(), 60)).unwrap();
    broker
        .create_topic("t", 1, 1, Vec::new(), Default::default(), false)
        .await
        .unwrap();
    let offsets = vec![
        ("t".to_string(), 0, 1, -1, Some("x".repeat(5_000))),
        ("missing".to_string(), 0, 1, -1, None),
        ("t".to_string(), 0, 2, -1, None),
    ];
    assert_eq!(
        broker
            .groups
            .commit(&broker, 9, "g", -1, "", None, &offsets)
            .await,
        vec![12, 3, 0]
    );
}

/// A full disk under __consumer_offsets: commits fail with NOT_COORDINATOR (Kafka's answer
/// for a storage failure: find the coordinator again), never a member or generation
/// error, and succeed again once space is freed, without a restart.
#[tokio::test]
async fn a_full_disk_fails_commits_retriably_and_they_resume_once_space_is_freed() {
    let mount_point = tempfile::tempdir().unwrap();
    let Some(_disk) = small_disk::SmallDisk::mount(mount_point.path(), 4 * 1024) else {
        return; // needs root; mount says SKIPPED
    };
    let data = mount_point.path().join("data");
    let broker = Broker::open(config(&data, 60)).unwrap();
    broker
        .create_topic("t", 1, 1, Vec::new(), Default::default(), false)
        .await
        .unwrap();
    let joined = broker.groups.join(&broker, "g", join("")).await;
    let member = joined.member_id.clone();
    let sync = SyncRequest {
        member_id: &member,
        group_instance_id: None,
        generation_id: joined.generation_id,
        protocol_type: None,
        protocol_name: None,
        assignments: vec![(member.clone(), Bytes::from_static(b"all"))],
    };
    assert_eq!(broker.groups.sync(&broker, "g", sync).await.error_code, 0);
    let commit = |offset: i64| vec![("t".to_string(), 0, offset, 0, Some("x".repeat(3000)))];
    let generation = joined.generation_id;
    assert_eq!(
        broker
            .groups
            .commit(&broker, 9, "g", generation, &member, None, &commit(1))
            .await,
        vec![0]
    );
    // Fill the disk.
    let ballast = mount_point.path().join("ballast");
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&ballast).unwrap();
        while file.write_all(&[0u8; 4096]).is_ok() {}
        let _ = file.sync_all();
    }
    let mut answers = Vec::new();
    for offset in 2..200 {
        let codes = broker
            .groups
            .commit(&broker, 9, "g", generation, &member, None, &commit(offset))
            .await;
        if codes != vec![0] {
            answers = codes;
            break;
        }
    }
    assert_eq!(answers, vec![16], "NOT_COORDINATOR while the disk is full");
    std::fs::remove_file(&ballast).unwrap();
    assert_eq!(
        broker
            .groups
            .commit(&broker, 9, "g", generation, &member, None, &commit(500))
            .await,
        vec![0],
        "commits resume once there is room"
    );
    let fetched = broker
        .groups
        .fetch_offsets(&broker, "g", None)
        .await
        .unwrap();
    assert_eq!(fetched[0].2.as_ref().unwrap().offset, 500);
}
