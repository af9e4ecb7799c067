//! DescribeClientQuotas (48) and AlterClientQuotas (49): client quotas as `kafka-configs
//! --entity-type users/clients/ips` manages them (the checks and the precedence are in
//! strand_metadata::client_quotas, where they live in `quotas.rs`).
//!
//! As Kafka: DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster, AlterClientQuotas
//! ALTER_CONFIGS (else CLUSTER_AUTHORIZATION_FAILED); an entity altered twice in one
//! request is answered once, with the second alteration's refusal.

use kafka_protocol::messages::{
    alter_client_quotas_response, describe_client_quotas_response, AlterClientQuotasRequest,
    AlterClientQuotasResponse, DescribeClientQuotasRequest, DescribeClientQuotasResponse,
};
use std::collections::BTreeMap;

use strand_metadata::client_quotas::{ListedEntity, QuotaEntity, QuotaValue};
use strand_metadata::{ControllerCommand, ControllerReply, ItemResult};
use strand_protocol::ParsedRequest;

use super::str_bytes;
use crate::authorization::AclOperation;
use crate::broker::{ApiError, Broker};
use crate::cluster::unexpected_reply;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};

pub fn describe(broker: &Broker, request: ParsedRequest, context: &RequestContext) -> Outcome {
    let body: DescribeClientQuotasRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let refuse = |code: i16, message: Option<String>| {
        respond(
            &request,
            &DescribeClientQuotasResponse::default()
                .with_error_code(code)
                .with_error_message(message.map(str_bytes))
                .with_entries(None),
        )
    };
    if !broker
        .authorization(context)
        .allows_cluster(AclOperation::DescribeConfigs)
    {
        return refuse(error_code::CLUSTER_AUTHORIZATION_FAILED, None);
    }
    let components: Vec<(String, i8, Option<String>)> = body
        .components
        .iter()
        .map(|c| {
            (
                c.entity_type.to_string(),
                c.match_type,
                c._match.as_ref().map(|m| m.to_string()),
            )
        })
        .collect();
    let quotas = broker.client_quotas();
    let found = match quotas.describe(&components, body.strict) {
        Ok(found) => found,
        Err((code, message)) => return refuse(code, Some(message)),
    };
    let entries = found
        .into_iter()
        .map(|(entity, values)| {
            describe_client_quotas_response::EntryData::default()
                .with_entity(
                    entity
                        .iter()
                        .map(|(entity_type, name)| {
                            describe_client_quotas_response::EntityData::default()
                                .with_entity_type(str_bytes(entity_type))
                                .with_entity_name(name.as_ref().map(str_bytes))
                        })
                        .collect(),
                )
                .with_values(
                    values
                        .iter()
                        .map(|(key, value)| {
                            describe_client_quotas_response::ValueData::default()
                                .with_key(str_bytes(key))
                                .with_value(value.0)
                        })
                        .collect(),
                )
        })
        .collect();
    respond(
        &request,
        &DescribeClientQuotasResponse::default()
            .with_error_code(error_code::NONE)
            .with_entries(Some(entries)),
    )
}

pub async fn alter(broker: &Broker, request: ParsedRequest, context: &RequestContext) -> Outcome {
    let body: AlterClientQuotasRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let alterations: Vec<strand_metadata::controller::QuotaAlteration> = body
        .entries
        .iter()
        .map(|entry| {
            let entity = entry
                .entity
                .iter()
                .map(|e| {
                    (
                        e.entity_type.to_string(),
                        e.entity_name.as_ref().map(|n| n.to_string()),
                    )
                })
                .collect();
            let ops = entry
                .ops
                .iter()
                .map(|op| {
                    let value = (!op.remove).then_some(QuotaValue(op.value));
                    (op.key.to_string(), value)
                })
                .collect();
            (entity, ops)
        })
        .collect();
    let results: Vec<ItemResult> = if !broker
        .authorization(context)
        .allows_cluster(AclOperation::AlterConfigs)
    {
        let refused = ItemResult {
            code: error_code::CLUSTER_AUTHORIZATION_FAILED,
            message: None,
        };
        vec![refused; alterations.len()]
    } else {
        let command = ControllerCommand::AlterClientQuotas {
            alterations: alterations.clone(),
        };
        let decided = if body.validate_only {
            Ok(broker.decide_without_storing(&broker.local_quotas, &command))
        } else {
            broker.decide_metadata(&broker.local_quotas, command).await
        };
        let failed = |error: ApiError| {
            let refused = ItemResult {
                code: error.code,
                message: error.message,
            };
            vec![refused; alterations.len()]
        };
        match decided {
            Ok(ControllerReply::Results(results)) => results,
            Ok(other) => failed(unexpected_reply(other)),
            Err(error) => failed(error),
        }
    };
    // One answer per entity: a later alteration of the same entity answers for it.
    let mut answered: Vec<(ListedEntity, ItemResult)> = Vec::new();
    let mut index: BTreeMap<QuotaEntity, usize> = BTreeMap::new();
    for ((entity, _), result) in alterations.into_iter().zip(results) {
        let named: QuotaEntity = entity.iter().cloned().collect();
        match index.get(&named) {
            Some(&at) => answered[at].1 = result,
            None => {
                index.insert(named, answered.len());
                answered.push((entity, result));
            }
        }
    }
    let entries = answered
        .into_iter()
        .map(|(entity, result)| {
            alter_client_quotas_response::EntryData::default()
                .with_error_code(result.code)
                .with_error_message(result.message.map(str_bytes))
                .with_entity(
                    entity
                        .into_iter()
                        .map(|(entity_type, name)| {
                            alter_client_quotas_response::EntityData::default()
                                .with_entity_type(str_bytes(entity_type))
                                .with_entity_name(name.map(str_bytes))
                        })
                        .collect(),
                )
        })
        .collect();
    respond(
        &request,
        &AlterClientQuotasResponse::default().with_entries(entries),
    )
}
