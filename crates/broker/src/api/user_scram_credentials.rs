//! AlterUserScramCredentials (51) and DescribeUserScramCredentials (50): SCRAM
//! credentials as `kafka-configs --entity-type users` manages them
//! (`scram_credentials.rs` has the checks and where they live).
//!
//! Describe, as Kafka's ScramImage answers: no user list (or an empty one) lists every
//! user with a credential; a user named twice is DUPLICATE_RESOURCE "Cannot describe SCRAM
//! credentials for the same user twice in a single request: NAME"; a user without one
//! RESOURCE_NOT_FOUND "Attempt to describe a user credential that does not exist: NAME".

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use strand_protocol::ParsedRequest;

use super::str_bytes;
use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};
use crate::scram_credentials::Alteration;

pub async fn alter(broker: &Broker, request: ParsedRequest, context: &RequestContext) -> Outcome {
    let body: AlterUserScramCredentialsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // Kafka's check: ALTER on the cluster (else every user CLUSTER_AUTHORIZATION_FAILED).
    if !broker
        .authorization(context)
        .allows_cluster(AclOperation::Alter)
    {
        let users = body.deletions.iter().map(|d| &d.name);
        let results = users
            .chain(body.upsertions.iter().map(|u| &u.name))
            .map(|user| {
                AlterUserScramCredentialsResult::default()
                    .with_user(user.clone())
                    .with_error_code(error_code::CLUSTER_AUTHORIZATION_FAILED)
            })
            .collect();
        return respond(
            &request,
            &AlterUserScramCredentialsResponse::default().with_results(results),
        );
    }
    let deletions = body.deletions.iter().map(|d| Alteration::Delete {
        user: d.name.to_string(),
        mechanism: d.mechanism,
    });
    let upsertions = body.upsertions.iter().map(|u| Alteration::Upsert {
        user: u.name.to_string(),
        mechanism: u.mechanism,
        iterations: u.iterations,
        salt: u.salt.to_vec(),
        salted_password: u.salted_password.to_vec(),
    });
    let results = broker
        .alter_scram_credentials(deletions.chain(upsertions).collect())
        .await
        .into_iter()
        .map(|(user, result)| {
            let entry = AlterUserScramCredentialsResult::default().with_user(str_bytes(user));
            match result {
                Ok(()) => entry
                    .with_error_code(error_code::NONE)
                    .with_error_message(None),
                Err(error) => entry
                    .with_error_code(error.code)
                    .with_error_message(error.message.map(str_bytes)),
            }
        })
        .collect();
    respond(
        &request,
        &AlterUserScramCredentialsResponse::default().with_results(results),
    )
}

pub fn describe(broker: &Broker, request: ParsedRequest, context: &RequestContext) -> Outcome {
    let body: DescribeUserScramCredentialsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // Kafka's check: DESCRIBE on the cluster.
    if !broker
        .authorization(context)
        .allows_cluster(AclOperation::Describe)
    {
        return respond(
            &request,
            &DescribeUserScramCredentialsResponse::default()
                .with_error_code(error_code::CLUSTER_AUTHORIZATION_FAILED),
        );
    }
    let known = broker.scram_credential_infos();
    let infos = |user: &str| -> Vec<CredentialInfo> {
        known
            .get(user)
            .map(|infos| {
                infos
                    .iter()
                    .map(|(mechanism, iterations)| {
                        CredentialInfo::default()
                            .with_mechanism(*mechanism)
                            .with_iterations(*iterations)
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let asked: Vec<String> = body
        .users
        .unwrap_or_default()
        .iter()
        .map(|u| u.name.to_string())
        .collect();
    let results = if asked.is_empty() {
        known
            .keys()
            .map(|user| {
                DescribeUserScramCredentialsResult::default()
                    .with_user(str_bytes(user.clone()))
                    .with_error_message(None)
                    .with_credential_infos(infos(user))
            })
            .collect()
    } else {
        let mut seen: Vec<&String> = Vec::new();
        let mut results = Vec::new();
        for user in &asked {
            if seen.contains(&user) {
                continue;
            }
            seen.push(user);
            let entry =
                DescribeUserScramCredentialsResult::default().with_user(str_bytes(user.clone()));
            results.push(if asked.iter().filter(|u| *u == user).count() > 1 {
                entry
                    .with_error_code(error_code::DUPLICATE_RESOURCE)
                    .with_error_message(Some(str_bytes(format!(
                        "Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
                    ))))
            } else if !known.contains_key(user) {
                entry
                    .with_error_code(error_code::RESOURCE_NOT_FOUND)
                    .with_error_message(Some(str_bytes(format!(
                        "Attempt to describe a user credential that does not exist: {user}"
                    ))))
            } else {
                entry
                    .with_error_message(None)
                    .with_credential_infos(infos(user))
            });
        }
        results
    };
    respond(
        &request,
        &DescribeUserScramCredentialsResponse::default()
            .with_error_message(None)
            .with_results(results),
    )
}
