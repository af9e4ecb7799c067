//! What one authorization costs: a principal's WRITE on its topic among 2,000 ACLs (the
//! shape of `bench/authorizer_overhead.py`: its own ALLOWs among other principals'
//! literal and prefixed ones), and a principal with no ACL being refused. Run:
//! `cargo bench -p strand-security --bench authorize`.

use criterion::{criterion_group, criterion_main, Criterion};
use strand_security::authorizer::{
    AclBinding, AclOperation, Acls, Authorizer, PatternType, Permission, ResourceType,
};
use strand_security::KafkaPrincipal;

fn acls() -> Acls {
    let mut bindings: Vec<AclBinding> = (0..1_996)
        .map(|i| AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: format!("team-{}-topic-{i}", i % 50),
            pattern_type: if i % 4 == 0 {
                PatternType::Prefixed
            } else {
                PatternType::Literal
            },
            principal: format!("User:user-{i}"),
            host: "*".into(),
            operation: AclOperation::Write,
            permission: Permission::Allow,
        })
        .collect();
    for (resource_type, name, operation) in [
        (ResourceType::Topic, "bench", AclOperation::All),
        (ResourceType::Group, "*", AclOperation::Read),
        (ResourceType::Cluster, "kafka-cluster", AclOperation::Create),
        (
            ResourceType::Cluster,
            "kafka-cluster",
            AclOperation::IdempotentWrite,
        ),
    ] {
        bindings.push(AclBinding {
            resource_type,
            resource_name: name.into(),
            pattern_type: PatternType::Literal,
            principal: "User:ANONYMOUS".into(),
            host: "*".into(),
            operation,
            permission: Permission::Allow,
        });
    }
    Acls::new(bindings)
}

fn authorize(c: &mut Criterion) {
    let acls = acls();
    let authorizer = Authorizer::default();
    let anonymous = KafkaPrincipal::anonymous();
    let stranger = KafkaPrincipal::user("stranger");
    c.bench_function("allowed WRITE on a topic among 2,000 ACLs", |b| {
        b.iter(|| {
            authorizer.authorize(
                &acls,
                &anonymous,
                "127.0.0.1",
                AclOperation::Write,
                ResourceType::Topic,
                "bench",
            )
        })
    });
    c.bench_function("refused WRITE on a prefixed team topic", |b| {
        b.iter(|| {
            authorizer.authorize(
                &acls,
                &stranger,
                "127.0.0.1",
                AclOperation::Write,
                ResourceType::Topic,
                "team-4-topic-1204",
            )
        })
    });
}

criterion_group!(benches, authorize);
criterion_main!(benches);
