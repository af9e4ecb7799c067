//! OffsetDelete (47): removes committed offsets of topics the group no longer consumes
//! (GROUP_SUBSCRIBED_TO_TOPIC for those it does).

use std::sync::Arc;

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use crate::broker::Broker;
use crate::error_code;
use crate::router::{decode, respond, Outcome};

pub async fn handle(broker: &Arc<Broker>, request: strand_protocol::ParsedRequest) -> Outcome {
    let body: OffsetDeleteRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let partitions: Vec<(String, i32)> = body
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.as_str().to_string(), p.partition_index))
        })
        .collect();
    let response = match broker
        .groups
        .delete_offsets(broker, body.group_id.as_str(), &partitions)
        .await
    {
        Err(code) => OffsetDeleteResponse::default().with_error_code(code),
        Ok(codes) => {
            let mut codes = codes.into_iter();
            let topics = body
                .topics
                .iter()
                .map(|t| {
                    OffsetDeleteResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    OffsetDeleteResponsePartition::default()
                                        .with_partition_index(p.partition_index)
                                        .with_error_code(codes.next().unwrap_or_default())
                                })
                                .collect(),
                        )
                })
                .collect();
            OffsetDeleteResponse::default()
                .with_error_code(error_code::NONE)
                .with_topics(topics)
        }
    };
    respond(&request, &response)
}
