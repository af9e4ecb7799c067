//! Requests that name topics by id from some version on (OffsetCommit v10, OffsetFetch
//! v10, TxnOffsetCommit v6: KIP-848 and KIP-1319) while the group coordinator keeps
//! offsets by name, as Kafka's does. An id this broker does not know (or the zero id)
//! resolves to nothing and its partitions are answered UNKNOWN_TOPIC_ID, as Kafka's
//! KafkaApis does before the coordinator sees the request.

use kafka_protocol::messages::TopicName;
use uuid::Uuid;

use crate::broker::Broker;

/// The name a request's topic stands for: the name itself below the by-id versions, else
/// the name of the topic with that id, if this broker knows one.
pub fn resolve(broker: &Broker, by_id: bool, name: &TopicName, id: &Uuid) -> Option<String> {
    if !by_id {
        return Some(name.as_str().to_string());
    }
    if id.is_nil() {
        return None;
    }
    broker.topic_by_id(id).map(|topic| topic.name)
}

/// The id of the topic named `name`, or the zero id if there is none.
pub fn id_of(broker: &Broker, name: &str) -> Uuid {
    broker.topic(name).map_or(Uuid::nil(), |topic| topic.id)
}

/// `resolve` for each of a request's topics, in order.
pub fn resolve_all<'a>(
    broker: &Broker,
    by_id: bool,
    topics: impl Iterator<Item = (&'a TopicName, &'a Uuid)>,
) -> Vec<Option<String>> {
    topics
        .map(|(name, id)| resolve(broker, by_id, name, id))
        .collect()
}

/// A commit's topics in Kafka's order: those whose id was unknown (`false`) first, as
/// KafkaApis answers them before the coordinator does, the others as asked.
pub fn unknown_first<T>(mut answered: Vec<(bool, T)>) -> Vec<T> {
    answered.sort_by_key(|(known, _)| *known);
    answered.into_iter().map(|(_, topic)| topic).collect()
}
